//! Command implementations. Errors here are `anyhow`: they end the process with a message.

mod certs;
mod serve;
mod webhook_config;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub use certs::certs;
pub use serve::serve;
pub use webhook_config::webhook_config;

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
        Command::WebhookConfig(args) => webhook_config(args),
        Command::Check(_) | Command::Test(_) => {
            Err(anyhow::anyhow!("this command is not available yet"))
        }
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

/// The engine for a list of policy paths: the built-in policy set when the list is empty.
pub fn load_engine(policies: &[std::path::PathBuf]) -> anyhow::Result<crate::engine::Engine> {
    if policies.is_empty() {
        return Ok(crate::engine::Engine::builtin());
    }
    Ok(crate::policy::load_engine(policies)?)
}
