//! The built-in rule set `serve` runs when no policies are given: no privileged containers and
//! no host namespaces in pods (and pod templates); default `imagePullPolicy` and seccomp
//! profile.

use serde_json::{Value, json};

use super::pod_specs::{CONTAINER_LISTS, PodSpecLocation, pod_spec, pod_spec_location};
use super::resource_rules::pod_spec_resource_rules;
use super::{DefaultingRule, ResourceRule, ValidationRule, Violation};
use crate::admission::{AdmissionRequest, Operation};
use crate::patch::{ObjectEditor, PathSegment};

const POLICY: &str = "builtin";

fn violation(rule: &str, path: String, message: String) -> Violation {
    Violation {
        policy: POLICY.to_owned(),
        rule: rule.to_owned(),
        path,
        message,
    }
}

/// Denies containers (including init and ephemeral ones) with
/// `securityContext.privileged: true`.
pub struct NoPrivilegedContainers;

impl ValidationRule for NoPrivilegedContainers {
    fn policy(&self) -> &str {
        POLICY
    }

    fn name(&self) -> &str {
        "no-privileged"
    }

    fn resource_rules(&self) -> Vec<ResourceRule> {
        pod_spec_resource_rules(&[Operation::Create, Operation::Update], true)
    }

    fn validate(&self, request: &AdmissionRequest, violations: &mut Vec<Violation>) {
        let Some((location, spec)) = pod_spec(request) else {
            return;
        };
        for list in CONTAINER_LISTS {
            let Some(containers) = spec.get(list).and_then(Value::as_array) else {
                continue;
            };
            for (index, container) in containers.iter().enumerate() {
                let privileged = container
                    .pointer("/securityContext/privileged")
                    .and_then(Value::as_bool);
                if privileged == Some(true) {
                    let name = container.get("name").and_then(Value::as_str).unwrap_or("");
                    violations.push(violation(
                        self.name(),
                        format!(
                            "{}.{list}[{index}].securityContext.privileged",
                            location.display
                        ),
                        format!("container {name:?} must not be privileged"),
                    ));
                }
            }
        }
    }
}

/// Denies pods that share the host's network, PID or IPC namespace.
pub struct NoHostNamespaces;

impl ValidationRule for NoHostNamespaces {
    fn policy(&self) -> &str {
        POLICY
    }

    fn name(&self) -> &str {
        "no-host-namespaces"
    }

    fn resource_rules(&self) -> Vec<ResourceRule> {
        pod_spec_resource_rules(&[Operation::Create, Operation::Update], true)
    }

    fn validate(&self, request: &AdmissionRequest, violations: &mut Vec<Violation>) {
        let Some((location, spec)) = pod_spec(request) else {
            return;
        };
        for (field, namespace) in [
            ("hostNetwork", "network"),
            ("hostPID", "PID"),
            ("hostIPC", "IPC"),
        ] {
            if spec.get(field).and_then(Value::as_bool) == Some(true) {
                violations.push(violation(
                    self.name(),
                    format!("{}.{field}", location.display),
                    format!("sharing the host {namespace} namespace is not allowed"),
                ));
            }
        }
    }
}

/// Warns about containers whose image has no tag or the `latest` tag (and no digest): what
/// runs can change without the object changing.
pub struct WarnMutableImageTag;

impl ValidationRule for WarnMutableImageTag {
    fn policy(&self) -> &str {
        POLICY
    }

    fn name(&self) -> &str {
        "mutable-image-tag"
    }

    fn resource_rules(&self) -> Vec<ResourceRule> {
        pod_spec_resource_rules(&[Operation::Create, Operation::Update], true)
    }

    fn validate(&self, request: &AdmissionRequest, violations: &mut Vec<Violation>) {
        let Some((location, spec)) = pod_spec(request) else {
            return;
        };
        for list in CONTAINER_LISTS {
            let Some(containers) = spec.get(list).and_then(Value::as_array) else {
                continue;
            };
            for (index, container) in containers.iter().enumerate() {
                let Some(image) = container.get("image").and_then(Value::as_str) else {
                    continue;
                };
                if image.contains('@') {
                    continue;
                }
                let last_segment = image.rsplit('/').next().unwrap_or(image);
                let tag = last_segment.split_once(':').map(|(_, tag)| tag);
                if matches!(tag, None | Some("latest")) {
                    let name = container.get("name").and_then(Value::as_str).unwrap_or("");
                    violations.push(violation(
                        self.name(),
                        format!("{}.{list}[{index}].image", location.display),
                        format!("container {name:?} image has no pinned tag; use a version tag or digest"),
                    ));
                }
            }
        }
    }
}

/// Where defaults may be written: pod templates on CREATE and UPDATE, Pods on CREATE only
/// (a Pod's spec is immutable once created, so a patch on UPDATE would be refused).
fn defaultable_pod_spec(request: &AdmissionRequest) -> Option<PodSpecLocation> {
    let location = pod_spec_location(request)?;
    let is_pod = location.path.len() == 1;
    let writable = match request.operation {
        Operation::Create => request.sub_resource.as_deref().unwrap_or("").is_empty(),
        Operation::Update => !is_pod,
        Operation::Delete | Operation::Connect => false,
    };
    writable.then_some(location)
}

/// Sets `imagePullPolicy: IfNotPresent` on containers and init containers that leave it unset.
pub struct DefaultImagePullPolicy;

impl DefaultingRule for DefaultImagePullPolicy {
    fn policy(&self) -> &str {
        POLICY
    }

    fn name(&self) -> &str {
        "default-image-pull-policy"
    }

    fn resource_rules(&self) -> Vec<ResourceRule> {
        pod_spec_resource_rules(&[Operation::Create, Operation::Update], false)
    }

    fn apply(&self, request: &AdmissionRequest, editor: &mut ObjectEditor<'_>) {
        let Some(location) = defaultable_pod_spec(request) else {
            return;
        };
        let mut path: Vec<PathSegment<'_>> = location.path.to_vec();
        let base = path.len();
        for list in ["containers", "initContainers"] {
            let count = pointer_array_len(editor.current(), location.path, list);
            for index in 0..count {
                path.truncate(base);
                path.extend([
                    PathSegment::Key(list),
                    PathSegment::Index(index),
                    PathSegment::Key("imagePullPolicy"),
                ]);
                editor.set_if_missing(&path, json!("IfNotPresent"));
            }
        }
    }
}

/// Sets the pod-level `securityContext.seccompProfile` to `RuntimeDefault` when the pod sets
/// none (containers that set their own keep it). The apiserver does not default this field.
pub struct DefaultSeccompProfile;

impl DefaultingRule for DefaultSeccompProfile {
    fn policy(&self) -> &str {
        POLICY
    }

    fn name(&self) -> &str {
        "default-seccomp-profile"
    }

    fn resource_rules(&self) -> Vec<ResourceRule> {
        pod_spec_resource_rules(&[Operation::Create, Operation::Update], false)
    }

    fn apply(&self, request: &AdmissionRequest, editor: &mut ObjectEditor<'_>) {
        let Some(location) = defaultable_pod_spec(request) else {
            return;
        };
        let mut path: Vec<PathSegment<'_>> = location.path.to_vec();
        path.extend([
            PathSegment::Key("securityContext"),
            PathSegment::Key("seccompProfile"),
        ]);
        editor.set_if_missing(&path, json!({"type": "RuntimeDefault"}));
    }
}

fn pointer_array_len(object: &Value, spec_path: &[PathSegment<'_>], list: &str) -> usize {
    let mut node = object;
    for segment in spec_path {
        let PathSegment::Key(key) = segment else {
            return 0;
        };
        match node.get(key) {
            Some(next) => node = next,
            None => return 0,
        }
    }
    node.get(list).and_then(Value::as_array).map_or(0, Vec::len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::parse_review;
    use crate::engine::{Endpoint, Engine, EvalContext};

    fn request(kind: &str, group: &str, operation: &str, object: Value) -> AdmissionRequest {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "kind": {"group": group, "version": "v1", "kind": kind},
                "resource": {"group": group, "version": "v1", "resource": "x"},
                "operation": operation, "object": object,
            }
        });
        parse_review(review.to_string().as_bytes()).unwrap().request
    }

    fn validate(request: &AdmissionRequest) -> Vec<Violation> {
        let context = EvalContext::new(Endpoint::Validate);
        Engine::builtin()
            .evaluate(request, &context)
            .unwrap()
            .violations
    }

    #[test]
    fn mutable_image_tags_warn_without_denying() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "image": "nginx"},
            {"name": "b", "image": "registry.example.com:5000/team/app:latest"},
            {"name": "c", "image": "registry.example.com:5000/team/app"},
            {"name": "d", "image": "nginx:1.27"},
            {"name": "e", "image": "nginx@sha256:0123"},
        ]}});
        let context = EvalContext::new(Endpoint::Validate);
        let decision = Engine::builtin()
            .evaluate(&request("Pod", "", "CREATE", pod), &context)
            .unwrap();
        assert!(decision.allowed());
        assert_eq!(decision.warnings.len(), 3, "{:?}", decision.warnings);
        assert_eq!(
            decision.warnings[0],
            "[builtin/mutable-image-tag] spec.containers[0].image: container \"a\" image has no \
             pinned tag; use a version tag or digest"
        );
        assert!(decision.warnings[2].contains("containers[2]"));
    }

    #[test]
    fn privileged_and_host_namespaces_are_denied_with_paths() {
        let pod = json!({"spec": {
            "hostNetwork": true, "hostPID": false,
            "containers": [{"name": "ok"}, {"name": "bad", "securityContext": {"privileged": true}}],
            "initContainers": [{"name": "init", "securityContext": {"privileged": true}}],
        }});
        let violations = validate(&request("Pod", "", "CREATE", pod));
        let paths: Vec<_> = violations.iter().map(|v| v.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.containers[1].securityContext.privileged",
                "spec.initContainers[0].securityContext.privileged",
                "spec.hostNetwork",
            ]
        );
        assert_eq!(
            violations[0].to_string(),
            "[builtin/no-privileged] spec.containers[1].securityContext.privileged: \
             container \"bad\" must not be privileged"
        );
    }

    #[test]
    fn pod_templates_are_reached() {
        let template = json!({"spec": {"containers": [{"name": "c", "securityContext": {"privileged": true}}]}});
        let deployment = json!({"spec": {"template": template}});
        let cron_job = json!({"spec": {"jobTemplate": {"spec": {"template": template}}}});
        assert_eq!(
            validate(&request("Deployment", "apps", "UPDATE", deployment))[0].path,
            "spec.template.spec.containers[0].securityContext.privileged"
        );
        assert_eq!(
            validate(&request("CronJob", "batch", "CREATE", cron_job))[0].path,
            "spec.jobTemplate.spec.template.spec.containers[0].securityContext.privileged"
        );
    }

    #[test]
    fn compliant_and_unrelated_objects_pass() {
        let pod = json!({"spec": {"hostNetwork": false, "containers": [{"name": "c", "securityContext": {"privileged": false}}]}});
        assert!(validate(&request("Pod", "", "CREATE", pod)).is_empty());
        let config_map = json!({"spec": {"hostNetwork": true}});
        assert!(validate(&request("ConfigMap", "", "CREATE", config_map)).is_empty());
    }

    #[test]
    fn image_pull_policy_is_defaulted_once() {
        let pod = json!({"spec": {
            "containers": [{"name": "a"}, {"name": "b", "imagePullPolicy": "Always"}],
            "initContainers": [{"name": "i"}],
        }});
        let context = EvalContext::new(Endpoint::Mutate);
        let engine = Engine::builtin();
        let decision = engine
            .evaluate(&request("Pod", "", "CREATE", pod), &context)
            .unwrap();
        let paths: Vec<_> = decision
            .patch
            .as_ref()
            .unwrap()
            .iter()
            .map(|op| op.path.as_str())
            .collect();
        assert_eq!(
            paths,
            [
                "/spec/containers/0/imagePullPolicy",
                "/spec/initContainers/0/imagePullPolicy",
                "/spec/securityContext",
            ]
        );
        let patched = decision.patched_object.unwrap();
        let again = engine
            .evaluate(&request("Pod", "", "CREATE", patched), &context)
            .unwrap();
        assert_eq!(again.patch, None);
    }

    #[test]
    fn pods_are_defaulted_only_on_create() {
        let context = EvalContext::new(Endpoint::Mutate);
        let pod = json!({"spec": {"containers": [{"name": "a"}]}});
        let update = request("Pod", "", "UPDATE", pod.clone());
        let decision = Engine::builtin().evaluate(&update, &context).unwrap();
        assert_eq!(decision.patch, None, "a Pod's spec is immutable");
        let deployment = json!({"spec": {"template": pod}});
        let update = request("Deployment", "apps", "UPDATE", deployment);
        let decision = Engine::builtin().evaluate(&update, &context).unwrap();
        assert_eq!(decision.patch.map(|p| p.len()), Some(2));
    }

    #[test]
    fn ephemeral_containers_are_validated() {
        let mut pod = request(
            "Pod",
            "",
            "UPDATE",
            json!({"spec": {"ephemeralContainers": [{"name": "debug", "securityContext": {"privileged": true}}]}}),
        );
        pod.sub_resource = Some("ephemeralcontainers".into());
        assert_eq!(
            validate(&pod)[0].path,
            "spec.ephemeralContainers[0].securityContext.privileged"
        );
        pod.sub_resource = Some("status".into());
        assert!(validate(&pod).is_empty());
    }
}
