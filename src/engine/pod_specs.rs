use serde_json::Value;

use crate::admission::AdmissionRequest;
use crate::patch::PathSegment;

/// Where a pod spec sits inside an object of some kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodSpecLocation {
    /// The path from the object root to the pod spec.
    pub path: &'static [PathSegment<'static>],
    /// The same path as users read it, e.g. `spec.template.spec`.
    pub display: &'static str,
}

use PathSegment::Key;

const POD: PodSpecLocation = PodSpecLocation {
    path: &[Key("spec")],
    display: "spec",
};
const TEMPLATE: PodSpecLocation = PodSpecLocation {
    path: &[Key("spec"), Key("template"), Key("spec")],
    display: "spec.template.spec",
};
const POD_TEMPLATE: PodSpecLocation = PodSpecLocation {
    path: &[Key("template"), Key("spec")],
    display: "template.spec",
};
const CRON_JOB: PodSpecLocation = PodSpecLocation {
    path: &[
        Key("spec"),
        Key("jobTemplate"),
        Key("spec"),
        Key("template"),
        Key("spec"),
    ],
    display: "spec.jobTemplate.spec.template.spec",
};

/// Where the pod spec is in objects of the request's kind: Pods, and the pod templates of
/// Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob, ReplicationController and
/// PodTemplate. `pods/ephemeralcontainers` carries the whole Pod and counts; other
/// subresources (`pods/exec`, `deployments/scale` …) have none.
pub fn pod_spec_location(request: &AdmissionRequest) -> Option<PodSpecLocation> {
    let kind = &request.kind;
    match request.sub_resource.as_deref().unwrap_or("") {
        "" => {}
        "ephemeralcontainers" if kind.group.is_empty() && kind.kind == "Pod" => return Some(POD),
        _ => return None,
    }
    match (kind.group.as_str(), kind.kind.as_str()) {
        ("", "Pod") => Some(POD),
        ("", "PodTemplate") => Some(POD_TEMPLATE),
        ("", "ReplicationController")
        | ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("batch", "Job") => Some(TEMPLATE),
        ("batch", "CronJob") => Some(CRON_JOB),
        _ => None,
    }
}

/// The pod spec of the object under decision (see [`AdmissionRequest::subject`]), with its
/// location, if the kind has one and the object has it.
pub fn pod_spec(request: &AdmissionRequest) -> Option<(PodSpecLocation, &Value)> {
    let location = pod_spec_location(request)?;
    let mut node = request.subject()?;
    for segment in location.path {
        let PathSegment::Key(key) = segment else {
            return None;
        };
        node = node.get(key)?;
    }
    node.is_object().then_some((location, node))
}

/// The container lists of a pod spec, by field name.
pub const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];
