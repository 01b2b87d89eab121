//! Hostile input over a real TLS socket on a loopback port chosen by the OS: malformed,
//! oversized and lying requests, slow clients, HTTP/2 stream abuse, connection floods and bytes
//! that are not TLS. Each class has one answer, listed in docs/security.md; after each class
//! the server still answers a good request.
//!
//! The server runs with short timeouts and small limits (see `hostile_connections`) so the
//! slow-client classes take well under a second each.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::read_fixture;
use common::tls::{client_config, connect, handshake};
use common::wait_until;
use portcullis::server::{ConnectionSettings, RequestSettings, RunningServer, ServeConfig, start};
use portcullis::tls::{CertificateSource, TlsSettings, generate_certificates};
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use rustls::version::{TLS12, TLS13};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const HEADER_READ_TIMEOUT: Duration = Duration::from_millis(500);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(700);
const REQUEST_TIMEOUT: Duration = Duration::from_millis(600);
const MAX_BODY_BYTES: usize = 1024 * 1024;
const MAX_HEADER_BYTES: usize = 16 * 1024;
const MAX_STREAMS: u32 = 8;
const MAX_CONNECTIONS: usize = 64;
const IDLE_TIMEOUT: Duration = Duration::from_millis(1500);
/// How long a test waits for an answer or a close before calling it a hang.
const PATIENCE: Duration = Duration::from_secs(5);

fn hostile_connections() -> ConnectionSettings {
    ConnectionSettings {
        max_connections: MAX_CONNECTIONS,
        tls_handshake_timeout: HANDSHAKE_TIMEOUT,
        header_read_timeout: HEADER_READ_TIMEOUT,
        max_concurrent_streams: MAX_STREAMS,
        max_header_bytes: MAX_HEADER_BYTES,
        idle_timeout: IDLE_TIMEOUT,
    }
}

/// A server under attack and the client configurations that reach it.
struct Target {
    server: RunningServer,
    http1: Arc<ClientConfig>,
    h2: Arc<ClientConfig>,
}

async fn start_target(connections: ConnectionSettings) -> Target {
    start_target_with(connections, hostile_requests()).await
}

fn hostile_requests() -> RequestSettings {
    RequestSettings {
        max_body_bytes: MAX_BODY_BYTES,
        request_timeout: REQUEST_TIMEOUT,
        ..RequestSettings::default()
    }
}

async fn start_target_with(connections: ConnectionSettings, request: RequestSettings) -> Target {
    let certificates = generate_certificates(&["localhost".into(), "127.0.0.1".into()], 1).unwrap();
    let server = start(ServeConfig {
        shutdown_grace: Duration::from_secs(5),
        request,
        connections,
        ..common::tls::loopback_config(TlsSettings {
            source: CertificateSource::Generated(certificates.clone()),
            client_ca: None,
        })
    })
    .await
    .expect("server starts");
    let versions = [&TLS13, &TLS12];
    Target {
        server,
        http1: client_config(&[&certificates.ca_pem], &[b"http/1.1"], None, &versions),
        h2: client_config(&[&certificates.ca_pem], &[b"h2"], None, &versions),
    }
}

impl Target {
    async fn tls(&self, config: &Arc<ClientConfig>) -> tokio_rustls::client::TlsStream<TcpStream> {
        connect(self.server.webhook_addr, config)
            .await
            .expect("TLS connection")
    }

    /// A fresh connection gets a good review allowed: the server is unaffected by `after`.
    async fn assert_serves(&self, after: &str) {
        let mut sender = handshake(self.tls(&self.http1).await).await.unwrap();
        let (status, body) = tokio::time::timeout(PATIENCE, sender.post("/validate", &good()))
            .await
            .unwrap_or_else(|_| panic!("no answer to a good request after {after}"))
            .unwrap_or_else(|e| panic!("good request failed after {after}: {e}"));
        assert_eq!(
            status,
            200,
            "after {after}: {}",
            String::from_utf8_lossy(&body)
        );
        let review: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            review["response"]["allowed"], true,
            "after {after}: {review}"
        );
        assert_eq!(review["response"]["uid"], GOOD_UID, "after {after}");
    }

    async fn metrics(&self) -> String {
        self.server.state.metrics.encode()
    }
}

const GOOD_UID: &str = "4d2b9c1e-7a3f-4e58-b6d0-91c8e2f5a731";

/// The compliant Pod CREATE fixture.
fn good() -> Vec<u8> {
    read_fixture("reviews/pod-create-compliant.json")
}

fn good_value() -> Value {
    serde_json::from_slice(&good()).unwrap()
}

/// The good review with the value at `pointer` replaced (or added, for a new last key).
fn good_with(pointer: &str, value: Value) -> Vec<u8> {
    let mut review = good_value();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    review.pointer_mut(parent).unwrap()[key] = value;
    review.to_string().into_bytes()
}

fn good_without(pointer: &str) -> Vec<u8> {
    let mut review = good_value();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    review
        .pointer_mut(parent)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove(key);
    review.to_string().into_bytes()
}

/// The compact good review with `from` replaced by `to` once (for JSON no `Value` can hold).
fn good_text_replaced(from: &str, to: &str) -> Vec<u8> {
    let text = good_value().to_string();
    assert!(text.contains(from), "{from} not in the good review");
    text.replacen(from, to, 1).into_bytes()
}

// ---------------------------------------------------------------------------------------
// HTTP/1.1 over TLS, byte for byte

/// A request with the given head lines; `connection: close` so the server ends the exchange.
fn http1(request_line: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{request_line}\r\nhost: localhost\r\n");
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("connection: close\r\n\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

/// The head of a keep-alive `POST /validate` with a JSON body of `length` bytes.
fn json_head(length: usize) -> String {
    format!(
        "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {length}\r\n\r\n"
    )
}

/// `POST /validate` with `lines` written into the head as they are.
fn raw_head(lines: &str) -> Vec<u8> {
    format!("POST /validate HTTP/1.1\r\nhost: localhost\r\n{lines}\r\nconnection: close\r\n\r\n")
        .into_bytes()
}

/// `POST path` with an honest Content-Length and `Content-Type: application/json`.
fn post(path: &str, body: &[u8]) -> Vec<u8> {
    let length = body.len().to_string();
    http1(
        &format!("POST {path} HTTP/1.1"),
        &[
            ("content-type", "application/json"),
            ("content-length", &length),
        ],
        body,
    )
}

/// One parsed HTTP/1.1 response.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What came back on one connection before the server closed it.
#[derive(Debug)]
struct Exchange {
    responses: Vec<Response>,
    closed: bool,
    elapsed: Duration,
}

/// Reads until the peer closes (EOF, reset or a TLS error) or `PATIENCE` passes.
async fn read_until_closed(reader: &mut (impl AsyncRead + Unpin)) -> (Vec<u8>, bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match tokio::time::timeout_at(deadline, reader.read(&mut buf)).await {
            Err(_) => return (bytes, false),
            Ok(Ok(0)) | Ok(Err(_)) => return (bytes, true),
            Ok(Ok(n)) => bytes.extend_from_slice(&buf[..n]),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn parse_responses(mut bytes: &[u8]) -> Vec<Response> {
    let mut responses = Vec::new();
    while let Some(end) = find(bytes, b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status = status_line
            .get(9..12)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP response: {status_line:?}"));
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            .collect();
        let mut response = Response {
            status,
            headers,
            body: Vec::new(),
        };
        let rest = &bytes[end + 4..];
        if let Some(length) = response.header("content-length") {
            let length: usize = length.parse().unwrap();
            let length = length.min(rest.len());
            response.body = rest[..length].to_vec();
            bytes = &rest[length..];
        } else if response.header("transfer-encoding") == Some("chunked") {
            let mut rest = rest;
            while let Some(line_end) = find(rest, b"\r\n") {
                let size = usize::from_str_radix(
                    std::str::from_utf8(&rest[..line_end]).unwrap().trim(),
                    16,
                )
                .unwrap();
                rest = &rest[line_end + 2..];
                if size == 0 {
                    rest = rest.get(2..).unwrap_or_default();
                    break;
                }
                let size = size.min(rest.len());
                response.body.extend_from_slice(&rest[..size]);
                rest = rest.get(size + 2..).unwrap_or_default();
            }
            bytes = rest;
        } else {
            bytes = rest;
        }
        responses.push(response);
    }
    responses
}

/// Sends `request` on a new connection (writing while reading, as a client that does not wait)
/// and collects every response until the server closes the connection.
async fn exchange(target: &Target, request: Vec<u8>) -> Exchange {
    let stream = target.tls(&target.http1).await;
    let (mut reader, mut writer) = tokio::io::split(stream);
    let started = Instant::now();
    let writing = tokio::spawn(async move {
        // The server may close before reading everything: a failed write is expected then.
        let _ = writer.write_all(&request).await;
        let _ = writer.flush().await;
        writer
    });
    let (bytes, closed) = read_until_closed(&mut reader).await;
    let elapsed = started.elapsed();
    writing.abort();
    Exchange {
        responses: parse_responses(&bytes),
        closed,
        elapsed,
    }
}

/// The answer expected for one request.
#[derive(Debug, Clone, Copy)]
enum Answer {
    /// A JSON `Status` with this code whose message contains the text.
    Status(u16, &'static str),
    /// An AdmissionReview (HTTP 200) with `allowed` as given.
    Review(bool),
    /// hyper's own answer to a request head it cannot parse: the code and no body.
    Bare(u16),
}

fn check(name: &str, exchange: &Exchange, expected: &[Answer]) {
    assert!(exchange.closed, "{name}: the connection stayed open");
    let got: Vec<_> = exchange
        .responses
        .iter()
        .map(|r| (r.status, String::from_utf8_lossy(&r.body).into_owned()))
        .collect();
    assert_eq!(
        exchange.responses.len(),
        expected.len(),
        "{name}: got {got:?}, expected {expected:?}"
    );
    for (response, answer) in exchange.responses.iter().zip(expected) {
        let text = String::from_utf8_lossy(&response.body);
        match *answer {
            Answer::Status(code, message) => {
                assert_eq!(response.status, code, "{name}: {text}");
                let body: Value = serde_json::from_slice(&response.body)
                    .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {text}"));
                assert_eq!(body["kind"], "Status", "{name}: {body}");
                assert_eq!(body["code"], code, "{name}: {body}");
                let got = body["message"].as_str().unwrap();
                assert!(got.contains(message), "{name}: {got:?} lacks {message:?}");
            }
            Answer::Review(allowed) => {
                assert_eq!(response.status, 200, "{name}: {text}");
                let body: Value = serde_json::from_slice(&response.body).unwrap();
                assert_eq!(body["kind"], "AdmissionReview", "{name}: {body}");
                assert_eq!(body["response"]["allowed"], allowed, "{name}: {body}");
            }
            Answer::Bare(code) => {
                assert_eq!(response.status, code, "{name}: {text}");
                assert!(response.body.is_empty(), "{name}: {text}");
            }
        }
    }
}

/// Requests whose answer is decided once the body (or head) is read: malformed JSON, wrong
/// envelopes, lying or broken framing, oversized heads. One connection each.
fn request_classes() -> Vec<(&'static str, Vec<u8>, Vec<Answer>)> {
    use Answer::*;
    let good = good();
    let nested_arrays = good_text_replaced(
        "\"status\":{}",
        &format!("\"status\":{}{}", "[".repeat(100_000), "]".repeat(100_000)),
    );
    let nested_objects = good_text_replaced(
        "\"status\":{}",
        &format!(
            "\"status\":{}1{}",
            "{\"a\":".repeat(50_000),
            "}".repeat(50_000)
        ),
    );
    let nested_within_limit = good_text_replaced(
        "\"status\":{}",
        &format!("\"status\":{}1{}", "{\"a\":".repeat(100), "}".repeat(100)),
    );
    let mut privileged_as_configmap = good_value();
    privileged_as_configmap["request"]["object"]["kind"] = json!("ConfigMap");
    privileged_as_configmap["request"]["object"]["spec"]["hostNetwork"] = json!(true);
    let mut pod_kind_configmap_object = good_value();
    pod_kind_configmap_object["request"]["object"] = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "data": {"k": "v"},
    });
    let mut configmap_kind_privileged_pod = good_value();
    configmap_kind_privileged_pod["request"]["kind"] =
        json!({"group": "", "version": "v1", "kind": "ConfigMap"});
    configmap_kind_privileged_pod["request"]["resource"] =
        json!({"group": "", "version": "v1", "resource": "configmaps"});
    configmap_kind_privileged_pod["request"]["object"]["spec"]["hostNetwork"] = json!(true);
    let mut unknown_fields = good_value();
    unknown_fields["surprise"] = json!({"nested": [1, 2, 3]});
    unknown_fields["request"]["surprise"] = json!(true);
    let oversized = vec![b' '; 64 * 1024];
    let over_limit = (2 * MAX_BODY_BYTES).to_string();
    let mut chunked_over_limit = Vec::new();
    for _ in 0..(MAX_BODY_BYTES / 65536 + 2) {
        chunked_over_limit.extend_from_slice(b"10000\r\n");
        chunked_over_limit.extend(std::iter::repeat_n(b' ', 65536));
        chunked_over_limit.extend_from_slice(b"\r\n");
    }
    chunked_over_limit.extend_from_slice(b"0\r\n\r\n");
    let many_headers: Vec<(String, String)> = (0..200)
        .map(|i| (format!("x-hostile-{i}"), "1".to_owned()))
        .collect();
    let many_headers: Vec<(&str, &str)> = many_headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let huge_header = "a".repeat(MAX_HEADER_BYTES + 1024);
    let good_length = good.len().to_string();
    let mut invalid_utf8 = good_text_replaced(GOOD_UID, "\u{0}");
    for byte in &mut invalid_utf8 {
        if *byte == 0 {
            *byte = 0xff;
        }
    }
    // No `connection: close`: the bytes after the first 10 are read as the next request.
    let mut short_length = b"POST /validate HTTP/1.1\r\nhost: localhost\r\n\
        content-type: application/json\r\ncontent-length: 10\r\n\r\n"
        .to_vec();
    short_length.extend_from_slice(&good);
    let json_type = ("content-type", "application/json");
    let huge_annotation = json!({"a": "x".repeat(900 * 1024)});
    let field = |pointer: &str, value: Value| post("/validate", &good_with(pointer, value));
    let replaced = |from: &str, to: &str| post("/validate", &good_text_replaced(from, to));
    let uid = format!("\"uid\":\"{GOOD_UID}");
    let uid_twice = format!("\"uid\":\"first\",{uid}");

    vec![
        // --- the body is not JSON
        (
            "truncated JSON",
            post("/validate", &good[..good.len() / 2]),
            vec![Status(400, "EOF while parsing")],
        ),
        (
            "invalid JSON",
            post("/validate", br#"{"apiVersion": admission}"#),
            vec![Status(400, "expected value")],
        ),
        (
            "invalid UTF-8 in a string",
            post("/validate", &invalid_utf8),
            vec![Status(400, "invalid unicode code point")],
        ),
        (
            "unpaired surrogate escape",
            replaced(GOOD_UID, r"\ud800"),
            vec![Status(400, "hex escape")],
        ),
        (
            "raw control character in a string",
            replaced(GOOD_UID, "a\u{1}b"),
            vec![Status(400, "control character")],
        ),
        (
            "byte-order mark before the JSON",
            post("/validate", &[b"\xef\xbb\xbf".as_slice(), &good].concat()),
            vec![Status(400, "expected value")],
        ),
        (
            "two reviews back to back",
            post("/validate", &[good.as_slice(), &good].concat()),
            vec![Status(400, "trailing characters")],
        ),
        (
            "number out of range",
            replaced("\"priority\":0", "\"priority\":1e400"),
            vec![Status(400, "number out of range")],
        ),
        (
            "arrays nested 100 000 deep",
            post("/validate", &nested_arrays),
            vec![Status(400, "recursion limit exceeded")],
        ),
        (
            "objects nested 50 000 deep",
            post("/validate", &nested_objects),
            vec![Status(400, "recursion limit exceeded")],
        ),
        // --- JSON that parses: the limits that do not refuse it
        (
            "objects nested 100 deep (within the parser's 128)",
            post("/validate", &nested_within_limit),
            vec![Review(true)],
        ),
        (
            "a 900 KiB string (within the 1 MiB body limit)",
            field("/request/object/metadata/annotations", huge_annotation),
            vec![Review(true)],
        ),
        (
            "an array of 200 000 numbers",
            field("/request/object/status/hostile", json!(vec![0; 200_000])),
            vec![Review(true)],
        ),
        (
            // Pod Security reads typed fields: a Pod with one that does not decode into its Go
            // type (the apiserver never sends one) is an evaluation error, refused under
            // --on-error=deny.
            "a number too large for a container's int64 runAsUser",
            replaced(
                "\"runAsNonRoot\":true",
                "\"runAsNonRoot\":true,\"runAsUser\":123456789012345678901234567890",
            ),
            vec![Review(false)],
        ),
        (
            // A field no rule reads is not checked: the Pod is decided.
            "a number too large for the Pod's int32 priority, which Pod Security does not read",
            replaced(
                "\"priority\":0",
                "\"priority\":123456789012345678901234567890",
            ),
            vec![Review(true)],
        ),
        (
            "unknown fields in the envelope and the request (ignored)",
            post("/validate", unknown_fields.to_string().as_bytes()),
            vec![Review(true)],
        ),
        // --- duplicate keys: our envelope refuses them, objects keep the last (as Go does)
        (
            "duplicate key in the envelope (uid twice)",
            replaced(&uid, &uid_twice),
            vec![Status(400, "duplicate field `uid`")],
        ),
        (
            "duplicate key in the object, the last one benign",
            replaced(
                "\"spec\":{",
                "\"spec\":{\"hostNetwork\":true,\"hostNetwork\":false,",
            ),
            vec![Review(true)],
        ),
        (
            "duplicate key in the object, the last one privileged",
            replaced(
                "\"spec\":{",
                "\"spec\":{\"hostNetwork\":false,\"hostNetwork\":true,",
            ),
            vec![Review(false)],
        ),
        // --- a wrong type in each envelope field
        (
            "apiVersion a number",
            field("/apiVersion", json!(1)),
            vec![Status(400, "invalid type: integer `1`, expected a string")],
        ),
        (
            "kind an object",
            field("/kind", Value::Object(Default::default())),
            vec![Status(400, "invalid type: map, expected a string")],
        ),
        (
            "request a string",
            field("/request", json!("yes")),
            vec![Status(400, "expected struct AdmissionRequest")],
        ),
        (
            "request null",
            field("/request", Value::Null),
            vec![Status(400, "AdmissionReview has no request")],
        ),
        (
            "uid a number",
            field("/request/uid", json!(42)),
            vec![Status(400, "invalid type: integer `42`, expected a string")],
        ),
        (
            "kind.kind an array",
            field("/request/kind/kind", json!(["Pod"])),
            vec![Status(400, "invalid type: sequence, expected a string")],
        ),
        (
            "request.kind a string",
            field("/request/kind", json!("Pod")),
            vec![Status(400, "expected struct GroupVersionKind")],
        ),
        (
            "resource a string",
            field("/request/resource", json!("pods")),
            vec![Status(400, "expected struct GroupVersionResource")],
        ),
        (
            "operation a boolean",
            field("/request/operation", json!(true)),
            vec![Status(
                400,
                "invalid type: boolean `true`, expected a string",
            )],
        ),
        (
            "operation unknown",
            field("/request/operation", json!("EXPLODE")),
            vec![Status(400, "unknown operation \"EXPLODE\"")],
        ),
        (
            "userInfo a string",
            field("/request/userInfo", json!("admin")),
            vec![Status(400, "expected struct UserInfo")],
        ),
        (
            "userInfo.groups a string",
            field("/request/userInfo/groups", json!("system:masters")),
            vec![Status(400, "expected a sequence")],
        ),
        (
            "object an array",
            field("/request/object", json!([1])),
            vec![Status(400, "request.object must be a JSON object")],
        ),
        (
            "oldObject a number",
            field("/request/oldObject", json!(7)),
            vec![Status(400, "request.oldObject must be a JSON object")],
        ),
        (
            "dryRun a string",
            field("/request/dryRun", json!("yes")),
            vec![Status(
                400,
                "invalid type: string \"yes\", expected a boolean",
            )],
        ),
        (
            "options a string (not interpreted)",
            field("/request/options", json!("anything")),
            vec![Review(true)],
        ),
        (
            "missing uid",
            post("/validate", &good_without("/request/uid")),
            vec![Status(400, "missing field `uid`")],
        ),
        (
            "empty uid",
            field("/request/uid", json!("")),
            vec![Status(400, "request.uid must not be empty")],
        ),
        // --- the object disagrees with request.kind: refused (the --on-error answer), as the
        // apiserver never sends such a request (issue #12)
        (
            "kind Pod, object a ConfigMap",
            post(
                "/validate",
                pod_kind_configmap_object.to_string().as_bytes(),
            ),
            vec![Review(false)],
        ),
        (
            "kind Pod, privileged Pod object saying kind ConfigMap",
            post("/validate", privileged_as_configmap.to_string().as_bytes()),
            vec![Review(false)],
        ),
        (
            "kind ConfigMap, object a privileged Pod",
            post(
                "/validate",
                configmap_kind_privileged_pod.to_string().as_bytes(),
            ),
            vec![Review(false)],
        ),
        // --- framing
        (
            "oversized body with an honest Content-Length",
            http1(
                "POST /validate HTTP/1.1",
                &[json_type, ("content-length", &over_limit)],
                &oversized,
            ),
            vec![Status(413, "larger than the limit of 1048576 bytes")],
        ),
        (
            "oversized chunked body",
            http1(
                "POST /validate HTTP/1.1",
                &[json_type, ("transfer-encoding", "chunked")],
                &chunked_over_limit,
            ),
            vec![Status(413, "larger than the limit of 1048576 bytes")],
        ),
        (
            "oversized body announced with Expect: 100-continue (no 100 is sent)",
            http1(
                "POST /validate HTTP/1.1",
                &[
                    json_type,
                    ("content-length", &over_limit),
                    ("expect", "100-continue"),
                ],
                b"",
            ),
            vec![Status(413, "larger than the limit")],
        ),
        (
            "Content-Length shorter than the body",
            short_length,
            vec![Status(400, "EOF while parsing"), Bare(400)],
        ),
        (
            "Content-Length not a number",
            http1(
                "POST /validate HTTP/1.1",
                &[json_type, ("content-length", "12abc")],
                &good,
            ),
            vec![Bare(400)],
        ),
        (
            "two different Content-Lengths",
            http1(
                "POST /validate HTTP/1.1",
                &[
                    json_type,
                    ("content-length", &good_length),
                    ("content-length", "5"),
                ],
                &good,
            ),
            vec![Bare(400)],
        ),
        (
            "Content-Length and Transfer-Encoding: chunked together",
            http1(
                "POST /validate HTTP/1.1",
                &[
                    json_type,
                    ("content-length", "5"),
                    ("transfer-encoding", "chunked"),
                ],
                b"5\r\nhello\r\n0\r\n\r\n",
            ),
            vec![Status(400, "expected value")],
        ),
        (
            "chunk size that is not hex",
            http1(
                "POST /validate HTTP/1.1",
                &[json_type, ("transfer-encoding", "chunked")],
                b"zz\r\nhello\r\n0\r\n\r\n",
            ),
            vec![Status(400, "cannot read request body")],
        ),
        (
            "chunk size that overflows",
            http1(
                "POST /validate HTTP/1.1",
                &[json_type, ("transfer-encoding", "chunked")],
                b"ffffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
            ),
            vec![Status(400, "cannot read request body")],
        ),
        (
            "chunk longer than its size",
            http1(
                "POST /validate HTTP/1.1",
                &[json_type, ("transfer-encoding", "chunked")],
                b"2\r\nhello\r\n0\r\n\r\n",
            ),
            vec![Status(400, "cannot read request body")],
        ),
        (
            "Transfer-Encoding other than chunked",
            http1(
                "POST /validate HTTP/1.1",
                &[json_type, ("transfer-encoding", "gzip")],
                &good,
            ),
            vec![Bare(400)],
        ),
        // --- heads
        (
            "too many headers (200)",
            http1("POST /validate HTTP/1.1", &many_headers, b""),
            vec![Bare(431)],
        ),
        (
            "a header larger than --max-header-bytes",
            http1(
                "POST /validate HTTP/1.1",
                &[("x-hostile", &huge_header)],
                b"",
            ),
            vec![Bare(431)],
        ),
        (
            "a request line larger than --max-header-bytes",
            http1(&format!("POST /{huge_header} HTTP/1.1"), &[], b""),
            vec![Bare(431)],
        ),
        (
            "obsolete line folding",
            raw_head("x-folded: a\r\n b"),
            vec![Bare(400)],
        ),
        (
            "a NUL byte in a header value",
            raw_head("x-nul: a\0b"),
            vec![Bare(400)],
        ),
        (
            "garbage request line",
            b"\x01\x02 hello there\r\n\r\n".to_vec(),
            vec![Bare(400)],
        ),
        (
            "Content-Type that is not text",
            http1(
                "POST /validate HTTP/1.1",
                &[
                    ("content-type", "application/json\u{e9}"),
                    ("content-length", &good_length),
                ],
                &good,
            ),
            vec![Status(415, "<not text>")],
        ),
        // --- paths and methods
        (
            "unknown path with a 2 MiB body",
            http1(
                "POST /admit HTTP/1.1",
                &[json_type, ("content-length", &over_limit)],
                &oversized,
            ),
            vec![Status(404, "no such endpoint \"/admit\"")],
        ),
        (
            "wrong method with a body",
            http1(
                "PUT /validate HTTP/1.1",
                &[json_type, ("content-length", &good_length)],
                &good,
            ),
            vec![Status(405, "send POST")],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_request_gets_its_answer_and_the_server_keeps_serving() {
    let target = start_target(hostile_connections()).await;
    let classes = request_classes();
    for (name, request, expected) in classes {
        let exchange = exchange(&target, request).await;
        check(name, &exchange, &expected);
        target.assert_serves(name).await;
    }
    target.server.shutdown().await.unwrap();
}

/// VmRSS of this process (server and client), in KiB.
fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The big-input classes, repeated: resident memory settles instead of growing per request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_big_inputs_do_not_grow_memory() {
    let target = start_target(hostile_connections()).await;
    let big: Vec<_> = request_classes()
        .into_iter()
        .filter(|(name, ..)| {
            name.contains("nested")
                || name.contains("900 KiB")
                || name.contains("200 000")
                || name.contains("oversized")
                || name.contains("2 MiB")
        })
        .collect();
    assert_eq!(big.len(), 9);
    let round = || async {
        for (name, request, expected) in &big {
            check(name, &exchange(&target, request.clone()).await, expected);
        }
    };
    round().await;
    round().await;
    let before = resident_kib();
    for _ in 0..8 {
        round().await;
    }
    let after = resident_kib();
    eprintln!("VmRSS {before} KiB before 8 rounds, {after} KiB after");
    // Eight rounds move about 40 MiB through the server; a leak of one body per request
    // would add at least that much.
    assert!(
        after < before + 32 * 1024,
        "VmRSS grew from {before} KiB to {after} KiB"
    );
    target.assert_serves("repeated big inputs").await;
    target.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order() {
    let target = start_target(hostile_connections()).await;
    let review = |uid: &str| good_with("/request/uid", json!(uid));
    let keep_alive = |body: &[u8]| {
        let mut request = json_head(body.len()).into_bytes();
        request.extend_from_slice(body);
        request
    };
    let mut all = Vec::new();
    all.extend(keep_alive(&review("first")));
    all.extend(keep_alive(b"{\"not\": \"a review\"}"));
    all.extend(keep_alive(&review("third")));
    all.extend(post("/mutate", &review("fourth")));
    let exchange = exchange(&target, all).await;
    assert!(exchange.closed);
    let answers: Vec<(u16, Value)> = exchange
        .responses
        .iter()
        .map(|r| (r.status, serde_json::from_slice(&r.body).unwrap()))
        .collect();
    assert_eq!(answers.len(), 4, "{answers:?}");
    assert_eq!(answers[0].1["response"]["uid"], "first");
    assert_eq!(answers[1].0, 400);
    assert_eq!(answers[2].1["response"]["uid"], "third");
    assert_eq!(answers[3].1["response"]["uid"], "fourth");
    assert_eq!(answers[3].1["response"]["patchType"], "JSONPatch");
    target.assert_serves("pipelining").await;
    target.server.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------
// Slow and idle clients

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off() {
    let target = start_target(hostile_connections()).await;

    // Slowloris: a header line every 50 ms, never the blank line that ends the head.
    let stream = target.tls(&target.http1).await;
    let (mut reader, mut writer) = tokio::io::split(stream);
    let started = Instant::now();
    let trickle = tokio::spawn(async move {
        writer.write_all(b"POST /validate HTTP/1.1\r\n").await?;
        let mut ticks = tokio::time::interval(Duration::from_millis(50));
        for i in 0..200 {
            ticks.tick().await;
            writer.write_all(format!("x-{i}: y\r\n").as_bytes()).await?;
            writer.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let (bytes, closed) = read_until_closed(&mut reader).await;
    let elapsed = started.elapsed();
    trickle.abort();
    assert!(closed && bytes.is_empty(), "slow headers: {bytes:?}");
    assert!(
        elapsed >= HEADER_READ_TIMEOUT && elapsed < HEADER_READ_TIMEOUT * 4,
        "slow headers closed after {elapsed:?}"
    );
    target.assert_serves("slow headers").await;

    // Slow body: the head at once, then one byte every 50 ms: 408 at the request deadline.
    let stream = target.tls(&target.http1).await;
    let (mut reader, mut writer) = tokio::io::split(stream);
    let started = Instant::now();
    let body = good();
    let head = json_head(body.len());
    let trickle = tokio::spawn(async move {
        writer.write_all(head.as_bytes()).await?;
        let mut ticks = tokio::time::interval(Duration::from_millis(50));
        for byte in body {
            ticks.tick().await;
            writer.write_all(&[byte]).await?;
            writer.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let (bytes, closed) = read_until_closed(&mut reader).await;
    let elapsed = started.elapsed();
    trickle.abort();
    let slow_body = Exchange {
        responses: parse_responses(&bytes),
        closed,
        elapsed,
    };
    check(
        "slow body",
        &slow_body,
        &[Answer::Status(
            408,
            "did not arrive before the request deadline",
        )],
    );
    assert!(elapsed >= REQUEST_TIMEOUT, "408 after {elapsed:?}");
    target.assert_serves("slow body").await;

    // Content-Length longer than the body sent: the same 408 at the deadline.
    let lying = http1(
        "POST /validate HTTP/1.1",
        &[
            ("content-type", "application/json"),
            ("content-length", "100000"),
        ],
        &good(),
    );
    let exchange = exchange(&target, lying).await;
    check(
        "Content-Length longer than the body",
        &exchange,
        &[Answer::Status(
            408,
            "did not arrive before the request deadline",
        )],
    );
    assert!(exchange.elapsed >= REQUEST_TIMEOUT);
    target
        .assert_serves("Content-Length longer than the body")
        .await;

    // The apiserver's ?timeout= shortens the deadline.
    let exchange = exchange_with_deadline(&target).await;
    assert!(exchange.elapsed < REQUEST_TIMEOUT, "{:?}", exchange.elapsed);
    target.assert_serves("?timeout=").await;
    target.server.shutdown().await.unwrap();
}

async fn exchange_with_deadline(target: &Target) -> Exchange {
    let request = http1(
        "POST /validate?timeout=200ms HTTP/1.1",
        &[
            ("content-type", "application/json"),
            ("content-length", "100000"),
        ],
        b"{",
    );
    let exchange = exchange(target, request).await;
    check(
        "?timeout=200ms and a body that never completes",
        &exchange,
        &[Answer::Status(
            408,
            "did not arrive before the request deadline",
        )],
    );
    exchange
}

/// Reads from a connection that sends nothing and returns how long the server kept it.
async fn time_to_close(mut stream: impl AsyncRead + Unpin) -> Duration {
    let started = Instant::now();
    let (bytes, closed) = read_until_closed(&mut stream).await;
    assert!(closed, "the server kept an idle connection open");
    assert!(
        bytes.is_empty() || bytes[0] == 21,
        "unexpected bytes {bytes:?}"
    );
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_by_the_timeouts() {
    let target = start_target(hostile_connections()).await;
    let addr = target.server.webhook_addr;

    // TCP open, no ClientHello: closed by --tls-handshake-timeout.
    let waited = time_to_close(TcpStream::connect(addr).await.unwrap()).await;
    assert!(
        waited >= HANDSHAKE_TIMEOUT - Duration::from_millis(50),
        "{waited:?}"
    );
    target.assert_serves("no ClientHello").await;

    // Half a ClientHello record: the same.
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00])
        .await
        .unwrap();
    let waited = time_to_close(tcp).await;
    assert!(
        waited >= HANDSHAKE_TIMEOUT - Duration::from_millis(50),
        "{waited:?}"
    );
    target.assert_serves("half a ClientHello").await;

    // TLS done, no request: closed by --header-read-timeout (h1 and h2 alike).
    for config in [&target.http1, &target.h2] {
        let waited = time_to_close(target.tls(config).await).await;
        assert!(
            waited >= HEADER_READ_TIMEOUT - Duration::from_millis(50),
            "{waited:?}"
        );
    }
    target.assert_serves("TLS without a request").await;

    // A keep-alive connection idle after one request: closed by the same timeout.
    let stream = target.tls(&target.http1).await;
    let (mut reader, mut writer) = tokio::io::split(stream);
    let body = good();
    writer
        .write_all(json_head(body.len()).as_bytes())
        .await
        .unwrap();
    writer.write_all(&body).await.unwrap();
    writer.flush().await.unwrap();
    let started = Instant::now();
    let (bytes, closed) = read_until_closed(&mut reader).await;
    assert!(closed, "idle keep-alive connection kept");
    assert_eq!(parse_responses(&bytes).len(), 1);
    assert!(started.elapsed() >= HEADER_READ_TIMEOUT - Duration::from_millis(50));
    target.assert_serves("idle keep-alive").await;

    // Abrupt closes: mid-handshake, mid-request (FIN and RST): nothing stays in flight.
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
    drop(tcp);
    let mut stream = target.tls(&target.http1).await;
    stream
        .write_all(json_head(body.len()).as_bytes())
        .await
        .unwrap();
    stream.write_all(&body[..body.len() / 2]).await.unwrap();
    stream.flush().await.unwrap();
    let metrics = target.server.state.metrics.clone();
    wait_until(PATIENCE, "the half request to be in flight", || {
        let metrics = metrics.clone();
        async move { metrics.in_flight.get() == 1 }
    })
    .await;
    let (tcp, _) = stream.into_inner();
    tcp.set_zero_linger().unwrap();
    drop(tcp); // RST
    wait_until(PATIENCE, "the aborted request to leave", || {
        let metrics = metrics.clone();
        async move { metrics.in_flight.get() == 0 }
    })
    .await;
    target.assert_serves("abrupt close mid-request").await;
    target.server.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------
// Bytes that are not TLS, and names that are not ours

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_tls_bytes_are_refused_at_the_handshake() {
    let target = start_target(hostile_connections()).await;
    let addr = target.server.webhook_addr;
    let attempts: [(&str, Vec<u8>); 3] = [
        (
            "garbage before the handshake",
            (0..=255u8).cycle().take(4096).collect(),
        ),
        (
            "plain HTTP to the TLS port",
            b"POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-length: 2\r\n\r\n{}".to_vec(),
        ),
        (
            "a TLS record header announcing 64 KiB",
            vec![0x16, 0x03, 0x03, 0xff, 0xff, 0x01],
        ),
    ];
    for (name, bytes) in attempts {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        let _ = tcp.write_all(&bytes).await;
        let started = Instant::now();
        let (reply, closed) = read_until_closed(&mut tcp).await;
        assert!(closed, "{name}: connection kept");
        // A fatal alert record (type 21, level 2), then the close; never an HTTP answer.
        assert!(
            reply.len() >= 7 && reply[0] == 21 && reply[5] == 2,
            "{name}: {reply:?}"
        );
        assert!(
            started.elapsed() < HANDSHAKE_TIMEOUT,
            "{name}: not refused at once"
        );
        target.assert_serves(name).await;
    }

    // Another name in SNI: the server has one certificate and presents it whatever the name;
    // a client that checks names (the apiserver does) refuses it.
    let tcp = TcpStream::connect(addr).await.unwrap();
    let refused = TlsConnector::from(target.http1.clone())
        .connect(ServerName::try_from("evil.example").unwrap(), tcp)
        .await
        .expect_err("a certificate for localhost must not pass as evil.example");
    assert!(
        refused
            .to_string()
            .contains("certificate not valid for name"),
        "{refused}"
    );
    target.assert_serves("wrong SNI").await;

    // No SNI at all (an IP address as the name): served.
    let tcp = TcpStream::connect(addr).await.unwrap();
    let stream = TlsConnector::from(target.http1.clone())
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap();
    let mut sender = handshake(stream).await.unwrap();
    assert_eq!(sender.post("/validate", &good()).await.unwrap().0, 200);
    target.server.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------
// Connection flood

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_connections_get_the_limit_and_no_more() {
    // Long timeouts: the idle connections must stay for the length of the test.
    let target = start_target(ConnectionSettings {
        tls_handshake_timeout: Duration::from_secs(30),
        header_read_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(30),
        ..hostile_connections()
    })
    .await;
    let addr = target.server.webhook_addr;
    let mut idle = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        idle.push(target.tls(&target.http1).await);
    }
    let server = &target.server;
    wait_until(PATIENCE, "64 open connections", || async move {
        server.connection_count() == MAX_CONNECTIONS
    })
    .await;

    // The other 936: accepted by the kernel, closed by the server before any TLS.
    let extra = 1000 - MAX_CONNECTIONS;
    for batch in 0..(extra / 104) {
        let mut attempts = tokio::task::JoinSet::new();
        for _ in 0..104 {
            attempts.spawn(async move {
                let mut tcp = TcpStream::connect(addr).await.unwrap();
                let mut byte = [0u8; 1];
                let read = tokio::time::timeout(PATIENCE, tcp.read(&mut byte)).await;
                matches!(read, Ok(Ok(0)) | Ok(Err(_)))
            });
        }
        let closed = attempts.join_all().await;
        assert!(
            closed.iter().all(|c| *c),
            "batch {batch}: a connection over the limit stayed open"
        );
    }
    let metrics = target.metrics().await;
    assert!(
        metrics.contains(&format!("portcullis_connections_rejected_total {extra}")),
        "{metrics}"
    );

    // Closing idle connections frees their slots.
    idle.truncate(MAX_CONNECTIONS - 8);
    wait_until(PATIENCE, "freed slots", || async move {
        server.connection_count() == MAX_CONNECTIONS - 8
    })
    .await;
    let mut senders = Vec::new();
    for i in 0..8 {
        let mut sender = handshake(target.tls(&target.http1).await).await.unwrap();
        let (status, _) = sender.post("/validate", &good()).await.unwrap();
        assert_eq!(status, 200, "freed slot {i}");
        senders.push(sender);
    }
    // Full again: the next one is refused and counted.
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(PATIENCE, tcp.read(&mut byte)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))));
    let metrics = target.metrics().await;
    assert!(
        metrics.contains(&format!(
            "portcullis_connections_rejected_total {}",
            extra + 1
        )),
        "{metrics}"
    );
    drop(idle);
    drop(senders);
    wait_until(PATIENCE, "all slots free", || async move {
        server.connection_count() == 0
    })
    .await;
    target.assert_serves("a thousand connections").await;
    target.server.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------
// HTTP/2, frame by frame

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;
const PROTOCOL_ERROR: u32 = 0x1;
const REFUSED_STREAM: u32 = 0x7;
const CANCEL: u32 = 0x8;
const ENHANCE_YOUR_CALM: u32 = 0xb;

#[derive(Debug)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

impl Frame {
    fn code(&self) -> u32 {
        let at = if self.kind == GOAWAY { 4 } else { 0 };
        u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap())
    }
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = payload.len() as u32;
    let mut out = length.to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An HPACK integer with an `n`-bit prefix under `flags`.
fn hpack_int(flags: u8, n: u32, mut value: usize) -> Vec<u8> {
    let max = (1usize << n) - 1;
    if value < max {
        return vec![flags | value as u8];
    }
    let mut out = vec![flags | max as u8];
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
    out
}

/// A literal header field without indexing, new name, no Huffman: no table state needed.
fn literal(name: &str, value: &str) -> Vec<u8> {
    let mut out = vec![0x00];
    out.extend(hpack_int(0, 7, name.len()));
    out.extend_from_slice(name.as_bytes());
    out.extend(hpack_int(0, 7, value.len()));
    out.extend_from_slice(value.as_bytes());
    out
}

fn request_block(path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in [
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "localhost"),
        (":path", path),
        ("content-type", "application/json"),
    ]
    .iter()
    .chain(extra)
    {
        block.extend(literal(name, value));
    }
    block
}

/// Decodes `:status` at the start of a response header block, as the h2 crate writes it:
/// a static-table entry, or name 8 with a literal (possibly Huffman-coded digits) value.
fn response_status(block: &[u8]) -> Option<u16> {
    let first = *block.first()?;
    if first & 0x80 != 0 {
        return match first & 0x7f {
            8 => Some(200),
            9 => Some(204),
            10 => Some(206),
            11 => Some(304),
            12 => Some(400),
            13 => Some(404),
            14 => Some(500),
            _ => None,
        };
    }
    let name_index = if first & 0x40 != 0 {
        first & 0x3f
    } else {
        first & 0x0f
    };
    if name_index != 8 {
        return None;
    }
    let huffman = block[1] & 0x80 != 0;
    let length = (block[1] & 0x7f) as usize;
    let value = &block[2..2 + length];
    let text = if huffman {
        huffman_digits(value)?
    } else {
        String::from_utf8(value.to_vec()).ok()?
    };
    text.parse().ok()
}

/// Huffman-decodes a string of digits (RFC 7541 Appendix B: 0–2 are `000xx`, 3–9 `011xxx`).
fn huffman_digits(bytes: &[u8]) -> Option<String> {
    let bits: Vec<u8> = bytes
        .iter()
        .flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1))
        .collect();
    let value =
        |range: std::ops::Range<usize>| bits[range].iter().fold(0u8, |acc, bit| (acc << 1) | bit);
    let mut at = 0;
    let mut out = String::new();
    while bits.len() - at >= 5 && bits[at..].contains(&0) {
        match value(at..at + 3) {
            0b000 => {
                out.push((b'0' + value(at + 3..at + 5)) as char);
                at += 5;
            }
            0b011 if bits.len() - at >= 6 => {
                out.push((b'0' + 2 + value(at + 3..at + 6)) as char);
                at += 6;
            }
            _ => return None,
        }
    }
    Some(out)
}

/// A raw HTTP/2 connection: preface and settings exchanged, nothing else assumed.
struct H2 {
    stream: tokio_rustls::client::TlsStream<TcpStream>,
    buffer: Vec<u8>,
    /// The server's SETTINGS, as (identifier, value).
    settings: Vec<(u16, u32)>,
}

impl H2 {
    async fn open(target: &Target) -> H2 {
        let stream = target.tls(&target.h2).await;
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(b"h2".as_slice()));
        let mut h2 = H2 {
            stream,
            buffer: Vec::new(),
            settings: Vec::new(),
        };
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend(frame(SETTINGS, 0, 0, &[]));
        h2.send(&hello).await.unwrap();
        loop {
            let settings = h2.next().await.expect("server SETTINGS");
            if settings.kind == SETTINGS && settings.flags & ACK == 0 {
                h2.settings = settings
                    .payload
                    .chunks(6)
                    .map(|c| {
                        (
                            u16::from_be_bytes([c[0], c[1]]),
                            u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                        )
                    })
                    .collect();
                break;
            }
        }
        h2.send(&frame(SETTINGS, ACK, 0, &[])).await.unwrap();
        h2
    }

    async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    /// The next frame, or `None` once the server has closed the connection.
    async fn next(&mut self) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if self.buffer.len() >= 9 {
                let length = u32::from_be_bytes([0, self.buffer[0], self.buffer[1], self.buffer[2]])
                    as usize;
                if self.buffer.len() >= 9 + length {
                    let bytes: Vec<u8> = self.buffer.drain(..9 + length).collect();
                    return Some(Frame {
                        kind: bytes[3],
                        flags: bytes[4],
                        stream: u32::from_be_bytes(bytes[5..9].try_into().unwrap()) & 0x7fff_ffff,
                        payload: bytes[9..].to_vec(),
                    });
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            match tokio::time::timeout_at(deadline, self.stream.read(&mut chunk)).await {
                Err(_) => panic!("no frame from the server within {PATIENCE:?}"),
                Ok(Ok(0)) | Ok(Err(_)) => return None,
                Ok(Ok(n)) => self.buffer.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Sends the good review on `stream` and reads frames until that stream ends.
    async fn post_good(&mut self, stream: u32) -> Vec<Frame> {
        let mut request = frame(
            HEADERS,
            END_HEADERS,
            stream,
            &request_block("/validate", &[]),
        );
        request.extend(frame(DATA, END_STREAM, stream, &good()));
        self.send(&request).await.unwrap();
        self.read_until(|f| f.stream == stream && f.flags & END_STREAM != 0)
            .await
    }

    /// Frames until GOAWAY, the close, or `until` says stop.
    async fn read_until(&mut self, mut until: impl FnMut(&Frame) -> bool) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(frame) = self.next().await {
            let stop = frame.kind == GOAWAY || until(&frame);
            frames.push(frame);
            if stop {
                break;
            }
        }
        frames
    }
}

/// The response body of `stream` among `frames`, if it ended.
fn body_of(frames: &[Frame], stream: u32) -> Option<Value> {
    let data: Vec<u8> = frames
        .iter()
        .filter(|f| f.kind == DATA && f.stream == stream)
        .flat_map(|f| f.payload.clone())
        .collect();
    frames
        .iter()
        .any(|f| f.stream == stream && f.flags & END_STREAM != 0)
        .then(|| serde_json::from_slice(&data).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_streams_beyond_the_limit_are_refused() {
    let target = start_target(hostile_connections()).await;
    let mut h2 = H2::open(&target).await;
    assert!(
        h2.settings.contains(&(0x3, MAX_STREAMS)),
        "{:?}",
        h2.settings
    );
    // 24 streams opened at once, ignoring the advertised limit of 8.
    let streams: Vec<u32> = (0..24).map(|i| 1 + 2 * i).collect();
    let mut burst = Vec::new();
    for &id in &streams {
        burst.extend(frame(
            HEADERS,
            END_HEADERS,
            id,
            &request_block("/validate", &[]),
        ));
    }
    h2.send(&burst).await.unwrap();
    let mut refused = Vec::new();
    let frames = h2
        .read_until(|f| {
            if f.kind == RST_STREAM && f.code() == REFUSED_STREAM {
                refused.push(f.stream);
            }
            refused.len() == 16
        })
        .await;
    assert_eq!(refused, streams[8..], "{frames:?}");
    // The first 8 are still open and answered once their bodies arrive.
    let mut bodies = Vec::new();
    for &id in &streams[..8] {
        bodies.extend(frame(DATA, END_STREAM, id, &good()));
    }
    h2.send(&bodies).await.unwrap();
    let mut ended = 0;
    let frames = h2
        .read_until(|f| {
            if f.kind == DATA && f.flags & END_STREAM != 0 {
                ended += 1;
            }
            ended == 8
        })
        .await;
    for &id in &streams[..8] {
        let body = body_of(&frames, id).unwrap_or_else(|| panic!("stream {id}: {frames:?}"));
        assert_eq!(body["response"]["allowed"], true);
    }
    target.assert_serves("streams beyond the limit").await;
    target.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_bodies_take_the_buffered_budget_as_they_arrive_and_past_it_are_refused_at_once() {
    const BUDGET: usize = 32 * 1024;
    let target = start_target_with(
        hostile_connections(),
        RequestSettings {
            max_buffered_body_bytes: BUDGET,
            ..hostile_requests()
        },
    )
    .await;
    let buffered = |target: &Target| {
        let metrics = target.server.state.metrics.encode();
        metrics
            .lines()
            .find_map(|line| line.strip_prefix("portcullis_buffered_body_bytes "))
            .and_then(|value| value.parse::<usize>().ok())
            .unwrap_or_else(|| panic!("{metrics}"))
    };
    // A review padded to 5 bytes short of the budget; stream 1 sends all of it but its last
    // 10 bytes, which leaves 15 bytes of the budget.
    let unpadded = good_with(
        "/request/object/metadata/annotations",
        json!({"padding": ""}),
    );
    let padded = good_with(
        "/request/object/metadata/annotations",
        json!({"padding": "x".repeat(BUDGET - 5 - unpadded.len())}),
    );
    assert_eq!(padded.len(), BUDGET - 5);
    let (first, last) = padded.split_at(padded.len() - 10);
    let mut h2 = H2::open(&target).await;
    let mut request = frame(HEADERS, END_HEADERS, 1, &request_block("/validate", &[]));
    for chunk in first.chunks(16_000) {
        request.extend(frame(DATA, 0, 1, chunk));
    }
    h2.send(&request).await.unwrap();
    wait_until(PATIENCE, "stream 1's bytes to be held", || async {
        buffered(&target) == first.len()
    })
    .await;
    // Stream 3's body does not fit in the 15 bytes left: 503 at once, long before the
    // request deadline, while stream 1 stays open.
    let sent = Instant::now();
    let frames = h2.post_good(3).await;
    let headers = frames
        .iter()
        .find(|f| f.kind == HEADERS && f.stream == 3)
        .unwrap_or_else(|| panic!("{frames:?}"));
    assert_eq!(response_status(&headers.payload), Some(503), "{frames:?}");
    let status = body_of(&frames, 3).unwrap();
    assert_eq!(status["reason"], "ServiceUnavailable", "{status}");
    assert!(
        status["message"].as_str().unwrap().contains("at once"),
        "{status}"
    );
    assert!(sent.elapsed() < REQUEST_TIMEOUT, "{:?}", sent.elapsed());
    // Its last bytes fit: stream 1 is answered, and the budget is given back.
    h2.send(&frame(DATA, END_STREAM, 1, last)).await.unwrap();
    let frames = h2
        .read_until(|f| f.stream == 1 && f.flags & END_STREAM != 0)
        .await;
    let review = body_of(&frames, 1).unwrap_or_else(|| panic!("{frames:?}"));
    assert_eq!(review["response"]["allowed"], true, "{review}");
    wait_until(PATIENCE, "the budget to be given back", || async {
        buffered(&target) == 0
    })
    .await;
    assert_eq!(target.server.state.body_budget.available_permits(), BUDGET);
    target
        .assert_serves("bodies past the buffered budget")
        .await;
    target.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_rapid_reset_gets_goaway() {
    let target = start_target(hostile_connections()).await;
    let mut h2 = H2::open(&target).await;
    let block = request_block("/validate", &[]);
    let mut last = 1;
    let mut sent = 0;
    'flood: for batch in 0..10 {
        let mut burst = Vec::new();
        for i in 0..100 {
            last = 1 + 2 * (batch * 100 + i);
            burst.extend(frame(HEADERS, END_HEADERS, last, &block));
            burst.extend(frame(RST_STREAM, 0, last, &CANCEL.to_be_bytes()));
        }
        if h2.send(&burst).await.is_err() {
            break 'flood;
        }
        sent += 100;
    }
    let frames = h2.read_until(|_| false).await;
    let goaway = frames
        .iter()
        .find(|f| f.kind == GOAWAY)
        .unwrap_or_else(|| panic!("no GOAWAY after {sent} resets: {frames:?}"));
    assert_eq!(goaway.code(), ENHANCE_YOUR_CALM, "{goaway:?}");
    assert!(
        String::from_utf8_lossy(&goaway.payload[8..]).contains("too_many_resets"),
        "{goaway:?}"
    );
    assert!(last > 1);
    target.assert_serves("rapid reset").await;
    target.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_oversized_and_broken_header_blocks() {
    let target = start_target(hostile_connections()).await;

    // A header list over --max-header-bytes in one frame: 431 on that stream, the
    // connection lives on and serves the next stream.
    let mut h2 = H2::open(&target).await;
    let big = "b".repeat(MAX_HEADER_BYTES + 1024);
    let block = request_block("/validate", &[("x-big", &big)]);
    let (first, rest) = block.split_at(16_000);
    let mut request = frame(HEADERS, END_STREAM, 1, first);
    request.extend(frame(CONTINUATION, END_HEADERS, 1, rest));
    h2.send(&request).await.unwrap();
    let frames = h2.read_until(|f| f.stream == 1 && f.kind == HEADERS).await;
    let headers = frames.iter().find(|f| f.kind == HEADERS).expect("431");
    assert_eq!(response_status(&headers.payload), Some(431), "{frames:?}");
    let frames = h2.post_good(3).await;
    assert_eq!(
        body_of(&frames, 3).expect("answer")["response"]["allowed"],
        true
    );
    target.assert_serves("h2 header list too large").await;

    // CONTINUATION flood: a header block that never ends, 16 KiB at a time.
    let mut h2 = H2::open(&target).await;
    h2.send(&frame(HEADERS, 0, 1, &request_block("/validate", &[])))
        .await
        .unwrap();
    let filler = literal("x-flood", &"c".repeat(16_000));
    let mut written = 0usize;
    for _ in 0..256 {
        if h2.send(&frame(CONTINUATION, 0, 1, &filler)).await.is_err() {
            break;
        }
        written += filler.len();
    }
    // Cut off after a few frames (the limit follows from the header list size); the rest of
    // what was written sits in socket buffers and is never read.
    let frames = h2.read_until(|_| false).await;
    let goaway = frames.iter().find(|f| f.kind == GOAWAY);
    assert_eq!(
        goaway.map(Frame::code),
        Some(ENHANCE_YOUR_CALM),
        "CONTINUATION flood after {written} bytes: {frames:?}"
    );
    target.assert_serves("CONTINUATION flood").await;

    // HPACK that does not decode (an index past both tables, an integer cut off at the end of
    // the block): GOAWAY with PROTOCOL_ERROR (the h2 crate's code for every HPACK error).
    for (block, code) in [
        (&[0xbe][..], PROTOCOL_ERROR),
        (&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff][..], PROTOCOL_ERROR),
    ] {
        let mut h2 = H2::open(&target).await;
        h2.send(&frame(HEADERS, END_HEADERS, 1, block))
            .await
            .unwrap();
        let frames = h2.read_until(|_| false).await;
        let goaway = frames.iter().find(|f| f.kind == GOAWAY).expect("GOAWAY");
        assert_eq!(goaway.code(), code, "{block:?}: {goaway:?}");
        target.assert_serves("broken HPACK").await;
    }
    target.assert_serves("broken HPACK").await;

    // A broken client preface after ALPN h2: closed without an answer stream.
    let mut stream = target.tls(&target.h2).await;
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    stream.flush().await.unwrap();
    let (bytes, closed) = read_until_closed(&mut stream).await;
    assert!(closed, "bad preface: connection kept");
    assert!(!bytes.starts_with(b"HTTP/1.1 200"), "{bytes:?}");
    target.assert_serves("bad h2 preface").await;
    target.server.shutdown().await.unwrap();
}

/// HTTP/2 has no idle timeout of its own: a connection that sends nothing for
/// `--idle-timeout` after its request is closed, so idle h2 clients cannot hold
/// `--max-connections` slots (HTTP/1.1 keep-alive connections are closed after
/// `--header-read-timeout`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_connection_idle_after_a_request_is_closed() {
    let target = start_target(hostile_connections()).await;
    let mut h2 = H2::open(&target).await;
    let mut request = frame(HEADERS, END_HEADERS, 1, &request_block("/validate", &[]));
    request.extend(frame(DATA, END_STREAM, 1, &good()));
    h2.send(&request).await.unwrap();
    let frames = h2
        .read_until(|f| f.stream == 1 && f.flags & END_STREAM != 0)
        .await;
    assert!(body_of(&frames, 1).is_some(), "{frames:?}");
    let (_, closed) = read_until_closed(&mut h2.stream).await;
    assert!(closed, "an idle h2 connection stayed open for {PATIENCE:?}");
    target.server.shutdown().await.unwrap();
}
