use std::process::ExitCode;

use clap::Parser;

mod allocator;

/// mimalloc rather than the system allocator: measured in docs/benchmarks.md (allocation was
/// a quarter of the server's CPU under load with glibc malloc).
#[global_allocator]
static ALLOCATOR: allocator::MiMalloc = allocator::MiMalloc;

/// mimalloc keeps freed pages committed for a while, to reuse them; after a policy load, which
/// frees most of what it allocated, they are returned at once (idle RSS, docs/benchmarks.md).
fn release_freed_memory() {
    // SAFETY: `mi_collect` only frees mimalloc's own unused memory; it is safe to call from
    // any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

fn main() -> ExitCode {
    // Every TLS configuration names ring explicitly; installing it as the process default
    // covers any library that asks for the default provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    portcullis::server::policy_reload::set_release_freed_memory(release_freed_memory);
    portcullis::commands::run(portcullis::cli::Cli::parse())
}
