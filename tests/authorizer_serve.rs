//! The webhook with a CEL `authorizer`: a request whose policies ask is decided on the blocking
//! pool, so an authorizer that waits for work on the runtime (as the SubjectAccessReview one
//! does) gets its answer even on a runtime with a single async worker; asked on that worker
//! instead, the same authorizer would wait for itself until its timeout.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{body_bytes, post_json, read_fixture};
use portcullis::authorization::{AccessQuestion, AccessReviewer};
use portcullis::commands::load_engine;
use portcullis::expressions::AuthorizationDecision;
use portcullis::server::{AppState, RequestSettings, webhook_router};
use serde_json::Value;
use tower::ServiceExt;

/// Allows `update` once a task spawned on `runtime` has run: like the SubjectAccessReview
/// authorizer, it needs the runtime free while it waits.
struct WaitsForTheRuntime {
    runtime: tokio::runtime::Handle,
}

impl AccessReviewer for WaitsForTheRuntime {
    fn review(&self, question: &AccessQuestion) -> Result<AuthorizationDecision, String> {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = sender.send(());
        });
        Ok(match receiver.recv_timeout(Duration::from_millis(500)) {
            Ok(()) => AuthorizationDecision {
                allowed: question.check.verb == "update",
                ..AuthorizationDecision::default()
            },
            Err(_) => AuthorizationDecision {
                error: "the runtime never ran the review".into(),
                ..AuthorizationDecision::default()
            },
        })
    }
}

#[tokio::test(flavor = "current_thread")]
async fn authorizer_checks_run_off_the_async_worker() {
    let engine = load_engine(&[common::fixture("authorizer/policy.yaml")]).unwrap();
    assert!(engine.rule_count() > 0);
    let reviewer: Arc<dyn AccessReviewer> = Arc::new(WaitsForTheRuntime {
        runtime: tokio::runtime::Handle::current(),
    });
    let mut state = AppState::new(engine, RequestSettings::default());
    state.authorizer = Some(reviewer.clone());
    let router = webhook_router(state);

    let body = read_fixture("authorizer/review-alice.json");
    let response = router.oneshot(post_json("/validate", body)).await.unwrap();
    let review: Value = serde_json::from_slice(&body_bytes(response).await).unwrap();
    assert_eq!(review["response"]["allowed"], true, "{review}");

    // The control: asked on the runtime's only worker, it cannot get its answer.
    let question = AccessQuestion {
        subject: portcullis::authorization::Subject::default(),
        check: portcullis::expressions::AuthorizationCheck {
            verb: "update".into(),
            ..Default::default()
        },
    };
    let decision = reviewer.review(&question).unwrap();
    assert_eq!(decision.error, "the runtime never ran the review");
}
