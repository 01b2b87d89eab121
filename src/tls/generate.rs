//! Certificate generation with rcgen: a CA and a serving certificate signed by it, used for
//! the ephemeral self-signed default of `serve` and by `portcullis certs`.

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};

use super::TlsError;

/// A freshly generated CA and serving certificate, PEM-encoded.
#[derive(Clone)]
pub struct GeneratedCertificates {
    /// The CA certificate: what clients (the apiserver's `caBundle`) trust.
    pub ca_pem: String,
    /// The serving certificate, signed by the CA.
    pub cert_pem: String,
    /// The serving certificate's private key (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for GeneratedCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratedCertificates")
            .field("key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// The names the ephemeral certificate of `serve` is valid for.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Generates a CA and a serving certificate for `hosts` (DNS names or IP addresses), valid
/// from an hour ago (clock skew) for `valid_days` days. Keys are ECDSA P-256.
pub fn generate_certificates(
    hosts: &[String],
    valid_days: u32,
) -> Result<GeneratedCertificates, TlsError> {
    if hosts.is_empty() {
        return Err(TlsError::Generate(
            "at least one host name is needed".into(),
        ));
    }
    let generate = |e: rcgen::Error| TlsError::Generate(e.to_string());
    let not_before = OffsetDateTime::now_utc() - Duration::hours(1);
    let not_after = OffsetDateTime::now_utc() + Duration::days(i64::from(valid_days));

    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "portcullis CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params.not_before = not_before;
    ca_params.not_after = not_after;
    let ca_key = KeyPair::generate().map_err(generate)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(generate)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut params = CertificateParams::default();
    params.subject_alt_names = hosts
        .iter()
        .map(|host| match host.parse::<IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => host
                .clone()
                .try_into()
                .map(SanType::DnsName)
                .map_err(|_| TlsError::Generate(format!("{host:?} is not a valid DNS name"))),
        })
        .collect::<Result<_, _>>()?;
    params
        .distinguished_name
        .push(DnType::CommonName, hosts[0].as_str());
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = not_before;
    params.not_after = not_after;
    let key = KeyPair::generate().map_err(generate)?;
    let cert = params.signed_by(&key, &issuer).map_err(generate)?;

    Ok(GeneratedCertificates {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// The DNS names a Service is reached by inside a cluster.
pub fn service_hosts(namespace: &str, name: &str) -> Vec<String> {
    vec![
        name.to_owned(),
        format!("{name}.{namespace}"),
        format!("{name}.{namespace}.svc"),
        format!("{name}.{namespace}.svc.cluster.local"),
    ]
}
