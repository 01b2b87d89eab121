//! Logs carry request metadata, never object contents: Secret reviews pass through every
//! path (allowed, patched, malformed) with all targets at TRACE, and no secret value appears.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use common::{post_json, read_fixture};
use portcullis::engine::Engine;
use portcullis::server::{AppState, RequestSettings, webhook_router};
use serde_json::Value;
use tower::ServiceExt;
use tracing_subscriber::fmt::MakeWriter;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

const SECRETS: [&str; 4] = [
    "aHVudGVyMi1zdXBlci1zZWNyZXQ=",
    "hunter2-super-secret",
    "plaintext-token-must-not-be-logged",
    "annotation-value-must-not-be-logged",
];

async fn exercise() {
    let router = webhook_router(AppState::new(Engine::builtin(), RequestSettings::default()));
    let secret = read_fixture("reviews/secret-create.json");
    for path in ["/validate", "/mutate"] {
        let response = router
            .clone()
            .oneshot(post_json(path, secret.clone()))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    // The same Secret inside a malformed review: a type error that serde describes.
    let mut broken: Value = serde_json::from_slice(&secret).unwrap();
    broken["request"]["operation"] = Value::String(SECRETS[2].into());
    let response = router
        .clone()
        .oneshot(post_json("/validate", broken.to_string()))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn no_object_contents_in_logs() {
    for json in [false, true] {
        let captured = Captured::default();
        let builder = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(captured.clone())
            .with_ansi(false);
        let _guard = if json {
            tracing::subscriber::set_default(builder.json().finish())
        } else {
            tracing::subscriber::set_default(builder.finish())
        };
        exercise().await;
        let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        // The decision lines are there, with the metadata.
        assert_eq!(logs.matches("admission decision").count(), 2, "{logs}");
        assert!(
            logs.contains("5b1d7c0e-3f0a-4c8e-9a51-secret000001"),
            "uid is logged"
        );
        assert!(logs.contains("db-credentials"), "name is logged");
        assert!(logs.contains("request rejected"), "{logs}");
        for secret in SECRETS {
            assert!(!logs.contains(secret), "log leaks {secret}:\n{logs}");
        }
    }
}

/// A decision line is `info` for a request some rule wanted and `debug` for one no rule
/// wants (allowed unchanged without decoding its objects); both carry the request's uid.
#[tokio::test]
async fn requests_no_rule_wants_are_logged_at_debug() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(captured.clone())
        .with_ansi(false)
        .json()
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let router = webhook_router(AppState::new(Engine::builtin(), RequestSettings::default()));
    let mut uids = Vec::new();
    for fixture in [
        "reviews/pod-create-compliant.json",
        "reviews/configmap-delete.json",
    ] {
        let body = read_fixture(fixture);
        let review: Value = serde_json::from_slice(&body).unwrap();
        uids.push(review["request"]["uid"].as_str().unwrap().to_owned());
        let response = router
            .clone()
            .oneshot(post_json("/validate", body))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let decisions: Vec<(String, String)> = logs
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["fields"]["message"] == "admission decision")
        .map(|event| {
            (
                event["fields"]["uid"].as_str().unwrap().to_owned(),
                event["level"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            (uids[0].clone(), "INFO".to_owned()),
            (uids[1].clone(), "DEBUG".to_owned())
        ],
        "{logs}"
    );
}
