//! The webhook server: router, handlers, the AdmissionReview extractor, errors, and the
//! listeners with graceful shutdown.

pub mod admin;
mod connections;
mod error;
mod evaluation_pool;
mod extract;
mod handlers;
mod limits;
mod observe;
pub mod policy_reload;
mod run;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use axum::Router;
use axum::routing::post;
use clap::ValueEnum;
use tower_http::catch_panic::CatchPanicLayer;

use crate::authorization::AccessReviewer;
use crate::engine::gatekeeper::Inventory;
use crate::engine::{Engine, NamespaceLookup, NoNamespaces, ParamLookup};
use crate::metrics::Metrics;
use crate::server::admin::Readiness;

pub use error::ApiError;
pub use extract::{AdmissionReviewBody, RawReviewBody};
pub use limits::ConnectionSettings;
pub use run::{RunningServer, ServeConfig, ServeError, ServeSources, start, start_with};

/// What Portcullis answers when it cannot evaluate a request (a panic in a rule, a deadline
/// passed): the AdmissionResponse still carries the request's uid and says what failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum OnError {
    /// Admit the request, with a warning saying it was not evaluated.
    Allow,
    /// Refuse the request with code 500 and the reason (fail closed).
    #[default]
    Deny,
}

/// Default of `--max-concurrent-evaluations`. Evaluations are CPU work: more of them than
/// cores only time-share, but a few slow ones must not hold up the many quick ones, so the
/// slots outnumber the cores and the kernel shares the CPU among them. A request takes one
/// slot per started 16 KiB of its body: the 64 slots also bound the bodies decoded at once
/// to 1 MiB.
pub const DEFAULT_MAX_CONCURRENT_EVALUATIONS: u16 = 64;

/// Default of `--max-buffered-body-bytes`: with the evaluation slots, it keeps a burst of
/// 256 requests of 100 KB each under 100 MiB of RSS (docs/serving.md), below the chart's
/// memory limit of 128 MiB.
pub const DEFAULT_MAX_BUFFERED_BODY_BYTES: usize = 16 * 1024 * 1024;

/// Per-request limits and failure behaviour.
#[derive(Debug, Clone)]
pub struct RequestSettings {
    /// Largest accepted body; larger ones get 413.
    pub max_body_bytes: usize,
    /// Deadline for reading and deciding one request. The apiserver's `?timeout=` lowers it.
    pub request_timeout: Duration,
    /// The answer when evaluation fails.
    pub on_error: OnError,
    /// Evaluation slots on the evaluation threads; a request takes one per started 16 KiB of its
    /// body, and waits for them until its deadline.
    pub max_concurrent_evaluations: usize,
    /// Bytes of HTTP/1.x request bodies read and not yet answered, in total; a request whose
    /// body would pass it waits, before its body is read, until its deadline.
    pub max_buffered_body_bytes: usize,
}

impl Default for RequestSettings {
    fn default() -> Self {
        RequestSettings {
            max_body_bytes: 3 * 1024 * 1024,
            request_timeout: Duration::from_secs(2),
            on_error: OnError::Deny,
            max_concurrent_evaluations: usize::from(DEFAULT_MAX_CONCURRENT_EVALUATIONS),
            max_buffered_body_bytes: DEFAULT_MAX_BUFFERED_BODY_BYTES,
        }
    }
}

/// Shared state of the webhook router.
#[derive(Clone)]
pub struct AppState {
    /// The policy engine in use; replaced whole on reload. Empty while no policy set has
    /// loaded yet (policy files broken at start): requests then get the `--on-error` answer.
    pub engine: Arc<ArcSwapOption<Engine>>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Readiness, shared with the admin listener.
    pub readiness: Arc<Readiness>,
    /// Limits and failure behaviour.
    pub settings: Arc<RequestSettings>,
    /// Namespace labels for selectors and Pod Security (none known unless a cluster is watched).
    pub namespaces: Arc<dyn NamespaceLookup>,
    /// Parameter objects of admission policies from the cluster; `None` without a cluster
    /// (then they come from the policy folders).
    pub params: Option<Arc<dyn ParamLookup>>,
    /// Slots for evaluations running at once (`--max-concurrent-evaluations`).
    pub evaluation_slots: Arc<tokio::sync::Semaphore>,
    /// The threads that decide requests off the async workers.
    evaluations: Arc<evaluation_pool::EvaluationPool>,
    /// Bytes of request bodies that may be held at once (`--max-buffered-body-bytes`), one
    /// permit per byte.
    pub body_budget: Arc<tokio::sync::Semaphore>,
    /// Who answers CEL `authorizer` checks (SubjectAccessReviews, with a cluster).
    pub authorizer: Option<Arc<dyn AccessReviewer>>,
    /// Gatekeeper's `data.inventory`, kept from the cluster for the kinds a Gatekeeper Config
    /// syncs; none without a cluster or synced kinds.
    pub inventory: Arc<ArcSwapOption<Inventory>>,
}

impl AppState {
    /// State with fresh metrics and readiness around `engine`.
    pub fn new(engine: Engine, settings: RequestSettings) -> Self {
        let state = AppState::without_engine(settings);
        state.engine.store(Some(Arc::new(engine)));
        state
    }

    /// State with no engine yet, for policies that are still to load: until one is stored,
    /// admission requests get the `--on-error` answer saying policies are not loaded.
    pub fn without_engine(settings: RequestSettings) -> Self {
        AppState {
            engine: Arc::new(ArcSwapOption::empty()),
            metrics: Arc::new(Metrics::new()),
            readiness: Arc::new(Readiness::default()),
            evaluations: Arc::default(),
            evaluation_slots: Arc::new(tokio::sync::Semaphore::new(
                settings.max_concurrent_evaluations.max(1),
            )),
            body_budget: Arc::new(tokio::sync::Semaphore::new(
                settings
                    .max_buffered_body_bytes
                    .clamp(1, tokio::sync::Semaphore::MAX_PERMITS),
            )),
            settings: Arc::new(settings),
            namespaces: Arc::new(NoNamespaces),
            authorizer: None,
            params: None,
            inventory: Arc::new(ArcSwapOption::empty()),
        }
    }
}

/// `count` permits of `semaphore`, taken as soon as they are free (at once when they are);
/// `None` when they are not free by `deadline`.
async fn permits_by(
    semaphore: &Arc<tokio::sync::Semaphore>,
    count: u32,
    deadline: std::time::Instant,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    let permits = semaphore.clone().acquire_many_owned(count);
    tokio::time::timeout_at(deadline.into(), permits)
        .await
        .ok()?
        .ok()
}

/// The webhook router: `POST /validate`, `POST /mutate`; every other path is 404 and every
/// other method 405, each with a JSON Status body. Panics become 500 and are counted.
pub fn webhook_router(state: AppState) -> Router {
    // One `Arc` for the whole state: the router clones its state and its per-route services
    // on every request, and each clone of `AppState` itself touches every shared field.
    let state = Arc::new(state);
    let metrics = state.metrics.clone();
    Router::new()
        .route(
            "/validate",
            post(handlers::validate).fallback(handlers::method_not_allowed),
        )
        .route(
            "/mutate",
            post(handlers::mutate).fallback(handlers::method_not_allowed),
        )
        .fallback(handlers::not_found)
        .layer(CatchPanicLayer::custom(move |_panic| {
            metrics.panics.inc();
            tracing::error!("request handler panicked");
            axum::response::IntoResponse::into_response(ApiError::Panicked)
        }))
        .layer(observe::ObserveLayer::new(state.clone()))
        .with_state(state)
}
