//! Reading and setting fields of an untyped object the way Go's zero values read them: an
//! absent field, `null`, `""` and `0` are all "unset" where the typed field would be a plain
//! string or number; only absent and `null` are unset where it would be a pointer.

use serde_json::{Map, Value};

/// A JSON object.
pub(super) type Object = Map<String, Value>;

/// The object at `key`, if it is one.
pub(super) fn child<'a>(map: &'a mut Object, key: &str) -> Option<&'a mut Object> {
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// The object at `key`, created empty when absent or `null` (a Go struct value, or a pointer
/// the defaulting allocates); `None` when the field has another type.
pub(super) fn child_or_empty<'a>(map: &'a mut Object, key: &str) -> Option<&'a mut Object> {
    let slot = map
        .entry(key)
        .or_insert_with(|| Value::Object(Object::new()));
    if slot.is_null() {
        *slot = Value::Object(Object::new());
    }
    slot.as_object_mut()
}

/// The objects in the list at `key` (items of another type are skipped).
pub(super) fn items<'a>(map: &'a mut Object, key: &str) -> impl Iterator<Item = &'a mut Object> {
    map.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// Whether `key` is unset as a pointer field: absent or `null`.
pub(super) fn is_unset(map: &Object, key: &str) -> bool {
    map.get(key).is_none_or(Value::is_null)
}

/// The string at `key`; `""` when unset; `None` when the field has another type.
pub(super) fn text<'a>(map: &'a Object, key: &str) -> Option<&'a str> {
    match map.get(key) {
        None | Some(Value::Null) => Some(""),
        Some(Value::String(text)) => Some(text),
        Some(_) => None,
    }
}

/// Whether the list or map at `key` is absent, `null` or empty (Go's `len(x) == 0`).
pub(super) fn is_empty(map: &Object, key: &str) -> bool {
    match map.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::Array(items)) => items.is_empty(),
        Some(Value::Object(entries)) => entries.is_empty(),
        Some(_) => false,
    }
}

/// Sets a pointer field that is unset (absent or `null`).
pub(super) fn default_value(map: &mut Object, key: &str, value: impl FnOnce() -> Value) {
    if is_unset(map, key) {
        map.insert(key.to_owned(), value());
    }
}

/// Sets a string field that is unset (absent, `null` or `""`).
pub(super) fn default_text(map: &mut Object, key: &str, value: &str) {
    if text(map, key) == Some("") {
        map.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}

/// Sets a number field that is unset (absent, `null` or `0`).
pub(super) fn default_number(map: &mut Object, key: &str, value: i64) {
    let unset = match map.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::Number(number)) => number.as_f64() == Some(0.0),
        Some(_) => false,
    };
    if unset {
        map.insert(key.to_owned(), Value::from(value));
    }
}

/// Sets a pointer field to a number when it is unset.
pub(super) fn default_pointer_number(map: &mut Object, key: &str, value: i64) {
    default_value(map, key, || Value::from(value));
}

/// The labels of the object's `spec.template`, when they are a mapping: what a Job or a
/// ReplicationController copies to its own labels (and selector) when it has none.
pub(super) fn template_labels(object: &Object) -> Option<Value> {
    object
        .get("spec")
        .and_then(|spec| spec.get("template"))
        .and_then(|template| template.get("metadata"))
        .and_then(|metadata| metadata.get("labels"))
        .filter(|labels| labels.is_object())
        .cloned()
}
