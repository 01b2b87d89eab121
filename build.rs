//! Link settings of the `portcullis` binary.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=link/text-order.txt");
    println!("cargo:rerun-if-env-changed=PORTCULLIS_TEXT_ORDER");
    let target = |name: &str| std::env::var(name).unwrap_or_default();
    let linux_gnu =
        target("CARGO_CFG_TARGET_OS") == "linux" && target("CARGO_CFG_TARGET_ENV") == "gnu";
    // Relative relocations packed (DT_RELR, glibc 2.36+, binutils 2.38+): the dynamic loader
    // reads 23 KB instead of 1.4 MB of them at start, and that table no longer stays resident
    // (idle RSS 1.4 MiB lower, docs/benchmarks.md). The binary stays position-independent.
    if linux_gnu {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    // The functions `serve` runs placed together at the start of the code (a symbol ordering
    // file, scripts/text-order.py): the kernel maps code 64 KB around each page touched, and
    // spread over the whole binary they kept about 10 MiB of it resident (6.5 MiB less idle
    // RSS, docs/benchmarks.md). rustc links x86_64 Linux with its own lld, which reads the
    // file; names it does not find (other profiles, a stale list) are skipped silently.
    // PORTCULLIS_TEXT_ORDER=off leaves it out, for a linker without `--symbol-ordering-file`.
    if linux_gnu
        && target("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && target("PORTCULLIS_TEXT_ORDER") != "off"
    {
        let order = std::path::Path::new(&target("CARGO_MANIFEST_DIR")).join("link/text-order.txt");
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}
