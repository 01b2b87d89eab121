//! ValidatingAdmissionPolicy and MutatingAdmissionPolicy from the policy folders, through
//! `Engine::evaluate`: the Kubernetes documentation's examples and one case per semantic, with
//! the apiserver's messages. Policies in tests/fixtures/admission_policies, objects in its
//! `objects/`.

use std::path::PathBuf;

use portcullis::admission::GroupVersionKind;
use portcullis::admission::{AdmissionRequest, parse_review};
use portcullis::engine::admission_policy::typed_form;
use portcullis::engine::{
    Decision, Endpoint, Engine, EvalContext, Labels, ResourceRule, StaticNamespaces,
};
use serde_json::{Value, json};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/admission_policies")
        .join(name)
}

fn engine(name: &str) -> Engine {
    Engine::load(&[fixture(name)]).unwrap_or_else(|e| panic!("{name} loads: {e}"))
}

fn load_error(name: &str) -> String {
    match Engine::load(&[fixture(name)]) {
        Ok(_) => panic!("{name} should not load"),
        Err(error) => error.to_string(),
    }
}

fn object(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(&format!("objects/{name}"))).unwrap();
    serde_norway::from_str(&text).unwrap()
}

/// `object` with the JSON at `pointer` replaced by `value` (created when missing).
fn with(mut object: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let mut node = &mut object;
    for token in parent.split('/').skip(1) {
        node = node
            .as_object_mut()
            .unwrap()
            .entry(token)
            .or_insert_with(|| json!({}));
    }
    node.as_object_mut().unwrap().insert(key.to_owned(), value);
    object
}

/// A review of `object` (kind and resource from its apiVersion and kind), with `extra` fields
/// of the request merged in.
fn request(object: &Value, operation: &str, extra: Value) -> AdmissionRequest {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap();
    let mut request = json!({
        "uid": "u", "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": format!("{}s", kind.to_lowercase())},
        "namespace": object["metadata"]["namespace"], "name": object["metadata"]["name"],
        "operation": operation,
        "object": if operation == "DELETE" { Value::Null } else { object.clone() },
        "userInfo": {"username": "jane@example.com", "groups": ["system:authenticated"]},
    });
    for (key, value) in extra.as_object().unwrap() {
        request[key] = value.clone();
    }
    let review =
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    parse_review(review.to_string().as_bytes()).unwrap().request
}

fn namespaces() -> StaticNamespaces {
    let mut namespaces = StaticNamespaces::default();
    for (name, labels) in [
        ("test-ns", vec![("environment", "test")]),
        ("prod-ns", vec![("environment", "prod")]),
        (
            "staging",
            vec![("environment", "staging"), ("exempt", "false")],
        ),
        (
            "sandbox",
            vec![("environment", "staging"), ("exempt", "true")],
        ),
        ("default", vec![]),
    ] {
        let mut map: Labels = labels
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        map.insert("kubernetes.io/metadata.name".into(), name.into());
        namespaces.insert(name, map);
    }
    namespaces
}

fn evaluate(engine: &Engine, request: &AdmissionRequest, endpoint: Endpoint) -> Decision {
    let namespaces = namespaces();
    engine
        .evaluate(
            request,
            &EvalContext::new(endpoint).with_namespaces(&namespaces),
        )
        .unwrap()
}

fn validate(engine: &Engine, object: &Value) -> Decision {
    evaluate(
        engine,
        &request(object, "CREATE", json!({})),
        Endpoint::Validate,
    )
}

fn denials(decision: &Decision) -> Vec<String> {
    decision
        .violations
        .iter()
        .map(|v| v.message.clone())
        .collect()
}

fn deployment(namespace: &str, replicas: i64) -> Value {
    let object = with(
        object("deployment.yaml"),
        "/metadata/namespace",
        json!(namespace),
    );
    with(object, "/spec/replicas", json!(replicas))
}

// ---- ValidatingAdmissionPolicy ----------------------------------------------------------------

#[test]
fn docs_demo_policy_limits_replicas_in_test_namespaces() {
    let engine = engine("demo-policy.yaml");
    let decision = validate(&engine, &deployment("test-ns", 6));
    assert_eq!(
        denials(&decision),
        [
            "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding \
          'demo-binding-test.example.com' denied request: failed expression: \
          object.spec.replicas <= 5"
        ]
    );
    let violation = &decision.violations[0];
    assert_eq!(
        (
            violation.policy.as_str(),
            violation.rule.as_str(),
            violation.path.as_str()
        ),
        (
            "demo-policy.example.com",
            "demo-binding-test.example.com",
            ""
        )
    );
    assert!(validate(&engine, &deployment("test-ns", 5)).allowed());
    // The binding's namespaceSelector does not match prod.
    assert!(validate(&engine, &deployment("prod-ns", 6)).allowed());
    // matchConstraints: deployments only; and a DELETE is not matched.
    assert!(
        validate(
            &engine,
            &with(object("pod.yaml"), "/metadata/namespace", json!("test-ns"))
        )
        .allowed()
    );
    let delete = request(
        &deployment("test-ns", 6),
        "DELETE",
        json!({"oldObject": deployment("test-ns", 6)}),
    );
    assert!(evaluate(&engine, &delete, Endpoint::Validate).allowed());
    // /mutate never runs validations.
    let mutate = evaluate(
        &engine,
        &request(&deployment("test-ns", 6), "CREATE", json!({})),
        Endpoint::Mutate,
    );
    assert!(mutate.allowed() && mutate.patch.is_none());
}

#[test]
fn docs_replica_limit_params_per_binding() {
    let engine = engine("replica-limit.yaml");
    assert_eq!(
        denials(&validate(&engine, &deployment("test-ns", 5))),
        [
            "ValidatingAdmissionPolicy 'replicalimit-policy.example.com' with binding \
          'replicalimit-binding-test.example.com' denied request: object.spec.replicas must be \
          no greater than 3"
        ]
    );
    assert!(validate(&engine, &deployment("test-ns", 3)).allowed());
    assert!(validate(&engine, &deployment("prod-ns", 50)).allowed());
    assert_eq!(
        denials(&validate(&engine, &deployment("prod-ns", 101))),
        [
            "ValidatingAdmissionPolicy 'replicalimit-policy.example.com' with binding \
          'replicalimit-binding-nontest' denied request: object.spec.replicas must be no \
          greater than 100"
        ]
    );
}

#[test]
fn configmap_params_by_selector_in_the_request_namespace() {
    let engine = engine("configmap-params.yaml");
    // Both labelled ConfigMaps of team-a are evaluated; the unlabelled one is not.
    assert_eq!(
        denials(&validate(&engine, &deployment("team-a", 3))),
        [
            "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-by-label' denied \
          request: at most 2 replicas (budget-limit)"
        ]
    );
    assert_eq!(
        denials(&validate(&engine, &deployment("team-a", 5))).len(),
        2
    );
    assert!(validate(&engine, &deployment("team-a", 2)).allowed());
    // No parameter in this namespace, parameterNotFoundAction Allow.
    assert!(validate(&engine, &deployment("open", 50)).allowed());
}

#[test]
fn parameter_not_found_follows_failure_policy() {
    let engine = engine("params-missing.yaml");
    // paramRef without namespace: the request's namespace; "limited" has the ConfigMap.
    assert_eq!(
        denials(&validate(&engine, &deployment("limited", 2))),
        [
            "ValidatingAdmissionPolicy 'needs-params' with binding 'needs-params-binding' denied \
             request: failed expression: object.spec.replicas <= int(params.data.maxReplicas)",
            "ValidatingAdmissionPolicy 'needs-params-ignored' with binding \
             'needs-params-ignored-binding' denied request: failed expression: \
             object.spec.replicas <= int(params.data.maxReplicas)",
        ]
    );
    // Elsewhere: Deny action under Fail denies; under Ignore the binding is skipped.
    assert_eq!(
        denials(&validate(&engine, &deployment("default", 1))),
        [
            "ValidatingAdmissionPolicy 'needs-params' with binding 'needs-params-binding' denied \
          request: failed to configure binding: no params found for policy binding with `Deny` \
          parameterNotFoundAction"
        ]
    );
}

#[test]
fn a_binding_without_param_ref_evaluates_with_null_params() {
    let engine = engine("params-no-ref.yaml");
    assert!(validate(&engine, &deployment("team-a", 3)).allowed());
    assert_eq!(
        denials(&validate(&engine, &deployment("team-a", 4))),
        [
            "ValidatingAdmissionPolicy 'optional-params' with binding 'optional-params-binding' \
             denied request: at most 3 replicas without params"
        ]
    );
}

#[test]
fn validation_actions_warn_audit_deny() {
    let engine = engine("actions.yaml");
    let pod = |namespace: &str| {
        with(
            with(object("pod.yaml"), "/metadata/namespace", json!(namespace)),
            "/metadata/name",
            json!("a-very-long-name"),
        )
    };
    let decision = validate(&engine, &pod("dev"));
    assert!(decision.allowed());
    assert_eq!(
        decision.warnings,
        [
            "Validation failed for ValidatingAdmissionPolicy 'labels.example.com' with binding \
             'labels-warn': pods need a team label",
            "Validation failed for ValidatingAdmissionPolicy 'labels.example.com' with binding \
             'labels-warn': failed expression: object.metadata.name.size() <= 10",
        ]
    );
    // As Go's encoding/json writes it for the apiserver: `<` is `\u003c`.
    assert_eq!(
        decision.audit_annotations["validation.policy.admission.k8s.io.validation_failure"],
        r#"[{"message":"pods need a team label","policy":"labels.example.com","binding":"labels-warn","expressionIndex":0,"validationActions":["Warn","Audit"]},{"message":"failed expression: object.metadata.name.size() \u003c= 10","policy":"labels.example.com","binding":"labels-warn","expressionIndex":1,"validationActions":["Warn","Audit"]}]"#
    );
    let decision = validate(&engine, &pod("prod"));
    assert_eq!(
        denials(&decision),
        [
            "ValidatingAdmissionPolicy 'labels.example.com' with binding 'labels-deny' denied \
             request: pods need a team label",
            "ValidatingAdmissionPolicy 'labels.example.com' with binding 'labels-deny' denied \
             request: failed expression: object.metadata.name.size() <= 10",
        ]
    );
    assert!(decision.warnings.is_empty());
    assert_eq!(decision.audit_annotations.len(), 1);
    // The response carries the denial, with the code of the first failed validation's
    // reason (Forbidden: 403) ...
    let response = decision.to_response("u");
    assert!(!response.allowed);
    let status = response.status.as_ref().unwrap();
    assert_eq!((status.code, status.reason), (403, "Forbidden"));
    // ... or of no reason: Invalid, 422, as the apiserver answers.
    let labelled = with(pod("prod"), "/metadata/labels", json!({"team": "a"}));
    let response = validate(&engine, &labelled).to_response("u");
    let status = response.status.as_ref().unwrap();
    assert_eq!((status.code, status.reason), (422, "Invalid"));
    // No binding for other namespaces.
    assert_eq!(validate(&engine, &pod("default")), Decision::default());
}

#[test]
fn docs_audit_annotations() {
    let engine = engine("audit-annotations.yaml");
    let decision = validate(&engine, &deployment("default", 60));
    assert!(decision.allowed());
    assert_eq!(
        decision.audit_annotations["demo-policy.example.com.high-replica-count"],
        "Deployment spec.replicas set to 60"
    );
    // The validation (replicas > 50) fails at 3: audited with its messageExpression; the
    // `never` annotation's valueExpression is null and publishes nothing.
    let decision = validate(&engine, &deployment("default", 3));
    assert_eq!(decision.audit_annotations.len(), 2, "{decision:?}");
    assert!(
        !decision
            .audit_annotations
            .contains_key("demo-policy.example.com.never")
    );
    assert!(
        decision.audit_annotations["validation.policy.admission.k8s.io.validation_failure"]
            .contains(r#""message":"Deployment spec.replicas set to 3""#)
    );
}

#[test]
fn docs_match_conditions() {
    let engine = engine("match-conditions.yaml");
    let named_demo = |object: Value| with(object, "/metadata/name", json!("demo-thing"));
    let denied = "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding' \
                  denied request: failed expression: !object.metadata.name.contains('demo') || \
                  object.metadata.namespace == 'demo'";
    assert_eq!(
        denials(&validate(&engine, &named_demo(object("configmap.yaml")))).len(),
        2
    );
    assert_eq!(
        denials(&validate(&engine, &named_demo(object("deployment.yaml")))),
        [denied]
    );
    // Leases and kubelets are excluded by matchConditions.
    assert!(validate(&engine, &named_demo(object("lease.yaml"))).allowed());
    let kubelet = request(
        &named_demo(object("deployment.yaml")),
        "CREATE",
        json!({"userInfo": {"username": "system:node:n1", "groups": ["system:nodes"]}}),
    );
    assert!(evaluate(&engine, &kubelet, Endpoint::Validate).allowed());
    // A condition that errors (no labels) under failurePolicy Fail denies with the error.
    assert_eq!(
        denials(&validate(&engine, &object("configmap.yaml"))),
        [
            "ValidatingAdmissionPolicy 'opted-in.example.com' with binding 'opted-in-binding' \
          denied request: expression 'object.metadata.labels['policy'] == 'strict'' resulted in \
          error: no such key: labels"
        ]
    );
    // A false condition skips the policy.
    let relaxed = with(
        object("configmap.yaml"),
        "/metadata/labels",
        json!({"policy": "relaxed"}),
    );
    assert!(validate(&engine, &relaxed).allowed());
    let strict = with(
        object("configmap.yaml"),
        "/metadata/labels",
        json!({"policy": "strict"}),
    );
    assert!(validate(&engine, &strict).allowed());
    let strict_empty = with(strict, "/data", Value::Null);
    let strict_empty = {
        let mut o = strict_empty;
        o.as_object_mut().unwrap().remove("data");
        o
    };
    assert_eq!(
        denials(&validate(&engine, &strict_empty)),
        [
            "ValidatingAdmissionPolicy 'opted-in.example.com' with binding 'opted-in-binding' \
          denied request: strict ConfigMaps need data"
        ]
    );
}

#[test]
fn has_variables_inside_a_variable_evaluates_only_earlier_ones() {
    let engine = engine("has-variables.yaml");
    let decision = validate(&engine, &deployment("default", 1));
    assert!(decision.allowed(), "{:?}", denials(&decision));
}

#[test]
fn docs_variables_and_lazy_errors() {
    let engine = engine("variables.yaml");
    let image = |namespace: &str, image: &str| {
        with(
            deployment(namespace, 1),
            "/spec/template/spec/containers",
            json!([{"name": "app", "image": image}, {"name": "sidecar", "image": "docker.io/envoy"}]),
        )
    };
    let annotated = |object: Value| {
        with(
            object,
            "/metadata/annotations",
            json!({"example.com/owner": "team-a"}),
        )
    };
    assert!(
        validate(
            &engine,
            &annotated(image("staging", "staging.example.com/app"))
        )
        .allowed()
    );
    assert_eq!(
        denials(&validate(
            &engine,
            &annotated(image("staging", "prod.example.com/app"))
        )),
        [
            "ValidatingAdmissionPolicy 'image-matches-namespace-environment.policy.example.com' \
          with binding 'image-matches-namespace-environment.binding.example.com' denied \
          request: only staging images are allowed in namespace staging"
        ]
    );
    // exempt namespace; a namespace without the label is "prod".
    assert!(
        validate(
            &engine,
            &annotated(image("sandbox", "prod.example.com/app"))
        )
        .allowed()
    );
    assert!(
        validate(
            &engine,
            &annotated(image("default", "prod.example.com/app"))
        )
        .allowed()
    );
    // Lazy: the failing `owner` variable only fails the validation that uses it.
    let decision = validate(&engine, &image("default", "prod.example.com/app"));
    assert!(decision.allowed());
    assert_eq!(
        decision.warnings,
        [
            "Validation failed for ValidatingAdmissionPolicy 'lazy-variables' with binding \
          'lazy-variables': expression 'variables.owner != ''' resulted in error: composited \
          variable \"owner\" fails to evaluate: no such key: annotations"
        ]
    );
}

#[test]
fn failure_policy_on_evaluation_errors() {
    let engine = engine("failure-policy.yaml");
    let pod = object("pod.yaml");
    // priorityClassName is absent: Fail denies with the error, Ignore admits.
    assert_eq!(
        denials(&validate(&engine, &pod)),
        [
            "ValidatingAdmissionPolicy 'strict-priority' with binding 'strict-priority' denied \
          request: expression 'object.spec.priorityClassName != 'system-node-critical'' \
          resulted in error: no such key: priorityClassName"
        ]
    );
    let two = with(
        with(pod, "/spec/priorityClassName", json!("low")),
        "/spec/containers",
        json!([{"name": "a", "image": "a"}, {"name": "b", "image": "b"}]),
    );
    // The messageExpression fails: the static message is used.
    assert_eq!(
        denials(&validate(&engine, &two)),
        [
            "ValidatingAdmissionPolicy 'lenient-priority' with binding 'lenient-priority' denied \
          request: one container only"
        ]
    );
}

#[test]
fn match_constraints_rules_selectors_and_names() {
    let engine = engine("match-constraints.yaml");
    let frozen = |name: &str, replicas: i64| {
        with(
            with(
                deployment("default", replicas),
                "/metadata/name",
                json!(name),
            ),
            "/metadata/labels",
            json!({"frozen": "true"}),
        )
    };
    let update = |new: Value, old: Value, extra: Value| {
        let mut extra = extra;
        extra["oldObject"] = old;
        evaluate(&engine, &request(&new, "UPDATE", extra), Endpoint::Validate)
    };
    let denied = [
        "ValidatingAdmissionPolicy 'no-scaling-frozen' with binding 'no-scaling-frozen' \
                   denied request: frozen",
    ];
    assert_eq!(
        denials(&update(frozen("web", 3), frozen("web", 1), json!({}))),
        denied
    );
    // objectSelector: the old object carries the label.
    assert_eq!(
        denials(&update(
            deployment("default", 3),
            frozen("web", 1),
            json!({})
        )),
        denied
    );
    assert!(
        update(
            deployment("default", 3),
            deployment("default", 1),
            json!({})
        )
        .allowed()
    );
    // excludeResourceRules with resourceNames, in the policy and in the binding.
    assert!(
        update(
            frozen("allowed-to-scale", 3),
            frozen("allowed-to-scale", 1),
            json!({})
        )
        .allowed()
    );
    assert!(
        update(
            frozen("exempt-by-binding", 3),
            frozen("exempt-by-binding", 1),
            json!({})
        )
        .allowed()
    );
    // Subresources: scale is listed, status is not.
    assert_eq!(
        denials(&update(
            frozen("web", 3),
            frozen("web", 1),
            json!({"subResource": "scale"})
        )),
        denied
    );
    assert!(
        update(
            frozen("web", 3),
            frozen("web", 1),
            json!({"subResource": "status"})
        )
        .allowed()
    );
    // matchPolicy Exact: a request made through another version is not matched.
    let other_version = json!({"requestResource": {"group": "apps", "version": "v1beta2", "resource": "deployments"}});
    assert!(update(frozen("web", 3), frozen("web", 1), other_version).allowed());
    // webhook-config registers what matchConstraints name.
    assert_eq!(
        engine.webhook_rules(Endpoint::Validate),
        [ResourceRule {
            api_groups: vec!["apps".into()],
            api_versions: vec!["v1".into()],
            resources: vec!["deployments".into(), "deployments/scale".into()],
            operations: vec![portcullis::admission::Operation::Update],
        }]
    );
    assert!(engine.webhook_rules(Endpoint::Mutate).is_empty());
}

// ---- MutatingAdmissionPolicy ------------------------------------------------------------------

fn mutate(engine: &Engine, object: &Value) -> Decision {
    evaluate(
        engine,
        &request(object, "CREATE", json!({})),
        Endpoint::Mutate,
    )
}

fn patch_json(decision: &Decision) -> Value {
    serde_json::to_value(decision.patch.as_ref().expect("a patch")).unwrap()
}

fn apply_patch(original: &Value, decision: &Decision) -> Value {
    let patch: json_patch::Patch = serde_json::from_value(patch_json(decision)).unwrap();
    let mut document = original.clone();
    json_patch::patch(&mut document, &patch).unwrap();
    document
}

/// `object` as the apiserver sends it to a webhook: decoded into its typed form and
/// defaulted.
fn as_sent(object: Value) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = GroupVersionKind {
        group: group.into(),
        version: version.into(),
        kind: object["kind"].as_str().unwrap().into(),
    };
    typed_form(&kind, object).unwrap()
}

/// The fields the apiserver defaults in a container it decodes, besides those given.
fn defaulted_container(container: Value, pull_policy: &str) -> Value {
    let mut container = container;
    let fields = container.as_object_mut().unwrap();
    fields.insert("imagePullPolicy".into(), json!(pull_policy));
    fields.insert("resources".into(), json!({}));
    fields.insert(
        "terminationMessagePath".into(),
        json!("/dev/termination-log"),
    );
    fields.insert("terminationMessagePolicy".into(), json!("File"));
    container
}

#[test]
fn docs_sidecar_apply_configuration_with_params() {
    let engine = engine("map-sidecar.yaml");
    let pod = as_sent(object("pod.yaml"));
    let decision = mutate(&engine, &pod);
    assert!(decision.allowed(), "{decision:?}");
    let patched = apply_patch(&pod, &decision);
    // After each mutation the apiserver decodes and defaults the object: the injected
    // container carries the defaults of a decoded container.
    assert_eq!(
        patched["spec"]["initContainers"],
        json!([
            defaulted_container(
                json!({"name": "init-db", "image": "busybox:1.36"}),
                "IfNotPresent"
            ),
            defaulted_container(
                json!({"name": "mesh-proxy", "image": "mesh/proxy:v1.0.0", "restartPolicy": "Always"}),
                "IfNotPresent"
            ),
        ])
    );
    assert_eq!(decision.patched_object.as_ref(), Some(&patched));
    // Already injected: the matchCondition is false; no patch.
    assert_eq!(mutate(&engine, &patched).patch, None);
    // /validate never mutates.
    assert!(
        evaluate(
            &engine,
            &request(&pod, "CREATE", json!({})),
            Endpoint::Validate
        )
        .patch
        .is_none()
    );
    assert_eq!(engine.webhook_rules(Endpoint::Mutate).len(), 1);
}

#[test]
fn each_mutation_sees_the_typed_object_as_the_apiserver_decodes_it() {
    let pod = as_sent(object("pod.yaml"));
    // Two mutations: the empty map the first adds is gone when the second runs.
    let decision = mutate(&engine("map-two-steps.yaml"), &pod);
    assert_eq!(
        denials(&decision),
        [
            "policy 'two-steps' with binding 'two-steps' denied request: JSON Patch: add \
          operation does not apply: doc is missing path: \"/metadata/annotations/team\": \
          missing value"
        ]
    );
    // The same operations in one mutation: both apply.
    let decision = mutate(&engine("map-one-step.yaml"), &pod);
    assert!(decision.allowed(), "{:?}", denials(&decision));
    assert_eq!(
        patch_json(&decision),
        json!([{"op": "add", "path": "/metadata/annotations", "value": {"team": "a"}}])
    );
}

#[test]
fn a_custom_resource_is_merged_by_the_list_keys_of_its_crd_among_the_policies() {
    let widget = object("widget.yaml");
    let decision = mutate(&engine("crd-merge"), &widget);
    assert!(decision.allowed(), "{:?}", denials(&decision));
    let patched = decision.patched_object.expect("a patched object");
    assert_eq!(
        patched["spec"],
        json!({"size": 1,
               "parts": [{"name": "p0", "count": 0}, {"name": "p2", "count": 2},
                         {"name": "p1", "count": 1, "color": "red"}],
               "tags": ["a", "b", "c"]})
    );
    assert_eq!(
        patched["metadata"]["labels"],
        json!({"a": "1", "mutated": "true"})
    );
    // Without the CRD the lists' shapes are unknown: atomic, and refused as the apiserver
    // refuses an atomic list in an apply configuration.
    let decision = mutate(&engine("crd-merge/map.yaml"), &widget);
    assert!(!decision.allowed());
}

#[test]
fn docs_jsonpatch_sidecar_and_escaped_label() {
    let engine = engine("map-jsonpatch.yaml");
    let mut pod = object("pod.yaml");
    pod["spec"]
        .as_object_mut()
        .unwrap()
        .remove("initContainers");
    let pod = as_sent(pod);
    let decision = mutate(&engine, &pod);
    // An untagged image's pull policy defaults to Always.
    let sidecar = defaulted_container(
        json!({"name": "mesh-proxy", "image": "mesh-proxy/v1.0.0", "restartPolicy": "Always"}),
        "Always",
    );
    assert_eq!(
        patch_json(&decision),
        json!([
            {"op": "add", "path": "/metadata/labels", "value": {"example.com/environment": "test"}},
            {"op": "add", "path": "/spec/initContainers", "value": [sidecar]},
        ])
    );
    let patched = apply_patch(&pod, &decision);
    assert_eq!(
        patched["metadata"]["labels"]["example.com/environment"],
        "test"
    );
    // With init containers already there, the sidecar is appended.
    let decision = mutate(&engine, &as_sent(object("pod.yaml")));
    let patch = patch_json(&decision);
    assert!(
        patch
            .as_array()
            .unwrap()
            .contains(&json!({"op": "add", "path": "/spec/initContainers/-", "value": sidecar})),
        "{patch}"
    );
}

#[test]
fn reinvocation_and_one_patch_with_native_defaults() {
    let engine = engine("map-reinvocation.yaml");
    let configmap = object("configmap.yaml");
    let decision = mutate(&engine, &configmap);
    let patched = apply_patch(&configmap, &decision);
    assert_eq!(
        patched["metadata"]["labels"],
        json!({"app.kubernetes.io/managed-by": "portcullis", "team": "platform"})
    );
    // team-annotation ran before default-team set the label, and again after it.
    assert_eq!(
        patched["metadata"]["annotations"],
        json!({"example.com/owner": "team-platform"})
    );
    assert_eq!(
        patch_json(&decision),
        json!([
            {"op": "add", "path": "/metadata/annotations", "value": {"example.com/owner": "team-platform"}},
            {"op": "add", "path": "/metadata/labels", "value": {"app.kubernetes.io/managed-by": "portcullis", "team": "platform"}},
        ])
    );
    // Idempotent: the mutated object needs no further patch.
    assert_eq!(mutate(&engine, &patched).patch, None);
}

#[test]
fn mutation_errors_follow_failure_policy() {
    let engine = engine("map-failure.yaml");
    let in_namespace = |ns: &str| with(object("configmap.yaml"), "/metadata/namespace", json!(ns));
    let decision = mutate(&engine, &in_namespace("strict"));
    assert_eq!(
        denials(&decision),
        [
            "policy 'broken-patch' with binding 'broken-patch' denied request: JSON Patch: add \
          operation does not apply: doc is missing path: \"/spec/missing/field\": missing value"
        ]
    );
    assert!(!decision.to_response("u").allowed);
    // Ignore: the failing mutation is skipped, the next one applies.
    let decision = mutate(&engine, &in_namespace("lenient"));
    assert!(decision.allowed());
    assert_eq!(
        patch_json(&decision),
        json!([
            {"op": "remove", "path": "/data/key", "value": null},
            {"op": "add", "path": "/data/patched", "value": "yes"},
        ])
    );
}

// ---- Load errors --------------------------------------------------------------------------------

#[test]
fn load_errors_name_file_document_and_expression() {
    let path = |name: &str| fixture(name).display().to_string();
    let parse = load_error("errors/parse-error.yaml");
    assert!(
        parse.starts_with(&format!(
            "{} (document 0): spec.validations[1].expression: Invalid value: \"object.spec.replicas <=\": compilation failed: ",
            path("errors/parse-error.yaml")
        )),
        "{parse}"
    );
    assert_eq!(
        load_error("errors/undeclared.yaml"),
        format!(
            "{} (document 0): spec.validations[0].expression: Invalid value: \
             \"objects.spec.replicas <= 5\": compilation failed: ERROR: <input>:1:1: undeclared reference to \
             'objects' (in container '')\n | objects.spec.replicas <= 5\n | ^",
            path("errors/undeclared.yaml")
        )
    );
    assert!(load_error("errors/unknown-variable.yaml").contains(
        "(document 0): spec.variables[0].expression: Invalid value: \"variables.second\": \
             compilation failed: ERROR: <input>:1:10: undefined field 'second'"
    ));
    assert!(load_error("errors/match-condition-name.yaml").contains(
        "spec.matchConditions[0].name: Invalid value: \"not a qualified name\": name part \
             must consist of alphanumeric characters"
    ));
    assert!(
        load_error("errors/match-condition-variables.yaml").contains(
            "spec.matchConditions[0].expression: Invalid value: \"variables.team != ''\": \
             compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables' (in \
             container '')"
        )
    );
    assert!(
        load_error("errors/map-no-reinvocation-policy.yaml")
            .contains("spec.reinvocationPolicy: Required value")
    );
    assert!(load_error("errors/variable-name.yaml").contains(
        "spec.variables[0].name: Invalid value: \"team-name\": must be a valid CEL identifier"
    ));
    assert!(load_error("errors/unknown-kind.yaml").contains(
        "(document 0): kind: unsupported document admissionregistration.k8s.io/v1 \
             ValidatingAdmissionPolicyBindng"
    ));
    let unknown_field = load_error("errors/unknown-field.yaml");
    assert!(
        unknown_field.contains("(document 0): spec.validation: unknown field `validation`"),
        "{unknown_field}"
    );
    assert!(load_error("errors/unbound-policy-name.yaml").contains(
        "(document 0): spec.policyName: no ValidatingAdmissionPolicy named \"does-not-exist\""
    ));
    assert!(
        load_error("errors/stray-parameter.yaml")
            .contains("(document 0): kind: unsupported document v1 ConfigMap")
    );
    assert!(
        load_error("errors/portcullis-typo.yaml")
            .contains("(document 0): kind: unsupported document portcullis.dev/v1alpha1 Polcy")
    );
    assert!(load_error("errors/unsupported-reason.yaml").contains(
        "(document 0): spec.validations[0].reason: Unsupported value: \"Conflict\": supported \
         values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\""
    ));
    assert!(load_error("errors/deny-and-warn.yaml").contains(
        "(document 1): spec.validationActions: Invalid value: [\"Deny\",\"Warn\"]: \
                       must not contain both Deny and Warn"
    ));
}

#[test]
fn bound_policies_count_as_rules() {
    // One rule per validation, audit annotation or mutation of a bound policy.
    for name in [
        "replica-limit.yaml",
        "configmap-params.yaml",
        "actions.yaml",
        "variables.yaml",
        "map-sidecar.yaml",
        "map-jsonpatch.yaml",
    ] {
        assert!(engine(name).rule_count() > 0, "{name}");
    }
}

// ---- Native Policy: the `cel` rule family -------------------------------------------------------

#[test]
fn native_cel_validations_and_defaults() {
    let engine = engine("native-cel.yaml");
    let decision = validate(&engine, &deployment("team-a", 6));
    let found: Vec<String> = decision
        .violations
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        found,
        [
            "[replicas/at-most-five] failed expression: object.spec.replicas <= 5",
            "[replicas/named-by-team] deployments are named <team>-<app>",
            "[replicas/owner] deployment web in team-a needs an owner",
        ]
    );
    let fine = with(
        with(deployment("team-a", 2), "/metadata/name", json!("team-web")),
        "/metadata/annotations",
        json!({"example.com/owner": "me"}),
    );
    assert!(validate(&engine, &fine).allowed());

    // Defaults: added only where missing (replicas is set), in one patch.
    let object = deployment("team-a", 2);
    let decision = mutate(&engine, &object);
    assert_eq!(
        patch_json(&decision),
        json!([
            {"op": "add", "path": "/metadata/annotations", "value": {"example.com/owner": "team-team-a"}},
            {"op": "add", "path": "/spec/revisionHistoryLimit", "value": 3},
        ])
    );
    assert_eq!(
        mutate(&engine, &apply_patch(&object, &decision)).patch,
        None
    );
}

#[test]
fn native_cel_load_errors() {
    let error = load_error("errors/native-cel.yaml");
    assert!(
        error.contains(
            "(document 0): spec.validate[0].cel.expression: compilation failed for expression \
             \"object.spec.replicas <= params.max\": undeclared reference to 'params'"
        ),
        "{error}"
    );
}

#[test]
fn a_folder_holds_policies_params_and_native_policies_together() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "replica-limit.yaml",
        "configmap-params.yaml",
        "map-sidecar.yaml",
        "native-cel.yaml",
    ] {
        std::fs::copy(fixture(name), dir.path().join(name)).unwrap();
    }
    let engine = Engine::load(&[dir.path().to_owned()]).unwrap();
    assert_eq!(engine.rule_count(), 1 + 1 + 1 + 4);
    let decision = validate(&engine, &deployment("team-a", 200));
    // configmap-params (two ConfigMaps), native-cel (three rules), replica-limit (non-test).
    assert_eq!(decision.violations.len(), 6, "{decision:?}");
}

/// The status a MutatingAdmissionPolicy's refusal is answered with, as kube-apiserver v1.37.2
/// answers it (seen in its responses to the cases of tests/fixtures/e2e/patch-errors): 403 with
/// the reason `Invalid` for a mutation that fails, 500 `InternalError` for a JSON Patch whose
/// result the Deployment's Go type cannot decode, that error alone and unwrapped.
#[test]
fn mutating_policy_refusals_carry_the_apiservers_status() {
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/e2e/patch-errors");
    let engine = Engine::load(&[folder.join("policies.yaml")]).unwrap();
    let objects: Vec<Value> = serde_norway::Deserializer::from_str(
        &std::fs::read_to_string(folder.join("objects.yaml")).unwrap(),
    )
    .map(|document| serde::Deserialize::deserialize(document).unwrap())
    .collect();
    for (name, code, reason, message) in [
        (
            "no-slash",
            403,
            "Invalid",
            "policy 'patch-error-no-slash' with binding 'patch-error-no-slash' denied request: \
             JSON Patch: add operation does not apply: doc is missing path: \
             \"metadata/labels/x\": missing value",
        ),
        (
            "add-wrong-type",
            500,
            "InternalError",
            "Internal error occurred: json: cannot unmarshal string into Go struct field \
             DeploymentSpec.spec.replicas of type int32",
        ),
        (
            "add-unknown-field",
            500,
            "InternalError",
            "Internal error occurred: strict decoding error: unknown field \"spec.replicaz\"",
        ),
    ] {
        let object = objects
            .iter()
            .find(|object| object["metadata"]["name"] == name)
            .unwrap();
        let decision = evaluate(
            &engine,
            &request(object, "CREATE", json!({})),
            Endpoint::Mutate,
        );
        assert!(decision.patch.is_none(), "{name}: no patch with a refusal");
        let response = decision.to_response("u");
        let status = response.status.as_ref().unwrap();
        assert_eq!((status.code, status.reason), (code, reason), "{name}");
        assert_eq!(status.message, message, "{name}");
    }
}
