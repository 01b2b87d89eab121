//! The webhook over real TLS on loopback ports chosen by the OS: ALPN, protocol versions,
//! mTLS, certificate rotation by a `..data` symlink swap, and graceful drain.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::read_fixture;
use common::tls::{client_config, client_identity, connect, handshake, peer_leaf, start_server};
use common::wait_until;
use portcullis::tls::{
    CertificateSource, GeneratedCertificates, TlsSettings, generate_certificates,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::version::{TLS12, TLS13};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn loopback_certificates() -> GeneratedCertificates {
    generate_certificates(&["localhost".into(), "127.0.0.1".into()], 1).unwrap()
}

fn leaf_der(generated: &GeneratedCertificates) -> Vec<u8> {
    CertificateDer::from_pem_slice(generated.cert_pem.as_bytes())
        .unwrap()
        .to_vec()
}

fn generated(certificates: &GeneratedCertificates) -> TlsSettings {
    TlsSettings {
        source: CertificateSource::Generated(certificates.clone()),
        client_ca: None,
    }
}

#[tokio::test]
async fn h2_and_http1_by_alpn_on_tls12_and_tls13() {
    let certificates = loopback_certificates();
    let server = start_server(generated(&certificates)).await;
    let review = read_fixture("reviews/pod-create-privileged.json");
    for (alpn, versions, expect_h2) in [
        (&[b"h2".as_slice(), b"http/1.1"][..], &[&TLS13][..], true),
        (&[b"http/1.1".as_slice()][..], &[&TLS13][..], false),
        (&[b"h2".as_slice()][..], &[&TLS12][..], true),
        (&[][..], &[&TLS12][..], false),
    ] {
        let config = client_config(&[&certificates.ca_pem], alpn, None, versions);
        let stream = connect(server.webhook_addr, &config).await.unwrap();
        let mut sender = handshake(stream).await.unwrap();
        assert_eq!(sender.is_h2(), expect_h2);
        let (status, body) = sender.post("/validate", &review).await.unwrap();
        assert_eq!(status, 200);
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["response"]["allowed"], false);
    }
    server.shutdown().await.unwrap();
}

/// A ClientHello offering only TLS 1.1: legacy version 3.2 and no supported_versions
/// extension, as OpenSSL sends with `-tls1_1`.
fn tls11_client_hello() -> Vec<u8> {
    let mut body = vec![0x03, 0x02]; // client_version TLS 1.1
    body.extend([7u8; 32]); // random
    body.push(0); // session id
    body.extend([0x00, 0x04, 0xc0, 0x2b, 0xc0, 0x2f]); // ECDHE AES-128-GCM suites
    body.extend([0x01, 0x00]); // null compression
    // signature_algorithms (rustls requires it before looking at versions)
    body.extend([
        0x00, 0x0a, 0x00, 0x0d, 0x00, 0x06, 0x00, 0x04, 0x04, 0x03, 0x08, 0x04,
    ]);
    let mut handshake = vec![0x01, 0x00, 0x00, body.len() as u8];
    handshake.extend(body);
    let mut record = vec![0x16, 0x03, 0x01, 0x00, handshake.len() as u8];
    record.extend(handshake);
    record
}

#[tokio::test]
async fn tls11_is_refused_with_a_protocol_version_alert() {
    let server = start_server(generated(&loopback_certificates())).await;
    let mut tcp = tokio::net::TcpStream::connect(server.webhook_addr)
        .await
        .unwrap();
    tcp.write_all(&tls11_client_hello()).await.unwrap();
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut reply))
        .await
        .expect("server answers and closes")
        .ok();
    // An alert record: type 21, then level fatal (2) and protocol_version (70).
    assert!(reply.len() >= 7, "reply {reply:?}");
    assert_eq!(reply[0], 21, "expected an alert record, got {reply:?}");
    assert_eq!(
        &reply[5..7],
        &[2, 70],
        "expected fatal protocol_version, got {reply:?}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn mtls_accepts_only_certificates_of_the_client_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (client_ca, client_cert, client_key) = client_identity("kube-apiserver");
    let (_, stranger_cert, stranger_key) = client_identity("stranger");
    std::fs::write(dir.path().join("client-ca.crt"), &client_ca).unwrap();
    let certificates = loopback_certificates();
    let server = start_server(TlsSettings {
        source: CertificateSource::Generated(certificates.clone()),
        client_ca: Some(dir.path().join("client-ca.crt")),
    })
    .await;
    let review = read_fixture("reviews/pod-create-compliant.json");
    let attempt =
        |identity: Option<(&str, &str)>,
         versions: &'static [&'static rustls::SupportedProtocolVersion]| {
            let config = client_config(&[&certificates.ca_pem], &[b"http/1.1"], identity, versions);
            let addr = server.webhook_addr;
            let review = review.clone();
            async move {
                let stream = connect(addr, &config).await.map_err(|e| e.to_string())?;
                let mut sender = handshake(stream).await.map_err(|e| e.to_string())?;
                sender.post("/validate", &review).await
            }
        };
    static ONLY_TLS13: [&rustls::SupportedProtocolVersion; 1] = [&TLS13];
    static ONLY_TLS12: [&rustls::SupportedProtocolVersion; 1] = [&TLS12];
    for versions in [&ONLY_TLS13[..], &ONLY_TLS12[..]] {
        let accepted = attempt(Some((&client_cert, &client_key)), versions).await;
        assert_eq!(accepted.map(|(status, _)| status), Ok(200));
        assert!(
            attempt(None, versions).await.is_err(),
            "no client certificate must fail"
        );
        assert!(
            attempt(Some((&stranger_cert, &stranger_key)), versions)
                .await
                .is_err(),
            "a certificate from another CA must fail"
        );
    }
    server.shutdown().await.unwrap();
}

/// Lays out `dir` as kubelet does for a mounted Secret: the files are links through `..data`,
/// which points at a timestamped folder and is replaced atomically on update.
fn publish_secret(dir: &Path, version: &str, cert_pem: &str, key_pem: &str) {
    let payload = dir.join(format!("..{version}"));
    std::fs::create_dir(&payload).unwrap();
    std::fs::write(payload.join("tls.crt"), cert_pem).unwrap();
    std::fs::write(payload.join("tls.key"), key_pem).unwrap();
    let staged = dir.join("..data_tmp");
    std::os::unix::fs::symlink(format!("..{version}"), &staged).unwrap();
    std::fs::rename(&staged, dir.join("..data")).unwrap();
    for file in ["tls.crt", "tls.key"] {
        let link = dir.join(file);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{file}"), &link).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_by_symlink_swap_under_load_fails_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let first = loopback_certificates();
    let second = loopback_certificates();
    publish_secret(
        dir.path(),
        "2026_11_30_first",
        &first.cert_pem,
        &first.key_pem,
    );
    let server = start_server(TlsSettings {
        source: CertificateSource::Directory(dir.path().to_owned()),
        client_ca: None,
    })
    .await;
    let config = client_config(
        &[&first.ca_pem, &second.ca_pem],
        &[b"http/1.1"],
        None,
        &[&TLS13, &TLS12],
    );
    let review = read_fixture("reviews/pod-create-compliant.json");

    // A keep-alive connection opened before the swap must keep working after it.
    let mut kept = handshake(connect(server.webhook_addr, &config).await.unwrap())
        .await
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let served_first = Arc::new(AtomicUsize::new(0));
    let served_second = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(AtomicUsize::new(0));
    let (first_leaf, second_leaf) = (leaf_der(&first), leaf_der(&second));
    let load = {
        let (stop, served_first, served_second, failures) = (
            stop.clone(),
            served_first.clone(),
            served_second.clone(),
            failures.clone(),
        );
        let (config, review, addr) = (config.clone(), review.clone(), server.webhook_addr);
        let (first_leaf, second_leaf) = (first_leaf.clone(), second_leaf.clone());
        tokio::spawn(async move {
            // New connections in a loop, bounded in count.
            for _ in 0..20_000 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let result = async {
                    let stream = connect(addr, &config).await.map_err(|e| e.to_string())?;
                    let leaf = peer_leaf(&stream);
                    let mut sender = handshake(stream).await.map_err(|e| e.to_string())?;
                    let (status, _) = sender.post("/mutate", &review).await?;
                    Ok::<_, String>((status, leaf))
                }
                .await;
                match result {
                    Ok((200, leaf)) if leaf == first_leaf => {
                        served_first.fetch_add(1, Ordering::SeqCst)
                    }
                    Ok((200, leaf)) if leaf == second_leaf => {
                        served_second.fetch_add(1, Ordering::SeqCst)
                    }
                    _ => failures.fetch_add(1, Ordering::SeqCst),
                };
            }
        })
    };
    wait_until(
        Duration::from_secs(20),
        "requests with the first certificate",
        || {
            let served = served_first.clone();
            async move { served.load(Ordering::SeqCst) >= 5 }
        },
    )
    .await;

    publish_secret(
        dir.path(),
        "2026_11_30_second",
        &second.cert_pem,
        &second.key_pem,
    );
    wait_until(
        Duration::from_secs(20),
        "requests with the rotated certificate",
        || {
            let served = served_second.clone();
            async move { served.load(Ordering::SeqCst) >= 5 }
        },
    )
    .await;

    // A broken pair (the first certificate with the second key) is refused; the second stays.
    publish_secret(
        dir.path(),
        "2026_11_30_broken",
        &first.cert_pem,
        &second.key_pem,
    );
    let metrics = server.state.metrics.clone();
    wait_until(
        Duration::from_secs(20),
        "the failed reload to be counted",
        || {
            let metrics = metrics.clone();
            async move {
                metrics
                    .encode()
                    .contains(r#"portcullis_reloads_total{component="tls",result="failure"} 1"#)
            }
        },
    )
    .await;
    let after_broken = served_second.load(Ordering::SeqCst);
    wait_until(
        Duration::from_secs(20),
        "more requests after the broken update",
        || {
            let served = served_second.clone();
            async move { served.load(Ordering::SeqCst) >= after_broken + 5 }
        },
    )
    .await;

    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();
    eprintln!(
        "rotation: {} with the first certificate, {} with the second, {} failed",
        served_first.load(Ordering::SeqCst),
        served_second.load(Ordering::SeqCst),
        failures.load(Ordering::SeqCst)
    );
    assert_eq!(
        failures.load(Ordering::SeqCst),
        0,
        "failed requests during rotation"
    );
    let (status, _) = kept.post("/validate", &review).await.unwrap();
    assert_eq!(status, 200, "the pre-rotation connection still works");
    let text = server.state.metrics.encode();
    assert!(
        text.contains(r#"portcullis_reloads_total{component="tls",result="success"} 1"#),
        "{text}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_drains_in_flight_requests() {
    let certificates = loopback_certificates();
    let server = start_server(generated(&certificates)).await;
    let config = client_config(&[&certificates.ca_pem], &[b"http/1.1"], None, &[&TLS13]);
    let review = read_fixture("reviews/pod-create-privileged.json");
    let (head, tail) = review.split_at(review.len() / 2);

    // Send the headers and half the body: the request is now in flight.
    let mut stream = connect(server.webhook_addr, &config).await.unwrap();
    let headers = format!(
        "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        review.len()
    );
    stream.write_all(headers.as_bytes()).await.unwrap();
    stream.write_all(head).await.unwrap();
    stream.flush().await.unwrap();
    let metrics = server.state.metrics.clone();
    wait_until(
        Duration::from_secs(10),
        "the request to be in flight",
        || {
            let metrics = metrics.clone();
            async move { metrics.in_flight.get() == 1 }
        },
    )
    .await;

    server.begin_shutdown();
    let admin = server.admin_addr;
    let readyz = reqwest_status(admin, "/readyz").await;
    assert_eq!(readyz, 503, "not ready while draining");
    let addr = server.webhook_addr;
    wait_until(
        Duration::from_secs(10),
        "new connections to be refused",
        || async move { tokio::net::TcpStream::connect(addr).await.is_err() },
    )
    .await;

    stream.write_all(tail).await.unwrap();
    stream.flush().await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .expect("response before the grace period ends")
        .ok();
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains(r#""allowed":false"#), "{text}");
    tokio::time::timeout(Duration::from_secs(10), server.wait())
        .await
        .expect("server stops after draining")
        .unwrap();
}

/// GETs a path on the plain-HTTP admin listener and returns the status code.
async fn reqwest_status(addr: std::net::SocketAddr, path: &str) -> u16 {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tcp.read_to_string(&mut response).await.unwrap();
    response[9..12].parse().unwrap()
}
