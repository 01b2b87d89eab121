//! `portcullis audit`: scan the objects already in a cluster with the webhook's engine.

use std::io::{BufWriter, ErrorKind};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::check::{EXIT_ALLOWED, EXIT_DENIED, EXIT_ERROR};
use crate::audit::{
    JsonWriter, OpenReportsWriter, ResultWriter, ScanError, ScanOptions, Scanner, TableWriter,
};
use crate::cli::{AuditArgs, AuditOutput};
use crate::kubernetes::vocabulary::LabelSelector;

/// Runs `audit`: 0 when every scanned object would be admitted, 1 when any would be denied,
/// 2 (through the caller, or here when some objects could not be evaluated) on an error.
pub fn audit(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let object_selector = args
        .object_selector
        .as_deref()
        .map(parse_object_selector)
        .transpose()?;
    let engine = Arc::new(super::load_engine(&args.policies).context("cannot load the policies")?);
    let concurrency = args.concurrency.map_or_else(
        || std::thread::available_parallelism().map_or(2, |n| n.get()),
        usize::from,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let client = runtime
        .block_on(client(args.kubeconfig.as_deref()))
        .context("cannot connect to the cluster")?;
    let options = ScanOptions {
        page_size: args.page_size,
        concurrency,
        namespaces: args.namespaces,
        own_namespace: args.webhook_namespace,
        excluded_namespaces: args.exclude_namespaces,
        object_selector,
        apply: args.apply,
    };
    let scanner = Scanner::new(client, engine, options);
    let stdout = BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let mut writer: Box<dyn ResultWriter> = match args.output {
        AuditOutput::Table => Box::new(TableWriter::new(stdout)),
        AuditOutput::Json => Box::new(JsonWriter::new(stdout)),
        AuditOutput::Openreports => Box::new(OpenReportsWriter::new(stdout, SystemTime::now())),
    };
    let started = Instant::now();
    let summary = match scanner.run(&runtime, writer.as_mut()) {
        Ok(summary) => summary,
        // A closed pipe (`| head`) ends the scan unfinished: not a verdict.
        Err(ScanError::Output(error)) if error.kind() == ErrorKind::BrokenPipe => {
            return Ok(ExitCode::from(EXIT_ERROR));
        }
        Err(error) => return Err(error).context("audit failed"),
    };
    match writer.finish(&summary) {
        Err(error) if error.kind() != ErrorKind::BrokenPipe => {
            return Err(anyhow::Error::from(error).context("cannot write to standard output"));
        }
        _ => {}
    }
    drop(writer);
    if args.output != AuditOutput::Table {
        eprintln!("{}", summary.line());
    }
    tracing::info!(
        scanned = summary.scanned,
        excluded = summary.excluded,
        denied = summary.denied,
        errors = summary.errors,
        requests = summary.requests,
        seconds = started.elapsed().as_secs_f64(),
        "audit: done"
    );
    Ok(ExitCode::from(if summary.errors > 0 {
        EXIT_ERROR
    } else if summary.denied > 0 {
        args.denied_exit_code.min(EXIT_DENIED)
    } else {
        EXIT_ALLOWED
    }))
}

/// A client from `--kubeconfig`, or inferred (in-cluster in a Pod, else $KUBECONFIG or
/// ~/.kube/config).
async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        None => Config::infer().await?,
    };
    // The scan retries what the apiserver asks it to, a few times (audit::scan).
    let mut config = config;
    config.default_retry = false;
    Ok(Client::try_from(config)?)
}

/// `--object-selector`: a LabelSelector as JSON, with operators and values that go together.
fn parse_object_selector(text: &str) -> anyhow::Result<LabelSelector> {
    let selector: LabelSelector = serde_json::from_str(text)
        .with_context(|| format!("--object-selector {text:?} is not a LabelSelector"))?;
    if let Some((field, message)) = selector.requirement_error() {
        anyhow::bail!("--object-selector: {field}: {message}");
    }
    Ok(selector)
}
