//! `portcullis test`: run `PolicyTest` suites.

use std::process::ExitCode;

use anyhow::Context as _;

use crate::authorization::AnswerTable;
use crate::cli::TestArgs;
use crate::offline::run_suites_with;

/// Runs the suites under the given paths and prints the result table: exit code 0 when every
/// case passes, 1 when any fails, 2 when a suite cannot be loaded.
pub fn test_suites(args: TestArgs) -> anyhow::Result<ExitCode> {
    let authorizer = args
        .authorizer
        .as_deref()
        .map(AnswerTable::from_flag)
        .transpose()
        .context("--authorizer")?;
    let run = run_suites_with(&args.paths, authorizer.as_ref(), super::load_engine);
    super::check::print(&run.table())?;
    Ok(ExitCode::from(run.exit_code()))
}
