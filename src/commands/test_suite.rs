//! `portcullis test`: run `PolicyTest` suites.

use std::process::ExitCode;

use crate::cli::TestArgs;
use crate::offline::run_suites;

/// Runs the suites under the given paths and prints the result table: exit code 0 when every
/// case passes, 1 when any fails, 2 when a suite cannot be loaded.
pub fn test_suites(args: TestArgs) -> anyhow::Result<ExitCode> {
    let run = run_suites(&args.paths, super::load_engine);
    super::check::print(&run.table())?;
    Ok(ExitCode::from(run.exit_code()))
}
