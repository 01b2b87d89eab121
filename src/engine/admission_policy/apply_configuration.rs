//! `patchType: ApplyConfiguration` of a MutatingAdmissionPolicy: merging the partial object a
//! CEL expression built into the admitted object, as the apiserver does
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch/smd.go`, v0.37.2):
//!
//! 1. the apply configuration is converted to a typed value, which validates it against the
//!    schema (an associative-list item without its keys, duplicate keys, a list where a map
//!    belongs …) → `failed to convert patch object to typed object: …`;
//! 2. it may not contain atomic lists, maps or structs, whose unmentioned parts would be lost →
//!    `invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: …`;
//! 3. it is merged into the object with structured-merge-diff's `Merge` (v6.4.2, `typed/merge.go`)
//!    → `failed to merge patch: …` (the live object may hold duplicate keys; they are kept).
//!
//! The shapes come from [`list_keys`](super::list_keys). Where that table knows nothing
//! ([`Shape::Unknown`]) maps merge key by key and lists are atomic, as they are for every list
//! it leaves out of the kinds it knows. Unlike the apiserver, fields it does not know are not
//! refused (it does not hold the whole schema) and scalars are not type-checked.
//!
//! `null` in an apply configuration does what SMD does with it: a scalar, an atomic field, or an
//! empty map or list becomes `null`, which decoding into the typed object then drops, so the
//! field is removed here; on a non-empty granular map or associative list it changes nothing.
//! `apiVersion` and `kind` of the apply configuration are ignored: the apiserver sets them to
//! the object's before merging.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

/// The table of how each field merges, for callers that need it.
pub use super::list_keys::{ListKey, ListKind, Shape, object_shape, shape_at};
use crate::admission::GroupVersionKind;

/// Merges `partial` (an apply configuration) into `object` of kind `gvk`, SMD style:
/// maps (structs and map-typed fields) merged recursively; atomic lists replaced; associative
/// lists (x-kubernetes-list-type: map) merged item by item using the list's keys; set lists
/// (list-type: set) unioned; scalars replaced. Returns the merged object.
///
/// As in the apiserver, an apply configuration that sets an atomic list, map or struct to a
/// value (rather than `null`) is refused, since the merge would drop what it does not repeat.
/// The error text is the apiserver's (`failed to convert patch object …`, `invalid
/// ApplyConfiguration: …`, `failed to merge patch: …`), without its `error applying patch: `
/// prefix; a type error names the JSON type found rather than printing a Go value. One
/// deliberate difference: an associative-list item of the apply configuration that lacks a key
/// field without a real default (a container without `name`) is an error here, where SMD keys
/// it by the zero value and leaves the apiserver's validation to refuse the object.
pub fn merge_apply_configuration(
    object: &Value,
    partial: &Value,
    gvk: &GroupVersionKind,
) -> Result<Value, String> {
    merge_checked(object, partial, gvk, AtomicGuard::Refuse)
}

/// The same merge without the apiserver's refusal of atomic values: an atomic list, map or
/// struct in `partial` replaces the object's, as plain server-side apply does (and Kyverno's
/// MutatingPolicy with `useServerSideApply`).
pub fn merge_server_side_apply(
    object: &Value,
    partial: &Value,
    gvk: &GroupVersionKind,
) -> Result<Value, String> {
    merge_checked(object, partial, gvk, AtomicGuard::Allow)
}

/// Whether an apply configuration may set atomic values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AtomicGuard {
    Refuse,
    Allow,
}

fn merge_checked(
    object: &Value,
    partial: &Value,
    gvk: &GroupVersionKind,
    guard: AtomicGuard,
) -> Result<Value, String> {
    let shape = object_shape(gvk);
    let partial = match partial {
        Value::Object(map) if map.contains_key("apiVersion") || map.contains_key("kind") => {
            let mut map = map.clone();
            map.remove("apiVersion");
            map.remove("kind");
            Cow::Owned(Value::Object(map))
        }
        _ => Cow::Borrowed(partial),
    };

    let mut errors = Vec::new();
    validate(&partial, shape, &mut String::new(), &mut errors);
    if !errors.is_empty() {
        return Err(format!(
            "failed to convert patch object to typed object: {}",
            join_errors(&errors)
        ));
    }

    if guard == AtomicGuard::Refuse {
        let mut atomics = Vec::new();
        find_atomics(&partial, shape, &mut String::new(), &mut atomics);
        if !atomics.is_empty() {
            return Err(format!(
                "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
                atomics.join(", ")
            ));
        }
    }

    let mut path = String::new();
    match merge(Some(object), Some(partial.as_ref()), shape, &mut path) {
        Ok(Some(merged)) => Ok(merged),
        Ok(None) => Ok(Value::Object(Map::new())),
        Err(errors) => Err(format!("failed to merge patch: {}", join_errors(&errors))),
    }
}

/// An error at a path (`.spec.containers[name="app"]`), as SMD's `ValidationError`.
#[derive(Debug)]
struct FieldError {
    path: String,
    message: String,
}

fn join_errors(errors: &[FieldError]) -> String {
    let one = |e: &FieldError| {
        if e.path.is_empty() {
            e.message.clone()
        } else {
            format!("{}: {}", e.path, e.message)
        }
    };
    match errors {
        [error] => one(error),
        _ => std::iter::once("errors:".to_owned())
            .chain(errors.iter().map(|e| format!("  {}", one(e))))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn error(path: &str, message: String) -> FieldError {
    FieldError {
        path: path.to_owned(),
        message,
    }
}

// ---- Item keys ----

/// Which items of a keyed list to refuse for lacking a key field: the apply configuration's
/// (see the module comment of `list_keys`); the live object's only when all are missing, as
/// SMD does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Object,
    ApplyConfiguration,
}

/// The path element of a list item, rendered as SMD renders it (`[name="app"]`,
/// `[containerPort=80,protocol="TCP"]`, `[="finalizer"]`); equal renderings are the same item.
fn item_key(kind: &ListKind, item: &Value, side: Side) -> Result<String, String> {
    match kind {
        ListKind::Atomic => Err("invalid indexing of non-associative list".to_owned()),
        ListKind::Set => match item {
            Value::Object(_) => {
                Err("associative list without keys has an element that's a map type".to_owned())
            }
            Value::Array(_) => {
                Err("not supported: associative list with lists as elements".to_owned())
            }
            Value::Null => Err(
                "associative list without keys has an element that's an explicit null".to_owned(),
            ),
            scalar => Ok(format!("[={}]", render(scalar))),
        },
        ListKind::Map(keys) => keyed_item_key(keys, item, side),
    }
}

fn keyed_item_key(keys: &[ListKey], item: &Value, side: Side) -> Result<String, String> {
    let map = match item {
        Value::Object(map) => map,
        Value::Null => {
            return Err("associative list with keys may not have a null element".to_owned());
        }
        _ => return Err("associative list with keys may not have non-map elements".to_owned()),
    };
    let mut parts = Vec::with_capacity(keys.len());
    for key in keys {
        match (map.get(key.field), key.default) {
            (Some(value), _) => parts.push(format!("{}={}", key.field, render(value))),
            (None, Some(default)) => parts.push(format!("{}={:?}", key.field, default)),
            (None, None) if side == Side::ApplyConfiguration => {
                return Err(format!(
                    "associative list with keys has an element that omits key field {:?}",
                    key.field
                ));
            }
            (None, None) => {}
        }
    }
    if parts.is_empty() {
        let names: Vec<_> = keys.iter().map(|key| format!("{:?}", key.field)).collect();
        return Err(format!(
            "associative list with keys has an element that omits all key fields [{}] (and \
             doesn't have default values for any key fields)",
            names.join(" ")
        ));
    }
    // SMD sorts the key fields by name.
    parts.sort();
    Ok(format!("[{}]", parts.join(",")))
}

/// A value as SMD's `value.ToString` writes it: strings quoted, numbers as numbers.
fn render(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::String(s) => format!("{s:?}"),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(render).collect::<Vec<_>>().join(",")
        ),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", render(v)))
            .collect(),
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

// ---- Step 1: the apply configuration against the schema ----

/// Checks `value` against `shape` as SMD's validating walker does (`typed/validate.go`), with
/// duplicates refused.
fn validate(value: &Value, shape: &'static Shape, path: &mut String, errors: &mut Vec<FieldError>) {
    match shape {
        // Nothing to check: what lies beneath an unlisted field is unlisted too.
        Shape::Unknown => {}
        Shape::Scalar => {
            if matches!(value, Value::Object(_) | Value::Array(_)) {
                errors.push(error(
                    path,
                    format!("expected scalar, got {}", describe(value)),
                ));
            }
        }
        Shape::Struct { .. } | Shape::Map { .. } => match value {
            Value::Null => {}
            Value::Object(map) => {
                for (key, child) in map {
                    let len = path.len();
                    path.push('.');
                    path.push_str(key);
                    validate(child, shape.field(key), path, errors);
                    path.truncate(len);
                }
            }
            _ => errors.push(error(
                path,
                format!("expected map, got {}", describe(value)),
            )),
        },
        Shape::List { kind, items } => match value {
            Value::Null => {}
            Value::Array(list) => {
                let mut seen = HashSet::new();
                for (index, child) in list.iter().enumerate() {
                    let element = if *kind == ListKind::Atomic {
                        format!("[{index}]")
                    } else {
                        match item_key(kind, child, Side::ApplyConfiguration) {
                            Ok(key) => key,
                            Err(message) => {
                                // SMD stops at the first item it cannot key.
                                errors.push(error(path, format!("element {index}: {message}")));
                                return;
                            }
                        }
                    };
                    if *kind != ListKind::Atomic && !seen.insert(element.clone()) {
                        errors.push(error(path, format!("duplicate entries for key {element}")));
                    }
                    let len = path.len();
                    path.push_str(&element);
                    validate(child, items, path, errors);
                    path.truncate(len);
                }
            }
            _ => errors.push(error(
                path,
                format!("expected list, got {}", describe(value)),
            )),
        },
    }
}

// ---- Step 2: no atomic values in the apply configuration ----

/// Collects the paths of atomic lists, maps and structs that `value` sets, as the apiserver's
/// `findAtomics` does: named fields and list items (by index) are walked; map-typed fields'
/// values are not. A list where the table knows nothing is atomic.
fn find_atomics(
    value: &Value,
    shape: &'static Shape,
    path: &mut String,
    atomics: &mut Vec<String>,
) {
    match (value, shape) {
        (Value::Object(map), Shape::Struct { atomic, .. }) => {
            if *atomic {
                atomics.push(path.clone());
            }
            for (key, child) in map {
                let len = path.len();
                path.push('.');
                path.push_str(key);
                find_atomics(child, shape.field(key), path, atomics);
                path.truncate(len);
            }
        }
        (Value::Object(_), Shape::Map { atomic: true, .. }) => atomics.push(path.clone()),
        (Value::Object(map), Shape::Unknown) => {
            // An unlisted struct of a listed kind: only lists beneath it can be atomic.
            for (key, child) in map {
                let len = path.len();
                path.push('.');
                path.push_str(key);
                find_atomics(child, &Shape::Unknown, path, atomics);
                path.truncate(len);
            }
        }
        (Value::Array(list), Shape::List { kind, items }) => {
            if *kind == ListKind::Atomic {
                atomics.push(path.clone());
            }
            for (index, child) in list.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                find_atomics(child, items, path, atomics);
                path.truncate(len);
            }
        }
        (Value::Array(list), Shape::Unknown) => {
            atomics.push(path.clone());
            for (index, child) in list.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                find_atomics(child, &Shape::Unknown, path, atomics);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

// ---- Step 3: the merge ----

/// Merges `rhs` into `lhs` (at most one of them absent), as SMD's merging walker does with
/// its keep-the-right-hand-side rule. `None` means the field is absent from the result.
fn merge(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    shape: &'static Shape,
    path: &mut String,
) -> Result<Option<Value>, Vec<FieldError>> {
    let Some(rhs_value) = rhs else {
        // Untouched by the apply configuration: SMD's walk rebuilds the same value.
        return Ok(lhs.cloned());
    };
    let rhs = Some(rhs_value);
    match shape {
        Shape::Struct { atomic, .. } | Shape::Map { atomic, .. } => {
            let left = lhs.and_then(Value::as_object);
            let right = rhs.and_then(Value::as_object);
            let empty = |map: Option<&Map<String, Value>>| map.is_none_or(Map::is_empty);
            if *atomic || (empty(left) && empty(right)) || is_other_type(rhs, Value::is_object) {
                return Ok(leaf(lhs, rhs));
            }
            merge_maps(left, right, shape, path)
        }
        Shape::List { kind, items } => {
            let left = lhs.and_then(Value::as_array);
            let right = rhs.and_then(Value::as_array);
            let empty = |list: Option<&Vec<Value>>| list.is_none_or(Vec::is_empty);
            if *kind == ListKind::Atomic
                || (empty(left) && empty(right))
                || is_other_type(rhs, Value::is_array)
            {
                return Ok(leaf(lhs, rhs));
            }
            merge_lists(kind, items, left, right, path)
        }
        Shape::Scalar => Ok(leaf(lhs, rhs)),
        // Deduced: maps are merged key by key, everything else is atomic.
        Shape::Unknown => match (lhs, rhs_value) {
            (None | Some(Value::Object(_)), Value::Object(right)) => {
                let left = lhs.and_then(Value::as_object);
                if left.is_none_or(Map::is_empty) && right.is_empty() {
                    return Ok(leaf(lhs, rhs));
                }
                merge_maps(left, Some(right), shape, path)
            }
            _ => Ok(leaf(lhs, rhs)),
        },
    }
}

/// Whether the apply configuration holds something other than null where `expected` belongs
/// (validation refuses that; kept for safety, the right-hand side then wins whole).
fn is_other_type(rhs: Option<&Value>, expected: fn(&Value) -> bool) -> bool {
    rhs.is_some_and(|value| !value.is_null() && !expected(value))
}

/// SMD's leaf rule: the right-hand side if present, else the left.
fn leaf(lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value> {
    rhs.or(lhs).cloned()
}

fn merge_maps(
    lhs: Option<&Map<String, Value>>,
    rhs: Option<&Map<String, Value>>,
    shape: &'static Shape,
    path: &mut String,
) -> Result<Option<Value>, Vec<FieldError>> {
    let mut out = Map::new();
    let mut errors = Vec::new();
    let keys = lhs.into_iter().flat_map(Map::keys).chain(
        rhs.into_iter()
            .flat_map(Map::keys)
            .filter(|key| lhs.is_none_or(|lhs| !lhs.contains_key(*key))),
    );
    for key in keys {
        let left = lhs.and_then(|map| map.get(key));
        let right = rhs.and_then(|map| map.get(key));
        let len = path.len();
        path.push('.');
        path.push_str(key);
        match merge(left, right, shape.field(key), path) {
            // A null the apply configuration wrote decodes to an unset field.
            Ok(Some(Value::Null)) if right.is_some_and(Value::is_null) => {}
            Ok(Some(value)) => {
                out.insert(key.clone(), value);
            }
            Ok(None) => {}
            Err(mut nested) => errors.append(&mut nested),
        }
        path.truncate(len);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok((!out.is_empty()).then_some(Value::Object(out)))
}

/// The items of one side of a list: each one's key, in order, and the item for each key (the
/// live object's duplicates map to `null`, so that they are not merged, as in SMD).
struct IndexedItems<'v> {
    keys: Vec<String>,
    by_key: HashMap<String, Option<&'v Value>>,
}

fn index_items<'v>(
    kind: &ListKind,
    list: Option<&'v Vec<Value>>,
    side: Side,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> IndexedItems<'v> {
    let mut indexed = IndexedItems {
        keys: Vec::new(),
        by_key: HashMap::new(),
    };
    for (index, item) in list.into_iter().flatten().enumerate() {
        let key = match item_key(kind, item, side) {
            Ok(key) => key,
            Err(message) => {
                errors.push(error(path, format!("element {index}: {message}")));
                continue;
            }
        };
        match indexed.by_key.get_mut(&key) {
            Some(_) if side == Side::ApplyConfiguration => {
                errors.push(error(path, format!("duplicate entries for key {key}")));
                continue;
            }
            Some(slot) => *slot = None,
            None => {
                indexed.by_key.insert(key.clone(), Some(item));
            }
        }
        indexed.keys.push(key);
    }
    indexed
}

/// SMD's `visitListItems`: items of both sides merged by key; the apply configuration's order
/// wins for the items both have, the object's items it does not mention keep their places.
fn merge_lists(
    kind: &ListKind,
    items: &'static Shape,
    lhs: Option<&Vec<Value>>,
    rhs: Option<&Vec<Value>>,
    path: &mut String,
) -> Result<Option<Value>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let right = index_items(kind, rhs, Side::ApplyConfiguration, path, &mut errors);
    let left = index_items(kind, lhs, Side::Object, path, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    let null = Value::Null;
    // A duplicated live item is merged as SMD merges it: as a null.
    let live = |key: &str| left.by_key.get(key).map(|item| item.unwrap_or(&null));

    let mut shared = right
        .keys
        .iter()
        .filter(|key| left.by_key.contains_key(*key))
        .collect::<std::collections::VecDeque<_>>();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: HashSet<&str> = HashSet::new();
    let mut out = Vec::with_capacity(left.keys.len().max(right.keys.len()));
    let mut push = |left_item: Option<&Value>,
                    right_item: Option<&Value>,
                    key: &str,
                    path: &mut String,
                    errors: &mut Vec<FieldError>| {
        let len = path.len();
        path.push_str(key);
        match merge(left_item, right_item, items, path) {
            Ok(Some(value)) => out.push(value),
            Ok(None) => {}
            Err(mut nested) => errors.append(&mut nested),
        }
        path.truncate(len);
    };

    let lhs_items = lhs.map_or(&[][..], Vec::as_slice);
    let (mut l, mut r) = (0, 0);
    while l < left.keys.len() || r < right.keys.len() {
        if l < left.keys.len() && r < right.keys.len() {
            let key = &left.keys[l];
            if *key == right.keys[r] {
                merged_rhs.insert(key.as_str());
                let right_item = right.by_key[key].unwrap_or(&null);
                push(live(key), Some(right_item), key, path, &mut errors);
                l += 1;
                r += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if right.by_key.contains_key(key) && next_shared.is_some_and(|next| next != key) {
                // Shared, but not the one due now: it is emitted where the apply configuration
                // puts it.
                l += 1;
                continue;
            }
        }
        if l < left.keys.len() {
            let key = &left.keys[l];
            if !right.by_key.contains_key(key) {
                push(Some(&lhs_items[l]), None, key, path, &mut errors);
                l += 1;
                continue;
            } else if merged_rhs.contains(key.as_str()) {
                l += 1;
            }
        }
        if r < right.keys.len() {
            let key = &right.keys[r];
            merged_rhs.insert(key.as_str());
            let right_item = right.by_key[key].unwrap_or(&null);
            push(live(key), Some(right_item), key, path, &mut errors);
            r += 1;
            if next_shared.is_some_and(|next| next == key) {
                next_shared = shared.pop_front();
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok((!out.is_empty()).then_some(Value::Array(out)))
}
