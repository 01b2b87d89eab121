//! A request's `object` or `oldObject`, held as the reader needs it.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::object_view::{JsonKind, JsonRead, JsonRef, ObjectView};

/// How a review's objects are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ObjectForm {
    /// Into a `serde_json::Value`.
    #[default]
    Tree,
    /// Into an [`ObjectView`], for a policy set whose every reader reads one; the tree is
    /// built only if something asks for it.
    View,
}

/// A request's `object` or `oldObject`: a decoded tree, or an [`ObjectView`] whose tree is
/// built the first time a reader asks for it.
///
/// Dereferencing gives the tree, so a reader that needs one always gets the object as sent,
/// never nothing; [`RequestObject::json`] gives the view where there is one, for the readers
/// written over [`JsonRead`](super::JsonRead).
#[derive(Clone)]
pub struct RequestObject {
    view: Option<ObjectView>,
    tree: OnceLock<Value>,
}

impl RequestObject {
    /// An object held in a view.
    pub fn from_view(view: ObjectView) -> Self {
        RequestObject {
            view: Some(view),
            tree: OnceLock::new(),
        }
    }

    /// The object as its view where it has one, else as its tree.
    pub fn json(&self) -> JsonRef<'_> {
        match &self.view {
            Some(view) => JsonRef::View(view.root()),
            None => JsonRef::Tree(self),
        }
    }

    /// What kind of JSON value the object is (read from the view where there is one).
    pub fn kind(&self) -> JsonKind {
        match self.json() {
            JsonRef::Tree(tree) => tree.kind(),
            JsonRef::View(node) => node.kind(),
        }
    }

    /// The view, if the object is held in one.
    pub fn view(&self) -> Option<&ObjectView> {
        self.view.as_ref()
    }

    /// The object as a tree, built now if it was not yet.
    pub fn tree(&self) -> &Value {
        self.tree.get_or_init(|| match &self.view {
            Some(view) => view.root().to_value(),
            None => Value::Null,
        })
    }

    /// The tree, if it is built: from the start for an object decoded into one, for a view
    /// once a reader asked for it.
    pub fn tree_if_built(&self) -> Option<&Value> {
        self.tree.get()
    }

    /// The object held in a view: itself where it is, else its tree's JSON text read into a
    /// view (what `serve` would have decoded), or the tree again should that fail.
    pub fn in_view(&self) -> RequestObject {
        if self.view.is_some() {
            return self.clone();
        }
        let text = self.tree().to_string();
        match ObjectView::parse(&text) {
            Ok(view) => RequestObject::from_view(view),
            Err(_) => self.clone(),
        }
    }

    /// The tree, owned.
    pub fn into_value(mut self) -> Value {
        self.tree();
        self.tree.take().unwrap_or(Value::Null)
    }
}

impl From<Value> for RequestObject {
    fn from(tree: Value) -> Self {
        RequestObject {
            view: None,
            tree: OnceLock::from(tree),
        }
    }
}

impl Deref for RequestObject {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.tree()
    }
}

impl DerefMut for RequestObject {
    /// The tree, to edit: the view, which would no longer be the object, is dropped.
    fn deref_mut(&mut self) -> &mut Value {
        self.tree();
        self.view = None;
        self.tree.get_mut().expect("built above")
    }
}

impl PartialEq for RequestObject {
    fn eq(&self, other: &Self) -> bool {
        self.tree() == other.tree()
    }
}

impl PartialEq<Value> for RequestObject {
    fn eq(&self, other: &Value) -> bool {
        self.tree() == other
    }
}

impl fmt::Debug for RequestObject {
    /// The tree where it is built (as a `Value` prints); a view's sizes only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.tree.get(), &self.view) {
            (Some(tree), _) => tree.fmt(f),
            (None, Some(view)) => view.fmt(f),
            (None, None) => f.write_str("null"),
        }
    }
}

impl Serialize for RequestObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.tree().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RequestObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(RequestObject::from)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::JsonRead;

    #[test]
    fn a_view_gives_its_tree_when_asked() {
        let text = r#"{"metadata": {"name": "a", "labels": {"x": "1"}}, "n": 1.5}"#;
        let object = RequestObject::from_view(ObjectView::parse(text).unwrap());
        assert!(object.tree.get().is_none());
        assert!(matches!(object.json(), JsonRef::View(node) if node.get("n").is_some()));
        assert!(format!("{object:?}").starts_with("ObjectView { entries: 6,"));
        let expected: Value = serde_json::from_str(text).unwrap();
        assert_eq!(*object, expected);
        assert_eq!(object["metadata"]["name"], "a");
        assert!(object.view().is_some());
        assert_eq!(object.clone().into_value(), expected);
    }

    #[test]
    fn editing_drops_the_view() {
        let mut object = RequestObject::from_view(ObjectView::parse(r#"{"a": 1}"#).unwrap());
        object["a"] = json!(2);
        assert!(object.view().is_none());
        assert!(matches!(object.json(), JsonRef::Tree(tree) if tree == &json!({"a": 2})));
    }

    #[test]
    fn a_tree_is_held_in_a_view_on_request() {
        let tree = json!({"metadata": {"name": "a"}, "data": {"k": "v"}, "n": -1});
        let object = RequestObject::from(tree.clone()).in_view();
        assert!(object.view().is_some() && object.tree_if_built().is_none());
        assert_eq!(object, tree);
        let again = object.in_view();
        assert!(again.view().is_some());
    }

    #[test]
    fn a_tree_is_read_as_a_tree() {
        let object = RequestObject::from(json!({"a": [1, 2]}));
        assert!(matches!(object.json(), JsonRef::Tree(_)));
        assert_eq!(serde_json::to_value(&object).unwrap(), json!({"a": [1, 2]}));
        let back: RequestObject = serde_json::from_value(json!({"b": null})).unwrap();
        assert_eq!(back, json!({"b": null}));
    }
}
