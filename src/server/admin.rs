//! The plain-HTTP admin listener: `/healthz`, `/readyz` and `/metrics`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::metrics::Metrics;

/// What readiness depends on: a certificate and a policy set loaded, and not draining.
#[derive(Debug, Default)]
pub struct Readiness {
    certificate: AtomicBool,
    policies: AtomicBool,
    draining: AtomicBool,
    policy_error: Mutex<Option<String>>,
}

impl Readiness {
    /// Marks the serving certificate as loaded.
    pub fn set_certificate_loaded(&self) {
        self.certificate.store(true, Ordering::SeqCst);
    }

    /// Marks a policy set as loaded (clearing any earlier load error).
    pub fn set_policies_loaded(&self) {
        *self.policy_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.policies.store(true, Ordering::SeqCst);
    }

    /// Records why policies failed to load at start; readiness says so until a load succeeds.
    pub fn set_policies_failed(&self, reason: String) {
        *self.policy_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
    }

    /// Marks the server as shutting down: not ready from now on.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the server is shutting down.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Ok when ready; otherwise why not.
    pub fn check(&self) -> Result<(), String> {
        if self.draining.load(Ordering::SeqCst) {
            return Err("shutting down".into());
        }
        if !self.certificate.load(Ordering::SeqCst) {
            return Err("serving certificate not loaded".into());
        }
        if !self.policies.load(Ordering::SeqCst) {
            let error = self.policy_error.lock().unwrap_or_else(|e| e.into_inner());
            return Err(match error.as_deref() {
                Some(reason) => format!("policies failed to load: {reason}"),
                None => "policies not loaded".into(),
            });
        }
        Ok(())
    }
}

/// State of the admin router.
#[derive(Clone)]
pub struct AdminState {
    /// Metrics to expose.
    pub metrics: Arc<Metrics>,
    /// Readiness to report.
    pub readiness: Arc<Readiness>,
}

/// The admin router: `GET /healthz` (alive), `GET /readyz`, `GET /metrics`.
pub fn admin_router(state: AdminState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<AdminState>) -> Response {
    match state.readiness.check() {
        Ok(()) => (StatusCode::OK, "ok\n").into_response(),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}\n"),
        )
            .into_response(),
    }
}

async fn metrics(State(state): State<AdminState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
        .into_response()
}
