use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, Version, header};
use axum::response::Response;
use prometheus_client::metrics::gauge::Gauge;
use tower::{Layer, Service};

use super::AppState;
use crate::metrics::EndpointLabel;

/// Wraps every webhook route: counts, times and tracks in-flight requests, and closes HTTP/1
/// connections while the server drains.
///
/// A hand-written service rather than two `from_fn` middlewares: the router clones each
/// route's service stack for every request, and a `from_fn` clones its state and inner
/// service once more per call; here a clone is one `Arc` and the inner service's own.
#[derive(Clone)]
pub(super) struct ObserveLayer {
    state: Arc<AppState>,
}

impl ObserveLayer {
    pub(super) fn new(state: Arc<AppState>) -> Self {
        ObserveLayer { state }
    }
}

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;

    fn layer(&self, inner: S) -> Observe<S> {
        Observe {
            state: self.state.clone(),
            inner,
        }
    }
}

/// The service [`ObserveLayer`] makes.
#[derive(Clone)]
pub(super) struct Observe<S> {
    state: Arc<AppState>,
    inner: S,
}

/// Holds the in-flight gauge up while a request is handled, also when its future is dropped
/// (the client went away).
struct InFlight<'a>(&'a Gauge);

impl<'a> InFlight<'a> {
    fn enter(gauge: &'a Gauge) -> Self {
        gauge.inc();
        InFlight(gauge)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl<S> Service<Request> for Observe<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let endpoint = match request.uri().path() {
            "/validate" => EndpointLabel::Validate,
            "/mutate" => EndpointLabel::Mutate,
            _ => EndpointLabel::Other,
        };
        let http1 = request.version() < Version::HTTP_2;
        let state = self.state.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let started = Instant::now();
            let in_flight = InFlight::enter(&state.metrics.in_flight);
            let Ok(mut response) = answer.await;
            drop(in_flight);
            // A 200 from `/validate` or `/mutate` carries an AdmissionReview, which the
            // handler counted with its decision; anything else is an HTTP-level answer.
            if response.status() != StatusCode::OK || endpoint == EndpointLabel::Other {
                state
                    .metrics
                    .record_request(endpoint, "error", response.status().as_u16());
            }
            state.metrics.record_duration(endpoint, started.elapsed());
            // While the server drains, HTTP/1.x answers carry `Connection: close`: the client
            // reads its answer and opens a new connection for the next request, instead of
            // writing it to a keep-alive connection the server is about to close unread.
            // HTTP/2 clients learn of the drain from GOAWAY, which tells them exactly which
            // streams were served.
            if http1 && state.readiness.is_draining() {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(response)
        })
    }
}
