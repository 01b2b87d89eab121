//! What Pod Security reads of an object besides the pod checks: where each workload kind
//! keeps its pod template (upstream's `DefaultPodSpecExtractor`) and which Pod updates are
//! evaluated at all (upstream's `isSignificantPodUpdate`).

use serde_json::Value;

use super::pod::{list, str_field};

/// Where a workload kind keeps its pod template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TemplateAt {
    /// PodTemplate: `template`.
    Template,
    /// ReplicationController: `spec.template`, which may be unset (nothing to evaluate).
    ReplicationController,
    /// Deployment, ReplicaSet, StatefulSet, DaemonSet, Job: `spec.template`.
    Spec,
    /// CronJob: `spec.jobTemplate.spec.template`.
    CronJob,
}

/// The workload resources upstream evaluates, by group and resource.
pub(super) fn workload_template(group: &str, resource: &str) -> Option<TemplateAt> {
    match (group, resource) {
        ("", "podtemplates") => Some(TemplateAt::Template),
        ("", "replicationcontrollers") => Some(TemplateAt::ReplicationController),
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => Some(TemplateAt::Spec),
        ("batch", "cronjobs") => Some(TemplateAt::CronJob),
        _ => None,
    }
}

pub(super) static NULL: Value = Value::Null;

/// The value at `keys`, or `null` (Go's zero value) when a step is missing.
pub(super) fn at<'a>(value: &'a Value, keys: &[&str]) -> &'a Value {
    keys.iter()
        .try_fold(value, |node, key| node.get(key))
        .unwrap_or(&NULL)
}

/// The template's metadata and spec, as upstream's `DefaultPodSpecExtractor` finds them.
pub(super) fn extract_template(object: &Value, template: TemplateAt) -> Option<(&Value, &Value)> {
    let template = match template {
        TemplateAt::Template => at(object, &["template"]),
        TemplateAt::ReplicationController => {
            // A pointer in Go: no template, nothing to evaluate.
            let template = at(object, &["spec", "template"]);
            if template.is_null() {
                return None;
            }
            template
        }
        TemplateAt::Spec => at(object, &["spec", "template"]),
        TemplateAt::CronJob => at(object, &["spec", "jobTemplate", "spec", "template"]),
    };
    Some((at(template, &["metadata"]), at(template, &["spec"])))
}

/// Upstream's `isSignificantPodUpdate`: container or init container lists changed length, a
/// container's image changed, or an ephemeral container was added or changed image. Other
/// updates (labels, annotations, status …) cannot make a pod less compliant.
pub(super) fn is_significant_pod_update(pod: &Value, old_pod: &Value) -> bool {
    let spec = at(pod, &["spec"]);
    let old_spec = at(old_pod, &["spec"]);
    fn image(container: &Value) -> &str {
        str_field(container, "image")
    }
    for key in ["containers", "initContainers"] {
        let (new, old) = (list(spec, key), list(old_spec, key));
        if new.len() != old.len() {
            return true;
        }
        if new.iter().zip(old).any(|(n, o)| image(n) != image(o)) {
            return true;
        }
    }
    let old_ephemeral = list(old_spec, "ephemeralContainers");
    list(spec, "ephemeralContainers").iter().any(|container| {
        let name = str_field(container, "name");
        match old_ephemeral
            .iter()
            .find(|old| str_field(old, "name") == name)
        {
            None => true,
            Some(old) => image(container) != image(old),
        }
    })
}
