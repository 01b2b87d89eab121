use std::process::ExitCode;

use clap::Parser;

/// mimalloc rather than the system allocator: measured in docs/benchmarks.md (allocation was
/// a quarter of the server's CPU under load with glibc malloc).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Every TLS configuration names ring explicitly; installing it as the process default
    // covers any library that asks for the default provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    portcullis::commands::run(portcullis::cli::Cli::parse())
}
