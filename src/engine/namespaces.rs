//! What Portcullis knows of the cluster's namespaces: their labels (namespace selectors, Pod
//! Security namespace labels) and the whole object (CEL's `namespaceObject`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::{Map, Value};

/// Labels of a namespace, as `namespaceSelector`s and Pod Security namespace labels need them.
pub type Labels = BTreeMap<String, String>;

/// The label the apiserver sets on every namespace, to its name.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Where namespaces come from: a watch cache of the cluster's Namespaces when `serve` has a
/// cluster, the Namespace objects among the input files for `check`, or nothing. Reviews
/// carry neither namespace labels nor the namespace.
pub trait NamespaceLookup: Send + Sync {
    /// The labels of namespace `name`, or `None` when it is not known.
    fn labels(&self, name: &str) -> Option<Labels>;

    /// The same labels as [`NamespaceLookup::labels`], read where the lookup keeps them
    /// rather than copied (by default, a copy).
    fn labels_ref<'a>(&'a self, name: &'a str) -> Option<NamespaceLabels<'a>> {
        self.labels(name).map(NamespaceLabels::Owned)
    }

    /// The labels of namespace `name`; an unknown namespace has only the label every
    /// namespace has, `kubernetes.io/metadata.name`.
    fn labels_or_default(&self, name: &str) -> Labels {
        self.labels(name).unwrap_or_else(|| default_labels(name))
    }

    /// CEL's `namespaceObject` for namespace `name`: [`namespace_object`] of the Namespace
    /// when the lookup has the object. By default, and for a namespace it does not know,
    /// only what is known: [`partial_namespace_object`] of its name and labels.
    fn namespace_object(&self, name: &str) -> Value {
        partial_namespace_object(name, self.labels_or_default(name))
    }

    /// Why namespace `name` could not be had, when the lookup does not hold it and the last read
    /// of it failed (not when it does not exist). By default, never.
    fn read_failure(&self, _name: &str) -> Option<ReadFailure> {
        None
    }

    /// Whether namespace `name` is one the lookup does not hold but could get
    /// ([`NamespaceLookup::fetch`]): a namespace the cluster's watch has not delivered yet.
    /// By default, false.
    fn fetches(&self, _name: &str) -> bool {
        false
    }

    /// Gets namespace `name` where it comes from, giving up at `deadline`; afterwards the
    /// lookups answer with it (or, when it does not exist or could not be had, as before, for a
    /// while). By default, nothing to do.
    fn fetch<'a>(&'a self, _name: &'a str, _deadline: Instant) -> FetchFuture<'a> {
        Box::pin(std::future::ready(()))
    }
}

/// Why an object a rule needs from the cluster (a namespace, a parameter object) could not be
/// had: the read failed, which is not the same as finding that it does not exist. Answered as
/// the apiserver answers when its own read fails (see docs/params.md and docs/serving.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFailure {
    /// The code and reason of the API's Status when the API answered with one (`403
    /// Forbidden`, `500 InternalError` …); `None` when it could not be reached or did not
    /// answer in time.
    pub status: Option<(u16, String)>,
    /// What the failed read says: the Status's message, or the client's error.
    pub message: String,
}

/// What [`NamespaceLookup::fetch`] returns.
pub type FetchFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;

/// The labels of a namespace as a [`NamespaceLookup`] holds them.
#[derive(Debug, Clone)]
pub enum NamespaceLabels<'a> {
    /// Labels kept by the lookup.
    Kept(&'a Labels),
    /// A Namespace shared with a cache, with the name it was looked up by: the
    /// `kubernetes.io/metadata.name` label reads as that name, as the apiserver sets it.
    Shared(Arc<Namespace>, &'a str),
    /// Labels built for the lookup.
    Owned(Labels),
}

impl NamespaceLabels<'_> {
    /// The value of label `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        match self {
            NamespaceLabels::Kept(labels) => labels.get(key).map(String::as_str),
            NamespaceLabels::Owned(labels) => labels.get(key).map(String::as_str),
            NamespaceLabels::Shared(_, name) if key == NAME_LABEL => Some(name),
            NamespaceLabels::Shared(namespace, _) => namespace
                .metadata
                .labels
                .as_ref()?
                .get(key)
                .map(String::as_str),
        }
    }
}

/// Label `key` of namespace `name` with `labels` (`None`: unknown, so only the label every
/// namespace has, `kubernetes.io/metadata.name`).
pub(crate) fn namespace_label<'a>(
    labels: Option<&'a NamespaceLabels<'_>>,
    name: &'a str,
    key: &str,
) -> Option<&'a str> {
    match labels {
        Some(labels) => labels.get(key),
        None => (key == NAME_LABEL).then_some(name),
    }
}

/// The labels of a namespace nothing is known about.
fn default_labels(name: &str) -> Labels {
    Labels::from([(NAME_LABEL.to_owned(), name.to_owned())])
}

/// The Namespace as the kube-apiserver v1.37 gives it to admission policies as
/// `namespaceObject`: `CreateNamespaceObject` (k8s.io/apiserver v0.37.2,
/// `pkg/admission/plugin/cel/condition.go`) keeps `spec`, `status` and, of the metadata,
/// `name`, `generateName`, `namespace`, `uid`, `resourceVersion`, `generation`,
/// `creationTimestamp`, `deletionTimestamp`, `deletionGracePeriodSeconds`, `labels`,
/// `annotations` and `finalizers` (no `apiVersion`, `kind`, `ownerReferences` or
/// `managedFields`); CEL then sees it as its JSON encoding (`SchemalessTypedToVal`, equal to
/// `ToUnstructured`):
///
/// - `metadata`, `spec` and `status` are always there, `{}` when empty;
/// - an empty string, a zero `generation`, an empty map or list is left out (`omitempty`);
///   `deletionGracePeriodSeconds` is there whenever it is set, `0` included;
/// - times are strings in UTC to the second (`2024-01-01T00:00:00Z`), not CEL timestamps;
/// - a condition always has `type` and `status`, and `lastTransitionTime` (`null` when
///   unset); `reason` and `message` only when not empty.
pub fn namespace_object(namespace: &Namespace) -> Value {
    let meta = &namespace.metadata;
    let mut metadata = Map::new();
    put_text(&mut metadata, "name", meta.name.as_deref());
    put_text(&mut metadata, "generateName", meta.generate_name.as_deref());
    put_text(&mut metadata, "namespace", meta.namespace.as_deref());
    put_text(&mut metadata, "uid", meta.uid.as_deref());
    put_text(
        &mut metadata,
        "resourceVersion",
        meta.resource_version.as_deref(),
    );
    if let Some(generation) = meta.generation.filter(|g| *g != 0) {
        metadata.insert("generation".into(), generation.into());
    }
    if let Some(time) = &meta.creation_timestamp {
        metadata.insert("creationTimestamp".into(), time_value(Some(time)));
    }
    if let Some(time) = &meta.deletion_timestamp {
        metadata.insert("deletionTimestamp".into(), time_value(Some(time)));
    }
    if let Some(seconds) = meta.deletion_grace_period_seconds {
        metadata.insert("deletionGracePeriodSeconds".into(), seconds.into());
    }
    put_map(&mut metadata, "labels", meta.labels.as_ref());
    put_map(&mut metadata, "annotations", meta.annotations.as_ref());
    put_list(&mut metadata, "finalizers", meta.finalizers.as_deref());

    let mut spec = Map::new();
    if let Some(namespace_spec) = &namespace.spec {
        put_list(
            &mut spec,
            "finalizers",
            namespace_spec.finalizers.as_deref(),
        );
    }

    let mut status = Map::new();
    if let Some(namespace_status) = &namespace.status {
        put_text(&mut status, "phase", namespace_status.phase.as_deref());
        let conditions = namespace_status.conditions.as_deref().unwrap_or_default();
        if !conditions.is_empty() {
            let conditions = conditions
                .iter()
                .map(|condition| {
                    let mut map = Map::new();
                    map.insert("type".into(), condition.type_.clone().into());
                    map.insert("status".into(), condition.status.clone().into());
                    map.insert(
                        "lastTransitionTime".into(),
                        time_value(condition.last_transition_time.as_ref()),
                    );
                    put_text(&mut map, "reason", condition.reason.as_deref());
                    put_text(&mut map, "message", condition.message.as_deref());
                    Value::Object(map)
                })
                .collect();
            status.insert("conditions".into(), Value::Array(conditions));
        }
    }

    let mut object = Map::new();
    object.insert("metadata".into(), Value::Object(metadata));
    object.insert("spec".into(), Value::Object(spec));
    object.insert("status".into(), Value::Object(status));
    Value::Object(object)
}

/// `namespaceObject` for a namespace known only by name and labels (no cluster, or not in
/// the cache yet, or not among `check`'s inputs): [`namespace_object`] of a Namespace with
/// just those, so `metadata.annotations` and `status.phase` are missing keys.
pub fn partial_namespace_object(name: &str, labels: Labels) -> Value {
    namespace_object(&Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    })
}

fn put_text(map: &mut Map<String, Value>, key: &str, text: Option<&str>) {
    if let Some(text) = text.filter(|t| !t.is_empty()) {
        map.insert(key.to_owned(), text.into());
    }
}

fn put_map(map: &mut Map<String, Value>, key: &str, entries: Option<&BTreeMap<String, String>>) {
    if let Some(entries) = entries.filter(|e| !e.is_empty()) {
        let entries = entries
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        map.insert(key.to_owned(), Value::Object(entries));
    }
}

fn put_list(map: &mut Map<String, Value>, key: &str, items: Option<&[String]>) {
    if let Some(items) = items.filter(|i| !i.is_empty()) {
        map.insert(key.to_owned(), items.iter().cloned().collect());
    }
}

/// `metav1.Time` as Go encodes it: the instant in UTC to the second, `null` when unset.
fn time_value(time: Option<&Time>) -> Value {
    time.and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or(Value::Null)
}

/// No namespace is known.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoNamespaces;

impl NamespaceLookup for NoNamespaces {
    fn labels(&self, _: &str) -> Option<Labels> {
        None
    }
}

/// A fixed set of namespaces, e.g. the Namespace objects given to `check`.
#[derive(Debug, Default, Clone)]
pub struct StaticNamespaces {
    namespaces: HashMap<String, StaticNamespace>,
}

/// One namespace of a [`StaticNamespaces`]: its labels, and its `namespaceObject` when it
/// was given as an object (built once, when added).
#[derive(Debug, Clone)]
struct StaticNamespace {
    labels: Labels,
    object: Option<Value>,
}

impl StaticNamespaces {
    /// Adds a namespace by name and labels; its `namespaceObject` has only those.
    pub fn insert(&mut self, name: impl Into<String>, labels: Labels) {
        self.namespaces.insert(
            name.into(),
            StaticNamespace {
                labels,
                object: None,
            },
        );
    }

    /// Adds a `v1` Namespace object; returns false (and adds nothing) for any other object.
    /// The object should be as the apiserver stores it (decoded and defaulted, as `check`
    /// passes it); the
    /// `kubernetes.io/metadata.name` label is added when it is missing, as the apiserver adds
    /// it. An object that does not decode as a Namespace keeps only its name and labels.
    pub fn insert_object(&mut self, object: &Value) -> bool {
        if object.get("kind").and_then(Value::as_str) != Some("Namespace") {
            return false;
        }
        let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str) else {
            return false;
        };
        let mut labels: Labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|map| {
                map.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        labels.insert(NAME_LABEL.into(), name.to_owned());
        let object = serde_json::from_value::<Namespace>(object.clone())
            .ok()
            .map(|mut namespace| {
                namespace.metadata.labels = Some(labels.clone());
                namespace_object(&namespace)
            });
        self.namespaces
            .insert(name.to_owned(), StaticNamespace { labels, object });
        true
    }
}

impl NamespaceLookup for StaticNamespaces {
    fn labels(&self, name: &str) -> Option<Labels> {
        self.namespaces.get(name).map(|n| n.labels.clone())
    }

    fn labels_ref<'a>(&'a self, name: &'a str) -> Option<NamespaceLabels<'a>> {
        self.namespaces
            .get(name)
            .map(|n| NamespaceLabels::Kept(&n.labels))
    }

    fn namespace_object(&self, name: &str) -> Value {
        match self.namespaces.get(name) {
            Some(StaticNamespace {
                object: Some(object),
                ..
            }) => object.clone(),
            Some(namespace) => partial_namespace_object(name, namespace.labels.clone()),
            None => partial_namespace_object(name, default_labels(name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NamespaceCondition, NamespaceSpec, NamespaceStatus};
    use serde_json::json;

    use super::*;

    fn time(text: &str) -> Time {
        Time(text.parse().unwrap())
    }

    #[test]
    fn a_stored_namespace_keeps_only_what_the_apiserver_copies() {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some("team-a".into()),
                generate_name: Some("team-".into()),
                uid: Some("6f1c5e2a-0000-4000-8000-000000000001".into()),
                resource_version: Some("4242".into()),
                generation: Some(0),
                creation_timestamp: Some(time("2026-01-02T03:04:05.678+01:00")),
                deletion_timestamp: Some(time("2026-02-01T00:00:00Z")),
                deletion_grace_period_seconds: Some(0),
                labels: Some(Labels::from([(NAME_LABEL.into(), "team-a".into())])),
                annotations: Some(BTreeMap::from([("x".into(), "y".into())])),
                finalizers: Some(vec!["example.com/hold".into()]),
                owner_references: Some(vec![Default::default()]),
                managed_fields: Some(vec![Default::default()]),
                self_link: Some("/api/v1/namespaces/team-a".into()),
                ..ObjectMeta::default()
            },
            spec: Some(NamespaceSpec {
                finalizers: Some(vec!["kubernetes".into()]),
            }),
            status: Some(NamespaceStatus {
                phase: Some("Terminating".into()),
                conditions: Some(vec![
                    NamespaceCondition {
                        type_: "NamespaceDeletionContentFailure".into(),
                        status: "False".into(),
                        last_transition_time: Some(time("2026-02-01T00:00:01Z")),
                        reason: Some("ContentDeleted".into()),
                        message: Some(String::new()),
                    },
                    NamespaceCondition {
                        type_: String::new(),
                        status: String::new(),
                        ..NamespaceCondition::default()
                    },
                ]),
            }),
        };
        assert_eq!(
            namespace_object(&namespace),
            json!({
                "metadata": {
                    "name": "team-a",
                    "generateName": "team-",
                    "uid": "6f1c5e2a-0000-4000-8000-000000000001",
                    "resourceVersion": "4242",
                    "creationTimestamp": "2026-01-02T02:04:05Z",
                    "deletionTimestamp": "2026-02-01T00:00:00Z",
                    "deletionGracePeriodSeconds": 0,
                    "labels": {"kubernetes.io/metadata.name": "team-a"},
                    "annotations": {"x": "y"},
                    "finalizers": ["example.com/hold"],
                },
                "spec": {"finalizers": ["kubernetes"]},
                "status": {
                    "phase": "Terminating",
                    "conditions": [
                        {"type": "NamespaceDeletionContentFailure", "status": "False",
                         "lastTransitionTime": "2026-02-01T00:00:01Z",
                         "reason": "ContentDeleted"},
                        {"type": "", "status": "", "lastTransitionTime": null},
                    ],
                },
            })
        );
    }

    #[test]
    fn empty_fields_are_left_out_but_metadata_spec_and_status_stay() {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some("bare".into()),
                generate_name: Some(String::new()),
                generation: Some(3),
                labels: Some(Labels::new()),
                annotations: Some(BTreeMap::new()),
                finalizers: Some(Vec::new()),
                ..ObjectMeta::default()
            },
            spec: Some(NamespaceSpec {
                finalizers: Some(Vec::new()),
            }),
            status: Some(NamespaceStatus {
                phase: Some(String::new()),
                conditions: Some(Vec::new()),
            }),
        };
        assert_eq!(
            namespace_object(&namespace),
            json!({"metadata": {"name": "bare", "generation": 3}, "spec": {}, "status": {}})
        );
        assert_eq!(
            namespace_object(&Namespace::default()),
            json!({"metadata": {}, "spec": {}, "status": {}})
        );
    }

    #[test]
    fn an_unknown_namespace_has_its_name_and_labels_only() {
        let expected = json!({
            "metadata": {"name": "ns", "labels": {"kubernetes.io/metadata.name": "ns"}},
            "spec": {},
            "status": {},
        });
        assert_eq!(NoNamespaces.namespace_object("ns"), expected);
        assert_eq!(StaticNamespaces::default().namespace_object("ns"), expected);
        let mut known = StaticNamespaces::default();
        known.insert("ns", Labels::from([("team".into(), "a".into())]));
        assert_eq!(
            known.namespace_object("ns"),
            json!({"metadata": {"name": "ns", "labels": {"team": "a"}}, "spec": {}, "status": {}})
        );
    }

    #[test]
    fn namespace_documents_give_the_whole_object() {
        let mut namespaces = StaticNamespaces::default();
        assert!(namespaces.insert_object(&json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": "team-a",
                "labels": {"team": "a"},
                "annotations": {"owner": "alice"},
                "managedFields": [{"manager": "kubectl"}],
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        })));
        let labels = Labels::from([
            ("team".into(), "a".into()),
            (NAME_LABEL.into(), "team-a".into()),
        ]);
        assert_eq!(namespaces.labels("team-a"), Some(labels));
        assert_eq!(
            namespaces.namespace_object("team-a"),
            json!({
                "metadata": {
                    "name": "team-a",
                    "labels": {"team": "a", "kubernetes.io/metadata.name": "team-a"},
                    "annotations": {"owner": "alice"},
                },
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            })
        );
        // Not a Namespace, or nameless: nothing is added.
        assert!(
            !namespaces.insert_object(&json!({"kind": "ConfigMap", "metadata": {"name": "c"}}))
        );
        assert!(!namespaces.insert_object(&json!({"kind": "Namespace", "metadata": {}})));
        // A document that does not decode keeps its name and labels.
        assert!(namespaces.insert_object(&json!({
            "kind": "Namespace",
            "metadata": {"name": "odd", "labels": {"a": "b"}, "generation": "one"},
        })));
        assert_eq!(
            namespaces.namespace_object("odd"),
            json!({
                "metadata": {"name": "odd", "labels": {"a": "b", "kubernetes.io/metadata.name": "odd"}},
                "spec": {},
                "status": {},
            })
        );
    }
}
