//! An object as the apiserver sees it after it has been through its Go type: decoded into the
//! typed struct and encoded again with `encoding/json`.
//!
//! A MutatingAdmissionPolicy's JSON Patch is applied to the JSON encoding of the typed object
//! and the result is decoded back into the typed object (k8s.io/apiserver v0.37.2,
//! `policy/mutating/patch/json_patch.go`), so the next mutation sees the object after this
//! round-trip, never the raw patch result. What the round-trip does, following the Go rules
//! exactly:
//!
//! - fields the Go type does not have are dropped;
//! - `null` decodes to the zero value, like an absent field;
//! - a field with `omitempty` is dropped when its encoding is empty: `false`, `0`, `""`,
//!   `null` (nil pointer, map or slice), an empty map or an empty list. A pointer to a zero
//!   value (`automountServiceAccountToken: false`) is not empty and stays; a non-pointer
//!   struct is never empty, so `resources: {}` and `status: {}` are always written;
//! - a field with `omitzero` is dropped when it is its zero value (`creationTimestamp`);
//! - a field with neither is always written, with its zero value when it was absent
//!   (`containers: null`, `name: ""`);
//! - types with their own encoding: `Time` is `null` when zero, else written in UTC to the
//!   second (`2024-01-01T01:00:00.5+01:00` → `2024-01-01T00:00:00Z`); `IntOrString` and `Quantity`
//!   keep their value, a `Quantity` written in canonical form (`0.5` → `500m`, `1000` → `1k`,
//!   a number as a string); a `RawExtension` or `interface{}` keeps its JSON as it is.
//!
//! So `metadata.annotations: {}` and `initContainers: []` vanish, which is why a later patch
//! adding a key under them fails with "doc is missing path".
//!
//! Checked against a v1.37.2 apiserver with MutatingAdmissionPolicy JSON Patch probes (`test`
//! and `copy` operations on the object a mutation sees): `status: {}`, a container's
//! `resources: {}`, `automountServiceAccountToken: false`, a nameless container's `name: ""`
//! and an absent `containers` as `null` are there; `hostNetwork: false` and
//! `creationTimestamp` are not; `status.startTime: 2024-01-01T01:00:00.5+01:00` is
//! `2024-01-01T00:00:00Z` and a CPU limit given as the number `0.5` is `"500m"`.
//!
//! Custom resources stay unstructured in the apiserver: their objects come back unchanged.

use serde_json::{Map, Value};

use super::decode::{DecodeError, base64_error, check_decode};
use super::quantity::canonical_quantity;
use super::time::canonical_time;
use super::{Field, Node, NodeKind, Origin, Schema};
use crate::admission::GroupVersionKind;

/// The object as decoding `object` into the kind's Go type and encoding it again gives it, or
/// the decode error when a value has the wrong type for its field. Objects of custom resources
/// are returned unchanged.
pub fn round_trip(schema: &Schema, object: &Value) -> Result<Value, DecodeError> {
    if schema.origin() != Origin::BuiltIn {
        return Ok(object.clone());
    }
    check_decode(schema, object)?;
    Ok(encode(schema, &schema.root_node(), present(Some(object))))
}

/// [`round_trip`] for an object of kind `gvk`, with the built-in kind's schema; objects of
/// kinds without one (custom resources) are returned unchanged.
pub fn round_trip_object(gvk: &GroupVersionKind, object: &Value) -> Result<Value, DecodeError> {
    match super::builtin(gvk) {
        Some(schema) => round_trip(&schema, object),
        None => Ok(object.clone()),
    }
}

/// The fields of `object` that the kind's Go type does not have, as a strict decode names
/// them (`spec.replicaz`, `spec.template.spec.containers[0].imagePullPolicyX`); none for a
/// custom resource, which the apiserver keeps unstructured.
pub fn unknown_fields(schema: &Schema, object: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if schema.origin() == Origin::BuiltIn {
        collect_unknown(
            schema,
            &schema.root_node(),
            object,
            &mut String::new(),
            &mut unknown,
        );
    }
    unknown
}

fn collect_unknown(
    schema: &Schema,
    node: &Node,
    value: &Value,
    path: &mut String,
    unknown: &mut Vec<String>,
) {
    let len = path.len();
    match (&node.kind, value) {
        (NodeKind::Object(index), Value::Object(map)) => {
            let fields = &schema.object(*index).fields;
            for (key, child) in map {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                match fields.iter().find(|field| field.name == *key) {
                    Some(field) => collect_unknown(schema, &field.node, child, path, unknown),
                    None => unknown.push(path.clone()),
                }
                path.truncate(len);
            }
        }
        (NodeKind::Map { values, .. }, Value::Object(map)) => {
            for (key, child) in map {
                path.push('.');
                path.push_str(key);
                collect_unknown(schema, values, child, path, unknown);
                path.truncate(len);
            }
        }
        (NodeKind::List { items, .. }, Value::Array(list)) => {
            for (index, child) in list.iter().enumerate() {
                path.push_str(&format!("[{index}]"));
                collect_unknown(schema, items, child, path, unknown);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// A decoded value: `None` is the zero value (absent or `null`).
fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| !v.is_null())
}

/// Encodes the value decoded from `value` into a Go value of shape `node`.
fn encode(schema: &Schema, node: &Node, value: Option<&Value>) -> Value {
    match &node.kind {
        NodeKind::String => value.cloned().unwrap_or_else(|| Value::from("")),
        NodeKind::Bytes => match value {
            Some(Value::String(s)) => Value::String(reencode_base64(s)),
            Some(other) => other.clone(),
            None => Value::from(""),
        },
        NodeKind::Integer(_) | NodeKind::Number => value.cloned().unwrap_or_else(|| Value::from(0)),
        NodeKind::Boolean => value.cloned().unwrap_or(Value::Bool(false)),
        NodeKind::IntOrString => value.cloned().unwrap_or_else(|| Value::from(0)),
        NodeKind::Quantity => match value {
            Some(Value::Number(n)) => {
                let text = n.to_string();
                Value::String(canonical_quantity(&text).unwrap_or(text))
            }
            Some(Value::String(s)) => {
                Value::String(canonical_quantity(s.trim()).unwrap_or_else(|| s.clone()))
            }
            Some(other) => other.clone(),
            None => Value::from("0"),
        },
        NodeKind::Time => match value {
            Some(Value::String(s)) if node.go_type == "v1.Time" => match canonical_time(s) {
                // Go's zero time is written as null.
                Some(t) if t == "0001-01-01T00:00:00Z" && !s.contains(['.', ',']) => Value::Null,
                Some(t) => Value::String(t),
                None => Value::String(s.clone()),
            },
            Some(other) => other.clone(),
            None => Value::Null,
        },
        NodeKind::Any => value.cloned().unwrap_or(Value::Null),
        NodeKind::Object(index) => {
            let input = value.and_then(Value::as_object);
            let mut out = Map::new();
            for field in &schema.object(*index).fields {
                if let Some(encoded) =
                    encode_field(schema, field, input.and_then(|m| m.get(&field.name)))
                {
                    out.insert(field.name.clone(), encoded);
                }
            }
            Value::Object(out)
        }
        NodeKind::Map { values, .. } => match value.and_then(Value::as_object) {
            Some(map) => Value::Object(
                map.iter()
                    .map(|(key, v)| (key.clone(), encode(schema, values, present(Some(v)))))
                    .collect(),
            ),
            None => Value::Null,
        },
        NodeKind::List { items, .. } => match value.and_then(Value::as_array) {
            Some(list) => Value::Array(
                list.iter()
                    .map(|v| encode(schema, items, present(Some(v))))
                    .collect(),
            ),
            None => Value::Null,
        },
    }
}

/// A `[]byte` as decoding then encoding leaves it: newlines dropped, the unused bits of the
/// last symbol cleared, padding written (`YWJj\nZGVm` → `YWJjZGVm`, `YR==` → `YQ==`).
fn reencode_base64(s: &str) -> String {
    use base64::Engine as _;
    if base64_error(s.as_bytes()).is_some() {
        return s.to_owned();
    }
    let sextets: Vec<u8> = s
        .bytes()
        .filter_map(|c| match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        })
        .collect();
    let mut bytes = Vec::with_capacity(sextets.len() * 3 / 4);
    for chunk in sextets.chunks(4) {
        let value = chunk
            .iter()
            .chain(std::iter::repeat(&0))
            .take(4)
            .fold(0u32, |acc, &sextet| acc << 6 | u32::from(sextet));
        let [_, a, b, c] = value.to_be_bytes();
        bytes.extend_from_slice(&[a, b, c][..chunk.len() - 1]);
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The encoding of one struct field, or `None` when `omitempty`/`omitzero` leave it out.
fn encode_field(schema: &Schema, field: &Field, value: Option<&Value>) -> Option<Value> {
    let value = present(value);
    if field.pointer {
        // A nil pointer is empty and zero; a non-nil one is neither, whatever it points to.
        return match value {
            None if field.omit_empty || field.omit_zero => None,
            None => Some(Value::Null),
            Some(_) => Some(encode(schema, &field.node, value)),
        };
    }
    if field.omit_zero && is_zero(schema, &field.node, value) {
        return None;
    }
    let encoded = encode(schema, &field.node, value);
    if field.omit_empty && is_empty(&field.node, &encoded) {
        return None;
    }
    Some(encoded)
}

/// `encoding/json`'s `isEmptyValue` on the Go value behind `encoded`: structs never are.
fn is_empty(node: &Node, encoded: &Value) -> bool {
    match &node.kind {
        NodeKind::Object(_) | NodeKind::IntOrString | NodeKind::Quantity | NodeKind::Time => false,
        NodeKind::Map { .. } => encoded.as_object().is_none_or(Map::is_empty),
        NodeKind::List { .. } | NodeKind::Bytes => match encoded {
            Value::Array(list) => list.is_empty(),
            Value::String(s) => s.is_empty(),
            _ => true,
        },
        NodeKind::String => encoded.as_str() == Some(""),
        NodeKind::Boolean => encoded == &Value::Bool(false),
        NodeKind::Integer(_) | NodeKind::Number => encoded.as_f64() == Some(0.0),
        NodeKind::Any => encoded.is_null(),
    }
}

/// Whether the decoded value is its type's zero value (or `IsZero()` says so, for `Time`).
fn is_zero(schema: &Schema, node: &Node, value: Option<&Value>) -> bool {
    let Some(value) = value else {
        return true;
    };
    match &node.kind {
        NodeKind::String | NodeKind::Bytes => value.as_str() == Some(""),
        NodeKind::Integer(_) | NodeKind::Number => value.as_f64() == Some(0.0),
        NodeKind::Boolean => value == &Value::Bool(false),
        NodeKind::IntOrString => value.as_f64() == Some(0.0),
        NodeKind::Time => {
            node.go_type == "v1.Time"
                && value.as_str().is_some_and(|s| {
                    !s.contains(['.', ','])
                        && canonical_time(s).as_deref() == Some("0001-01-01T00:00:00Z")
                })
        }
        NodeKind::Any | NodeKind::Quantity => false,
        NodeKind::Map { .. } | NodeKind::List { .. } => false,
        NodeKind::Object(index) => schema.object(*index).fields.iter().all(|field| {
            let child = present(value.get(&field.name));
            if field.pointer {
                child.is_none()
            } else {
                is_zero(schema, &field.node, child)
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kubernetes::schema::builtin;

    fn schema(group: &str, kind: &str) -> Schema {
        builtin(&GroupVersionKind {
            group: group.to_owned(),
            version: "v1".to_owned(),
            kind: kind.to_owned(),
        })
        .expect("a built-in kind")
    }

    #[test]
    fn empty_annotations_and_init_containers_are_dropped() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "annotations": {}, "labels": {"a": "b"}},
            "spec": {"initContainers": [], "containers": [{"name": "app", "image": "nginx"}]}
        });
        let out = round_trip(&schema("", "Pod"), &pod).unwrap();
        assert_eq!(
            out,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "labels": {"a": "b"}},
                "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {}}]},
                "status": {}
            })
        );
    }

    #[test]
    fn unknown_fields_are_dropped_and_pointers_to_zero_values_kept() {
        let pod = json!({
            "kind": "Pod",
            "metadata": {"creationTimestamp": null, "bogus": 1},
            "spec": {
                "containers": [],
                "hostNetwork": false,
                "automountServiceAccountToken": false,
                "priority": 0,
                "nodeName": "",
                "extra": {"x": 1}
            }
        });
        let out = round_trip(&schema("", "Pod"), &pod).unwrap();
        assert_eq!(
            out,
            json!({
                "kind": "Pod",
                "metadata": {},
                "spec": {"containers": [], "automountServiceAccountToken": false, "priority": 0},
                "status": {}
            })
        );
    }

    #[test]
    fn fields_without_omitempty_get_their_zero_values() {
        let pod = json!({"spec": {"containers": [{"image": "x"}]}});
        let out = round_trip(&schema("", "Pod"), &pod).unwrap();
        assert_eq!(out["spec"]["containers"][0]["name"], json!(""));
        let pod = json!({"spec": {}});
        let out = round_trip(&schema("", "Pod"), &pod).unwrap();
        assert_eq!(out["spec"], json!({"containers": null}));
    }

    #[test]
    fn deployment_template_keeps_its_structs() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {
                "selector": {"matchLabels": {"app": "a"}},
                "template": {"metadata": {"labels": {"app": "a"}},
                             "spec": {"containers": [{"name": "a", "image": "a"}]}}
            }
        });
        let out = round_trip(&schema("apps", "Deployment"), &deployment).unwrap();
        assert_eq!(out["spec"]["strategy"], json!({}));
        assert_eq!(out["status"], json!({}));
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"][0]["resources"],
            json!({})
        );
        // A second round-trip changes nothing.
        assert_eq!(
            round_trip(&schema("apps", "Deployment"), &out).unwrap(),
            out
        );
    }

    #[test]
    fn kinds_without_a_schema_come_back_unchanged() {
        let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                            "metadata": {"annotations": {}}, "spec": {"parts": []}});
        let gvk = GroupVersionKind {
            group: "example.com".to_owned(),
            version: "v1".to_owned(),
            kind: "Widget".to_owned(),
        };
        assert_eq!(round_trip_object(&gvk, &widget).unwrap(), widget);
    }

    #[test]
    fn type_errors_are_decode_errors() {
        let pod = json!({"spec": {"hostNetwork": "true"}});
        let error = round_trip(&schema("", "Pod"), &pod).unwrap_err();
        assert!(
            error
                .message
                .contains("PodSpec.spec.hostNetwork of type bool")
        );
    }

    #[test]
    fn times_are_written_in_utc() {
        let pod = json!({"metadata": {"deletionTimestamp": "2024-01-01T01:00:00.5+01:00"}});
        let out = round_trip(&schema("", "Pod"), &pod).unwrap();
        assert_eq!(
            out["metadata"]["deletionTimestamp"],
            json!("2024-01-01T00:00:00Z")
        );
        // The zero time is null, and creationTimestamp (omitzero) is then left out.
        let pod = json!({"metadata": {"creationTimestamp": "0001-01-01T00:00:00Z",
                                      "deletionTimestamp": "0001-01-01T00:00:00Z"}});
        let out = round_trip(&schema("", "Pod"), &pod).unwrap();
        assert_eq!(out["metadata"], json!({"deletionTimestamp": null}));
    }

    #[test]
    fn bytes_are_reencoded() {
        let secret =
            json!({"kind": "Secret", "data": {"a": "YWJj\nZGVm", "b": "YR==", "c": "YQ=="}});
        let out = round_trip(&schema("", "Secret"), &secret).unwrap();
        assert_eq!(
            out["data"],
            json!({"a": "YWJjZGVm", "b": "YQ==", "c": "YQ=="})
        );
    }

    #[test]
    fn raw_extensions_and_quantities() {
        let revision = json!({"kind": "ControllerRevision", "revision": 1,
                              "data": {"anything": {"goes": [1]}}});
        let out = round_trip(&schema("apps", "ControllerRevision"), &revision).unwrap();
        assert_eq!(out["data"], revision["data"]);
        let pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": 2, "memory": "1Gi"}}}
        ]}});
        let out = round_trip(&schema("", "Pod"), &pod).unwrap();
        assert_eq!(
            out["spec"]["containers"][0]["resources"]["limits"],
            json!({"cpu": "2", "memory": "1Gi"})
        );
        let pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "0.5", "memory": 1000}}}
        ]}});
        let out = round_trip(&schema("", "Pod"), &pod).unwrap();
        assert_eq!(
            out["spec"]["containers"][0]["resources"]["limits"],
            json!({"cpu": "500m", "memory": "1k"})
        );
    }
}
