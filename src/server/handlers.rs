use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::{Uri, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::OwnedSemaphorePermit;

use super::{AdmissionReviewBody, ApiError, AppState, OnError, RawReviewBody, permits_by};
use crate::admission::{
    AdmissionRequest, AdmissionResponse, ObjectForm, WantedObjects, encode_review,
};
use crate::engine::{Decision, Endpoint, Engine, EvalContext, EvalError, NamespaceLookup};
use crate::metrics::EndpointLabel;
use crate::telemetry::DecisionLine;

pub(super) async fn validate(State(state): State<Arc<AppState>>, body: RawReviewBody) -> Response {
    admit(state, body, Endpoint::Validate).await
}

pub(super) async fn mutate(State(state): State<Arc<AppState>>, body: RawReviewBody) -> Response {
    admit(state, body, Endpoint::Mutate).await
}

pub(super) async fn not_found(uri: Uri) -> ApiError {
    ApiError::NotFound(uri.path().to_owned())
}

pub(super) async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// The reason given while no policy set has loaded (policy files broken since start). The
/// PolicyError itself is in `/readyz` and the log, not in answers that reach every user.
const POLICIES_NOT_LOADED: &str = "policies are not loaded";

/// The answer when evaluation itself failed, as `--on-error` says.
fn evaluation_failure(on_error: OnError, uid: &str, reason: &str) -> AdmissionResponse {
    match on_error {
        OnError::Deny => AdmissionResponse::allow(uid).deny(
            500,
            "InternalError",
            format!("portcullis could not evaluate the request: {reason}"),
        ),
        OnError::Allow => {
            let mut response = AdmissionResponse::allow(uid);
            response.warnings.push(format!(
                "portcullis could not evaluate the request ({reason}); admitted by --on-error=allow"
            ));
            response
        }
    }
}

/// Evaluates `request` with `engine`; a rule error or panic gets the `--on-error` answer.
/// Returns the response, the number of violations and of patch operations.
fn decide(
    state: &AppState,
    engine: &Engine,
    request: &AdmissionRequest,
    deadline: Instant,
    endpoint: Endpoint,
) -> Decided {
    // Gatekeeper's `data.inventory` as it is now; none without synced kinds.
    let inventory = state.inventory.load_full();
    let mut context = EvalContext::new(endpoint)
        .with_deadline(deadline)
        .with_namespaces(state.namespaces.as_ref())
        .with_params(state.params.as_deref())
        .with_inventory(inventory.as_deref());
    if let Some(authorizer) = &state.authorizer {
        context = context.with_authorizer(authorizer);
    }
    guarded(state, &request.uid, || engine.evaluate(request, &context))
}

/// Runs `evaluate` and answers with its decision; an evaluation error or a panic gets the
/// `--on-error` answer (a panic is also counted and logged).
fn guarded(
    state: &AppState,
    uid: &str,
    evaluate: impl FnOnce() -> Result<Decision, EvalError>,
) -> Decided {
    let on_error = state.settings.on_error;
    match std::panic::catch_unwind(AssertUnwindSafe(evaluate)) {
        Ok(Ok(decision)) => {
            state.metrics.record_policies(&decision);
            Decided {
                response: decision.to_response(uid),
                violations: decision.violations.len(),
                patch_operations: decision.patch.as_ref().map_or(0, Vec::len),
                wanted: true,
            }
        }
        Ok(Err(error)) => {
            tracing::warn!(uid = %uid, error = %error, "evaluation failed");
            Decided::failed(evaluation_failure(on_error, uid, &error.to_string()))
        }
        Err(_) => {
            state.metrics.panics.inc();
            tracing::error!(uid = %uid, "a policy rule panicked");
            Decided::failed(evaluation_failure(on_error, uid, "a policy rule panicked"))
        }
    }
}

/// What deciding a request gave: the answer, and the counts its log line reports.
struct Decided {
    response: AdmissionResponse,
    violations: usize,
    patch_operations: usize,
    /// False for a request no rule wants: nothing was evaluated, and its log line is `debug`.
    wanted: bool,
}

impl Decided {
    /// The answer to a request no rule wants: allowed, unchanged.
    fn unwanted(uid: &str) -> Self {
        Decided {
            wanted: false,
            ..Decided::failed(Decision::default().to_response(uid))
        }
    }

    /// An answer without a decision's counts (an evaluation that failed).
    fn failed(response: AdmissionResponse) -> Self {
        Decided {
            response,
            violations: 0,
            patch_operations: 0,
            wanted: true,
        }
    }
}

/// Evaluation slots an offloaded request with a body of `size` bytes takes: one per started
/// [`OFFLOAD_MIN_BYTES`], at least one, at most all `total`. Decoded and evaluated, a request
/// takes several times its body's size, so the slots bound the memory of the evaluations
/// running at once as well as their number.
fn slots_for(size: usize, total: usize) -> u32 {
    let slots = size.div_ceil(OFFLOAD_MIN_BYTES).clamp(1, total.max(1));
    u32::try_from(slots).unwrap_or(u32::MAX)
}

/// Takes `slots` evaluation slots if they are free now, recording a wait of zero.
fn try_take_slots(state: &AppState, slots: u32) -> Option<OwnedSemaphorePermit> {
    let permit = state
        .evaluation_slots
        .clone()
        .try_acquire_many_owned(slots)
        .ok()?;
    state.metrics.evaluation_wait.observe(0.0);
    Some(permit)
}

/// Waits for `slots` evaluation slots until `deadline`; `None` when they did not free up in
/// time.
async fn wait_for_slots(
    state: &AppState,
    slots: u32,
    deadline: Instant,
) -> Option<OwnedSemaphorePermit> {
    let waited = Instant::now();
    state.metrics.evaluations_waiting.inc();
    let permit = permits_by(&state.evaluation_slots, slots, deadline).await;
    state.metrics.evaluations_waiting.dec();
    state
        .metrics
        .evaluation_wait
        .observe(waited.elapsed().as_secs_f64());
    permit
}

/// The answer to a request that got no evaluation slot before its deadline.
fn no_evaluation_slot(state: &AppState, uid: &str) -> Decided {
    tracing::warn!(uid = %uid, "no evaluation slot before the deadline");
    Decided::failed(evaluation_failure(
        state.settings.on_error,
        uid,
        NO_EVALUATION_SLOT,
    ))
}

/// Decides a small `body` on the evaluation threads, off the async workers that accept
/// connections and answer probes, once the evaluation slot it takes is free
/// (`--max-concurrent-evaluations`). A request that gets no slot before its deadline gets the
/// `--on-error` answer instead of queueing past the apiserver's timeout.
async fn decide_off_workers(
    state: &Arc<AppState>,
    engine: Arc<Engine>,
    body: AdmissionReviewBody,
    endpoint: Endpoint,
) -> Result<(Decided, AdmissionReviewBody), Response> {
    let slots = slots_for(body.size, state.settings.max_concurrent_evaluations);
    let Some(permit) = wait_for_slots(state, slots, body.deadline).await else {
        let decided = no_evaluation_slot(state, &body.review.request.uid);
        return Ok((decided, body));
    };
    let uid = body.review.request.uid.clone();
    let version = body.review.version;
    let worker_state = state.clone();
    let decided = off_workers(state, move || {
        let mut body = body;
        let decided = decide_and_drop_objects(&worker_state, &engine, &mut body, endpoint);
        (decided, body)
    })
    .await;
    // Given back once the thread is about to be idle, so the request it lets in finds it.
    drop(permit);
    decided.ok_or_else(|| evaluation_cancelled(state, endpoint, &uid, version))
}

/// Parses a large body and decides it on the evaluation threads, in the evaluation slots
/// `permit` holds: the objects are allocated, read and freed on one thread (decoded on an
/// async worker and freed on another thread, the 100 KB Pod's review cost about 40% more CPU),
/// and the async workers only read bodies.
async fn parse_and_decide_off_workers(
    state: &Arc<AppState>,
    engine: Arc<Engine>,
    raw: RawReviewBody,
    permit: OwnedSemaphorePermit,
    endpoint: Endpoint,
) -> Result<(Decided, AdmissionReviewBody), Response> {
    let bytes = raw.bytes.clone();
    let worker_state = state.clone();
    let evaluated = off_workers(state, move || {
        let state = worker_state.as_ref();
        let namespaces = state.namespaces.as_ref();
        let mut body = raw.parse(
            &|request: &AdmissionRequest| wanted_objects(&engine, namespaces, endpoint, request),
            engine.object_form(endpoint),
        )?;
        if body.review.objects_skipped {
            return Ok((Decided::unwanted(&body.review.request.uid), body));
        }
        tokio::runtime::Handle::current().block_on(read_unheld_inputs(
            state,
            &engine,
            endpoint,
            &body.review.request,
            body.deadline,
        ));
        let decided = decide_and_drop_objects(state, &engine, &mut body, endpoint);
        Ok((decided, body))
    })
    .await;
    drop(permit);
    match evaluated {
        Some(Ok(done)) => Ok(done),
        Some(Err(error)) => Err(ApiError::into_response(error)),
        None => {
            let envelope = crate::admission::parse_review_for(&bytes, &|_| WantedObjects::Neither)
                .map_err(|error| ApiError::from(error).into_response())?;
            let version = envelope.version;
            Err(evaluation_cancelled(
                state,
                endpoint,
                &envelope.request.uid,
                version,
            ))
        }
    }
}

/// Runs `work` on the evaluation threads, at a lower priority than the async workers; `None`
/// only when it panicked (evaluation catches its own panics) or no thread could start.
async fn off_workers<T: Send + 'static>(
    state: &AppState,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    state
        .evaluations
        .run(move || {
            lower_thread_priority();
            work()
        })
        .await
}

/// Decides `body` and drops its objects: they go here, on the evaluating thread and with the
/// slots that bound them, not when the answer is written on an async worker, which may be
/// busy reading further bodies meanwhile.
fn decide_and_drop_objects(
    state: &AppState,
    engine: &Engine,
    body: &mut AdmissionReviewBody,
    endpoint: Endpoint,
) -> Decided {
    let decided = decide(state, engine, &body.review.request, body.deadline, endpoint);
    body.review.request.object = None;
    body.review.request.old_object = None;
    decided
}

/// The answer when an evaluation thread gave no answer: its work panicked outside the rules
/// (which are guarded on their own), or no thread could start.
fn evaluation_cancelled(
    state: &AppState,
    endpoint: Endpoint,
    uid: &str,
    version: crate::admission::ReviewVersion,
) -> Response {
    tracing::error!(uid = %uid, "evaluation thread gave no answer");
    // An answer without a decision: counted as the observe layer counts HTTP answers.
    state
        .metrics
        .record_request(endpoint_label(endpoint), "error", 200);
    let response = evaluation_failure(state.settings.on_error, uid, "evaluation gave no answer");
    (
        [(header::CONTENT_TYPE, "application/json")],
        encode_review(version, &response),
    )
        .into_response()
}

/// Requests with bodies at least this large are decoded and evaluated on the evaluation
/// threads.
pub const OFFLOAD_MIN_BYTES: usize = 16 * 1024;

/// How much nicer than the async workers the threads deciding requests off them run.
const EVALUATION_NICENESS: i32 = 10;

/// Lowers the calling evaluation thread's scheduling priority (once per thread, Linux
/// only): when long evaluations fill the cores, the async workers (TLS, cheap requests, probes
/// on the admin port) still get the CPU first, so a slow policy delays its own requests only.
fn lower_thread_priority() {
    #[cfg(target_os = "linux")]
    {
        use std::cell::Cell;
        thread_local!(static LOWERED: Cell<bool> = const { Cell::new(false) });
        LOWERED.with(|lowered| {
            if lowered.replace(true) {
                return;
            }
            let thread = rustix::thread::gettid();
            let result = rustix::process::getpriority_process(Some(thread)).and_then(|now| {
                rustix::process::setpriority_process(
                    Some(thread),
                    (now + EVALUATION_NICENESS).min(19),
                )
            });
            if let Err(error) = result {
                tracing::debug!(%error, "could not lower an evaluation thread's priority");
            }
        });
    }
}

/// The namespace of `request` to read before deciding it: one `namespaces` does not hold
/// yet but can read ([`NamespaceLookup::fetches`]), when `engine` has rules that may read it.
/// A request on `namespaces` itself is matched on its own labels and has no
/// `namespaceObject`, so it reads none.
fn namespace_to_read<'r>(
    engine: Option<&Engine>,
    namespaces: &dyn NamespaceLookup,
    request: &'r AdmissionRequest,
) -> Option<&'r str> {
    let namespace = request
        .namespace
        .as_deref()
        .filter(|name| !name.is_empty())?;
    (engine.is_some_and(Engine::reads_namespaces)
        && request.resource.resource != "namespaces"
        && namespaces.fetches(namespace))
    .then_some(namespace)
}

/// Reads, before the request is decided and by its deadline, what the cluster watches do not
/// hold yet and `engine` will decide it with, as the apiserver's listers fall back to a read
/// on a miss: the request's namespace, and the parameter objects its bindings name.
async fn read_unheld_inputs(
    state: &AppState,
    engine: &Engine,
    endpoint: Endpoint,
    request: &AdmissionRequest,
    deadline: Instant,
) {
    let namespaces = state.namespaces.as_ref();
    if let Some(namespace) = namespace_to_read(Some(engine), namespaces, request) {
        namespaces.fetch(namespace, deadline).await;
    }
    let Some(params) = state.params.as_deref() else {
        return;
    };
    let in_namespace = request.namespace.as_deref();
    for (kind, param_ref) in engine.params_by_name(request, endpoint, namespaces) {
        if params.fetches(kind, param_ref, in_namespace) {
            params.fetch(kind, param_ref, in_namespace, deadline).await;
        }
    }
}

/// The reason given when no evaluation slot freed up before the request's deadline.
const NO_EVALUATION_SLOT: &str =
    "every evaluation slot was busy until the deadline (--max-concurrent-evaluations)";

/// What a large body found when it asked for its evaluation slots ([`take_slots_for`]).
enum LargeBody {
    /// Its slots, taken: it is parsed in them.
    InSlots(OwnedSemaphorePermit),
    /// No rule wants it: parsed without its objects, it needs no slots.
    Unwanted(AdmissionReviewBody),
    /// Its envelope only: its slots did not free up before its deadline.
    NoSlots(AdmissionReviewBody),
}

/// Takes the evaluation slots of a large body ([`slots_for`]), which is decoded only once it
/// holds them: decoded, its objects take several times its size, and a burst of large
/// requests decoded while they wait for slots would hold all of that at once. With too few
/// slots free, the envelope alone tells whether a rule wants the request at all: one no rule
/// wants does not wait, and one that is wanted is read only as far as its first object
/// before it waits.
async fn take_slots_for(
    state: &AppState,
    raw: &RawReviewBody,
    wants: &(dyn Fn(&AdmissionRequest) -> WantedObjects + Sync),
) -> Result<LargeBody, ApiError> {
    let slots = slots_for(raw.bytes.len(), state.settings.max_concurrent_evaluations);
    if let Some(permit) = try_take_slots(state, slots) {
        return Ok(LargeBody::InSlots(permit));
    }
    if let Some(unwanted) = raw.parse_unless_wanted(wants)? {
        return Ok(LargeBody::Unwanted(unwanted));
    }
    match wait_for_slots(state, slots, raw.deadline).await {
        Some(permit) => Ok(LargeBody::InSlots(permit)),
        None => Ok(LargeBody::NoSlots(
            raw.parse(&|_| WantedObjects::Neither, ObjectForm::Tree)?,
        )),
    }
}

/// Which of `request`'s objects are decoded ([`Engine::wanted_objects`]). A namespace the
/// watch has not delivered yet is read before deciding a request in it, as the apiserver's
/// lister falls back to a read; until then nothing can be told from its labels, so the
/// objects are decoded.
fn wanted_objects(
    engine: &Engine,
    namespaces: &dyn NamespaceLookup,
    endpoint: Endpoint,
    request: &AdmissionRequest,
) -> WantedObjects {
    if namespace_to_read(Some(engine), namespaces, request).is_some() {
        WantedObjects::Both
    } else {
        engine.wanted_objects(request, endpoint, namespaces)
    }
}

/// Parses `raw` and decides it with the engine loaded now; `Err` is an answer without a
/// decision (a body that is not an AdmissionReview request, or an evaluation thread that gave
/// no answer).
async fn decide_review(
    state: &Arc<AppState>,
    raw: RawReviewBody,
    endpoint: Endpoint,
) -> Result<(Decided, AdmissionReviewBody), Response> {
    let Some(engine) = state.engine.load_full() else {
        let body = raw
            .parse(&|_| WantedObjects::Both, ObjectForm::Tree)
            .map_err(IntoResponse::into_response)?;
        let response = evaluation_failure(
            state.settings.on_error,
            &body.review.request.uid,
            POLICIES_NOT_LOADED,
        );
        return Ok((Decided::failed(response), body));
    };
    let namespaces = state.namespaces.as_ref();
    // The objects are decoded only for a request some rule may act on; the same engine
    // decides it.
    let wants = |request: &AdmissionRequest| wanted_objects(&engine, namespaces, endpoint, request);
    if raw.bytes.len() >= OFFLOAD_MIN_BYTES {
        return match take_slots_for(state, &raw, &wants)
            .await
            .map_err(IntoResponse::into_response)?
        {
            LargeBody::InSlots(permit) => {
                parse_and_decide_off_workers(state, engine, raw, permit, endpoint).await
            }
            LargeBody::Unwanted(body) => Ok((Decided::unwanted(&body.review.request.uid), body)),
            LargeBody::NoSlots(envelope) => {
                let decided = no_evaluation_slot(state, &envelope.review.request.uid);
                Ok((decided, envelope))
            }
        };
    }
    let body = raw
        .parse(&wants, engine.object_form(endpoint))
        .map_err(IntoResponse::into_response)?;
    if body.review.objects_skipped {
        return Ok((Decided::unwanted(&body.review.request.uid), body));
    }
    read_unheld_inputs(
        state,
        &engine,
        endpoint,
        &body.review.request,
        body.deadline,
    )
    .await;
    // Handing a request to the evaluation threads costs more than deciding a small one (the
    // thread hand-offs doubled the CPU per review of an empty policy set, measured in
    // `make bench-load`); the time CEL can spend grows with the lists in the object, so
    // large objects go to the pool (above), as do requests an admission policy with nested
    // comprehensions or `authorizer` checks (which wait for SubjectAccessReviews) runs on;
    // small ones are decided here, bounded by the CEL limits (`--cel-max-iterations`,
    // `--cel-timeout`).
    if !engine.may_run_long(&body.review.request, endpoint) {
        let decided = decide(
            state,
            &engine,
            &body.review.request,
            body.deadline,
            endpoint,
        );
        return Ok((decided, body));
    }
    decide_off_workers(state, engine, body, endpoint).await
}

async fn admit(state: Arc<AppState>, raw: RawReviewBody, endpoint: Endpoint) -> Response {
    let started = Instant::now();
    let (decided, body) = match decide_review(&state, raw, endpoint).await {
        Ok(done) => done,
        Err(response) => return response,
    };
    let request = &body.review.request;
    let Decided {
        response,
        violations,
        patch_operations,
        wanted,
    } = decided;
    let code = response.status.as_ref().map_or(200, |status| status.code);
    // A request no rule wants carries no decision worth a line per request at `info` (a
    // webhook registered for every resource sees them all); it is counted like any other.
    DecisionLine {
        request,
        endpoint: endpoint.name(),
        allowed: response.allowed,
        code,
        violations,
        patch_operations,
        warnings: response.warnings.len(),
        started,
    }
    .log(wanted);
    // The observe layer counts every other answer; this one carries the decision.
    state.metrics.record_request(
        endpoint_label(endpoint),
        if response.allowed { "true" } else { "false" },
        code,
    );
    (
        [(header::CONTENT_TYPE, "application/json")],
        encode_review(body.review.version, &response),
    )
        .into_response()
}

fn endpoint_label(endpoint: Endpoint) -> EndpointLabel {
    match endpoint {
        Endpoint::Validate => EndpointLabel::Validate,
        Endpoint::Mutate => EndpointLabel::Mutate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::RequestSettings;

    #[test]
    fn an_offloaded_request_takes_one_slot_per_started_16_kib() {
        assert_eq!(slots_for(0, 64), 1);
        assert_eq!(slots_for(16 * 1024, 64), 1);
        assert_eq!(slots_for(16 * 1024 + 1, 64), 2);
        assert_eq!(slots_for(102_534, 64), 7);
        assert_eq!(slots_for(3 << 20, 64), 64, "never more than all");
        assert_eq!(slots_for(3 << 20, 0), 1);
    }

    /// Sends `body` to `/validate` and returns the response's `allowed`.
    async fn allowed(router: &axum::Router, body: &[u8]) -> bool {
        use tower::ServiceExt;
        let request = axum::http::Request::post("/validate")
            .header(header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(body.to_vec()))
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let review: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        review["response"]["allowed"].as_bool().unwrap()
    }

    #[tokio::test]
    async fn a_namespace_the_watch_does_not_hold_yet_is_read_before_deciding() {
        // Pod Security enforces baseline by default; namespace `shop`, which the watch has
        // not delivered yet, is labelled privileged in the cluster.
        let body = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/reviews/pod-create-privileged.json"
        ))
        .unwrap();
        let shop = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "shop", "labels": {
                "pod-security.kubernetes.io/enforce": "privileged",
                "pod-security.kubernetes.io/warn": "privileged",
                "pod-security.kubernetes.io/audit": "privileged"}}});
        let (client, requests) =
            crate::cluster::fake_api::client(&[("/api/v1/namespaces/shop", shop.clone())]);
        let (store, _writer) = kube::runtime::reflector::store();
        let with_reads = |client| {
            let mut state = AppState::new(Engine::builtin(), RequestSettings::default());
            state.namespaces = Arc::new(
                crate::cluster::NamespaceCache::new(store.clone())
                    .with_reads(client, state.metrics.namespace_reads.clone()),
            );
            state
        };
        let state = with_reads(client);
        let metrics = state.metrics.clone();
        let router = crate::server::webhook_router(state);
        assert!(
            allowed(&router, &body).await,
            "privileged where the cluster says so"
        );
        assert!(allowed(&router, &body).await);
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(
            metrics
                .encode()
                .contains(r#"portcullis_namespace_reads_total{result="found"} 1"#)
        );
        // A large body, decoded only in its evaluation slots, reads it too.
        let mut large: serde_json::Value = serde_json::from_slice(&body).unwrap();
        large["request"]["object"]["metadata"]["annotations"] =
            serde_json::json!({"pad": "x".repeat(OFFLOAD_MIN_BYTES)});
        let large = serde_json::to_vec(&large).unwrap();
        let (client, requests) =
            crate::cluster::fake_api::client(&[("/api/v1/namespaces/shop", shop)]);
        let router = crate::server::webhook_router(with_reads(client));
        assert!(allowed(&router, &large).await);
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);

        // The same namespace unknown to the cluster too: the defaults, baseline, refuse.
        let (client, requests) = crate::cluster::fake_api::client(&[]);
        let router = crate::server::webhook_router(with_reads(client));
        assert!(!allowed(&router, &body).await);
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
        // An engine without rules reads nothing.
        let (client, requests) = crate::cluster::fake_api::client(&[]);
        let mut state = AppState::new(Engine::empty(), RequestSettings::default());
        state.namespaces = Arc::new(
            crate::cluster::NamespaceCache::new(store.clone())
                .with_reads(client, state.metrics.namespace_reads.clone()),
        );
        assert!(allowed(&crate::server::webhook_router(state), &body).await);
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn the_router_reads_a_param_the_watch_does_not_hold_before_deciding() {
        use crate::cluster::params::ClusterParams;
        use crate::policy::admission_policy::ParamKind;
        use k8s_openapi::api::core::v1::ConfigMap;
        use std::sync::atomic::Ordering;
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/params-read/policy.yaml"
        ))
        .unwrap();
        let documents =
            crate::policy::documents_from_str(std::path::Path::new("policy.yaml"), &text).unwrap();
        let body = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/reviews/deployment-update.json"
        ))
        .unwrap();
        let limit = |max: &str| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "replica-limit", "namespace": "default"},
                "data": {"maxReplicas": max}})
        };
        // The Deployment has 3 replicas.
        for (in_cluster, allowed, reads) in [
            (Some(limit("5")), true, 1),
            (Some(limit("2")), false, 1),
            (None, false, 1),
        ] {
            let objects: Vec<(&str, serde_json::Value)> = in_cluster
                .into_iter()
                .map(|object| {
                    (
                        "/api/v1/namespaces/default/configmaps/replica-limit",
                        object,
                    )
                })
                .collect();
            let (client, requests) = crate::cluster::fake_api::client(&objects);
            let resource = kube::api::ApiResource::erase::<ConfigMap>(&());
            let kind = ParamKind {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
            };
            let params = ClusterParams::listed(kind, true, Vec::new(), Some((client, resource)));
            let mut state = AppState::new(
                Engine::compile(&documents).unwrap(),
                RequestSettings::default(),
            );
            state.params = Some(Arc::new(params));
            let router = crate::server::webhook_router(state);
            for _ in 0..2 {
                assert_eq!(self::allowed(&router, &body).await, allowed);
            }
            assert_eq!(
                requests.load(Ordering::SeqCst),
                reads,
                "read once, then kept"
            );
        }
    }

    #[test]
    fn a_panicking_rule_gets_the_on_error_answer_and_is_counted() {
        for on_error in [OnError::Deny, OnError::Allow] {
            let state = AppState::new(
                Engine::empty(),
                RequestSettings {
                    on_error,
                    ..RequestSettings::default()
                },
            );
            let Decided {
                response,
                violations,
                patch_operations,
                wanted,
            } = guarded(&state, "u", || panic!("rule bug"));
            assert_eq!((violations, patch_operations, wanted), (0, 0, true));
            assert_eq!(response.uid, "u");
            match on_error {
                OnError::Deny => {
                    assert!(!response.allowed);
                    let status = response.status.unwrap();
                    assert_eq!(status.code, 500);
                    assert!(status.message.contains("a policy rule panicked"));
                }
                OnError::Allow => {
                    assert!(response.allowed);
                    assert!(response.warnings[0].contains("--on-error=allow"));
                }
            }
            assert!(state.metrics.encode().contains("portcullis_panics_total 1"));
        }
    }
}
