use std::path::Path;

use anyhow::{Context, bail};

use crate::cli::CertsArgs;
use crate::tls::{generate_certificates, service_hosts};

/// `portcullis certs`: writes `ca.crt`, `tls.crt` and `tls.key` into `--out`.
pub fn certs(args: CertsArgs) -> anyhow::Result<()> {
    let mut hosts = args.hosts.clone();
    if let Some(service) = &args.service {
        let Some((namespace, name)) = service.split_once('/') else {
            bail!("--service must be NAMESPACE/NAME, got {service:?}");
        };
        if namespace.is_empty() || name.is_empty() {
            bail!("--service must be NAMESPACE/NAME, got {service:?}");
        }
        hosts.extend(service_hosts(namespace, name));
    }
    if hosts.is_empty() {
        bail!("name at least one --host or a --service");
    }
    let generated = generate_certificates(&hosts, args.days)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let files = [
        ("ca.crt", &generated.ca_pem, 0o644),
        ("tls.crt", &generated.cert_pem, 0o644),
        ("tls.key", &generated.key_pem, 0o600),
    ];
    if !args.force {
        for (name, _, _) in &files {
            let path = args.out.join(name);
            if path.exists() {
                bail!("{} exists; pass --force to replace it", path.display());
            }
        }
    }
    for (name, contents, mode) in files {
        write_file(&args.out.join(name), contents, mode)?;
    }
    println!(
        "wrote ca.crt, tls.crt, tls.key to {} for {}",
        args.out.display(),
        hosts.join(", ")
    );
    Ok(())
}

fn write_file(path: &Path, contents: &str, mode: u32) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(contents.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
