//! Command implementations. Errors here are `anyhow`: they end the process with a message.

mod certs;
mod serve;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub use certs::certs;
pub use serve::serve;

/// Runs a parsed command line and returns the process exit code: 0 on success, 1 on failure.
pub fn run(cli: Cli) -> ExitCode {
    crate::telemetry::init(cli.log_format, &cli.log_level);
    let result = match cli.command {
        Command::Serve(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|runtime| runtime.block_on(serve(args))),
        Command::Certs(args) => certs(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
