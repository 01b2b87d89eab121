//! Reading a pod's JSON the way Go decodes it into `corev1.Pod`.
//!
//! A pointer field is set when its key is present and not `null`; a scalar that is missing or
//! `null` is its zero value. Values of the wrong JSON type cannot be decoded by the apiserver
//! at all; they read as unset here.
//!
//! The pod is read through [`JsonRead`], from a decoded tree or from an object view alike: the
//! checks are written once, generic over the [`Form`] the pod is held in, and compiled for
//! each.

use serde_json::Value;

use super::registry::{CheckFn, Run};
use crate::admission::{JsonRead, Node, unique_members};
use crate::kubernetes::schema::decode::StructWalk;

/// How a pod's JSON is held, for the checks (see the module docs).
pub(super) trait Form: Sized + 'static {
    /// A value of the pod's JSON.
    type Json<'a>: JsonRead<'a>;
    /// This form's compiled revision of a check.
    fn check_of(run: &Run) -> CheckFn<Self>;
}

/// A pod held as a decoded `serde_json::Value`.
pub(super) struct Tree;

/// A pod held in an [`ObjectView`](crate::admission::ObjectView).
pub(super) struct Flat;

impl Form for Tree {
    type Json<'a> = &'a Value;
    fn check_of(run: &Run) -> CheckFn<Tree> {
        run.tree
    }
}

impl Form for Flat {
    type Json<'a> = Node<'a>;
    fn check_of(run: &Run) -> CheckFn<Flat> {
        run.flat
    }
}

/// A JSON value Pod Security's checks read: a decoded tree's or an object view's.
pub trait PodJson<'a>: JsonRead<'a> {
    /// [`check_pod`](super::check_pod) of a pod held in this value's form.
    fn check_pod(
        level_version: super::LevelVersion,
        pod_metadata: Option<Self>,
        pod_spec: Option<Self>,
    ) -> Vec<super::CheckFailure>;
}

impl<'a> PodJson<'a> for &'a Value {
    fn check_pod(
        level_version: super::LevelVersion,
        pod_metadata: Option<Self>,
        pod_spec: Option<Self>,
    ) -> Vec<super::CheckFailure> {
        super::check_pod_in::<Tree>(level_version, pod_metadata, pod_spec)
    }
}

impl<'a> PodJson<'a> for Node<'a> {
    fn check_pod(
        level_version: super::LevelVersion,
        pod_metadata: Option<Self>,
        pod_spec: Option<Self>,
    ) -> Vec<super::CheckFailure> {
        super::check_pod_in::<Flat>(level_version, pod_metadata, pod_spec)
    }
}

/// A set (non-null) field of an object: Go's non-nil pointer.
pub(super) fn field<'a, J: JsonRead<'a>>(object: J, key: &str) -> Option<J> {
    object.get(key).filter(|value| !value.is_null())
}

/// A `*bool` field.
pub(super) fn bool_field<'a, J: JsonRead<'a>>(object: J, key: &str) -> Option<bool> {
    object.get(key).and_then(JsonRead::as_bool)
}

/// A `string` field: `""` when missing or null.
pub(super) fn str_field<'a, J: JsonRead<'a>>(object: J, key: &str) -> &'a str {
    object.get(key).and_then(JsonRead::as_str).unwrap_or("")
}

/// A `*string` field.
pub(super) fn str_ptr_field<'a, J: JsonRead<'a>>(object: J, key: &str) -> Option<&'a str> {
    field(object, key).map(|value| value.as_str().unwrap_or(""))
}

/// A `*int64` (or int32) field.
pub(super) fn int_field<'a, J: JsonRead<'a>>(object: J, key: &str) -> Option<i64> {
    object.get(key).and_then(JsonRead::as_i64)
}

/// The elements of a list field; nothing when missing or null.
pub(super) fn list<'a, J: JsonRead<'a>>(
    object: J,
    key: &str,
) -> impl Iterator<Item = J> + use<'a, J> {
    object.get(key).into_iter().flat_map(JsonRead::items)
}

/// The strings of a `[]string`-like field (`null` elements read as `""`).
pub(super) fn str_list<'a, J: JsonRead<'a>>(
    object: J,
    key: &str,
) -> impl Iterator<Item = &'a str> + use<'a, J> {
    list(object, key).map(|value| value.as_str().unwrap_or(""))
}

/// How much of each Go struct Pod Security reads of a Pod or workload, on the way to its pod
/// template and in it: security contexts whole, of a volume which sources are set, of probes
/// and lifecycle handlers the actions' `host`, of ports `hostPort`. The decode check of `serve`
/// walks this much ([`check_decode_fields`](crate::kubernetes::schema::decode::check_decode_fields)):
/// a type error elsewhere cannot make a check misread a field.
pub fn fields_read(go_name: &str) -> StructWalk {
    const CONTAINER: &[&str] = &[
        "name",
        "image",
        "securityContext",
        "ports",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
        "lifecycle",
    ];
    StructWalk::Fields(match go_name {
        "Pod"
        | "ReplicationController"
        | "Deployment"
        | "ReplicaSet"
        | "StatefulSet"
        | "DaemonSet"
        | "Job"
        | "CronJob" => &["apiVersion", "kind", "metadata", "spec"],
        "PodTemplate" => &["apiVersion", "kind", "metadata", "template"],
        "ReplicationControllerSpec"
        | "DeploymentSpec"
        | "ReplicaSetSpec"
        | "StatefulSetSpec"
        | "DaemonSetSpec"
        | "JobSpec" => &["template"],
        "CronJobSpec" => &["jobTemplate"],
        "JobTemplateSpec" => &["spec"],
        "PodTemplateSpec" => &["metadata", "spec"],
        "ObjectMeta" => &["annotations"],
        "PodSpec" => &[
            "securityContext",
            "hostNetwork",
            "hostPID",
            "hostIPC",
            "hostUsers",
            "os",
            "runtimeClassName",
            "volumes",
            "initContainers",
            "containers",
            "ephemeralContainers",
        ],
        "Container" | "EphemeralContainer" => CONTAINER,
        "Probe" | "LifecycleHandler" => &["httpGet", "tcpSocket"],
        "Lifecycle" => &["postStart", "preStop"],
        "HTTPGetAction" | "TCPSocketAction" => &["host"],
        "ContainerPort" => &["hostPort"],
        "Volume" => return StructWalk::Shallow,
        _ => return StructWalk::Whole,
    })
}

/// How many containers' security contexts a [`PodView`] keeps at hand (without allocating);
/// those of further containers are looked up on each read.
const KEPT_CONTEXTS: usize = 16;

/// A pod (or pod template): its metadata and its spec, with what every check reads (the
/// container lists and the security contexts) looked up once.
pub(super) struct PodView<'a, F: Form> {
    metadata: Option<F::Json<'a>>,
    spec: Option<F::Json<'a>>,
    security_context: Option<F::Json<'a>>,
    /// Init containers, containers and ephemeral containers.
    lists: [Option<F::Json<'a>>; 3],
    /// The first containers' `securityContext`s, in visiting order.
    contexts: [Option<F::Json<'a>>; KEPT_CONTEXTS],
}

impl<'a, F: Form> PodView<'a, F> {
    /// The pod of `metadata` and `spec` (each `None` when missing: Go's zero value).
    pub fn new(metadata: Option<F::Json<'a>>, spec: Option<F::Json<'a>>) -> Self {
        let lists = ["initContainers", "containers", "ephemeralContainers"]
            .map(|key| spec.and_then(|spec| spec.get(key)));
        let mut contexts = [None; KEPT_CONTEXTS];
        let containers = lists.iter().flatten().flat_map(|list| list.items());
        for (kept, json) in contexts.iter_mut().zip(containers) {
            *kept = field(json, "securityContext");
        }
        PodView {
            metadata,
            spec,
            security_context: spec.and_then(|spec| field(spec, "securityContext")),
            lists,
            contexts,
        }
    }

    /// The PodSpec, when set.
    pub fn spec(&self) -> Option<F::Json<'a>> {
        self.spec
    }

    /// `spec.securityContext`, when set.
    pub fn security_context(&self) -> Option<F::Json<'a>> {
        self.security_context
    }

    /// A field of `spec.securityContext`, when both are set.
    pub fn security_context_field(&self, key: &str) -> Option<F::Json<'a>> {
        self.security_context()
            .and_then(|context| field(context, key))
    }

    /// Every container in upstream's visiting order: init containers, containers, then
    /// ephemeral containers.
    pub fn containers(&self) -> impl Iterator<Item = ContainerView<'a, F>> + '_ {
        self.lists
            .iter()
            .flatten()
            .flat_map(|list| list.items())
            .enumerate()
            .map(|(position, json)| ContainerView {
                json,
                security_context: match self.contexts.get(position) {
                    Some(kept) => *kept,
                    None => field(json, "securityContext"),
                },
            })
    }

    /// `spec.volumes`.
    pub fn volumes(&self) -> impl Iterator<Item = F::Json<'a>> + use<'a, F> {
        self.spec.into_iter().flat_map(|spec| list(spec, "volumes"))
    }

    /// `metadata.annotations` as Go decodes them into the map: each key once, with its last
    /// value (a null value reads as `""`), in key order.
    pub fn annotations(&self) -> impl Iterator<Item = (&'a str, &'a str)> + use<'a, F> {
        self.metadata
            .and_then(|metadata| metadata.get("annotations"))
            .into_iter()
            .flat_map(unique_members)
            .map(|(key, value)| (key, value.as_str().unwrap_or("")))
    }

    /// One annotation, if present.
    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.metadata
            .and_then(|metadata| metadata.get("annotations"))
            .and_then(|annotations| annotations.get(key))
            .map(|value| value.as_str().unwrap_or(""))
    }

    /// `spec.os.name` is `windows`.
    pub fn is_windows(&self) -> bool {
        self.spec
            .and_then(|spec| field(spec, "os"))
            .is_some_and(|os| str_field(os, "name") == "windows")
    }

    /// `spec.hostUsers` is `false`: the pod runs in a user namespace, which relaxes some
    /// checks from v1.35.
    pub fn in_user_namespace(&self) -> bool {
        self.spec
            .is_some_and(|spec| bool_field(spec, "hostUsers") == Some(false))
    }
}

/// One container (init, regular or ephemeral).
pub(super) struct ContainerView<'a, F: Form> {
    json: F::Json<'a>,
    security_context: Option<F::Json<'a>>,
}

impl<F: Form> Clone for ContainerView<'_, F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F: Form> Copy for ContainerView<'_, F> {}

impl<'a, F: Form> ContainerView<'a, F> {
    /// The container's name (`""` when unset).
    pub fn name(self) -> &'a str {
        str_field(self.json, "name")
    }

    /// The container's JSON.
    pub fn json(self) -> F::Json<'a> {
        self.json
    }

    /// `securityContext`, when set.
    pub fn security_context(self) -> Option<F::Json<'a>> {
        self.security_context
    }

    /// A field of `securityContext`, when both are set.
    pub fn security_context_field(self, key: &str) -> Option<F::Json<'a>> {
        self.security_context()
            .and_then(|context| field(context, key))
    }
}

/// Test support: runs one check revision on a pod given as JSON, held as a tree and as an
/// object view; the two must agree.
#[cfg(test)]
pub(super) fn run(check: Run, metadata: &Value, spec: &Value) -> Option<(&'static str, String)> {
    let tree = (check.tree)(&PodView::<Tree>::new(Some(metadata), Some(spec)));
    let metadata_view = crate::admission::ObjectView::parse(&metadata.to_string()).unwrap();
    let spec_view = crate::admission::ObjectView::parse(&spec.to_string()).unwrap();
    let flat = (check.flat)(&PodView::<Flat>::new(
        Some(metadata_view.root()),
        Some(spec_view.root()),
    ));
    assert_eq!(tree, flat, "a tree and a view of {spec} read differently");
    tree.map(|forbidden| (forbidden.reason, forbidden.detail))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::*;
    use crate::admission::{GroupVersionKind, ObjectView};
    use crate::kubernetes::schema::{NodeKind, ObjectType, Schema, builtin};

    fn view(value: &Value) -> ObjectView {
        ObjectView::parse(&value.to_string()).unwrap()
    }

    /// Walks the structs `fields_read` reaches from `schema`'s root, recording each struct it
    /// does not read whole, and checks each field it names is one of the struct's.
    fn reached(schema: &Schema, object: &ObjectType, seen: &mut BTreeSet<String>) {
        let walk = fields_read(&object.go_name);
        if let StructWalk::Fields(names) = walk {
            for name in names {
                assert!(
                    object.field(name).is_some(),
                    "{} has no field {name}",
                    object.go_name
                );
            }
        }
        if walk != StructWalk::Whole && !seen.insert(object.go_name.clone()) {
            return;
        }
        for field in &object.fields {
            match walk {
                StructWalk::Fields(names) if !names.contains(&field.name.as_str()) => continue,
                StructWalk::Shallow | StructWalk::Whole => continue,
                StructWalk::Fields(_) => {}
            }
            let mut node = &field.node;
            loop {
                match &node.kind {
                    NodeKind::List { items, .. } => node = items,
                    NodeKind::Map { values, .. } => node = values,
                    _ => break,
                }
            }
            if let NodeKind::Object(index) = node.kind {
                reached(schema, schema.object(index), seen);
            }
        }
    }

    #[test]
    fn the_fields_read_are_fields_of_the_structs_reached() {
        let mut seen = BTreeSet::new();
        for (group, version, kind) in [
            ("", "v1", "Pod"),
            ("", "v1", "PodTemplate"),
            ("", "v1", "ReplicationController"),
            ("apps", "v1", "Deployment"),
            ("apps", "v1", "ReplicaSet"),
            ("apps", "v1", "StatefulSet"),
            ("apps", "v1", "DaemonSet"),
            ("batch", "v1", "Job"),
            ("batch", "v1", "CronJob"),
        ] {
            let gvk = GroupVersionKind {
                group: group.to_owned(),
                version: version.to_owned(),
                kind: kind.to_owned(),
            };
            let schema = builtin(&gvk).expect("a built-in kind");
            reached(&schema, schema.root(), &mut seen);
        }
        // A misspelt struct name would be read whole, and missing here.
        let expected = [
            "Container",
            "ContainerPort",
            "CronJob",
            "CronJobSpec",
            "DaemonSet",
            "DaemonSetSpec",
            "Deployment",
            "DeploymentSpec",
            "EphemeralContainer",
            "HTTPGetAction",
            "Job",
            "JobSpec",
            "JobTemplateSpec",
            "Lifecycle",
            "LifecycleHandler",
            "ObjectMeta",
            "Pod",
            "PodSpec",
            "PodTemplate",
            "PodTemplateSpec",
            "Probe",
            "ReplicaSet",
            "ReplicaSetSpec",
            "ReplicationController",
            "ReplicationControllerSpec",
            "StatefulSet",
            "StatefulSetSpec",
            "TCPSocketAction",
            "Volume",
        ];
        assert_eq!(seen, expected.map(str::to_owned).into());
    }

    #[test]
    fn reads_like_go_decodes() {
        let value = json!({"a": null, "b": {}, "c": true, "d": "x", "e": 0, "f": [null, "y"]});
        let flat = view(&value);
        fn read<'a, J: JsonRead<'a>>(value: J) {
            assert!(field(value, "a").is_none());
            assert!(field(value, "b").is_some_and(|b| b.members().next().is_none()));
            assert_eq!(bool_field(value, "c"), Some(true));
            assert_eq!(bool_field(value, "a"), None);
            assert_eq!(str_field(value, "a"), "");
            assert_eq!(str_ptr_field(value, "d"), Some("x"));
            assert_eq!(str_ptr_field(value, "a"), None);
            assert_eq!(int_field(value, "e"), Some(0));
            assert_eq!(str_list(value, "f").collect::<Vec<_>>(), ["", "y"]);
            assert_eq!(list(value, "missing").count(), 0);
        }
        read(&value);
        read(flat.root());
    }

    /// The pod of `metadata` and `spec` in both forms, read by `read`, which must answer alike.
    fn both<T: PartialEq + std::fmt::Debug>(
        metadata: &Value,
        spec: &Value,
        read_tree: impl Fn(&PodView<'_, Tree>) -> T,
        read_flat: impl Fn(&PodView<'_, Flat>) -> T,
    ) -> T {
        let tree = read_tree(&PodView::new(Some(metadata), Some(spec)));
        let (metadata, spec) = (view(metadata), view(spec));
        let flat = read_flat(&PodView::new(Some(metadata.root()), Some(spec.root())));
        assert_eq!(tree, flat);
        tree
    }

    fn names<F: Form>(pod: &PodView<'_, F>) -> Vec<String> {
        pod.containers().map(|c| c.name().to_owned()).collect()
    }

    #[test]
    fn visits_init_then_regular_then_ephemeral_containers() {
        let spec = json!({
            "ephemeralContainers": [{"name": "e"}],
            "containers": [{"name": "c1"}, null],
            "initContainers": [{"name": "i"}],
        });
        let names = both(&json!({}), &spec, names, names);
        assert_eq!(names, ["i", "c1", "", "e"]);
    }

    fn privileged<F: Form>(pod: &PodView<'_, F>) -> Vec<Option<bool>> {
        pod.containers()
            .map(|c| {
                c.security_context_field("privileged")
                    .and_then(JsonRead::as_bool)
            })
            .collect()
    }

    #[test]
    fn reads_security_contexts_past_the_kept_ones() {
        let containers: Vec<Value> = (0..KEPT_CONTEXTS + 4)
            .map(
                |i| json!({"name": format!("c{i}"), "securityContext": {"privileged": i % 3 == 0}}),
            )
            .collect();
        let spec = json!({"initContainers": [{"name": "i"}], "containers": containers});
        let read = both(&json!({}), &spec, privileged, privileged);
        let expected: Vec<_> = std::iter::once(None)
            .chain((0..KEPT_CONTEXTS + 4).map(|i| Some(i % 3 == 0)))
            .collect();
        assert_eq!(read, expected);
    }

    type Flags = (
        Option<String>,
        Option<String>,
        Option<String>,
        usize,
        bool,
        bool,
    );

    fn flags<F: Form>(pod: &PodView<'_, F>) -> Flags {
        (
            pod.annotation("a").map(str::to_owned),
            pod.annotation("b").map(str::to_owned),
            pod.annotation("c").map(str::to_owned),
            pod.annotations().count(),
            pod.is_windows(),
            pod.in_user_namespace(),
        )
    }

    #[test]
    fn reads_annotations_and_pod_flags() {
        let metadata = json!({"annotations": {"a": "1", "b": null}});
        let spec = json!({"os": {"name": "windows"}, "hostUsers": false});
        let read = both(&metadata, &spec, flags, flags);
        assert_eq!(
            read,
            (Some("1".into()), Some("".into()), None, 2, true, true)
        );
        let empty = json!({});
        let read = both(&empty, &empty, flags, flags);
        assert_eq!(read, (None, None, None, 0, false, false));
    }

    fn annotations<F: Form>(pod: &PodView<'_, F>) -> Vec<(String, String)> {
        pod.annotations()
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
            .collect()
    }

    #[test]
    fn a_view_reads_annotations_as_go_decodes_them() {
        // Written twice: Go's map, like serde_json's, keeps the value written last.
        let text = r#"{"annotations": {"z": "1", "a": "x", "z": "2", "m": null, "a": "y"}}"#;
        let flat = ObjectView::parse(text).unwrap();
        let tree: Value = serde_json::from_str(text).unwrap();
        let spec = json!({});
        let from_tree = annotations(&PodView::<Tree>::new(Some(&tree), Some(&spec)));
        let spec_view = view(&spec);
        let pod = PodView::<Flat>::new(Some(flat.root()), Some(spec_view.root()));
        assert_eq!(annotations(&pod), from_tree);
        assert_eq!(
            from_tree,
            [("a", "y"), ("m", ""), ("z", "2")].map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        assert_eq!(pod.annotation("z"), Some("2"));
    }
}
