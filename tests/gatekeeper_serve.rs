//! Gatekeeper templates and constraints under `serve`: the webhook router decides an
//! AdmissionReview as Gatekeeper's validating webhook answers it (403 Forbidden, messages
//! `[constraint] msg` joined by new lines), with the request's own operation and user in
//! `input.review`; a template that does not compile keeps the policies from loading, with the
//! template's file, field and Rego line.

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
