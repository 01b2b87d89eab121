//! `portcullis test`: run `PolicyTest` suites and gator `Suite` files.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::authorization::AnswerTable;
use crate::cli::TestArgs;
use crate::offline::{SuiteOptions, run_suites_with};

/// A path as given, or, for `gator verify`'s `FOLDER/...` (every suite below the folder), the
/// folder: folders are always searched with their subfolders.
fn suite_path(path: PathBuf) -> PathBuf {
    if path.exists() {
        return path;
    }
    match path.to_str().and_then(|text| text.strip_suffix("/...")) {
        Some(folder) if !folder.is_empty() => PathBuf::from(folder),
        _ => path,
    }
}

/// Runs the suites under the given paths and prints the result table: exit code 0 when every
/// case passes, 1 when any fails, 2 when a suite cannot be loaded.
pub fn test_suites(args: TestArgs) -> anyhow::Result<ExitCode> {
    let authorizer = args
        .authorizer
        .as_deref()
        .map(AnswerTable::from_flag)
        .transpose()
        .context("--authorizer")?;
    let paths: Vec<PathBuf> = args.paths.into_iter().map(suite_path).collect();
    let options = SuiteOptions {
        authorizer: authorizer.as_ref(),
        compare_engines: args.compare_engines,
    };
    let run = run_suites_with(&paths, options, super::load_engine);
    super::check::print(&run.table())?;
    Ok(ExitCode::from(run.exit_code()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gator_recursive_paths_name_their_folder() {
        assert_eq!(
            suite_path(PathBuf::from("no/such/folder/...")),
            PathBuf::from("no/such/folder")
        );
        assert_eq!(suite_path(PathBuf::from("/...")), PathBuf::from("/..."));
        assert_eq!(
            suite_path(PathBuf::from("no/such.yaml")),
            PathBuf::from("no/such.yaml")
        );
    }
}
