//! Link settings of the `portcullis` binary.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = |name: &str| std::env::var(name).unwrap_or_default();
    // Relative relocations packed (DT_RELR, glibc 2.36+, binutils 2.38+): the dynamic loader
    // reads 23 KB instead of 1.4 MB of them at start, and that table no longer stays resident
    // (idle RSS 1.4 MiB lower, docs/benchmarks.md). The binary stays position-independent.
    if target("CARGO_CFG_TARGET_OS") == "linux" && target("CARGO_CFG_TARGET_ENV") == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
