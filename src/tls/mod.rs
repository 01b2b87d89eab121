//! TLS: certificate material from files, a Kubernetes Secret mount or generation; the rustls
//! server configuration (TLS 1.2 and 1.3, ALPN h2 and http/1.1, optional client certificates);
//! and hot reload.

mod generate;
mod reload;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use generate::{GeneratedCertificates, LOOPBACK_HOSTS, generate_certificates, service_hosts};
pub use reload::{CertificateReloader, ReloadOutcome};

/// Why certificate material could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A PEM file holds no usable certificate or key.
    #[error("{what}: {detail}")]
    Pem {
        /// Which file or role.
        what: String,
        /// What was wrong.
        detail: String,
    },
    /// rustls refused the material (for example, the key does not match the certificate).
    #[error("invalid TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client CA bundle cannot verify clients.
    #[error("client CA: {0}")]
    ClientCa(String),
    /// Certificate generation failed.
    #[error("certificate generation failed: {0}")]
    Generate(String),
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum CertificateSource {
    /// A certificate chain file and a key file.
    Files {
        /// PEM certificate chain, leaf first.
        cert: PathBuf,
        /// PEM private key.
        key: PathBuf,
    },
    /// A directory holding `tls.crt` and `tls.key`, as a mounted `kubernetes.io/tls` Secret.
    Directory(PathBuf),
    /// Generated at start, held in memory; never reloaded.
    Generated(GeneratedCertificates),
}

/// The TLS settings of the webhook listener.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// The serving certificate.
    pub source: CertificateSource,
    /// When set, clients must present a certificate signed by one of these CAs (mTLS).
    pub client_ca: Option<PathBuf>,
}

/// A built rustls configuration and facts about the material it came from.
pub struct LoadedTls {
    /// The configuration to serve with.
    pub config: Arc<ServerConfig>,
    /// A hash of the bytes read, to tell whether files changed.
    pub fingerprint: u64,
    /// NotAfter of the leaf certificate, Unix seconds.
    pub not_after: i64,
}

struct Material {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

impl TlsSettings {
    fn read_material(&self) -> Result<Material, TlsError> {
        let (cert, key) = match &self.source {
            CertificateSource::Files { cert, key } => (read(cert)?, read(key)?),
            CertificateSource::Directory(dir) => {
                (read(&dir.join("tls.crt"))?, read(&dir.join("tls.key"))?)
            }
            CertificateSource::Generated(generated) => (
                generated.cert_pem.clone().into_bytes(),
                generated.key_pem.clone().into_bytes(),
            ),
        };
        let client_ca = self.client_ca.as_deref().map(read).transpose()?;
        Ok(Material {
            cert,
            key,
            client_ca,
        })
    }

    /// Reads the material and builds a server configuration from it.
    pub fn load(&self) -> Result<LoadedTls, TlsError> {
        let material = self.read_material()?;
        let mut hasher = DefaultHasher::new();
        (&material.cert, &material.key, &material.client_ca).hash(&mut hasher);
        let fingerprint = hasher.finish();
        let (config, not_after) =
            server_config(&material.cert, &material.key, material.client_ca.as_deref())?;
        Ok(LoadedTls {
            config: Arc::new(config),
            fingerprint,
            not_after,
        })
    }

    /// The directories to watch for changes: those holding the files in use. Kubernetes
    /// updates a mounted Secret by swapping a `..data` symlink, which a watch on the files
    /// themselves would miss.
    pub fn watched_directories(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = match &self.source {
            CertificateSource::Files { cert, key } => vec![cert.clone(), key.clone()],
            CertificateSource::Directory(dir) => vec![dir.join("tls.crt")],
            CertificateSource::Generated(_) => Vec::new(),
        };
        files.extend(self.client_ca.iter().cloned());
        let mut directories: Vec<PathBuf> = files
            .iter()
            .map(|file| match file.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
                _ => PathBuf::from("."),
            })
            .collect();
        directories.sort();
        directories.dedup();
        directories
    }

    /// Whether the material can change (it is read from files).
    pub fn is_reloadable(&self) -> bool {
        !matches!(self.source, CertificateSource::Generated(_))
    }
}

/// Builds a rustls server configuration: ring provider, TLS 1.3 and 1.2 only with rustls'
/// safe default suites, ALPN `h2` then `http/1.1`, and client certificate verification when a
/// client CA bundle is given. Returns the configuration and the leaf's NotAfter.
pub fn server_config(
    cert_pem: &[u8],
    key_pem: &[u8],
    client_ca_pem: Option<&[u8]>,
) -> Result<(ServerConfig, i64), TlsError> {
    let chain = parse_certificates(cert_pem, "serving certificate")?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Pem {
        what: "private key".into(),
        detail: format!("no usable PEM private key ({e})"),
    })?;
    let not_after = not_after(&chain[0])?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let builder = match client_ca_pem {
        Some(pem) => {
            let mut roots = RootCertStore::empty();
            for cert in parse_certificates(pem, "client CA bundle")? {
                roots
                    .add(cert)
                    .map_err(|e| TlsError::ClientCa(e.to_string()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::ClientCa(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((config, not_after))
}

fn parse_certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            what: what.into(),
            detail: e.to_string(),
        })?;
    if certificates.is_empty() {
        return Err(TlsError::Pem {
            what: what.into(),
            detail: "no PEM certificate found".into(),
        });
    }
    Ok(certificates)
}

fn not_after(cert: &CertificateDer<'_>) -> Result<i64, TlsError> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert).map_err(|e| TlsError::Pem {
        what: "serving certificate".into(),
        detail: e.to_string(),
    })?;
    Ok(parsed.validity().not_after.timestamp())
}
