//! Gatekeeper templates and constraints under `serve`: the webhook router decides an
//! AdmissionReview as Gatekeeper's validating webhook answers it (403 Forbidden, messages
//! `[constraint] msg` joined by new lines), with the request's own operation and user in
//! `input.review`; a template that does not compile keeps the policies from loading, with the
//! template's file, field and Rego line. With ExpansionTemplates, the objects a request's
//! object generates are reviewed too, with the request's operation, as Gatekeeper's webhook
//! reviews them; an object that cannot be expanded fails the request (500).

mod common;

use common::{body_bytes, fixture, post_json, read_fixture};
use portcullis::commands::load_engine;
use portcullis::server::{AppState, RequestSettings, webhook_router};
use serde_json::Value;
use tower::ServiceExt;

const SCENARIO: &str = "gatekeeper/request-context";

async fn answer(review: &str) -> Value {
    let engine = load_engine(&[
        fixture(&format!("{SCENARIO}/templates")),
        fixture(&format!("{SCENARIO}/constraints")),
    ])
    .unwrap();
    let router = webhook_router(AppState::new(engine, RequestSettings::default()));
    let body = read_fixture(&format!("{SCENARIO}/reviews/{review}"));
    let response = router.oneshot(post_json("/validate", body)).await.unwrap();
    let review: Value = serde_json::from_slice(&body_bytes(response).await).unwrap();
    review["response"].clone()
}

#[tokio::test]
async fn a_violation_is_answered_as_gatekeepers_webhook_answers_it() {
    let response = answer("create-by-alice.json").await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(response["status"]["reason"], "Forbidden");
    let message = response["status"]["message"].as_str().unwrap();
    let lines: Vec<&str> = message.split('\n').collect();
    assert_eq!(lines.len(), 2, "{message}");
    // Sorted by message (both constraints deny), each prefixed by its constraint's name.
    let groups = r#"["developers", "system:authenticated"]"#;
    assert_eq!(
        lines[0],
        format!(
            "[platform-any-operation] ConfigMap ingress-settings in protected namespace \
             platform: operation \"CREATE\" by user \"alice\" (groups {groups}) is not allowed"
        )
    );
    assert!(
        lines[1].starts_with("[system-namespaces-frozen] ConfigMap ingress-settings"),
        "{message}"
    );
}

#[tokio::test]
async fn the_requests_user_is_what_the_template_reads() {
    let response = answer("update-by-ci-bot.json").await;
    let message = response["status"]["message"].as_str().unwrap_or("");
    assert!(
        !message.contains("[system-namespaces-frozen]"),
        "ci-bot may update: {response}"
    );
}

#[test]
fn a_template_that_does_not_compile_names_its_file_field_and_line() {
    let folder = tempfile::tempdir().unwrap();
    let template = folder.path().join("broken.yaml");
    std::fs::write(
        &template,
        "apiVersion: templates.gatekeeper.sh/v1\nkind: ConstraintTemplate\nmetadata:\n  name: \
         k8sbroken\nspec:\n  crd:\n    spec:\n      names:\n        kind: K8sBroken\n  \
         targets:\n    - target: admission.k8s.gatekeeper.sh\n      rego: |\n        package \
         k8sbroken\n        violation[{\"msg\": msg}] {\n          resp := http.send({\"url\": \
         \"http://example.com\"})\n          msg := \"x\"\n        }\n",
    )
    .unwrap();
    let error = format!("{:#}", load_engine(&[template]).unwrap_err());
    assert!(error.contains("broken.yaml (document 0)"), "{error}");
    assert!(error.contains("spec.targets[0].rego"), "{error}");
    assert!(
        error.contains("line 3: http.send is not allowed in ConstraintTemplates"),
        "{error}"
    );
}

/// The answer of the expansion scenario's policies to `review` (its object possibly changed).
async fn expansion_answer(review: Value) -> Value {
    let scenario = "gatekeeper/expansion";
    let engine = load_engine(&[
        fixture(&format!("{scenario}/templates")),
        fixture(&format!("{scenario}/constraints")),
        fixture(&format!("{scenario}/expansion")),
    ])
    .unwrap();
    let router = webhook_router(AppState::new(engine, RequestSettings::default()));
    let body = serde_json::to_vec(&review).unwrap();
    let response = router.oneshot(post_json("/validate", body)).await.unwrap();
    let review: Value = serde_json::from_slice(&body_bytes(response).await).unwrap();
    review["response"].clone()
}

fn deployment_review() -> Value {
    let text = read_fixture("gatekeeper/expansion/reviews/deployment-web-create.json");
    serde_json::from_slice(&text).unwrap()
}

#[tokio::test]
async fn a_deployments_pod_is_reviewed_with_the_requests_operation() {
    let response = expansion_answer(deployment_review()).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(
        response["status"]["message"],
        "[no-latest] [Implied by expand-deployments] container <nginx> uses tag <latest>: Pod \
         apps/web-pod, operation \"CREATE\", owners [\"Deployment/web\"]"
    );
    assert_eq!(
        response["warnings"],
        serde_json::json!([
            "[generated-pods-run-as-nonroot] [Implied by expand-deployments] pod web-pod in apps \
             must set runAsNonRoot (operation \"CREATE\")"
        ])
    );

    // On DELETE the Pod is made from the old object, and its review carries DELETE.
    let mut delete = deployment_review();
    let request = &mut delete["request"];
    request["operation"] = "DELETE".into();
    request["oldObject"] = request["object"].take();
    let response = expansion_answer(delete).await;
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.ends_with("Pod apps/web-pod, operation \"DELETE\", owners [\"Deployment/web\"]"),
        "{response}"
    );
}

#[tokio::test]
async fn an_object_that_cannot_be_expanded_fails_the_request() {
    let mut review = deployment_review();
    review["request"]["object"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("template");
    let response = expansion_answer(review).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 500);
    assert_eq!(
        response["status"]["message"],
        "unable to expand object: could not find source field \"spec.template\" in resource web"
    );
}

#[tokio::test]
async fn a_rego_evaluation_still_running_at_the_deadline_gets_the_on_error_answer() {
    let engine = load_engine(&[fixture("gatekeeper-deadline")]).unwrap();
    let router = webhook_router(AppState::new(engine, RequestSettings::default()));
    let body = read_fixture(&format!("{SCENARIO}/reviews/create-by-alice.json"));
    let response = router
        .oneshot(post_json("/validate?timeout=200ms", body))
        .await
        .unwrap();
    let review: Value = serde_json::from_slice(&body_bytes(response).await).unwrap();
    let status = &review["response"]["status"];
    assert_eq!(review["response"]["allowed"], false, "{review}");
    assert_eq!(status["code"], 500, "{review}");
    assert_eq!(
        status["message"],
        "portcullis could not evaluate the request: evaluation did not finish before the \
         request deadline"
    );
}
