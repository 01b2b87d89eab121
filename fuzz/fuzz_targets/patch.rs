//! An arbitrary JSON object (or an AdmissionReview's `request.object`) as the `object` of a CREATE through `/mutate` with defaulting
//! policies (the built-in defaults and a policy writing labels, annotations and keys with
//! `/` and `~`). The patch must apply with the `json-patch` crate, give the object the engine
//! says it patched, and the patched object must need no further patch (reinvocation).
#![no_main]

use std::path::Path;
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use portcullis::admission::AdmissionRequest;
use portcullis::engine::{Endpoint, Engine, EvalContext, EvalError};
use portcullis::policy::documents_from_str;
use serde_json::{Value, json};

const DEFAULTS: &str = r#"
apiVersion: portcullis.dev/v1alpha1
kind: Policy
metadata:
  name: fuzz-defaults
spec:
  match:
    resources:
      - group: "*"
        kinds: ["*"]
    operations: [CREATE, UPDATE]
  defaults:
    - name: managed-by
      labels:
        app.kubernetes.io/managed-by: portcullis
    - name: odd-annotation
      annotations:
        "example.com/a~b": "x/y"
    - name: nested
      set:
        path: spec.template.metadata.labels["example.com/team"]
        value: platform
    - name: every-container
      set:
        path: spec.containers[*].securityContext.allowPrivilegeEscalation
        value: false
    - name: first-container
      set:
        path: spec.containers[0].resources
        value: {requests: {cpu: 10m}}
"#;

static ENGINE: LazyLock<Engine> = LazyLock::new(|| {
    let mut documents = documents_from_str(Path::new("defaults.yaml"), DEFAULTS).unwrap();
    documents.extend(
        documents_from_str(
            Path::new("builtin.yaml"),
            include_str!("../../src/engine/builtin.yaml"),
        )
        .unwrap(),
    );
    Engine::compile(&documents).unwrap()
});

fn request_for(object: &Value) -> AdmissionRequest {
    let kind = object["kind"].as_str().unwrap_or("Pod");
    let (group, version) = match object["apiVersion"].as_str() {
        Some(api_version) => api_version.split_once('/').unwrap_or(("", api_version)),
        None => ("", "v1"),
    };
    let review = json!({
        "uid": "fuzz",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": format!("{}s", kind.to_lowercase())},
        "namespace": "fuzz",
        "operation": "CREATE",
        "object": object,
    });
    serde_json::from_value(review).unwrap()
}

fuzz_target!(|data: &[u8]| {
    let Ok(mut object @ Value::Object(_)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    // A whole AdmissionReview (the seeds are the fixtures' reviews) stands for its object.
    if object
        .pointer("/request/object")
        .is_some_and(Value::is_object)
    {
        object = object["request"]["object"].take();
    }
    let context = EvalContext::new(Endpoint::Mutate);
    // An object the apiserver would not decode into its kind is answered with an error, not
    // patched: that is the engine's documented answer, not a defect.
    let decision = match ENGINE.evaluate(&request_for(&object), &context) {
        Ok(decision) => decision,
        Err(EvalError::Undecodable(_) | EvalError::KindMismatch { .. }) => return,
        Err(error) => panic!("evaluation failed: {error}"),
    };
    let Some(operations) = decision.patch else {
        assert!(decision.patched_object.is_none());
        return;
    };
    assert!(!operations.is_empty(), "an empty patch is sent as no patch");
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::to_value(&operations).unwrap()).unwrap();
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch)
        .unwrap_or_else(|e| panic!("patch {operations:?} does not apply to {object}: {e}"));
    assert_eq!(
        Some(&patched),
        decision.patched_object.as_ref(),
        "the engine's patched object differs from the patch applied"
    );
    let again = ENGINE.evaluate(&request_for(&patched), &context).unwrap();
    assert!(
        again.patch.is_none(),
        "a patched object got another patch {:?}",
        again.patch
    );
});
