//! Arbitrary bytes as the body of `POST /validate` and `POST /mutate`, through the webhook
//! router in-process with the built-in policy set.
//!
//! Must never panic (libFuzzer aborts on any panic, even one the server would catch), and the
//! answer must be 200 with an AdmissionReview or a 4xx with a JSON `Status`: never a 5xx. The
//! envelope-first parse that skips the objects (or the `oldObject` alone) must fail with the
//! same error as the whole parse, or give the same request without what it skipped.
#![no_main]

use std::sync::LazyLock;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use libfuzzer_sys::fuzz_target;
use portcullis::admission::{AdmissionRequest, WantedObjects, parse_review, parse_review_for};
use portcullis::engine::Engine;
use portcullis::server::{AppState, RequestSettings, webhook_router};
use serde_json::Value;
use tower::ServiceExt;

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
});

static STATE: LazyLock<AppState> =
    LazyLock::new(|| AppState::new(Engine::builtin(), RequestSettings::default()));

static ROUTER: LazyLock<Router> = LazyLock::new(|| webhook_router(STATE.clone()));

/// The request as the envelope-first parse gives it when it skips `fields`.
fn without(request: &AdmissionRequest, fields: &[&str]) -> Value {
    let mut value = serde_json::to_value(request).unwrap();
    if let Some(members) = value.as_object_mut() {
        for field in fields {
            members.remove(*field);
        }
    }
    value
}

fuzz_target!(|data: &[u8]| {
    let whole = parse_review(data);
    for wanted in [WantedObjects::Neither, WantedObjects::Object] {
        let skipping = parse_review_for(data, &|_| wanted);
        match (&whole, &skipping) {
            (Ok(whole), Ok(skipping)) if skipping.objects_skipped => assert_eq!(
                without(&whole.request, &["object", "oldObject"]),
                serde_json::to_value(&skipping.request).unwrap()
            ),
            (Ok(whole), Ok(skipping)) if skipping.old_object_skipped => assert_eq!(
                without(&whole.request, &["oldObject"]),
                serde_json::to_value(&skipping.request).unwrap()
            ),
            (Ok(whole), Ok(skipping)) => assert_eq!(
                serde_json::to_value(&whole.request).unwrap(),
                serde_json::to_value(&skipping.request).unwrap()
            ),
            (Err(whole), Err(skipping)) => assert_eq!(whole.to_string(), skipping.to_string()),
            (whole, skipping) => panic!("whole parse {whole:?}, envelope first {skipping:?}"),
        }
    }
    for path in ["/validate", "/mutate"] {
        let request = Request::post(path)
            .header("content-type", "application/json")
            .body(Body::from(data.to_vec()))
            .unwrap();
        let (status, body) = RUNTIME.block_on(async {
            let response = ROUTER.clone().oneshot(request).await.unwrap();
            let status = response.status();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (status, body)
        });
        let value: Value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{path}: {status} with a body that is not JSON: {e}"));
        if status.as_u16() == 200 {
            assert_eq!(value["kind"], "AdmissionReview", "{path}: {value}");
            assert!(value["response"]["allowed"].is_boolean(), "{path}: {value}");
        } else {
            assert!(status.is_client_error(), "{path}: {status}: {value}");
            assert_eq!(value["kind"], "Status", "{path}: {value}");
            assert_eq!(value["code"], status.as_u16(), "{path}: {value}");
        }
    }
    assert_eq!(
        STATE.metrics.panics.get(),
        0,
        "a panic was caught by the server"
    );
});
