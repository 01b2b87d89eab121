//! Defaulting as the kube-apiserver does it when it decodes a built-in object: the defaulting
//! functions of `k8s.io/kubernetes/pkg/apis/*` v1.37 and the `+default=` markers of
//! `k8s.io/api` v0.37, applied to an untyped [`serde_json::Value`].
//!
//! [`apply_defaults`] is what a mutating webhook would receive after the apiserver decoded
//! the object a client sent: every field the typed defaulting sets is set here, with the same
//! value, and nothing else changes. Feature-gated defaults follow v1.37's default gates
//! (ImageVolume on, MaxUnavailableStatefulSet on, H2CContainerProbe off,
//! PodLevelResourcesFixDefaulting on, which moves pod-level resource defaulting out of
//! decoding into the REST strategy).
//!
//! What this module does not do, because the apiserver does it elsewhere (after mutating
//! admission, or not by defaulting): REST strategies (`PrepareForCreate`: Pod `status`,
//! pod-level resource requests, Job selectors and `controller-uid` labels, Namespace
//! finalizers), allocators (Service `clusterIP(s)`, `ipFamilies`, `ipFamilyPolicy`, node
//! ports), admission plugins (DefaultTolerationSeconds, Priority, DefaultStorageClass,
//! LimitRanger …). docs/object-model.md lists these.
//!
//! Resource quantities are written back in their canonical form, as the typed object prints
//! them (`1000m` → `1`, `1.5Gi` → `1536Mi`), and resource lists are rounded up to the
//! milliunit (`quantity`).
//!
//! A field of the wrong JSON type is left as it is (the apiserver refuses such an object
//! before any of this runs); defaulting never panics.
//!
//! One file per API group: `pod` (PodSpec, shared by every workload), `core`, `apps`,
//! `batch`, `networking`, `autoscaling`, `rbac`, `storage`, `scheduling`, `discovery`,
//! `admissionregistration`; `quantity` for resource quantities, `image`
//! for image references.

mod admissionregistration;
mod apps;
mod autoscaling;
mod batch;
mod core;
mod discovery;
mod fields;
mod image;
mod networking;
mod pod;
mod quantity;
mod rbac;
mod scheduling;
mod storage;

use serde_json::Value;

use crate::admission::GroupVersionKind;

pub use image::{image_tag, pull_policy_for};

/// Applies the apiserver's defaults for `kind` to `object`, in place. Returns whether
/// Portcullis knows defaulting for the kind: `false` for custom resources and for built-in
/// kinds whose version has no defaults here (the object is then left unchanged). Kinds
/// whose types have no defaults at all (ConfigMap, PodDisruptionBudget, Ingress, Role …)
/// return `true`.
pub fn apply_defaults(kind: &GroupVersionKind, object: &mut Value) -> bool {
    let Some(map) = object.as_object_mut() else {
        return false;
    };
    match (
        kind.group.as_str(),
        kind.version.as_str(),
        kind.kind.as_str(),
    ) {
        ("", "v1", "Pod") => core::pod(map),
        ("", "v1", "PodTemplate") => core::pod_template(map),
        ("", "v1", "ReplicationController") => core::replication_controller(map),
        ("", "v1", "Service") => core::service(map),
        ("", "v1", "Secret") => core::secret(map),
        ("", "v1", "Namespace") => core::namespace(map),
        ("", "v1", "PersistentVolumeClaim") => core::persistent_volume_claim(map),
        ("", "v1", "PersistentVolume") => core::persistent_volume(map),
        ("", "v1", "Endpoints") => core::endpoints(map),
        ("", "v1", "LimitRange") => core::limit_range(map),
        ("", "v1", "ResourceQuota") => core::resource_quota(map),
        ("", "v1", "Node") => core::node(map),
        ("", "v1", "ConfigMap" | "ServiceAccount" | "Event") => {}
        ("apps", "v1", "Deployment") => apps::deployment(map),
        ("apps", "v1", "StatefulSet") => apps::stateful_set(map),
        ("apps", "v1", "DaemonSet") => apps::daemon_set(map),
        ("apps", "v1", "ReplicaSet") => apps::replica_set(map),
        ("apps", "v1", "ControllerRevision") => {}
        ("batch", "v1", "Job") => batch::job(map),
        ("batch", "v1", "CronJob") => batch::cron_job(map),
        ("networking.k8s.io", "v1", "NetworkPolicy") => networking::network_policy(map),
        ("networking.k8s.io", "v1", "IngressClass") => networking::ingress_class(map),
        ("networking.k8s.io", "v1", "Ingress") => {}
        ("autoscaling", "v2", "HorizontalPodAutoscaler") => {
            autoscaling::horizontal_pod_autoscaler(map)
        }
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => {
            autoscaling::horizontal_pod_autoscaler_v1(map)
        }
        ("policy", "v1", "PodDisruptionBudget") => {}
        ("rbac.authorization.k8s.io", "v1", "RoleBinding" | "ClusterRoleBinding") => {
            rbac::binding(map)
        }
        ("rbac.authorization.k8s.io", "v1", "Role" | "ClusterRole") => {}
        ("storage.k8s.io", "v1", "StorageClass") => storage::storage_class(map),
        ("storage.k8s.io", "v1", "CSIDriver") => storage::csi_driver(map),
        ("scheduling.k8s.io", "v1", "PriorityClass") => scheduling::priority_class(map),
        ("discovery.k8s.io", "v1", "EndpointSlice") => discovery::endpoint_slice(map),
        ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration") => {
            admissionregistration::webhook_configuration(map, false)
        }
        ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration") => {
            admissionregistration::webhook_configuration(map, true)
        }
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy" | "MutatingAdmissionPolicy",
        ) => admissionregistration::policy(map),
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding" | "MutatingAdmissionPolicyBinding",
        ) => admissionregistration::binding(map),
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests;
