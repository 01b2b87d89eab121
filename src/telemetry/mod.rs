//! Logging setup. Log lines carry request metadata only, never object contents: reviews carry
//! Secrets.

mod batched;
mod decision;
mod format;

use std::sync::OnceLock;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

pub use batched::flush;
pub use decision::DecisionLine;
pub use format::{FieldVisitor, PlainFields, PlainVisitor, UtcMicros};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The file watcher logs at info level each time a watched folder it was told about goes away,
/// which a Kubernetes `..data` swap does on every update: quiet unless a filter names it.
const QUIET_WATCHER: &str = "notify=warn";

/// Where [`init`] writes plain text lines (the text format, without colours), when it
/// installed them: a line written often ([`DecisionLine`]) may then be formatted whole by its
/// caller, byte for byte as the subscriber would, for less work.
static PLAIN_TEXT_LINES: OnceLock<batched::StderrLines> = OnceLock::new();

fn plain_text_lines() -> Option<&'static batched::StderrLines> {
    PLAIN_TEXT_LINES.get()
}

/// Installs the global tracing subscriber writing to stderr. `level` is an `EnvFilter`
/// directive (`info`, `portcullis=debug` …); `RUST_LOG`, when set, wins. With `batching`
/// (`serve`), lines below `warn` are written in batches, at most 100 ms late; [`flush`]
/// writes what is left.
pub fn init(format: LogFormat, level: &str, batching: bool) {
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .filter(|value| !value.is_empty());
    let filter = from_env
        .iter()
        .map(String::as_str)
        .chain([level])
        .find_map(|directives| {
            if directives.contains("notify") {
                EnvFilter::try_new(directives).ok()
            } else {
                EnvFilter::try_new(format!("{directives},{QUIET_WATCHER}")).ok()
            }
        })
        .unwrap_or_else(|| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let lines = batched::stderr_lines(batching);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_timer(UtcMicros)
        .with_writer(lines)
        .with_ansi(ansi);
    let installed = match format {
        LogFormat::Text => builder.fmt_fields(PlainFields::default()).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    if installed.is_ok() && format == LogFormat::Text && !ansi {
        let _ = PLAIN_TEXT_LINES.set(lines);
    }
}
