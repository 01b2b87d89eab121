//! Native policies end to end through `Engine::evaluate`: the example policies in
//! examples/policies against manifests in tests/fixtures/policies/objects.

use std::path::PathBuf;

use portcullis::admission::{AdmissionRequest, parse_review};
use portcullis::engine::{Decision, Endpoint, Engine, EvalContext};
use serde_json::{Value, json};

fn root(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn example_engine() -> Engine {
    Engine::load(&[root("examples/policies")]).expect("example policies load")
}

fn request(manifest: &str, operation: &str) -> AdmissionRequest {
    let text =
        std::fs::read_to_string(root(&format!("tests/fixtures/policies/objects/{manifest}")))
            .unwrap();
    let object: Value = serde_norway::from_str(&text).unwrap();
    let (group, version) = match object["apiVersion"].as_str().unwrap().split_once('/') {
        Some((group, version)) => (group.to_owned(), version.to_owned()),
        None => (
            String::new(),
            object["apiVersion"].as_str().unwrap().to_owned(),
        ),
    };
    let kind = object["kind"].as_str().unwrap().to_owned();
    let resource = format!("{}s", kind.to_lowercase());
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": manifest, "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "namespace": object["metadata"]["namespace"], "name": object["metadata"]["name"],
            "operation": operation, "object": object,
            "userInfo": {"username": "jane@example.com", "groups": ["system:authenticated"]},
        }
    });
    parse_review(review.to_string().as_bytes()).unwrap().request
}

fn evaluate(engine: &Engine, request: &AdmissionRequest, endpoint: Endpoint) -> Decision {
    engine
        .evaluate(request, &EvalContext::new(endpoint))
        .unwrap()
}

#[test]
fn every_family_reports_with_paths() {
    let decision = evaluate(
        &example_engine(),
        &request("pod-bad.yaml", "CREATE"),
        Endpoint::Validate,
    );
    let denied: Vec<String> = decision
        .violations
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        denied,
        [
            r#"[host-isolation/namespaces-and-ports] spec.hostNetwork: sharing the host network namespace is not allowed"#,
            r#"[host-isolation/namespaces-and-ports] spec.containers[0].ports[0].hostPort: container "web" must not use host port 8080"#,
            r#"[trusted-images/registries] spec.containers[0].image: container "web" image "nginx:latest" is not from an allowed registry (registry.example.com, ghcr.io/example)"#,
            r#"[trusted-images/pinned] spec.containers[0].image: container "web" image "nginx:latest" must have a tag other than latest"#,
            r#"[require-team-label/team-label] metadata.labels["team"]: label "team" is required"#,
            r#"[container-resources/requests-and-limits] spec.containers[0].resources.requests.cpu: container "web" must set resources.requests.cpu"#,
            r#"[container-resources/requests-and-limits] spec.containers[0].resources.requests.memory: container "web" must set resources.requests.memory"#,
            r#"[container-resources/requests-and-limits] spec.containers[0].resources.limits.memory: container "web" must set resources.limits.memory"#,
        ]
    );
    assert_eq!(
        decision.warnings,
        [
            r#"[health-probes/readiness] spec.containers[0].readinessProbe: container "web" must define a readiness probe"#
        ]
    );
    assert_eq!(
        decision.audit_annotations["host-paths"],
        r#"[host-paths] spec.volumes[0].hostPath: volume "etc" must not mount host path "/etc""#
    );
    assert_eq!(decision.to_response("u").status.unwrap().code, 403);
}

#[test]
fn compliant_pod_passes() {
    let decision = evaluate(
        &example_engine(),
        &request("pod-good.yaml", "CREATE"),
        Endpoint::Validate,
    );
    assert!(decision.allowed(), "{:?}", decision.violations);
    assert!(decision.warnings.is_empty());
    assert!(decision.audit_annotations.is_empty());
}

#[test]
fn pod_rules_reach_pod_templates() {
    let decision = evaluate(
        &example_engine(),
        &request("deployment-bad.yaml", "UPDATE"),
        Endpoint::Validate,
    );
    let paths: Vec<&str> = decision
        .violations
        .iter()
        .map(|v| v.path.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            r#"spec.template.metadata.labels["team"]"#,
            "spec.template.spec.containers[0].resources.limits.memory",
        ],
        "{:?}",
        decision.violations
    );
    assert!(
        decision.violations[1]
            .message
            .contains("it must be at most 4Gi")
    );
}

#[test]
fn defaults_patch_minimally_and_idempotently() {
    let engine = example_engine();
    let decision = evaluate(
        &engine,
        &request("pod-bad.yaml", "CREATE"),
        Endpoint::Mutate,
    );
    let patch = serde_json::to_value(decision.patch.as_ref().unwrap()).unwrap();
    assert_eq!(
        patch,
        json!([
            {"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "IfNotPresent"},
            {"op": "add", "path": "/spec/containers/0/securityContext", "value": {"allowPrivilegeEscalation": false}},
            {"op": "add", "path": "/metadata/labels", "value": {"app.kubernetes.io/managed-by": "portcullis"}},
        ])
    );
    let mut again = request("pod-bad.yaml", "CREATE");
    again.object = decision.patched_object.clone().map(Into::into);
    assert_eq!(evaluate(&engine, &again, Endpoint::Mutate).patch, None);
    // UPDATE is not matched by the defaults policy (operations: [CREATE]).
    assert_eq!(
        evaluate(
            &engine,
            &request("pod-bad.yaml", "UPDATE"),
            Endpoint::Mutate
        )
        .patch,
        None
    );
}

#[test]
fn load_errors_name_file_document_and_field() {
    let error = Engine::load(&[root("tests/fixtures/policies/broken")]).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("typo.yaml (document 1)"), "{text}");
    assert!(text.contains("spec.validate[0].images"), "{text}");
    assert!(text.contains("unknown field `allowedRegistry`"), "{text}");
}

#[test]
fn webhook_rules_cover_pods_and_templates_only() {
    let rules = example_engine().webhook_rules(Endpoint::Validate);
    let resources: Vec<String> = rules.iter().flat_map(|r| r.resources.clone()).collect();
    assert!(resources.contains(&"pods".to_owned()));
    assert!(resources.contains(&"deployments".to_owned()));
    assert!(!resources.iter().any(|r| r == "configmaps" || r == "*"));
}

#[test]
fn pod_spec_is_not_defaulted_on_update() {
    let policy = r#"
apiVersion: portcullis.dev/v1alpha1
kind: Policy
metadata: {name: d}
spec:
  match: {resources: [{kinds: [Pod]}]}
  defaults:
    - {name: spec, set: {path: "spec.containers[*].imagePullPolicy", value: Always}}
    - {name: label, labels: {a: b}}
"#;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.yaml"), policy).unwrap();
    let engine = Engine::load(&[dir.path().to_owned()]).unwrap();
    let update = evaluate(
        &engine,
        &request("pod-bad.yaml", "UPDATE"),
        Endpoint::Mutate,
    );
    let paths: Vec<&str> = update
        .patch
        .iter()
        .flatten()
        .map(|op| op.path.as_str())
        .collect();
    assert_eq!(paths, ["/metadata/labels"], "a Pod's spec is immutable");
    let deployment = evaluate(
        &engine,
        &request("deployment-bad.yaml", "UPDATE"),
        Endpoint::Mutate,
    );
    let paths: Vec<&str> = deployment
        .patch
        .iter()
        .flatten()
        .map(|op| op.path.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            "/spec/template/spec/containers/0/imagePullPolicy",
            "/spec/template/metadata/labels/a"
        ]
    );
}
