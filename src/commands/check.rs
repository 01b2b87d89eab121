//! `portcullis check`: decide manifests and AdmissionReviews offline with the webhook's engine.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;

use crate::admission::Operation;
use crate::authorization::AnswerTable;
use crate::cli::{CheckArgs, CheckOperation, CheckOutput};
use crate::offline::{Checker, inventory_of, namespaces_of, read_inputs, report};

/// Exit code when every document is admitted.
pub const EXIT_ALLOWED: u8 = 0;
/// Exit code when some document is denied.
pub const EXIT_DENIED: u8 = 1;
/// Exit code for bad usage, policies or input.
pub const EXIT_ERROR: u8 = 2;

/// Runs `check`: 0 when every document is admitted, 1 when any is denied; an error (bad
/// policies or input) is reported by the caller with exit code 2.
pub fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let engine = super::load_engine(&args.policies).context("cannot load the policies")?;
    let documents = read_inputs(&args.files)?;
    let namespaces = namespaces_of(&documents);
    let inventory = inventory_of(&documents);
    let mut checker = Checker::new(&engine, &namespaces).with_inventory(&inventory);
    if let Some(flag) = &args.authorizer {
        let table = AnswerTable::from_flag(flag).context("--authorizer")?;
        checker = checker.with_authorizer(Arc::new(table));
    }
    let operation = match args.operation {
        CheckOperation::Create => Operation::Create,
        CheckOperation::Update => Operation::Update,
        CheckOperation::Delete => Operation::Delete,
    };
    let results = documents
        .iter()
        .map(|document| checker.check(document, operation))
        .collect::<Result<Vec<_>, _>>()?;
    let output = match args.output {
        CheckOutput::Json => serde_json::to_string_pretty(&results)? + "\n",
        CheckOutput::Text => report::text(&results),
    };
    print(&output)?;
    let denied = results.iter().any(|result| !result.allowed);
    Ok(ExitCode::from(if denied {
        EXIT_DENIED
    } else {
        EXIT_ALLOWED
    }))
}

/// Writes `text` to standard output; a closed pipe (`| head`) is not an error.
pub(super) fn print(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::from(e).context("cannot write to standard output"))
        }
        _ => Ok(()),
    }
}
