use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::metrics::gauge::Gauge;

use super::AppState;
use crate::metrics::{EndpointLabels, RequestLabels};

/// Set by the handlers on responses that carry an AdmissionResponse, for the metrics.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionOutcome {
    /// The AdmissionResponse's `allowed`.
    pub allowed: bool,
    /// The AdmissionResponse's status code (200 when allowed without a status).
    pub code: u16,
}

struct InFlight(Gauge);

impl InFlight {
    fn enter(gauge: &Gauge) -> Self {
        gauge.inc();
        InFlight(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Counts, times and tracks in-flight webhook requests.
pub(super) async fn observe(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let endpoint = match request.uri().path() {
        "/validate" => "validate",
        "/mutate" => "mutate",
        _ => "other",
    };
    let started = Instant::now();
    let in_flight = InFlight::enter(&state.metrics.in_flight);
    let response = next.run(request).await;
    drop(in_flight);
    let (allowed, code) = match response.extensions().get::<AdmissionOutcome>() {
        Some(outcome) => (if outcome.allowed { "true" } else { "false" }, outcome.code),
        None => ("error", response.status().as_u16()),
    };
    state
        .metrics
        .requests
        .get_or_create(&RequestLabels {
            endpoint,
            allowed,
            code,
        })
        .inc();
    state
        .metrics
        .duration
        .get_or_create(&EndpointLabels { endpoint })
        .observe(started.elapsed().as_secs_f64());
    response
}
