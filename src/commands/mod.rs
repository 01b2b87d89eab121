//! Command implementations. Errors here are `anyhow`: they end the process with a message.

mod audit;
mod certs;
mod check;
mod serve;
mod test_suite;
mod webhook_config;

use std::process::ExitCode;

use crate::cli::{Cli, Command};
use crate::expressions::CelLimits;

pub use audit::audit;
pub use certs::certs;
pub use check::check;
pub use serve::serve;
pub use test_suite::test_suites;
pub use webhook_config::webhook_config;

/// Runs a parsed command line and returns the process exit code: 0 on success and 1 on
/// failure; `check`, `test` and `audit` choose their own codes (0 or 1) and exit 2 on an
/// error.
pub fn run(cli: Cli) -> ExitCode {
    let serving = matches!(cli.command, Command::Serve(_));
    crate::telemetry::init(cli.log_format, &cli.log_level, serving);
    let done = |result: anyhow::Result<()>| result.map(|()| ExitCode::SUCCESS);
    let offline = matches!(
        cli.command,
        Command::Check(_) | Command::Test(_) | Command::Audit(_)
    );
    let cel = match &cli.command {
        Command::Serve(args) => Some(args.cel),
        Command::Check(args) => Some(args.cel),
        Command::Test(args) => Some(args.cel),
        Command::Audit(args) => Some(args.cel),
        Command::Certs(_) | Command::WebhookConfig(_) => None,
    };
    let rego = match &cli.command {
        Command::Check(args) => Some(args.rego),
        Command::Test(args) => Some(args.rego),
        Command::Audit(args) => Some(args.rego),
        Command::Serve(_) | Command::Certs(_) | Command::WebhookConfig(_) => None,
    };
    if let Some(rego) = rego {
        crate::engine::gatekeeper::set_rego_timeout(rego.rego_timeout);
    }
    if let Some(cel) = cel {
        crate::expressions::set_compiled_evaluation(
            cel.cel_evaluator == crate::cli::CelEvaluator::Compiled,
        );
        // First thing, before any policy compiles: the limits are fixed at first use.
        let requested = CelLimits {
            max_iterations: cel.cel_max_iterations,
            max_eval_time: cel.cel_timeout,
            ..CelLimits::default()
        };
        if let Err(in_force) = CelLimits::configure(requested)
            && in_force != requested
        {
            let text = format!(
                "the --cel-max-iterations and --cel-timeout flags cannot take effect: CEL limits \
                 were fixed before they were read ({in_force:?})"
            );
            eprintln!("error: {text}");
            return ExitCode::from(if offline { check::EXIT_ERROR } else { 1 });
        }
    }
    let result = match cli.command {
        Command::Serve(args) => done(
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .map_err(anyhow::Error::from)
                .and_then(|runtime| runtime.block_on(serve(args))),
        ),
        Command::Certs(args) => done(certs(args)),
        Command::WebhookConfig(args) => done(webhook_config(args)),
        Command::Check(args) => check(args),
        Command::Test(args) => test_suites(args),
        Command::Audit(args) => audit(args),
    };
    crate::telemetry::flush();
    match result {
        Ok(code) => code,
        // The offline commands' errors are for the terminal, not for a log.
        Err(error) if offline => {
            eprintln!("error: {}", error_text(&error));
            ExitCode::from(check::EXIT_ERROR)
        }
        Err(error) => {
            let text = error_text(&error);
            tracing::error!("{text}");
            eprintln!("error: {text}");
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, `: `-separated, leaving out a cause whose text the message
/// already quotes (the typed errors name their source in their own message).
fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

/// The engine for a list of policy paths: the built-in policy set when the list is empty.
/// Type-checking warnings of the policies go to standard error, as the apiserver would put
/// them in each policy's `status.typeChecking`.
pub fn load_engine(policies: &[std::path::PathBuf]) -> anyhow::Result<crate::engine::Engine> {
    if policies.is_empty() {
        return Ok(crate::engine::Engine::builtin());
    }
    let engine = crate::engine::Engine::load(policies)?;
    // After the lines logged while loading.
    crate::telemetry::flush();
    eprint!("{}", type_checking_report(&engine.type_checking()));
    Ok(engine)
}

/// The type-checking warnings as `check` and `test` print them: per expression, the policy
/// and field, then the apiserver's warning text.
pub fn type_checking_report(
    warnings: &std::collections::BTreeMap<String, Vec<crate::engine::ExpressionWarning>>,
) -> String {
    let mut text = String::new();
    for (policy, list) in warnings {
        for warning in list {
            text.push_str(&format!(
                "warning: ValidatingAdmissionPolicy {policy:?}: {} does not type-check:\n{}",
                warning.field_ref, warning.warning
            ));
            if !warning.warning.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    text
}
