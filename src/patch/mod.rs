//! JSON Patch (RFC 6902) and JSON Pointer (RFC 6901): building minimal patches for defaulting
//! rules ([`ObjectEditor`]), applying and diffing patches for MutatingAdmissionPolicy
//! ([`json_patch`]), and the one pointer syntax both use ([`pointer`]).
//!
//! An [`ObjectEditor`] keeps the original object untouched, copies it on the first change, and
//! records one `add`/`replace` operation per change. A value set under a parent that does not
//! exist adds the parent with the value inside it (the apiserver refuses an `add` whose parent
//! is missing). Keys are escaped as RFC 6901 requires (`~` → `~0`, `/` → `~1`).

pub mod json_patch;
pub mod pointer;

use std::borrow::Cow;

use serde::Serialize;
use serde_json::{Map, Value};

use pointer::pointer;
pub use pointer::push_pointer_token;

/// One step of a path into a JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathSegment<'a> {
    /// A key of an object.
    Key(&'a str),
    /// An index into an array.
    Index(usize),
}

/// One JSON Patch operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PatchOperation {
    /// `add` or `replace`.
    pub op: &'static str,
    /// A JSON Pointer, escaped.
    pub path: String,
    /// The value written.
    pub value: Value,
}

/// Edits a copy of an object and records the JSON Patch that produces the copy.
#[derive(Debug)]
pub struct ObjectEditor<'a> {
    object: Cow<'a, Value>,
    operations: Vec<PatchOperation>,
}

impl<'a> ObjectEditor<'a> {
    /// Starts editing `object`; nothing is copied until the first change.
    pub fn new(object: &'a Value) -> Self {
        ObjectEditor {
            object: Cow::Borrowed(object),
            operations: Vec::new(),
        }
    }

    /// The object as edited so far.
    pub fn current(&self) -> &Value {
        &self.object
    }

    /// Sets the value at `path` unless a value (even `null`) is already there. Missing parent
    /// objects are created; a path through an array index that does not exist, or through a
    /// value that is not an object or array, is left alone. Returns whether anything changed.
    pub fn set_if_missing(&mut self, path: &[PathSegment<'_>], value: Value) -> bool {
        let Some((last, parents)) = path.split_last() else {
            return false;
        };
        // Find how far the path exists, without copying.
        let mut node = self.object.as_ref();
        let mut existing = 0;
        for segment in parents {
            match (segment, node) {
                (PathSegment::Key(k), Value::Object(map)) if map.contains_key(*k) => {
                    node = &map[*k];
                }
                (PathSegment::Index(i), Value::Array(items)) if *i < items.len() => {
                    node = &items[*i];
                }
                (PathSegment::Key(_), Value::Object(_)) => break,
                _ => return false,
            }
            existing += 1;
        }
        if existing == parents.len() {
            match (last, node) {
                (PathSegment::Key(k), Value::Object(map)) if !map.contains_key(*k) => {}
                _ => return false,
            }
        }
        // Nest the value inside the parents that are missing.
        let mut added = value;
        for segment in path[existing + 1..].iter().rev() {
            let PathSegment::Key(key) = segment else {
                return false;
            };
            let mut map = Map::new();
            map.insert((*key).to_owned(), added);
            added = Value::Object(map);
        }
        let target = &path[..=existing];
        let Some(parent) = locate_mut(self.object.to_mut(), &target[..existing]) else {
            return false;
        };
        let (Value::Object(map), PathSegment::Key(key)) = (parent, target[existing]) else {
            return false;
        };
        map.insert(key.to_owned(), added.clone());
        self.operations.push(PatchOperation {
            op: "add",
            path: pointer(target),
            value: added,
        });
        true
    }

    /// Whether any change was made.
    pub fn is_changed(&self) -> bool {
        !self.operations.is_empty()
    }

    /// The recorded operations, in order.
    pub fn operations(&self) -> &[PatchOperation] {
        &self.operations
    }

    /// Ends editing: the operations and the edited object.
    pub fn finish(self) -> (Vec<PatchOperation>, Value) {
        (self.operations, self.object.into_owned())
    }
}

fn locate_mut<'v>(mut node: &'v mut Value, path: &[PathSegment<'_>]) -> Option<&'v mut Value> {
    for segment in path {
        node = match (segment, node) {
            (PathSegment::Key(k), Value::Object(map)) => map.get_mut(*k)?,
            (PathSegment::Index(i), Value::Array(items)) => items.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(node)
}

#[cfg(test)]
mod tests {
    use super::PathSegment::{Index, Key};
    use super::*;
    use serde_json::json;

    fn apply(original: &Value, ops: &[PatchOperation]) -> Value {
        let patch: ::json_patch::Patch =
            serde_json::from_value(serde_json::to_value(ops).unwrap()).unwrap();
        let mut doc = original.clone();
        ::json_patch::patch(&mut doc, &patch).unwrap();
        doc
    }

    #[test]
    fn creates_missing_parents_and_escapes_keys() {
        let original = json!({"metadata": {"name": "x"}});
        let mut editor = ObjectEditor::new(&original);
        assert!(editor.set_if_missing(
            &[Key("metadata"), Key("labels"), Key("example.com/team")],
            json!("a")
        ));
        assert!(editor.set_if_missing(
            &[Key("metadata"), Key("labels"), Key("tilde~key")],
            json!("b")
        ));
        let (ops, edited) = editor.finish();
        assert_eq!(ops[0].path, "/metadata/labels");
        assert_eq!(ops[0].value, json!({"example.com/team": "a"}));
        assert_eq!(ops[1].path, "/metadata/labels/tilde~0key");
        assert_eq!(apply(&original, &ops), edited);
        assert_eq!(edited["metadata"]["labels"]["tilde~key"], "b");
    }

    #[test]
    fn only_if_missing_and_idempotent() {
        let original = json!({"spec": {"containers": [{"name": "a", "imagePullPolicy": "Always"}, {"name": "b"}]}});
        let mut editor = ObjectEditor::new(&original);
        for i in 0..3 {
            editor.set_if_missing(
                &[
                    Key("spec"),
                    Key("containers"),
                    Index(i),
                    Key("imagePullPolicy"),
                ],
                json!("IfNotPresent"),
            );
        }
        let (ops, edited) = editor.finish();
        assert_eq!(ops.len(), 1, "{ops:?}");
        assert_eq!(ops[0].path, "/spec/containers/1/imagePullPolicy");
        assert_eq!(edited["spec"]["containers"][0]["imagePullPolicy"], "Always");

        let mut again = ObjectEditor::new(&edited);
        again.set_if_missing(
            &[
                Key("spec"),
                Key("containers"),
                Index(1),
                Key("imagePullPolicy"),
            ],
            json!("IfNotPresent"),
        );
        assert!(!again.is_changed());
    }

    #[test]
    fn never_writes_through_scalars() {
        let original = json!({"metadata": "oops", "list": [1]});
        let mut editor = ObjectEditor::new(&original);
        assert!(!editor.set_if_missing(&[Key("metadata"), Key("labels")], json!({})));
        assert!(!editor.set_if_missing(&[Key("list"), Index(5), Key("x")], json!(1)));
        assert!(!editor.set_if_missing(&[Key("new"), Index(0), Key("x")], json!(1)));
        assert!(!editor.is_changed());
    }
}
