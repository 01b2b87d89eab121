//! The webhook router driven in-process with `oneshot`: golden responses for the fixture
//! reviews, the bad-input table, evaluation failures, and metrics after traffic.

mod common;

use std::path::Path;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine as _;
use common::{body_bytes, fixture, post_json, read_fixture};
use portcullis::engine::Engine;
use portcullis::server::admin::{AdminState, admin_router};
use portcullis::server::{AppState, RequestSettings, webhook_router};
use serde_json::{Value, json};
use tower::ServiceExt;

fn builtin_router() -> (Router, AppState) {
    let state = AppState::new(Engine::builtin(), RequestSettings::default());
    (webhook_router(state.clone()), state)
}

async fn call(router: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = body_bytes(response).await;
    let value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "response is not JSON ({e}): {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    (status, value)
}

/// Every review under tests/fixtures/reviews, sent to both endpoints, must produce the
/// response stored under tests/fixtures/golden (`UPDATE_GOLDEN=1` rewrites them).
#[tokio::test]
async fn fixture_reviews_match_golden_responses() {
    let (router, _) = builtin_router();
    let mut reviews: Vec<_> = std::fs::read_dir(fixture("reviews"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    reviews.sort();
    assert!(reviews.len() >= 6, "fixture reviews missing");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut compared = 0;
    for review in &reviews {
        let name = review.file_stem().unwrap().to_str().unwrap();
        for endpoint in ["validate", "mutate"] {
            let body = std::fs::read(review).unwrap();
            let (status, response) = call(&router, post_json(&format!("/{endpoint}"), body)).await;
            assert_eq!(status, StatusCode::OK, "{name} /{endpoint}: {response}");
            let golden_path = fixture(&format!("golden/{name}.{endpoint}.json"));
            if update {
                let pretty = serde_json::to_string_pretty(&response).unwrap() + "\n";
                std::fs::write(&golden_path, pretty).unwrap();
            }
            let golden: Value = serde_json::from_slice(&read_golden(&golden_path)).unwrap();
            assert_eq!(response, golden, "{name} /{endpoint} differs from golden");
            compared += 1;
        }
    }
    assert_eq!(compared, reviews.len() * 2);
}

fn read_golden(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    })
}

#[tokio::test]
async fn privileged_pod_is_denied_naming_each_rule() {
    let (router, _) = builtin_router();
    let body = read_fixture("reviews/pod-create-privileged.json");
    let (_, review) = call(&router, post_json("/validate", body)).await;
    let response = &review["response"];
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(response["status"]["reason"], "Forbidden");
    let message = response["status"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        r#"[pod-security/enforce] violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), hostPort (container "netdebug" uses hostPort 9000), privileged (container "netdebug" must not set securityContext.privileged=true)"#
    );
    assert!(response.get("patch").is_none(), "/validate never patches");
}

#[tokio::test]
async fn mutate_patch_is_base64_json_patch_that_applies() {
    let (router, _) = builtin_router();
    let body = read_fixture("reviews/pod-create-compliant.json");
    let request: Value = serde_json::from_slice(&body).unwrap();
    let (_, review) = call(&router, post_json("/mutate", body)).await;
    let response = &review["response"];
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");
    let encoded = response["patch"]
        .as_str()
        .expect("patch must be a base64 string, not bytes");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&decoded).unwrap();
    let mut object = request["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).unwrap();
    for container in object["spec"]["containers"].as_array().unwrap() {
        assert!(container.get("imagePullPolicy").is_some(), "{container}");
    }

    // The patched object, sent again, needs no patch (safe under reinvocation).
    let mut again = request.clone();
    again["request"]["object"] = object;
    let (_, review) = call(&router, post_json("/mutate", again.to_string())).await;
    assert!(review["response"].get("patch").is_none(), "{review}");
}

#[tokio::test]
async fn v1beta1_is_answered_in_v1beta1() {
    let (router, _) = builtin_router();
    let body = read_fixture("reviews/pod-create-v1beta1.json");
    let (_, review) = call(&router, post_json("/validate", body)).await;
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(review["kind"], "AdmissionReview");
}

fn minimal_review() -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "bad-input", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE", "object": {"kind": "Pod", "spec": {"containers": []}},
        }
    })
}

fn with(mut review: Value, pointer: &str, value: Value) -> String {
    *review.pointer_mut(pointer).unwrap() = value;
    review.to_string()
}

fn without(mut review: Value, parent: &str, key: &str) -> String {
    review
        .pointer_mut(parent)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove(key);
    review.to_string()
}

/// Each bad request gets its own status and a JSON Status body that says what was wrong.
#[tokio::test]
async fn bad_input_gets_a_clear_answer() {
    let state = AppState::new(
        Engine::builtin(),
        RequestSettings {
            max_body_bytes: 64 * 1024,
            ..RequestSettings::default()
        },
    );
    let router = webhook_router(state);
    let deep = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"x","object":{}{}}}}}"#,
        "[".repeat(20_000),
        "]".repeat(20_000)
    );
    let chunks = (0..100).map(|_| Ok::<_, std::io::Error>(vec![b' '; 1024]));
    let streamed_too_large = Request::post("/validate")
        .header("content-type", "application/json")
        .body(Body::from_stream(futures_stream(chunks)))
        .unwrap();
    let cases: Vec<(&str, Request<Body>, StatusCode, &str)> = vec![
        (
            "wrong method",
            Request::get("/validate").body(Body::empty()).unwrap(),
            StatusCode::METHOD_NOT_ALLOWED,
            "send POST",
        ),
        (
            "unknown path",
            post_json("/admit", minimal_review().to_string()),
            StatusCode::NOT_FOUND,
            "no such endpoint \"/admit\"",
        ),
        (
            "yaml content type",
            Request::post("/validate")
                .header("content-type", "application/yaml")
                .body(Body::from(minimal_review().to_string()))
                .unwrap(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported content type \"application/yaml\"",
        ),
        (
            "no content type",
            Request::post("/mutate")
                .body(Body::from(minimal_review().to_string()))
                .unwrap(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send Content-Type: application/json",
        ),
        (
            "declared length over the limit",
            Request::post("/validate")
                .header("content-type", "application/json")
                .header("content-length", "1000000")
                .body(Body::from(vec![b' '; 1_000_000]))
                .unwrap(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "larger than the limit of 65536 bytes",
        ),
        (
            "streamed body over the limit",
            streamed_too_large,
            StatusCode::PAYLOAD_TOO_LARGE,
            "larger than the limit",
        ),
        (
            "not JSON",
            post_json("/validate", "hello"),
            StatusCode::BAD_REQUEST,
            "expected value",
        ),
        (
            "empty body",
            post_json("/validate", ""),
            StatusCode::BAD_REQUEST,
            "EOF while parsing",
        ),
        (
            "truncated JSON",
            post_json("/validate", r#"{"apiVersion":"admission.k8s.io/v1","#),
            StatusCode::BAD_REQUEST,
            "EOF while parsing",
        ),
        (
            "a JSON array",
            post_json("/validate", "[1,2]"),
            StatusCode::BAD_REQUEST,
            "must be a JSON object",
        ),
        (
            "not an AdmissionReview",
            post_json("/validate", with(minimal_review(), "/kind", json!("Pod"))),
            StatusCode::BAD_REQUEST,
            "kind must be \"AdmissionReview\"",
        ),
        (
            "unknown apiVersion",
            post_json(
                "/validate",
                with(
                    minimal_review(),
                    "/apiVersion",
                    json!("admission.k8s.io/v2"),
                ),
            ),
            StatusCode::BAD_REQUEST,
            "unsupported apiVersion \"admission.k8s.io/v2\"",
        ),
        (
            "missing request",
            post_json("/validate", without(minimal_review(), "", "request")),
            StatusCode::BAD_REQUEST,
            "has no request",
        ),
        (
            "missing uid",
            post_json("/validate", without(minimal_review(), "/request", "uid")),
            StatusCode::BAD_REQUEST,
            "missing field `uid`",
        ),
        (
            "uid of the wrong type",
            post_json(
                "/validate",
                with(minimal_review(), "/request/uid", json!(42)),
            ),
            StatusCode::BAD_REQUEST,
            "invalid type: integer `42`, expected a string",
        ),
        (
            "operation of the wrong type",
            post_json(
                "/validate",
                with(minimal_review(), "/request/operation", json!(["CREATE"])),
            ),
            StatusCode::BAD_REQUEST,
            "invalid type: sequence, expected a string",
        ),
        (
            "object that is not an object",
            post_json(
                "/validate",
                with(minimal_review(), "/request/object", json!("Pod")),
            ),
            StatusCode::BAD_REQUEST,
            "request.object must be a JSON object",
        ),
        (
            "deeply nested JSON",
            post_json("/validate", deep),
            StatusCode::BAD_REQUEST,
            "recursion limit exceeded",
        ),
        (
            "invalid UTF-8",
            post_json(
                "/validate",
                vec![b'{', b'"', 0xff, 0xfe, b'"', b':', b'1', b'}'],
            ),
            StatusCode::BAD_REQUEST,
            "invalid unicode",
        ),
    ];
    for (name, request, status, message) in cases {
        let (got, body) = call(&router, request).await;
        assert_eq!(got, status, "{name}: {body}");
        assert_eq!(body["kind"], "Status", "{name}");
        assert_eq!(body["code"], status.as_u16(), "{name}");
        let text = body["message"].as_str().unwrap();
        assert!(text.contains(message), "{name}: {text:?} lacks {message:?}");
    }
}

fn futures_stream<I>(items: I) -> impl futures_core::Stream<Item = I::Item>
where
    I: Iterator + Unpin,
{
    struct Iter<I>(I);
    impl<I: Iterator + Unpin> futures_core::Stream for Iter<I> {
        type Item = I::Item;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<I::Item>> {
            std::task::Poll::Ready(self.0.next())
        }
    }
    Iter(items)
}

#[tokio::test]
async fn a_passed_deadline_is_an_evaluation_failure() {
    let (router, _) = builtin_router();
    let (_, review) = call(
        &router,
        post_json("/validate?timeout=0s", minimal_review().to_string()),
    )
    .await;
    let status = &review["response"]["status"];
    assert_eq!(status["code"], 500);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("before the request deadline"),
        "{review}"
    );
}

#[tokio::test]
async fn busy_evaluation_slots_give_the_on_error_answer_at_the_deadline() {
    let state = AppState::new(
        Engine::builtin(),
        RequestSettings {
            max_concurrent_evaluations: 2,
            ..RequestSettings::default()
        },
    );
    let router = webhook_router(state.clone());
    // A large object (over 16 KiB) is evaluated on the blocking pool, in a slot.
    let large = |mut review: Value| {
        review["request"]["object"]["metadata"]["annotations"] =
            json!({"padding": "x".repeat(20 * 1024)});
        review.to_string()
    };
    // Every slot is taken, as by two slow evaluations.
    let held = state
        .evaluation_slots
        .clone()
        .try_acquire_many_owned(2)
        .unwrap();
    let (status, review) = call(
        &router,
        post_json("/validate?timeout=0s", large(minimal_review())),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let message = review["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("every evaluation slot was busy until the deadline"),
        "{review}"
    );
    assert_eq!(review["response"]["status"]["code"], 500);
    // A small object is decided at once, slots or not.
    let compliant: Value =
        serde_json::from_slice(&read_fixture("reviews/pod-create-compliant.json")).unwrap();
    let (_, review) = call(&router, post_json("/validate", compliant.to_string())).await;
    assert_eq!(review["response"]["allowed"], true, "{review}");
    // A large request no rule wants does not wait: its envelope says so.
    let mut unwanted = large(compliant.clone());
    unwanted = unwanted
        .replace(r#""resource":"pods""#, r#""resource":"configmaps""#)
        .replace(r#""kind":"Pod""#, r#""kind":"ConfigMap""#);
    let (_, review) = call(&router, post_json("/validate?timeout=0s", unwanted)).await;
    assert_eq!(review["response"]["allowed"], true, "{review}");
    // A body of 20 KiB takes two slots, one per started 16 KiB: one free slot is not enough.
    drop(held);
    let one = state.evaluation_slots.clone().try_acquire_owned().unwrap();
    let (_, review) = call(
        &router,
        post_json("/validate?timeout=0s", large(compliant.clone())),
    )
    .await;
    assert_eq!(review["response"]["status"]["code"], 500, "{review}");
    // Freed slots are used again.
    drop(one);
    let (_, review) = call(&router, post_json("/validate", large(compliant))).await;
    assert_eq!(review["response"]["allowed"], true, "{review}");
    let metrics = state.metrics.encode();
    assert!(
        metrics.contains("portcullis_evaluations_waiting 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("portcullis_evaluation_wait_seconds_count 3"),
        "{metrics}"
    );
}

#[tokio::test]
async fn bodies_past_the_buffered_budget_get_503_at_the_deadline_or_at_once_over_http2() {
    let state = AppState::new(
        Engine::builtin(),
        RequestSettings {
            max_buffered_body_bytes: 10_000,
            ..RequestSettings::default()
        },
    );
    let router = webhook_router(state.clone());
    let body = minimal_review().to_string();
    let declared = |path: &str, body: &str| {
        let mut request = post_json(path, body.to_owned());
        request
            .headers_mut()
            .insert("content-length", body.len().into());
        request
    };
    // Bodies held by other requests leave 100 bytes.
    let held = state
        .body_budget
        .clone()
        .try_acquire_many_owned(9_900)
        .unwrap();
    let (status, reply) = call(&router, declared("/validate?timeout=0s", &body)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{reply}");
    assert_eq!(reply["reason"], "ServiceUnavailable");
    assert!(
        reply["message"]
            .as_str()
            .unwrap()
            .contains("--max-buffered-body-bytes"),
        "{reply}"
    );
    // A body that fits in what is left is read at once.
    let tiny = r#"{"kind":"AdmissionReview"}"#;
    assert!(tiny.len() < 100);
    let (status, _) = call(&router, declared("/validate?timeout=0s", tiny)).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "read and refused as no request"
    );
    // Over HTTP/2 a body takes its room as it arrives and is refused at once when there is
    // none (a stream left unread would hold back the connection's other streams): no
    // `?timeout=0s` here, so waiting for the deadline would take the default 10 s and name it.
    let over_h2 = |body: &str| {
        let mut request = post_json("/validate", body.to_owned());
        *request.version_mut() = axum::http::Version::HTTP_2;
        request
    };
    let (status, reply) = call(&router, over_h2(&body)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{reply}");
    assert_eq!(reply["reason"], "ServiceUnavailable");
    let message = reply["message"].as_str().unwrap();
    assert!(
        message.contains("--max-buffered-body-bytes") && message.contains("at once"),
        "{reply}"
    );
    let (status, _) = call(&router, over_h2(tiny)).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "fits: read and refused as no request"
    );
    let gauge = |state: &AppState| {
        let metrics = state.metrics.encode();
        metrics
            .lines()
            .find_map(|line| line.strip_prefix("portcullis_buffered_body_bytes "))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("{metrics}"))
    };
    assert_eq!(gauge(&state), "0", "answered bodies give their share back");
    // Given back, the budget serves a body larger than all of it, alone; one without
    // Content-Length counts as --max-body-bytes, also more than the budget.
    drop(held);
    let large = with(
        minimal_review(),
        "/request/object",
        json!({"kind": "Pod", "metadata": {"annotations": {"padding": "x".repeat(20_000)}},
               "spec": {"containers": []}}),
    );
    let (status, review) = call(&router, declared("/validate", &large)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(review["response"]["uid"], "bad-input", "{review}");
    let (status, _) = call(&router, post_json("/validate", body)).await;
    assert_eq!(status, StatusCode::OK);
    // Over HTTP/2 too, a body larger than the whole budget is read alone.
    let (status, review) = call(&router, over_h2(&large)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(review["response"]["uid"], "bad-input", "{review}");
    assert_eq!(state.body_budget.available_permits(), 10_000);
    assert_eq!(gauge(&state), "0");
}

#[tokio::test]
async fn type_confusion_and_kind_mismatch_are_evaluation_errors_not_passes() {
    let (router, _) = builtin_router();
    let review = |object: Value| {
        json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "confused", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": "default", "operation": "CREATE", "object": object,
            }
        })
    };
    // hostNetwork as a string: Pod Security must not read it as false.
    let confused = review(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"hostNetwork": "true", "containers": [{"name": "c", "image": "nginx:1.27"}]},
    }));
    let (_, answer) = call(&router, post_json("/validate", confused.to_string())).await;
    let status = &answer["response"]["status"];
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert_eq!(status["code"], 500);
    assert!(
        status["message"].as_str().unwrap().contains(
            "json: cannot unmarshal string into Go struct field PodSpec.spec.hostNetwork of type bool"
        ),
        "{answer}"
    );
    // An object that is not the kind the request names.
    let mismatched = review(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "p"}, "spec": {},
    }));
    let (_, answer) = call(&router, post_json("/validate", mismatched.to_string())).await;
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("the object is apps/v1 Deployment, but the request is for v1 Pod"),
        "{answer}"
    );
}

#[tokio::test]
async fn per_policy_metrics_count_would_be_denials_of_warn_and_audit_bindings() {
    let engine = Engine::load(&[common::fixture("admission_policies/actions.yaml")]).unwrap();
    let state = AppState::new(engine, RequestSettings::default());
    let router = webhook_router(state.clone());
    let pod = |namespace: &str, labels: Value| {
        json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": namespace, "operation": "CREATE",
                "object": {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": "web", "namespace": namespace, "labels": labels},
                           "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}},
            }
        })
    };
    // In dev the binding warns and audits: admitted, yet counted as failing under both.
    for _ in 0..2 {
        let (_, answer) = call(
            &router,
            post_json("/validate", pod("dev", json!({})).to_string()),
        )
        .await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }
    // In prod it denies; a labelled pod passes.
    let (_, answer) = call(
        &router,
        post_json("/validate", pod("prod", json!({})).to_string()),
    )
    .await;
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let labelled = pod("prod", json!({"team": "a"}));
    call(&router, post_json("/validate", labelled.to_string())).await;
    let metrics = state.metrics.encode();
    let count = |labels: &str| {
        let prefix = format!("portcullis_policy_evaluations_total{{{labels}}} ");
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{metrics}"))
            .to_owned()
    };
    let labels = |binding: &str, action: &str, result: &str| {
        format!(
            "policy=\"labels.example.com\",binding=\"{binding}\",kind=\"ValidatingAdmissionPolicy\",action=\"{action}\",result=\"{result}\""
        )
    };
    assert_eq!(count(&labels("labels-warn", "Warn", "fail")), "2");
    assert_eq!(count(&labels("labels-warn", "Audit", "fail")), "2");
    assert_eq!(count(&labels("labels-deny", "Deny", "fail")), "1");
    assert_eq!(count(&labels("labels-deny", "Deny", "pass")), "1");
    assert!(
        metrics.contains(
            "portcullis_policy_evaluation_duration_seconds_count{policy=\"labels.example.com\"} 4"
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn per_policy_metrics_count_pod_security_modes() {
    let (router, state) = builtin_router();
    // The built-in set enforces baseline and warns and audits restricted: a privileged Pod is
    // refused by baseline (and not warned about, as upstream), and fails restricted's audit.
    let (_, answer) = call(
        &router,
        post_json(
            "/validate",
            read_fixture("reviews/pod-create-privileged.json"),
        ),
    )
    .await;
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let metrics = state.metrics.encode();
    let line = |binding: &str, action: &str, result: &str| {
        format!(
            "portcullis_policy_evaluations_total{{policy=\"pod-security\",binding=\"{binding}\",kind=\"PodSecurity\",action=\"{action}\",result=\"{result}\"}} 1"
        )
    };
    for expected in [
        line("baseline:latest", "Deny", "fail"),
        line("restricted:latest", "Audit", "fail"),
    ] {
        assert!(metrics.contains(&expected), "no {expected} in\n{metrics}");
    }
    assert!(
        !metrics.contains("kind=\"PodSecurity\",action=\"Warn\""),
        "{metrics}"
    );
}

#[tokio::test]
async fn metrics_and_health_after_traffic() {
    let (router, state) = builtin_router();
    call(
        &router,
        post_json(
            "/validate",
            read_fixture("reviews/pod-create-privileged.json"),
        ),
    )
    .await;
    call(
        &router,
        post_json("/mutate", read_fixture("reviews/pod-create-compliant.json")),
    )
    .await;
    call(
        &router,
        post_json("/mutate", read_fixture("reviews/pod-create-compliant.json")),
    )
    .await;
    call(&router, post_json("/validate", "nope")).await;
    call(
        &router,
        Request::get("/validate").body(Body::empty()).unwrap(),
    )
    .await;
    call(&router, post_json("/nowhere", "{}")).await;
    let admin = admin_router(AdminState {
        metrics: state.metrics.clone(),
        readiness: state.readiness.clone(),
    });
    let response = admin
        .clone()
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = String::from_utf8(body_bytes(response).await).unwrap();
    for line in [
        r#"portcullis_admission_requests_total{endpoint="validate",allowed="false",code="403"} 1"#,
        r#"portcullis_admission_requests_total{endpoint="mutate",allowed="true",code="200"} 2"#,
        r#"portcullis_admission_requests_total{endpoint="validate",allowed="error",code="400"} 1"#,
        r#"portcullis_admission_requests_total{endpoint="validate",allowed="error",code="405"} 1"#,
        r#"portcullis_admission_requests_total{endpoint="other",allowed="error",code="404"} 1"#,
        r#"portcullis_admission_duration_seconds_bucket{le="0.0005",endpoint="validate"}"#,
        r#"portcullis_admission_duration_seconds_count{endpoint="validate"} 3"#,
        r#"portcullis_admission_duration_seconds_count{endpoint="mutate"} 2"#,
        r#"portcullis_admission_duration_seconds_count{endpoint="other"} 1"#,
        "portcullis_admission_in_flight 0",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }

    let readyz = |admin: Router| async move {
        admin
            .oneshot(Request::get("/readyz").body(Body::empty()).unwrap())
            .await
            .unwrap()
            .status()
    };
    assert_eq!(
        readyz(admin.clone()).await,
        StatusCode::SERVICE_UNAVAILABLE,
        "nothing loaded yet"
    );
    state.readiness.set_certificate_loaded();
    state.readiness.set_policies_loaded();
    assert_eq!(readyz(admin.clone()).await, StatusCode::OK);
    state.readiness.start_draining();
    assert_eq!(readyz(admin.clone()).await, StatusCode::SERVICE_UNAVAILABLE);
    let healthz = admin
        .oneshot(Request::get("/healthz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(healthz.status(), StatusCode::OK);
}

/// The examples users curl must be valid reviews too.
#[tokio::test]
async fn examples_are_valid_reviews() {
    let (router, _) = builtin_router();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/reviews");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let (status, review) = call(
            &router,
            post_json("/validate", std::fs::read(&path).unwrap()),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{}: {review}", path.display());
        count += 1;
    }
    assert!(count >= 6);
}
