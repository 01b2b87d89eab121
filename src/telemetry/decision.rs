//! The line each admission decision writes: metadata of the request and of the answer, never
//! object contents.

use std::fmt::Write as _;
use std::time::Instant;

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

use super::UtcMicros;
use super::format::{debug_is_verbatim, decimal};
use crate::admission::AdmissionRequest;

/// The target of the line, the handlers' module, which log filters name
/// (`portcullis::server::handlers=debug` shows the lines of requests no rule wants).
const TARGET: &str = "portcullis::server::handlers";

/// An admission decision's log line, `admission decision` with the request's and the answer's
/// metadata as fields.
#[derive(Debug)]
pub struct DecisionLine<'a> {
    /// The request decided.
    pub request: &'a AdmissionRequest,
    /// `validate` or `mutate`.
    pub endpoint: &'static str,
    /// The answer.
    pub allowed: bool,
    /// The answer's status code (200 without a status).
    pub code: u16,
    /// Violations in the answer.
    pub violations: usize,
    /// Operations of its patch.
    pub patch_operations: usize,
    /// Its warnings.
    pub warnings: usize,
    /// When the request arrived: the line gives the time since, in µs.
    pub started: Instant,
}

impl DecisionLine<'_> {
    /// Writes the line: at `info` for a request some rule wanted, `debug` for one no rule
    /// wanted. With plain text lines it is formatted here, whole, byte for byte as the
    /// subscriber formats the event, and written where the subscriber writes: a third of the
    /// work (docs/benchmarks.md, "Measured alternatives").
    pub fn log(&self, wanted: bool) {
        let Some(lines) = super::plain_text_lines() else {
            return self.event_with_fields(wanted);
        };
        let enabled = if wanted {
            tracing::enabled!(target: TARGET, tracing::Level::INFO)
        } else {
            tracing::enabled!(target: TARGET, tracing::Level::DEBUG)
        };
        if enabled {
            lines.write_quiet_line(self.text_line(wanted).as_bytes());
        }
    }

    /// The line as the text format writes the event: timestamp, level, target, message and
    /// fields.
    pub(super) fn text_line(&self, info: bool) -> String {
        let mut line = String::with_capacity(320);
        if UtcMicros.format_time(&mut Writer::new(&mut line)).is_err() {
            line.push_str("<unknown time>");
        }
        line.push_str(if info { "  INFO " } else { " DEBUG " });
        line.push_str(TARGET);
        line.push_str(": admission decision ");
        self.push_fields(&mut line);
        line.push('\n');
        line
    }

    /// The fields as the text format writes them after the message: `name=value`, strings
    /// quoted as `Debug` quotes them, the `%` fields (uid, kind, operation, user) as they are.
    fn push_fields(&self, line: &mut String) {
        let request = self.request;
        line.push_str("uid=");
        line.push_str(&request.uid);
        push_debug_str(line, " endpoint=", self.endpoint);
        line.push_str(" kind=");
        line.push_str(&request.kind.kind);
        push_debug_str(
            line,
            " namespace=",
            request.namespace.as_deref().unwrap_or(""),
        );
        push_debug_str(line, " name=", request.name.as_deref().unwrap_or(""));
        line.push_str(" operation=");
        line.push_str(request.operation.as_str());
        line.push_str(" user=");
        line.push_str(&request.user_info.username);
        push_bool(line, " dry_run=", request.dry_run.unwrap_or(false));
        push_bool(line, " allowed=", self.allowed);
        push_number(line, " code=", self.code.into());
        push_number(line, " violations=", self.violations as u64);
        push_number(line, " patch_operations=", self.patch_operations as u64);
        push_number(line, " warnings=", self.warnings as u64);
        push_number(line, " duration_us=", self.duration_us());
    }

    /// The line as an event with its fields (JSON lines, colours), at `info` or `debug`.
    pub(super) fn event_with_fields(&self, info: bool) {
        let request = self.request;
        macro_rules! event {
            ($level:expr) => {
                tracing::event!(
                    target: TARGET,
                    $level,
                    uid = %request.uid,
                    endpoint = self.endpoint,
                    kind = %request.kind.kind,
                    namespace = request.namespace.as_deref().unwrap_or(""),
                    name = request.name.as_deref().unwrap_or(""),
                    operation = %request.operation,
                    user = %request.user_info.username,
                    dry_run = request.dry_run.unwrap_or(false),
                    allowed = self.allowed,
                    code = self.code,
                    violations = self.violations,
                    patch_operations = self.patch_operations,
                    warnings = self.warnings,
                    duration_us = self.duration_us(),
                    "admission decision"
                )
            };
        }
        if info {
            event!(tracing::Level::INFO);
        } else {
            event!(tracing::Level::DEBUG);
        }
    }

    fn duration_us(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX)
    }
}

/// Appends `name=value`: strings quoted as `Debug` quotes them.
fn push_debug_str(line: &mut String, name: &str, value: &str) {
    line.push_str(name);
    if debug_is_verbatim(value) {
        line.push('"');
        line.push_str(value);
        line.push('"');
    } else {
        let _ = write!(line, "{value:?}");
    }
}

fn push_number(line: &mut String, name: &str, value: u64) {
    line.push_str(name);
    line.push_str(decimal(value, &mut [0; 20]));
}

fn push_bool(line: &mut String, name: &str, value: bool) {
    line.push_str(name);
    line.push_str(if value { "true" } else { "false" });
}
