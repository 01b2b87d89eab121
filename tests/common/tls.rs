//! A TLS test client (tokio-rustls + hyper) and certificate helpers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use portcullis::engine::Engine;
use portcullis::server::{ConnectionSettings, RequestSettings, RunningServer, ServeConfig, start};
use portcullis::tls::TlsSettings;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The configuration of the test servers: the built-in rules on loopback ports chosen by the
/// OS, default limits, no drain delay, 10 s of grace.
pub fn loopback_config(tls: TlsSettings) -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        tls,
        tls_reload_interval: Duration::from_secs(3600),
        drain_delay: Duration::ZERO,
        shutdown_grace: Duration::from_secs(10),
        request: RequestSettings::default(),
        connections: ConnectionSettings::default(),
        engine: Engine::builtin(),
    }
}

/// Starts a server with [`loopback_config`].
pub async fn start_server(tls: TlsSettings) -> RunningServer {
    start(loopback_config(tls)).await.expect("server starts")
}

/// A client configuration trusting `ca_pems`, offering `alpn`, optionally with a client
/// certificate, limited to the given protocol versions.
pub fn client_config(
    ca_pems: &[&str],
    alpn: &[&[u8]],
    client_identity: Option<(&str, &str)>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for pem in ca_pems {
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match client_identity {
        Some((cert_pem, key_pem)) => {
            let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// Opens a TLS connection to `addr`, verifying the name `localhost`.
pub async fn connect(
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(config.clone())
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

/// The DER of the certificate the server presented.
pub fn peer_leaf(stream: &TlsStream<TcpStream>) -> Vec<u8> {
    stream.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

/// A request sender over one connection, HTTP/1.1 or h2 as ALPN chose.
pub enum Sender {
    /// HTTP/1.1.
    Http1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    /// HTTP/2.
    Http2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

/// Starts HTTP on a TLS stream: h2 if ALPN negotiated it, HTTP/1.1 otherwise.
pub async fn handshake(stream: TlsStream<TcpStream>) -> hyper::Result<Sender> {
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    let io = TokioIo::new(stream);
    if h2 {
        let (sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
        tokio::spawn(connection);
        Ok(Sender::Http2(sender))
    } else {
        let (sender, connection) = hyper::client::conn::http1::handshake(io).await?;
        tokio::spawn(connection);
        Ok(Sender::Http1(sender))
    }
}

impl Sender {
    /// Whether this connection speaks h2.
    pub fn is_h2(&self) -> bool {
        matches!(self, Sender::Http2(_))
    }

    /// POSTs a JSON body and returns the status and body.
    pub async fn post(&mut self, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        let request = Request::post(format!("https://localhost{path}"))
            .header("content-type", "application/json")
            .header("host", "localhost")
            .body(Full::new(Bytes::copy_from_slice(body)))
            .unwrap();
        let response = match self {
            Sender::Http1(sender) => {
                sender.ready().await.map_err(|e| e.to_string())?;
                sender.send_request(request).await
            }
            Sender::Http2(sender) => {
                sender.ready().await.map_err(|e| e.to_string())?;
                sender.send_request(request).await
            }
        }
        .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes()
            .to_vec();
        Ok((status, body))
    }
}

/// A CA and a client certificate it signs, PEM: (ca, cert, key).
pub fn client_identity(common_name: &str) -> (String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "test client CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}
