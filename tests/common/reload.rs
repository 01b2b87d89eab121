//! Helpers of the policy reload tests: a ConfigMap-style mount, a server serving policy
//! files, an admission client and plain-HTTP requests to the admin listener.
//!
//! Included by `tests/reload.rs` with `#[path]`, next to `mod common`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use portcullis::metrics::{Metrics, ReloadLabels};
use portcullis::server::{
    OnError, RequestSettings, RunningServer, ServeConfig, ServeSources, start_with,
};
use portcullis::tls::{
    CertificateSource, GeneratedCertificates, TlsSettings, generate_certificates,
};
use rustls::version::{TLS12, TLS13};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::tls::{Sender, client_config, connect, handshake, loopback_config};

/// A folder laid out as kubelet lays out a ConfigMap volume: each key is a symlink through
/// `..data`, which points at a timestamped folder and is replaced atomically by a rename.
pub struct ConfigMapMount {
    dir: PathBuf,
    version: usize,
    keys: Vec<String>,
}

impl ConfigMapMount {
    /// An empty mount at `dir` (created): `..data` points at an empty payload.
    pub fn new(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let mut mount = ConfigMapMount {
            dir: dir.to_owned(),
            version: 0,
            keys: Vec::new(),
        };
        mount.publish(&[]);
        mount
    }

    /// The mount's folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Replaces the mount's contents with `files` (key, contents) in kubelet's order: write
    /// the new payload folder, swap `..data` to it by rename, add links for new keys, remove
    /// links of keys no longer present, remove the old payload folder.
    pub fn publish(&mut self, files: &[(&str, &[u8])]) {
        let old = (self.version > 0).then(|| self.payload_name(self.version));
        self.version += 1;
        let payload = self.payload_name(self.version);
        std::fs::create_dir(self.dir.join(&payload)).unwrap();
        for (key, contents) in files {
            std::fs::write(self.dir.join(&payload).join(key), contents).unwrap();
        }
        let staged = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&payload, &staged).unwrap();
        std::fs::rename(&staged, self.dir.join("..data")).unwrap();
        let keys: Vec<String> = files.iter().map(|(key, _)| (*key).to_owned()).collect();
        for key in &keys {
            let link = self.dir.join(key);
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(format!("..data/{key}"), &link).unwrap();
            }
        }
        for key in self.keys.iter().filter(|key| !keys.contains(key)) {
            std::fs::remove_file(self.dir.join(key)).unwrap();
        }
        self.keys = keys;
        if let Some(old) = old {
            std::fs::remove_dir_all(self.dir.join(old)).unwrap();
        }
    }

    fn payload_name(&self, version: usize) -> String {
        format!("..2026_05_01_10_00_{version:02}.{}", 100 + version)
    }
}

/// A serving certificate for `localhost`.
pub fn loopback_certificates() -> GeneratedCertificates {
    generate_certificates(&["localhost".into(), "127.0.0.1".into()], 1).unwrap()
}

/// Starts a server on loopback ports chosen by the OS, serving the policies under `paths`
/// (re-read every `interval` besides change notifications).
pub async fn start_with_policies(
    certificates: &GeneratedCertificates,
    paths: Vec<PathBuf>,
    on_error: OnError,
    interval: Duration,
) -> RunningServer {
    start_with(
        ServeConfig {
            request: RequestSettings {
                on_error,
                ..RequestSettings::default()
            },
            // The engine is ignored: policy files are given.
            ..loopback_config(TlsSettings {
                source: CertificateSource::Generated(certificates.clone()),
                client_ca: None,
            })
        },
        ServeSources {
            policy_paths: paths,
            policy_reload_interval: interval,
            ..ServeSources::default()
        },
    )
    .await
    .expect("server starts")
}

/// A keep-alive HTTPS connection to the webhook.
pub async fn admission_client(
    server: &RunningServer,
    certificates: &GeneratedCertificates,
) -> Sender {
    let config = client_config(
        &[&certificates.ca_pem],
        &[b"h2", b"http/1.1"],
        None,
        &[&TLS13, &TLS12],
    );
    handshake(connect(server.webhook_addr, &config).await.unwrap())
        .await
        .unwrap()
}

/// POSTs `review` to `path` and returns its AdmissionResponse, or why there is none: an
/// HTTP status other than 200, a body that is not an AdmissionReview, a uid that differs.
pub async fn admission_response(
    sender: &mut Sender,
    path: &str,
    review: &[u8],
) -> Result<Value, String> {
    let uid = serde_json::from_slice::<Value>(review).unwrap()["request"]["uid"].clone();
    let (status, body) = sender.post(path, review).await?;
    let text = String::from_utf8_lossy(&body);
    if status != 200 {
        return Err(format!("HTTP {status}: {text}"));
    }
    let body: Value = serde_json::from_slice(&body).map_err(|e| format!("{e}: {text}"))?;
    let response = &body["response"];
    if body["kind"] != "AdmissionReview" || response["uid"] != uid {
        return Err(format!("not an AdmissionReview for {uid}: {text}"));
    }
    Ok(response.clone())
}

/// GETs `path` on the plain-HTTP admin listener: status and body.
pub async fn admin_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tcp.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// `portcullis_reloads_total{component="policies",result=...}`.
pub fn policy_reloads(metrics: &Metrics, result: &'static str) -> u64 {
    metrics
        .reloads
        .get_or_create(&ReloadLabels {
            component: "policies",
            result,
        })
        .get()
}
