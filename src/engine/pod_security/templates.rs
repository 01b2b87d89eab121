//! What Pod Security reads of an object besides the pod checks: where each workload kind
//! keeps its pod template (upstream's `DefaultPodSpecExtractor`) and which Pod updates are
//! evaluated at all (upstream's `isSignificantPodUpdate`).

use crate::admission::JsonRead;

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

/// The value at `keys`, or `None` (Go's zero value) when a step is missing.
pub(super) fn at<'a, J: JsonRead<'a>>(value: J, keys: &[&str]) -> Option<J> {
    keys.iter().try_fold(value, |node, key| node.get(key))
}

/// The template's metadata and spec, as upstream's `DefaultPodSpecExtractor` finds them.
pub(super) fn extract_template<'a, J: JsonRead<'a>>(
    object: J,
    template: TemplateAt,
) -> Option<(Option<J>, Option<J>)> {
    let template = match template {
        TemplateAt::Template => at(object, &["template"]),
        // A pointer in Go: no template, nothing to evaluate.
        TemplateAt::ReplicationController => {
            Some(at(object, &["spec", "template"]).filter(|t| !t.is_null())?)
        }
        TemplateAt::Spec => at(object, &["spec", "template"]),
        TemplateAt::CronJob => at(object, &["spec", "jobTemplate", "spec", "template"]),
    };
    Some((
        template.and_then(|t| t.get("metadata")),
        template.and_then(|t| t.get("spec")),
    ))
}

/// Upstream's `isSignificantPodUpdate`: container or init container lists changed length, a
/// container's image changed, or an ephemeral container was added or changed image. Other
/// updates (labels, annotations, status …) cannot make a pod less compliant.
pub(super) fn is_significant_pod_update<'a, J: JsonRead<'a>>(pod: J, old_pod: J) -> bool {
    let spec = pod.get("spec");
    let old_spec = old_pod.get("spec");
    let items =
        |spec: Option<J>, key: &'static str| spec.into_iter().flat_map(move |s| list(s, key));
    let image = |container: J| str_field(container, "image");
    for key in ["containers", "initContainers"] {
        if items(spec, key).count() != items(old_spec, key).count() {
            return true;
        }
        if items(spec, key)
            .zip(items(old_spec, key))
            .any(|(n, o)| image(n) != image(o))
        {
            return true;
        }
    }
    items(spec, "ephemeralContainers").any(|container| {
        let name = str_field(container, "name");
        match items(old_spec, "ephemeralContainers").find(|old| str_field(*old, "name") == name) {
            None => true,
            Some(old) => image(container) != image(old),
        }
    })
}
