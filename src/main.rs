use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Every TLS configuration names ring explicitly; installing it as the process default
    // covers any library that asks for the default provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    portcullis::commands::run(portcullis::cli::Cli::parse())
}
