//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod control_plane;
pub mod tls;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, Response};
use http_body_util::BodyExt;

/// Path of a file under tests/fixtures.
pub fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(relative)
}

/// Contents of a file under tests/fixtures.
pub fn read_fixture(relative: &str) -> Vec<u8> {
    std::fs::read(fixture(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// A JSON POST request to `path`.
pub fn post_json(path: &str, body: impl Into<Body>) -> Request<Body> {
    Request::post(path)
        .header("content-type", "application/json")
        .body(body.into())
        .unwrap()
}

/// The whole body of a response.
pub async fn body_bytes(response: Response<Body>) -> Vec<u8> {
    response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec()
}

/// Polls `condition` every few milliseconds until it holds or `timeout` passes.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if condition().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The gator binary (`PORTCULLIS_GATOR`, set by scripts/test.sh); `None` skips the calling
/// test with a message, except under `CI=true`, where a missing binary fails it.
pub fn gator() -> Option<PathBuf> {
    match std::env::var_os("PORTCULLIS_GATOR") {
        Some(path) => Some(PathBuf::from(path)),
        None if std::env::var_os("CI").is_some() => {
            panic!("CI is set but PORTCULLIS_GATOR is not: run `make test` (scripts/test.sh)")
        }
        None => {
            eprintln!(
                "SKIPPED gator test: PORTCULLIS_GATOR is not set (`make gator` builds gator with \
                 e2e/build-gator.sh; scripts/test.sh sets it)"
            );
            None
        }
    }
}
