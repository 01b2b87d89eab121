//! Reading a pod's JSON the way Go decodes it into `corev1.Pod`.
//!
//! A pointer field is set when its key is present and not `null`; a scalar that is missing or
//! `null` is its zero value. Values of the wrong JSON type cannot be decoded by the apiserver
//! at all; they read as unset here.

use serde_json::Value;

/// A set (non-null) field of an object: Go's non-nil pointer.
pub(super) fn field<'a>(object: &'a Value, key: &str) -> Option<&'a Value> {
    object.get(key).filter(|value| !value.is_null())
}

/// A `*bool` field.
pub(super) fn bool_field(object: &Value, key: &str) -> Option<bool> {
    object.get(key).and_then(Value::as_bool)
}

/// A `string` field: `""` when missing or null.
pub(super) fn str_field<'a>(object: &'a Value, key: &str) -> &'a str {
    object.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A `*string` field.
pub(super) fn str_ptr_field<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    field(object, key).map(|value| value.as_str().unwrap_or(""))
}

/// A `*int64` (or int32) field.
pub(super) fn int_field(object: &Value, key: &str) -> Option<i64> {
    object.get(key).and_then(Value::as_i64)
}

/// The elements of a list field; nothing when missing or null.
pub(super) fn list<'a>(object: &'a Value, key: &str) -> &'a [Value] {
    object
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The strings of a `[]string`-like field (`null` elements read as `""`).
pub(super) fn str_list<'a>(object: &'a Value, key: &str) -> impl Iterator<Item = &'a str> {
    list(object, key)
        .iter()
        .map(|value| value.as_str().unwrap_or(""))
}

/// How many containers' security contexts a [`PodView`] keeps at hand (without allocating);
/// those of further containers are looked up on each read.
const KEPT_CONTEXTS: usize = 16;

/// A pod (or pod template): its metadata and its spec, with what every check reads (the
/// container lists and the security contexts) looked up once.
pub(super) struct PodView<'a> {
    metadata: &'a Value,
    spec: &'a Value,
    security_context: Option<&'a Value>,
    /// Init containers, containers and ephemeral containers.
    lists: [&'a [Value]; 3],
    /// The first containers' `securityContext`s, in visiting order.
    contexts: [Option<&'a Value>; KEPT_CONTEXTS],
}

impl<'a> PodView<'a> {
    pub fn new(metadata: &'a Value, spec: &'a Value) -> Self {
        let lists = [
            list(spec, "initContainers"),
            list(spec, "containers"),
            list(spec, "ephemeralContainers"),
        ];
        let mut contexts = [None; KEPT_CONTEXTS];
        for (kept, json) in contexts.iter_mut().zip(lists.iter().copied().flatten()) {
            *kept = field(json, "securityContext");
        }
        PodView {
            metadata,
            spec,
            security_context: field(spec, "securityContext"),
            lists,
            contexts,
        }
    }

    /// The PodSpec.
    pub fn spec(&self) -> &'a Value {
        self.spec
    }

    /// `spec.securityContext`, when set.
    pub fn security_context(&self) -> Option<&'a Value> {
        self.security_context
    }

    /// A field of `spec.securityContext`, when both are set.
    pub fn security_context_field(&self, key: &str) -> Option<&'a Value> {
        self.security_context()
            .and_then(|context| field(context, key))
    }

    /// Every container in upstream's visiting order: init containers, containers, then
    /// ephemeral containers.
    pub fn containers(&self) -> impl Iterator<Item = ContainerView<'a>> + '_ {
        self.lists
            .iter()
            .copied()
            .flatten()
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
    pub fn volumes(&self) -> &'a [Value] {
        list(self.spec, "volumes")
    }

    /// `metadata.annotations` (a null value reads as `""`, as Go decodes it into the map).
    pub fn annotations(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.metadata
            .get("annotations")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(key, value)| (key.as_str(), value.as_str().unwrap_or("")))
    }

    /// One annotation, if present.
    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.metadata
            .get("annotations")
            .and_then(|annotations| annotations.get(key))
            .map(|value| value.as_str().unwrap_or(""))
    }

    /// `spec.os.name` is `windows`.
    pub fn is_windows(&self) -> bool {
        field(self.spec, "os").is_some_and(|os| str_field(os, "name") == "windows")
    }

    /// `spec.hostUsers` is `false`: the pod runs in a user namespace, which relaxes some
    /// checks from v1.35.
    pub fn in_user_namespace(&self) -> bool {
        bool_field(self.spec, "hostUsers") == Some(false)
    }
}

/// One container (init, regular or ephemeral).
#[derive(Clone, Copy)]
pub(super) struct ContainerView<'a> {
    json: &'a Value,
    security_context: Option<&'a Value>,
}

impl<'a> ContainerView<'a> {
    /// The container's name (`""` when unset).
    pub fn name(self) -> &'a str {
        str_field(self.json, "name")
    }

    /// The container's JSON.
    pub fn json(self) -> &'a Value {
        self.json
    }

    /// `securityContext`, when set.
    pub fn security_context(self) -> Option<&'a Value> {
        self.security_context
    }

    /// A field of `securityContext`, when both are set.
    pub fn security_context_field(self, key: &str) -> Option<&'a Value> {
        self.security_context()
            .and_then(|context| field(context, key))
    }
}

/// Test support: runs one check revision on a pod given as JSON.
#[cfg(test)]
pub(super) fn run(
    check: super::registry::CheckFn,
    metadata: &Value,
    spec: &Value,
) -> Option<(&'static str, String)> {
    check(&PodView::new(metadata, spec)).map(|forbidden| (forbidden.reason, forbidden.detail))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_like_go_decodes() {
        let value = json!({"a": null, "b": {}, "c": true, "d": "x", "e": 0, "f": [null, "y"]});
        assert_eq!(field(&value, "a"), None);
        assert_eq!(field(&value, "b"), Some(&json!({})));
        assert_eq!(bool_field(&value, "c"), Some(true));
        assert_eq!(bool_field(&value, "a"), None);
        assert_eq!(str_field(&value, "a"), "");
        assert_eq!(str_ptr_field(&value, "d"), Some("x"));
        assert_eq!(str_ptr_field(&value, "a"), None);
        assert_eq!(int_field(&value, "e"), Some(0));
        assert_eq!(str_list(&value, "f").collect::<Vec<_>>(), ["", "y"]);
        assert!(list(&value, "missing").is_empty());
    }

    #[test]
    fn visits_init_then_regular_then_ephemeral_containers() {
        let spec = json!({
            "ephemeralContainers": [{"name": "e"}],
            "containers": [{"name": "c1"}, null],
            "initContainers": [{"name": "i"}],
        });
        let metadata = json!({});
        let pod = PodView::new(&metadata, &spec);
        let names: Vec<_> = pod.containers().map(ContainerView::name).collect();
        assert_eq!(names, ["i", "c1", "", "e"]);
    }

    #[test]
    fn reads_security_contexts_past_the_kept_ones() {
        let containers: Vec<Value> = (0..KEPT_CONTEXTS + 4)
            .map(
                |i| json!({"name": format!("c{i}"), "securityContext": {"privileged": i % 3 == 0}}),
            )
            .collect();
        let spec = json!({"initContainers": [{"name": "i"}], "containers": containers});
        let metadata = json!({});
        let pod = PodView::new(&metadata, &spec);
        let read: Vec<_> = pod
            .containers()
            .map(|c| {
                c.security_context_field("privileged")
                    .and_then(Value::as_bool)
            })
            .collect();
        let expected: Vec<_> = std::iter::once(None)
            .chain((0..KEPT_CONTEXTS + 4).map(|i| Some(i % 3 == 0)))
            .collect();
        assert_eq!(read, expected);
    }

    #[test]
    fn reads_annotations_and_pod_flags() {
        let metadata = json!({"annotations": {"a": "1", "b": null}});
        let spec = json!({"os": {"name": "windows"}, "hostUsers": false});
        let pod = PodView::new(&metadata, &spec);
        assert_eq!(pod.annotation("a"), Some("1"));
        assert_eq!(pod.annotation("b"), Some(""));
        assert_eq!(pod.annotation("c"), None);
        assert_eq!(pod.annotations().count(), 2);
        assert!(pod.is_windows());
        assert!(pod.in_user_namespace());
        let empty = json!({});
        let pod = PodView::new(&empty, &empty);
        assert!(!pod.is_windows());
        assert!(!pod.in_user_namespace());
    }
}
