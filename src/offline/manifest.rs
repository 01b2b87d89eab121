//! A manifest as the kube-apiserver would admit it: the resource its kind is served as, its
//! scope and namespace, and the [`AdmissionRequest`] for an operation.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::input::{InputError, Source};
use crate::admission::{
    AdmissionRequest, GroupVersionKind, GroupVersionResource, Operation, RequestObject, UserInfo,
};
use crate::kubernetes::defaulting::apply_defaults;

/// The user offline requests are made as: `portcullis:offline`, in `system:authenticated`.
/// Rules that look at the user see an ordinary, unprivileged one.
pub const OFFLINE_USER: &str = "portcullis:offline";

/// The groups of [`OFFLINE_USER`].
pub const OFFLINE_GROUPS: [&str; 1] = ["system:authenticated"];

/// The namespace a namespaced object without `metadata.namespace` is created in, as kubectl
/// does with a context that names none.
pub const DEFAULT_NAMESPACE: &str = "default";

/// A kind the apiserver serves: its preferred version, its resource and its scope.
struct KnownKind {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    resource: &'static str,
    namespaced: bool,
}

const fn known(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    resource: &'static str,
    namespaced: bool,
) -> KnownKind {
    KnownKind {
        group,
        version,
        kind,
        resource,
        namespaced,
    }
}

/// The built-in kinds of Kubernetes 1.37 a manifest is likely to hold. A kind listed twice
/// (Event) resolves to the first entry when the manifest has no apiVersion.
const KNOWN_KINDS: &[KnownKind] = &[
    known("", "v1", "Pod", "pods", true),
    known("", "v1", "PodTemplate", "podtemplates", true),
    known(
        "",
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        true,
    ),
    known("", "v1", "Service", "services", true),
    known("", "v1", "ServiceAccount", "serviceaccounts", true),
    known("", "v1", "ConfigMap", "configmaps", true),
    known("", "v1", "Secret", "secrets", true),
    known("", "v1", "Endpoints", "endpoints", true),
    known("", "v1", "Event", "events", true),
    known("", "v1", "LimitRange", "limitranges", true),
    known("", "v1", "ResourceQuota", "resourcequotas", true),
    known(
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
    ),
    known("", "v1", "Binding", "bindings", true),
    known("", "v1", "PersistentVolume", "persistentvolumes", false),
    known("", "v1", "Namespace", "namespaces", false),
    known("", "v1", "Node", "nodes", false),
    known("", "v1", "ComponentStatus", "componentstatuses", false),
    known("apps", "v1", "Deployment", "deployments", true),
    known("apps", "v1", "ReplicaSet", "replicasets", true),
    known("apps", "v1", "StatefulSet", "statefulsets", true),
    known("apps", "v1", "DaemonSet", "daemonsets", true),
    known(
        "apps",
        "v1",
        "ControllerRevision",
        "controllerrevisions",
        true,
    ),
    known("batch", "v1", "Job", "jobs", true),
    known("batch", "v1", "CronJob", "cronjobs", true),
    known(
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        true,
    ),
    known(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    known("networking.k8s.io", "v1", "Ingress", "ingresses", true),
    known(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
    known(
        "networking.k8s.io",
        "v1",
        "IngressClass",
        "ingressclasses",
        false,
    ),
    known(
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        "endpointslices",
        true,
    ),
    known("coordination.k8s.io", "v1", "Lease", "leases", true),
    known("events.k8s.io", "v1", "Event", "events", true),
    known("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    known(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    known(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    known(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    known(
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        false,
    ),
    known("storage.k8s.io", "v1", "CSIDriver", "csidrivers", false),
    known("storage.k8s.io", "v1", "CSINode", "csinodes", false),
    known(
        "storage.k8s.io",
        "v1",
        "VolumeAttachment",
        "volumeattachments",
        false,
    ),
    known(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        false,
    ),
    known("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", false),
    known(
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        false,
    ),
    known(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
    ),
    known(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
    ),
    known(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
    ),
    known(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        false,
    ),
    known(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
    known(
        "apiregistration.k8s.io",
        "v1",
        "APIService",
        "apiservices",
        false,
    ),
];

pub use crate::kubernetes::names::plural_resource as guess_resource;

/// An object to be admitted, normalised as the apiserver would see it.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Group, version and kind, from `apiVersion` and `kind`.
    pub kind: GroupVersionKind,
    /// The resource the kind is served as (plural, lower case).
    pub resource: GroupVersionResource,
    /// Whether the kind is namespaced; `None` for kinds Portcullis does not know.
    pub namespaced: Option<bool>,
    /// The namespace of the request.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: Option<String>,
    /// The object, with `apiVersion` and `metadata.namespace` set as the apiserver sets them.
    pub object: Value,
}

impl Manifest {
    /// Recognises an object. Kinds in the table get their resource and scope from it; a known
    /// kind without `apiVersion` gets its preferred version. Other kinds need `apiVersion`,
    /// their resource is guessed ([`guess_resource`]) and their namespace is taken as written.
    ///
    /// As the apiserver does before admission (`EnsureObjectNamespaceMatchesRequestNamespace`),
    /// a namespaced object without a namespace is put in [`DEFAULT_NAMESPACE`] and a
    /// cluster-scoped object loses any namespace it names.
    pub fn from_object(source: &Source, mut object: Value) -> Result<Manifest, InputError> {
        let kind = match object.get("kind") {
            Some(Value::String(kind)) if !kind.is_empty() => kind.clone(),
            _ => return Err(InputError::at(source, "kind: must be a non-empty string")),
        };
        let (group, version, table) = match object.get("apiVersion") {
            Some(Value::String(api_version)) => {
                let (group, version) = match api_version.split_once('/') {
                    Some((group, version)) => (group, version),
                    None => ("", api_version.as_str()),
                };
                if version.is_empty() || version.contains('/') || api_version.starts_with('/') {
                    return Err(InputError::at(
                        source,
                        format!("apiVersion: {api_version:?} is not GROUP/VERSION or VERSION"),
                    ));
                }
                let table = KNOWN_KINDS
                    .iter()
                    .find(|known| known.group == group && known.kind == kind);
                (group.to_owned(), version.to_owned(), table)
            }
            None | Some(Value::Null) => {
                let Some(table) = KNOWN_KINDS.iter().find(|known| known.kind == kind) else {
                    return Err(InputError::at(
                        source,
                        format!(
                            "{kind} has no apiVersion, and it is not a built-in kind whose \
                             version Portcullis knows: add apiVersion"
                        ),
                    ));
                };
                let api_version = if table.group.is_empty() {
                    table.version.to_owned()
                } else {
                    format!("{}/{}", table.group, table.version)
                };
                object["apiVersion"] = Value::String(api_version);
                (
                    table.group.to_owned(),
                    table.version.to_owned(),
                    Some(table),
                )
            }
            Some(_) => return Err(InputError::at(source, "apiVersion: must be a string")),
        };
        let resource = table.map_or_else(|| guess_resource(&kind), |t| t.resource.to_owned());
        let namespaced = table.map(|t| t.namespaced);

        let metadata = match object.get("metadata") {
            None | Some(Value::Null) => None,
            Some(Value::Object(metadata)) => Some(metadata),
            Some(_) => return Err(InputError::at(source, "metadata: must be a mapping")),
        };
        let text_field = |field: &str| -> Result<Option<String>, InputError> {
            match metadata.and_then(|m| m.get(field)) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) if text.is_empty() => Ok(None),
                Some(Value::String(text)) => Ok(Some(text.clone())),
                Some(_) => Err(InputError::at(
                    source,
                    format!("metadata.{field}: must be a string"),
                )),
            }
        };
        let name = text_field("name")?;
        let written_namespace = text_field("namespace")?;
        let namespace = match namespaced {
            Some(true) => {
                let namespace = written_namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
                set_namespace(&mut object, Some(&namespace));
                Some(namespace)
            }
            Some(false) => {
                set_namespace(&mut object, None);
                None
            }
            None => written_namespace,
        };
        let kind = GroupVersionKind {
            group: group.clone(),
            version: version.clone(),
            kind,
        };
        // The apiserver refuses an object of a built-in kind that does not decode into its Go
        // type before any admission runs; so does check, with the apiserver's words.
        crate::kubernetes::schema::decode::check_object(&kind, (&object).into())
            .map_err(|error| InputError::at(source, error.to_string()))?;
        Ok(Manifest {
            kind,
            resource: GroupVersionResource {
                group,
                version,
                resource,
            },
            namespaced,
            namespace,
            name,
            object,
        })
    }

    /// The manifest's object as admission sees it: decoded into its kind's typed form (empty
    /// optional fields and unknown fields dropped, as Go's decoding drops them) and defaulted
    /// as the apiserver defaults it ([`apply_defaults`]); unchanged for kinds without a
    /// schema or defaults here (custom resources).
    #[must_use]
    pub fn defaulted(&self) -> Cow<'_, Manifest> {
        // `from_object` checked that the object decodes.
        let mut object =
            crate::kubernetes::schema::round_trip::round_trip_object(&self.kind, &self.object)
                .unwrap_or_else(|_| self.object.clone());
        apply_defaults(&self.kind, &mut object);
        if object != self.object {
            Cow::Owned(Manifest {
                object,
                ..self.clone()
            })
        } else {
            Cow::Borrowed(self)
        }
    }

    /// `apiVersion` as written in manifests (`v1`, `apps/v1`).
    pub fn api_version(&self) -> String {
        api_version(&self.kind)
    }

    /// The request the apiserver would send for `operation` on this object: CREATE carries
    /// it as `object`; UPDATE as both `object` and `oldObject` (an apply that changes
    /// nothing); DELETE as `oldObject` only. A Namespace's own request names the namespace
    /// itself in `namespace`, as the apiserver's do. The user is [`OFFLINE_USER`]; `dryRun`
    /// is false.
    pub fn request(&self, operation: Operation, uid: String) -> AdmissionRequest {
        let (object, old_object, options) = match operation {
            Operation::Create => (Some(self.object.clone()), None, "CreateOptions"),
            Operation::Update => (
                Some(self.object.clone()),
                Some(self.object.clone()),
                "UpdateOptions",
            ),
            Operation::Delete => (None, Some(self.object.clone()), "DeleteOptions"),
            Operation::Connect => (None, None, "ConnectOptions"),
        };
        AdmissionRequest {
            uid,
            kind: self.kind.clone(),
            resource: self.resource.clone(),
            sub_resource: None,
            request_kind: Some(self.kind.clone()),
            request_resource: Some(self.resource.clone()),
            request_sub_resource: None,
            name: self.name.clone(),
            namespace: if self.kind.group.is_empty() && self.kind.kind == "Namespace" {
                self.name.clone()
            } else {
                self.namespace.clone()
            },
            operation,
            user_info: UserInfo {
                username: OFFLINE_USER.to_owned(),
                groups: OFFLINE_GROUPS.iter().map(|g| (*g).to_owned()).collect(),
                ..UserInfo::default()
            },
            object: object.map(RequestObject::from),
            old_object: old_object.map(RequestObject::from),
            dry_run: Some(false),
            options: Some(json!({"apiVersion": "meta.k8s.io/v1", "kind": options})),
        }
    }
}

/// `apiVersion` as manifests write it: `VERSION` for the core group, else `GROUP/VERSION`.
pub fn api_version(kind: &GroupVersionKind) -> String {
    if kind.group.is_empty() {
        kind.version.clone()
    } else {
        format!("{}/{}", kind.group, kind.version)
    }
}

fn set_namespace(object: &mut Value, namespace: Option<&str>) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    match namespace {
        Some(namespace) => {
            let metadata = map
                .entry("metadata")
                .or_insert_with(|| Value::Object(Default::default()));
            if metadata.is_null() {
                *metadata = Value::Object(Default::default());
            }
            if let Some(metadata) = metadata.as_object_mut() {
                metadata.insert("namespace".into(), Value::String(namespace.to_owned()));
            }
        }
        None => {
            if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("namespace");
            }
        }
    }
}

/// A deterministic request uid in UUID form: FNV-1a (128 bits) of `seed`, so that the same
/// file and document give the same uid on every run.
pub fn offline_uid(seed: &str) -> String {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut hash = OFFSET;
    for byte in seed.bytes() {
        hash ^= u128::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    let hex = format!("{hash:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> Source {
        Source {
            file: "m.yaml".into(),
            index: 0,
            item: None,
        }
    }

    fn manifest(object: Value) -> Manifest {
        Manifest::from_object(&source(), object).unwrap()
    }

    #[test]
    fn resources_come_from_the_table_or_kubernetes_guess() {
        assert_eq!(guess_resource("Widget"), "widgets");
        assert_eq!(guess_resource("Policy"), "policies");
        assert_eq!(guess_resource("Ingress"), "ingresses");
        assert_eq!(guess_resource("Gateway"), "gateways");
        assert_eq!(guess_resource("Mesh"), "meshes");
        let ingress = manifest(json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"}));
        assert_eq!(ingress.resource.resource, "ingresses");
        let endpoints = manifest(json!({"apiVersion": "v1", "kind": "Endpoints"}));
        assert_eq!(endpoints.resource.resource, "endpoints");
        let custom = manifest(json!({"apiVersion": "example.com/v1", "kind": "Gateway"}));
        assert_eq!(custom.resource.group, "example.com");
        assert_eq!(custom.resource.resource, "gateways");
        assert_eq!(custom.namespaced, None);
    }

    #[test]
    fn namespaces_are_set_as_the_apiserver_sets_them() {
        let pod = manifest(json!({"kind": "Pod", "metadata": {"name": "web"}}));
        assert_eq!(pod.namespace.as_deref(), Some("default"));
        assert_eq!(pod.object["metadata"]["namespace"], "default");
        assert_eq!(pod.object["apiVersion"], "v1");
        let role = manifest(json!({"apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole", "metadata": {"name": "r", "namespace": "x"}}));
        assert_eq!(role.namespace, None);
        assert!(role.object["metadata"].get("namespace").is_none());
        let custom = manifest(json!({"apiVersion": "example.com/v1", "kind": "Gateway"}));
        assert_eq!(custom.namespace, None);
    }

    #[test]
    fn requests_carry_the_object_per_operation() {
        let pod = manifest(json!({"kind": "Pod", "metadata": {"name": "web"}}));
        let create = pod.request(Operation::Create, "u".into());
        assert!(create.object.is_some() && create.old_object.is_none());
        assert_eq!(create.user_info.username, OFFLINE_USER);
        let update = pod.request(Operation::Update, "u".into());
        assert_eq!(update.object, update.old_object);
        let delete = pod.request(Operation::Delete, "u".into());
        assert!(delete.object.is_none() && delete.old_object.is_some());
        assert_eq!(delete.options.unwrap()["kind"], "DeleteOptions");
        // The apiserver names a Namespace's own requests by the namespace itself.
        let namespace = manifest(json!({"kind": "Namespace", "metadata": {"name": "team"}}));
        assert_eq!(namespace.namespace, None);
        for operation in [Operation::Create, Operation::Update, Operation::Delete] {
            let request = namespace.request(operation, "u".into());
            assert_eq!(request.namespace.as_deref(), Some("team"), "{operation}");
        }
    }

    #[test]
    fn manifests_are_defaulted_as_the_apiserver_defaults_them() {
        let pod = manifest(json!({"kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], "volumes": [{"name": "v"}]}}));
        let defaulted = pod.defaulted();
        assert!(matches!(defaulted, Cow::Owned(_)));
        assert_eq!(
            defaulted.object["spec"]["volumes"][0]["emptyDir"],
            json!({})
        );
        assert_eq!(
            defaulted.object["spec"]["containers"][0]["imagePullPolicy"],
            "Always"
        );
        assert!(pod.object["spec"]["volumes"][0].get("emptyDir").is_none());
        let custom = manifest(json!({"apiVersion": "example.com/v1", "kind": "Gateway"}));
        assert!(matches!(custom.defaulted(), Cow::Borrowed(_)));
    }

    #[test]
    fn bad_fields_are_named() {
        for (object, expected) in [
            (
                json!({"apiVersion": "a/b/c", "kind": "X"}),
                "apiVersion: \"a/b/c\"",
            ),
            (
                json!({"apiVersion": 1, "kind": "X"}),
                "apiVersion: must be a string",
            ),
            (
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": []}),
                "metadata: must be",
            ),
            (
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 3}}),
                "metadata.name: must be a string",
            ),
        ] {
            let error = Manifest::from_object(&source(), object).unwrap_err();
            assert!(error.message.starts_with(expected), "{error}");
        }
    }

    #[test]
    fn uids_are_stable_and_distinct() {
        assert_eq!(offline_uid("a#0"), offline_uid("a#0"));
        assert_ne!(offline_uid("a#0"), offline_uid("a#1"));
        assert_eq!(offline_uid("x").len(), 36);
    }
}
