//! Pod Security Admission semantics: `PodSecurityAdmission::evaluate` on AdmissionReviews.
//!
//! - Every case of `tests/fixtures/pod_security_admission/cases.json` (a configuration, the
//!   labels of the request's namespace, a review from `reviews/`) must get the answer upstream
//!   gives: `expected.json` was written by running upstream's own admission library
//!   (`k8s.io/pod-security-admission` v0.37.2) on the same cases (see `generate/`). Refusals,
//!   warnings and audit annotations are compared byte for byte, with the audit annotation keys
//!   mapped (`enforce-policy` → `pod-security-enforce-policy` …).
//! - Further tests pin the exact texts, what upstream's library would refuse but the webhook
//!   never registers (DELETE, CONNECT), and allocation on the hot path.

#[path = "common/allocations.rs"]
mod allocations;

use std::path::{Path, PathBuf};

use portcullis::admission::{
    AdmissionRequest, ObjectForm, Operation, WantedObjects, parse_review, parse_review_as,
};
use portcullis::engine::pod_security::{
    AUDIT_VIOLATIONS_ANNOTATION, ENFORCE_POLICY_ANNOTATION, ERROR_ANNOTATION, EXEMPT_ANNOTATION,
    PodSecurityAdmission,
};
use portcullis::engine::{Decision, Labels, NamespaceLookup, NoNamespaces, StaticNamespaces};
use portcullis::policy::PodSecurityConfiguration;
use serde_json::{Value, json};

use allocations::allocations_of;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pod_security_admission")
}

fn read_json(relative: &str) -> Value {
    let path = fixtures().join(relative);
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The request of a review fixture, parsed as the server parses it.
fn request(review: &str) -> AdmissionRequest {
    request_in(review, ObjectForm::Tree)
}

/// The request of a review fixture, its objects decoded in `form`.
fn request_in(review: &str, form: ObjectForm) -> AdmissionRequest {
    let path = fixtures().join("reviews").join(review);
    let body = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_review_as(&body, &|_| WantedObjects::Both, form)
        .unwrap_or_else(|e| panic!("{review}: {e}"))
        .request
}

/// A review fixture edited as JSON before parsing.
fn edited_request(review: &str, edit: impl FnOnce(&mut Value)) -> AdmissionRequest {
    let mut value = read_json(&format!("reviews/{review}"));
    edit(&mut value["request"]);
    parse_review(&serde_json::to_vec(&value).unwrap())
        .unwrap()
        .request
}

/// Compiles the body of a `PodSecurityConfiguration` (without apiVersion and kind).
fn admission(body: Value) -> PodSecurityAdmission {
    let mut document = json!({
        "apiVersion": "pod-security.admission.config.k8s.io/v1",
        "kind": "PodSecurityConfiguration",
    });
    document
        .as_object_mut()
        .unwrap()
        .extend(body.as_object().unwrap().clone());
    let config: PodSecurityConfiguration = serde_json::from_value(document).unwrap();
    PodSecurityAdmission::new(&config).unwrap()
}

fn labels(value: &Value) -> Labels {
    value
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect()
}

fn namespace(name: &str, pairs: Value) -> StaticNamespaces {
    let mut namespaces = StaticNamespaces::default();
    namespaces.insert(name, labels(&pairs));
    namespaces
}

fn evaluate(
    admission: &PodSecurityAdmission,
    request: &AdmissionRequest,
    namespaces: &dyn NamespaceLookup,
) -> Decision {
    let mut decision = Decision::default();
    admission.evaluate(request, namespaces, &mut decision);
    decision
}

// ---------------------------------------------------------------------------------------------
// Upstream's answers
// ---------------------------------------------------------------------------------------------

/// What `decision` should be to say what upstream's response `expected` says; the differences.
fn differences(decision: &Decision, expected: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let allowed = expected["allowed"].as_bool().unwrap();
    if decision.allowed() != allowed {
        problems.push(format!(
            "allowed: {} (upstream {allowed})",
            decision.allowed()
        ));
    }
    if !allowed {
        let upstream = expected["message"].as_str().unwrap();
        // A refused pod: upstream wraps the reason in `pods "NAME" is forbidden: `, which the
        // apiserver's webhook message does not need; an invalid Namespace: the whole message.
        let (rule, message) = match expected["code"].as_u64() {
            Some(403) => ("enforce", upstream.split_once(" is forbidden: ").unwrap().1),
            Some(422) => ("namespace-labels", upstream),
            code => panic!("unexpected code {code:?}"),
        };
        match decision.violations.as_slice() {
            [violation] => {
                if violation.policy != "pod-security" || violation.rule != rule {
                    problems.push(format!(
                        "violation of {}/{}",
                        violation.policy, violation.rule
                    ));
                }
                if !violation.path.is_empty() {
                    problems.push(format!("violation path {:?}", violation.path));
                }
                if violation.message != message {
                    problems.push(format!(
                        "message:\n  ours:     {}\n  upstream: {message}",
                        violation.message
                    ));
                }
            }
            other => problems.push(format!("{} violations", other.len())),
        }
    }
    let warnings: Vec<&str> = expected["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    if decision.warnings != warnings {
        problems.push(format!(
            "warnings:\n  ours:     {:?}\n  upstream: {warnings:?}",
            decision.warnings
        ));
    }
    let annotations: Vec<(String, &str)> = expected["auditAnnotations"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (format!("pod-security-{k}"), v.as_str().unwrap()))
        .collect();
    let ours: Vec<(String, &str)> = decision
        .audit_annotations
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str()))
        .collect();
    if ours != annotations {
        problems.push(format!(
            "audit annotations:\n  ours:     {ours:?}\n  upstream: {annotations:?}"
        ));
    }
    problems
}

#[test]
fn every_case_gets_upstreams_answer() {
    let cases = read_json("cases.json");
    let expected = read_json("expected.json");
    let (cases, expected) = (cases.as_array().unwrap(), expected.as_array().unwrap());
    assert_eq!(cases.len(), expected.len(), "regenerate expected.json");
    assert!(cases.len() >= 39);
    let mut failures = Vec::new();
    let mut read_from_views = 0;
    for (case, expected) in cases.iter().zip(expected) {
        let name = case["name"].as_str().unwrap();
        assert_eq!(expected["name"], name, "regenerate expected.json");
        let admission = admission(case["config"].clone());
        // The objects decoded into trees, and into views as `serve` decodes them for a policy
        // set of Pod Security alone.
        for form in [ObjectForm::Tree, ObjectForm::View] {
            let request = request_in(case["review"].as_str().unwrap(), form);
            // The case's labels belong to the request's namespace; without labels the
            // namespace is unknown, and the defaults apply (upstream sees a namespace without
            // labels).
            let mut namespaces = StaticNamespaces::default();
            if let Some(pairs) = case["namespaceLabels"].as_object() {
                let name = request.namespace.clone().unwrap();
                namespaces.insert(name, labels(&Value::Object(pairs.clone())));
            }
            let decision = evaluate(&admission, &request, &namespaces);
            let problems = differences(&decision, expected);
            if !problems.is_empty() {
                failures.push(format!("{name} ({form:?}):\n  {}", problems.join("\n  ")));
            }
            // Pods and workloads are read from their views: no tree is built for them.
            if form == ObjectForm::View && request.kind.kind != "Namespace" {
                for object in [&request.object, &request.old_object].into_iter().flatten() {
                    assert!(object.view().is_some(), "{name}");
                    if object.tree_if_built().is_some() {
                        failures.push(format!("{name}: a tree was built from the view"));
                    }
                }
                read_from_views += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(read_from_views >= 30, "{read_from_views}");
}

// ---------------------------------------------------------------------------------------------
// Exact texts
// ---------------------------------------------------------------------------------------------

const RESTRICTED_WEB: &str = "PodSecurity \"restricted:latest\": allowPrivilegeEscalation != \
    false (container \"app\" must set securityContext.allowPrivilegeEscalation=false), \
    unrestricted capabilities (container \"app\" must set \
    securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \
    \"app\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \
    \"app\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \
    \"Localhost\")";

#[test]
fn refusal_text_and_response() {
    let admission = admission(json!({"defaults": {"enforce": "restricted"}}));
    let decision = evaluate(&admission, &request("pod-create.json"), &NoNamespaces);
    assert_eq!(decision.violations.len(), 1);
    let violation = &decision.violations[0];
    assert_eq!(violation.message, format!("violates {RESTRICTED_WEB}"));
    assert_eq!(
        violation.to_string(),
        format!("[pod-security/enforce] violates {RESTRICTED_WEB}")
    );
    let response = decision.to_response("u");
    assert!(!response.allowed);
    let status = response.status.unwrap();
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        format!("[pod-security/enforce] violates {RESTRICTED_WEB}")
    );
    assert!(response.warnings.is_empty(), "no warning on a refusal");
    assert_eq!(
        response.audit_annotations[ENFORCE_POLICY_ANNOTATION],
        "restricted:latest"
    );
}

#[test]
fn warning_and_audit_texts() {
    let admission = admission(json!({"defaults": {"audit": "restricted", "warn": "restricted"}}));
    let decision = evaluate(&admission, &request("pod-create.json"), &NoNamespaces);
    assert!(decision.allowed());
    assert_eq!(
        decision.warnings,
        [format!("would violate {RESTRICTED_WEB}")]
    );
    assert_eq!(
        decision.audit_annotations[AUDIT_VIOLATIONS_ANNOTATION],
        format!("would violate {RESTRICTED_WEB}")
    );
    assert_eq!(
        decision.audit_annotations[ENFORCE_POLICY_ANNOTATION],
        "privileged:latest"
    );
    // Keys hold no `/`: the apiserver prefixes them with the webhook's name and a `/`.
    assert!(decision.audit_annotations.keys().all(|k| !k.contains('/')));
}

#[test]
fn invalid_namespace_labels_text() {
    let admission = admission(json!({}));
    let decision = evaluate(
        &admission,
        &request("namespace-create-invalid.json"),
        &NoNamespaces,
    );
    assert_eq!(
        decision.denial_message(),
        "[pod-security/namespace-labels] Namespace \"team-b\" is invalid: \
         [metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be \
         one of privileged, baseline, restricted, \
         metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: \"1.30\": \
         must be \"latest\" or \"v1.x\"]"
    );
    // A pod in a namespace with such labels is evaluated at restricted, and the error audited.
    let namespaces = namespace(
        "team-a",
        json!({"pod-security.kubernetes.io/enforce": "strict"}),
    );
    let decision = evaluate(&admission, &request("pod-create.json"), &namespaces);
    assert_eq!(
        decision.violations[0].message,
        format!("violates {RESTRICTED_WEB}")
    );
    assert_eq!(
        decision.audit_annotations[ERROR_ANNOTATION],
        "Failed to parse policy: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid \
         value: \"strict\": must be one of privileged, baseline, restricted"
    );
}

#[test]
fn exempt_namespace_warning_text() {
    let admission = admission(json!({"exemptions": {"namespaces": ["ops"]}}));
    let decision = evaluate(
        &admission,
        &request("namespace-create-exempt.json"),
        &NoNamespaces,
    );
    assert!(decision.allowed());
    assert_eq!(
        decision.warnings,
        [
            "namespace \"ops\" is exempt from Pod Security, and the policy \
          (enforce=restricted:latest, audit=baseline:latest) will be ignored"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Policy resolution, versions, exemptions
// ---------------------------------------------------------------------------------------------

#[test]
fn namespace_labels_raise_and_lower_the_defaults() {
    let host_network = request("pod-create-host-network.json");
    let privileged_defaults = admission(json!({}));
    assert!(evaluate(&privileged_defaults, &host_network, &NoNamespaces).allowed());
    let raised = namespace(
        "team-a",
        json!({"pod-security.kubernetes.io/enforce": "baseline"}),
    );
    let decision = evaluate(&privileged_defaults, &host_network, &raised);
    assert_eq!(
        decision.violations[0].message,
        "violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true), \
         privileged (container \"agent\" must not set securityContext.privileged=true)"
    );

    let strict_defaults = admission(json!({"defaults": {"enforce": "baseline"}}));
    assert!(!evaluate(&strict_defaults, &host_network, &NoNamespaces).allowed());
    let lowered = namespace(
        "team-a",
        json!({"pod-security.kubernetes.io/enforce": "privileged"}),
    );
    let decision = evaluate(&strict_defaults, &host_network, &lowered);
    assert_eq!(
        decision,
        Decision {
            audit_annotations: [(
                ENFORCE_POLICY_ANNOTATION.to_owned(),
                "privileged:latest".to_owned()
            )]
            .into(),
            ..Decision::default()
        }
    );
    // Another namespace's labels do not apply.
    let elsewhere = namespace(
        "team-z",
        json!({"pod-security.kubernetes.io/enforce": "privileged"}),
    );
    assert!(!evaluate(&strict_defaults, &host_network, &elsewhere).allowed());
}

#[test]
fn version_pinning_selects_the_checks_of_that_version() {
    // The host of a probe is checked at baseline from v1.34 on.
    let probe = request("pod-create-host-probe.json");
    let admission = admission(json!({}));
    let at = |version: &str| {
        let namespaces = namespace(
            "team-a",
            json!({
                "pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/enforce-version": version,
            }),
        );
        evaluate(&admission, &probe, &namespaces)
    };
    assert!(at("v1.33").allowed());
    assert_eq!(
        at("v1.34").denial_message(),
        "[pod-security/enforce] violates PodSecurity \"baseline:v1.34\": probe or lifecycle host \
         (container \"app\" uses probe or lifecycle host \"169.254.169.254\")"
    );
    assert!(!at("latest").allowed());
    assert!(!at("v1.99").allowed());
}

#[test]
fn each_exemption() {
    let pod = request("pod-create.json");
    let deny_all = json!({"enforce": "restricted", "audit": "restricted", "warn": "restricted"});
    let exempt = |exemptions: Value, request: &AdmissionRequest| {
        let admission = admission(json!({"defaults": deny_all, "exemptions": exemptions}));
        evaluate(&admission, request, &NoNamespaces)
    };
    let only_exempt = |reason: &str| Decision {
        audit_annotations: [(EXEMPT_ANNOTATION.to_owned(), reason.to_owned())].into(),
        ..Decision::default()
    };
    assert_eq!(
        exempt(json!({"usernames": ["alice@example.com"]}), &pod),
        only_exempt("user")
    );
    assert_eq!(
        exempt(json!({"namespaces": ["team-a"]}), &pod),
        only_exempt("namespace")
    );
    let sandboxed = request("pod-create-runtime-class.json");
    assert_eq!(
        exempt(json!({"runtimeClasses": ["kata"]}), &sandboxed),
        only_exempt("runtimeClass")
    );
    // Near misses are not exempt.
    assert!(!exempt(json!({"usernames": ["bob@example.com"]}), &pod).allowed());
    assert!(!exempt(json!({"namespaces": ["team-b"]}), &pod).allowed());
    assert!(!exempt(json!({"runtimeClasses": ["gvisor"]}), &sandboxed).allowed());
    assert!(!exempt(json!({"runtimeClasses": ["kata"]}), &pod).allowed());
}

// ---------------------------------------------------------------------------------------------
// Which requests are evaluated
// ---------------------------------------------------------------------------------------------

#[test]
fn pod_updates_are_evaluated_only_when_significant() {
    let admission = admission(json!({"defaults": {"enforce": "baseline", "warn": "restricted"}}));
    let labels_only = request("pod-update-labels.json");
    assert_eq!(
        evaluate(&admission, &labels_only, &NoNamespaces),
        Decision::default()
    );
    let image = request("pod-update-image.json");
    let decision = evaluate(&admission, &image, &NoNamespaces);
    assert!(!decision.allowed());
    assert_eq!(
        decision.audit_annotations[ENFORCE_POLICY_ANNOTATION],
        "baseline:latest"
    );
}

#[test]
fn ephemeral_containers_are_evaluated_and_status_is_not() {
    let admission = admission(json!({"defaults": {"enforce": "baseline"}}));
    let debug = request("pod-ephemeralcontainers.json");
    assert_eq!(debug.sub_resource.as_deref(), Some("ephemeralcontainers"));
    assert_eq!(
        evaluate(&admission, &debug, &NoNamespaces).denial_message(),
        "[pod-security/enforce] violates PodSecurity \"baseline:latest\": privileged (container \
         \"debugger\" must not set securityContext.privileged=true)"
    );

    let status = request("pod-status.json");
    assert_eq!(
        evaluate(&admission, &status, &NoNamespaces),
        Decision::default()
    );
    // Ignored for the subresource, not because the update is insignificant.
    let new_image = |request: &mut Value| {
        request["object"]["spec"]["containers"][0]["image"] = json!("registry.example.com/x:9");
    };
    let status_with_image = edited_request("pod-status.json", new_image);
    assert_eq!(
        evaluate(&admission, &status_with_image, &NoNamespaces),
        Decision::default()
    );
    let main_with_image = edited_request("pod-status.json", |request| {
        new_image(request);
        let object = request.as_object_mut().unwrap();
        object.remove("subResource");
        object.remove("requestSubResource");
    });
    assert!(!evaluate(&admission, &main_with_image, &NoNamespaces).allowed());
    // Other ignored subresources too.
    for subresource in [
        "exec",
        "attach",
        "binding",
        "eviction",
        "log",
        "portforward",
        "proxy",
    ] {
        let request = edited_request("pod-update-image.json", |request| {
            request["subResource"] = json!(subresource);
            request["requestSubResource"] = json!(subresource);
        });
        assert_eq!(
            evaluate(&admission, &request, &NoNamespaces),
            Decision::default(),
            "{subresource}"
        );
    }
}

#[test]
fn delete_and_connect_are_ignored() {
    let admission = admission(json!({"defaults": {"enforce": "baseline", "audit": "baseline"}}));
    let delete = request("pod-delete.json");
    assert_eq!(delete.operation, Operation::Delete);
    assert_eq!(
        evaluate(&admission, &delete, &NoNamespaces),
        Decision::default()
    );
    let connect = edited_request("pod-create-host-network.json", |request| {
        request["operation"] = json!("CONNECT");
        request["subResource"] = json!("exec");
    });
    assert_eq!(
        evaluate(&admission, &connect, &NoNamespaces),
        Decision::default()
    );
}

#[test]
fn workloads_are_warned_and_audited_never_refused() {
    let admission = admission(json!({
        "defaults": {"enforce": "restricted", "audit": "restricted", "warn": "restricted"},
    }));
    let decision = evaluate(
        &admission,
        &request("deployment-create.json"),
        &NoNamespaces,
    );
    let text = "would violate PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false \
                (container \"api\" must set securityContext.allowPrivilegeEscalation=false), \
                unrestricted capabilities (container \"api\" must set \
                securityContext.capabilities.drop=[\"ALL\"]), seccompProfile (pod or container \
                \"api\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \
                \"Localhost\")";
    assert_eq!(
        decision,
        Decision {
            warnings: vec![text.to_owned()],
            audit_annotations: [(AUDIT_VIOLATIONS_ANNOTATION.to_owned(), text.to_owned())].into(),
            ..Decision::default()
        }
    );
    // The template is what counts: a compliant one is not warned about.
    let compliant = edited_request("deployment-create.json", |request| {
        request["object"]["spec"]["template"]["spec"] = json!({
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "api",
                "image": "registry.example.com/api:3.4",
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]},
                },
            }],
        });
    });
    assert_eq!(
        evaluate(&admission, &compliant, &NoNamespaces),
        Decision::default()
    );
}

#[test]
fn configuration_errors_name_the_field() {
    let config: PodSecurityConfiguration = serde_json::from_value(json!({
        "apiVersion": "pod-security.admission.config.k8s.io/v1",
        "kind": "PodSecurityConfiguration",
        "defaults": {"enforce": "restricted", "enforce-version": "v1.x"},
    }))
    .unwrap();
    let config = PodSecurityAdmission::new(&config).unwrap_err();
    assert_eq!(config.field, "defaults.enforce-version");
    assert_eq!(
        config.to_string(),
        "defaults.enforce-version: Invalid value: \"v1.x\": must be \"latest\" or \"v1.x\""
    );
}

// ---------------------------------------------------------------------------------------------
// Allocation on the hot path
// ---------------------------------------------------------------------------------------------

#[test]
fn compliant_and_skipped_requests_do_not_allocate() {
    let admission = admission(json!({
        "defaults": {"enforce": "restricted", "audit": "restricted", "warn": "restricted"},
    }));
    let compliant_workload = edited_request("deployment-create.json", |request| {
        request["object"]["spec"]["template"]["spec"] = json!({
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "api",
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]},
                },
            }],
        });
    });
    let label_update = request("pod-update-labels.json");
    let status = request("pod-status.json");
    let mut decision = Decision::default();
    for request in [&compliant_workload, &label_update, &status] {
        let allocated =
            allocations_of(|| admission.evaluate(request, &NoNamespaces, &mut decision));
        assert_eq!(allocated, 0, "{:?} allocated", request.name);
    }
    assert_eq!(decision, Decision::default());
    // A compliant pod allocates only its enforce-policy annotation (key, value, map node).
    let compliant_pod = edited_request("pod-create.json", |request| {
        request["object"]["spec"] =
            compliant_workload.object.as_ref().unwrap()["spec"]["template"]["spec"].clone();
    });
    let allocated =
        allocations_of(|| admission.evaluate(&compliant_pod, &NoNamespaces, &mut decision));
    assert!(decision.allowed() && decision.warnings.is_empty());
    assert!(allocated <= 3, "{allocated} allocations");
}
