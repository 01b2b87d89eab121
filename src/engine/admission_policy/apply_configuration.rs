//! `patchType: ApplyConfiguration` of a MutatingAdmissionPolicy: merging the partial object a
//! CEL expression built into the admitted object, as the apiserver does
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch/smd.go`, v0.37.2):
//!
//! 1. the apply configuration is converted to a typed value, which validates it against the
//!    schema (a field the schema does not declare, a scalar of the wrong type, an
//!    associative-list item without its keys, duplicate keys, a list where a map belongs …) →
//!    `failed to convert patch object to typed object: …`;
//! 2. it may not contain atomic lists, maps or structs, whose unmentioned parts would be lost →
//!    `invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: …`;
//! 3. it is merged into the object with structured-merge-diff's `Merge` (v6.4.2, `typed/merge.go`)
//!    → `failed to merge patch: …` (the live object may hold duplicate keys; they are kept).
//!
//! The shapes come from the kind's [`Schema`]: the generated table of built-in kinds
//! ([`crate::kubernetes::schema::builtin`]) or a CustomResourceDefinition's structural schema
//! ([`crate::kubernetes::schema::crd::schemas_from_crd`], passed to [`merge_apply_configuration_with`]).
//! Where there is no schema (a kind without one, a `x-kubernetes-preserve-unknown-fields`
//! subtree, a `RawExtension`), the shape is deduced from the value as SMD deduces it: maps
//! merge key by key and lists are atomic. A kind without a schema still has the built-in
//! `metadata`. Fields of the live object that the schema does not declare are kept as they are
//! (the apiserver's typed object would not have them).
//!
//! `null` in an apply configuration does what SMD does with it: a scalar, an atomic field, or an
//! empty map or list becomes `null`, which decoding into the typed object then drops, so the
//! field is removed here; on a non-empty granular map or associative list it changes nothing.
//! `apiVersion` and `kind` of the apply configuration are ignored: the apiserver sets them to
//! the object's before merging.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::admission::GroupVersionKind;
use crate::kubernetes::schema::{self, ListType, Node, NodeKind, ObjectType, Schema};

/// The numbers of a merged object of a built-in kind as the apiserver's conversion from
/// unstructured into the Go type leaves them (`runtime.DefaultUnstructuredConverter`, after an
/// ApplyConfiguration): an integer field takes an integer, converted to the field's width as Go
/// converts (wrapping), or a whole double; a double with a fraction is refused (`unable to
/// convert unstructured object to apps/v1, Kind=Deployment: cannot convert float64 to int32`).
/// Custom resources stay unstructured: nothing changes.
pub fn convert_from_unstructured(schema: &Schema, object: &mut Value) -> Result<(), String> {
    if schema.origin() != schema::Origin::BuiltIn {
        return Ok(());
    }
    convert_numbers(schema, &schema.root_node(), object).map_err(|go_type| {
        let gvk = schema.gvk();
        format!(
            "unable to convert unstructured object to {}/{}, Kind={}: cannot convert float64 to \
             {go_type}",
            gvk.group, gvk.version, gvk.kind
        )
    })
}

/// [`convert_from_unstructured`] below `node`; the error is the Go type a fractional double
/// could not be converted to.
fn convert_numbers<'s>(
    schema: &'s Schema,
    node: &'s Node,
    value: &mut Value,
) -> Result<(), &'s str> {
    match (&node.kind, value) {
        (NodeKind::Integer(kind), Value::Number(number)) => {
            let bits = if let Some(i) = number.as_i64() {
                i
            } else if let Some(u) = number.as_u64() {
                u.cast_signed()
            } else {
                let double = number.as_f64().unwrap_or(f64::NAN);
                if double.trunc() != double {
                    return Err(&node.go_type);
                }
                // amd64's conversion: out of range is the "integer indefinite" value.
                #[allow(clippy::cast_possible_truncation)]
                if double.abs() < 2f64.powi(63) {
                    double as i64
                } else {
                    i64::MIN
                }
            };
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let converted = match kind {
                schema::IntKind::I8 => Value::from(bits as i8),
                schema::IntKind::I16 => Value::from(bits as i16),
                schema::IntKind::I32 => Value::from(bits as i32),
                schema::IntKind::I64 => Value::from(bits),
                schema::IntKind::U8 => Value::from(bits as u8),
                schema::IntKind::U16 => Value::from(bits as u16),
                schema::IntKind::U32 => Value::from(bits as u32),
                schema::IntKind::U64 => Value::from(bits.cast_unsigned()),
            };
            if let Value::Number(converted) = converted {
                *number = converted;
            }
            Ok(())
        }
        (NodeKind::Object(index), Value::Object(map)) => {
            let object = schema.object(*index);
            for (key, item) in map.iter_mut() {
                if let Some(field) = object.field(key) {
                    convert_numbers(schema, &field.node, item)?;
                }
            }
            Ok(())
        }
        (NodeKind::Map { values, .. }, Value::Object(map)) => map
            .values_mut()
            .try_for_each(|item| convert_numbers(schema, values, item)),
        (NodeKind::List { items, .. }, Value::Array(list)) => list
            .iter_mut()
            .try_for_each(|item| convert_numbers(schema, items, item)),
        _ => Ok(()),
    }
}

/// Merges `partial` (an apply configuration) into `object` of kind `gvk`, SMD style:
/// maps (structs and map-typed fields) merged recursively; atomic lists replaced; associative
/// lists (x-kubernetes-list-type: map) merged item by item using the list's keys; set lists
/// (list-type: set) unioned; scalars replaced. Returns the merged object. The schema is the
/// built-in kind's; a kind without one (a custom resource) merges with deduced shapes.
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
    let schema = schema::builtin(gvk);
    merge_checked(object, partial, schema.as_ref(), AtomicGuard::Refuse)
}

/// [`merge_apply_configuration`] with the schema given: a custom resource's (from its
/// CustomResourceDefinition), a built-in kind's, or none (deduced shapes, built-in `metadata`).
pub fn merge_apply_configuration_with(
    object: &Value,
    partial: &Value,
    schema: Option<&Schema>,
) -> Result<Value, String> {
    merge_checked(object, partial, schema, AtomicGuard::Refuse)
}

/// The same merge without the apiserver's refusal of atomic values: an atomic list, map or
/// struct in `partial` replaces the object's, as plain server-side apply does (and Kyverno's
/// MutatingPolicy with `useServerSideApply`).
pub fn merge_server_side_apply(
    object: &Value,
    partial: &Value,
    gvk: &GroupVersionKind,
) -> Result<Value, String> {
    let schema = schema::builtin(gvk);
    merge_checked(object, partial, schema.as_ref(), AtomicGuard::Allow)
}

/// [`merge_server_side_apply`] with the schema given (see [`merge_apply_configuration_with`]).
pub fn merge_server_side_apply_with(
    object: &Value,
    partial: &Value,
    schema: Option<&Schema>,
) -> Result<Value, String> {
    merge_checked(object, partial, schema, AtomicGuard::Allow)
}

/// Whether an apply configuration may set atomic values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AtomicGuard {
    Refuse,
    Allow,
}

// ---- Shapes, from the schema ----

/// What a scalar must be, as SMD checks it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scalar {
    String,
    Numeric,
    Boolean,
    /// int-or-string, quantities: SMD's untyped atomic, anything goes.
    Untyped,
}

/// How a list's items are told apart.
#[derive(Clone, Copy)]
enum ListKind<'s> {
    Atomic,
    Set,
    /// By these key fields of items of this object type.
    Map(&'s [String], Option<&'s ObjectType>),
}

/// How a value merges: a view of a schema node.
#[derive(Clone, Copy)]
enum Shape<'s> {
    /// No schema: maps merge key by key, lists are atomic, scalars are replaced.
    Deduced,
    /// The root of a kind without a schema: `metadata` is the built-in one, the rest deduced.
    UnknownKind(&'s Schema),
    /// A field the schema does not declare.
    NotDeclared,
    Scalar(Scalar),
    Struct(&'s Schema, &'s ObjectType),
    Map(&'s Schema, bool, &'s Node),
    List(&'s Schema, ListKind<'s>, &'s Node),
}

impl<'s> Shape<'s> {
    fn of(schema: &'s Schema, node: &'s Node) -> Shape<'s> {
        match &node.kind {
            NodeKind::String | NodeKind::Bytes | NodeKind::Time => Shape::Scalar(Scalar::String),
            NodeKind::Integer(_) | NodeKind::Number => Shape::Scalar(Scalar::Numeric),
            NodeKind::Boolean => Shape::Scalar(Scalar::Boolean),
            NodeKind::IntOrString | NodeKind::Quantity => Shape::Scalar(Scalar::Untyped),
            NodeKind::Any => Shape::Deduced,
            NodeKind::Object(index) => Shape::Struct(schema, schema.object(*index)),
            NodeKind::Map { values, atomic } => Shape::Map(schema, *atomic, values),
            NodeKind::List {
                items,
                list_type,
                keys,
            } => {
                let kind = match list_type {
                    ListType::Atomic => ListKind::Atomic,
                    ListType::Set => ListKind::Set,
                    ListType::Map => ListKind::Map(
                        keys,
                        match items.kind {
                            NodeKind::Object(index) => Some(schema.object(index)),
                            _ => None,
                        },
                    ),
                };
                Shape::List(schema, kind, items)
            }
        }
    }

    /// The shape of field `name` of an object of this shape.
    fn field(self, name: &str) -> Shape<'s> {
        match self {
            Shape::Struct(schema, object) => match object.field(name) {
                Some(field) => Shape::of(schema, &field.node),
                None if object.preserve_unknown_fields => Shape::Deduced,
                None => Shape::NotDeclared,
            },
            Shape::Map(schema, _, values) => Shape::of(schema, values),
            Shape::UnknownKind(pod) if name == "metadata" => pod
                .root()
                .field("metadata")
                .map_or(Shape::Deduced, |field| Shape::of(pod, &field.node)),
            _ => Shape::Deduced,
        }
    }

    /// Whether the object of this shape is replaced whole.
    fn atomic_object(self) -> bool {
        match self {
            Shape::Struct(_, object) => object.atomic,
            Shape::Map(_, atomic, _) => atomic,
            _ => false,
        }
    }
}

/// The root shape of a kind with `schema`, or of a kind without one.
fn root_shape<'s>(schema: Option<&'s Schema>, pod: &'static Option<Schema>) -> Shape<'s> {
    match schema {
        Some(schema) => Shape::Struct(schema, schema.root()),
        None => match pod {
            Some(pod) => Shape::UnknownKind(pod),
            None => Shape::Deduced,
        },
    }
}

/// The Pod schema, whose `metadata` kinds without a schema use.
static POD: std::sync::LazyLock<Option<Schema>> = std::sync::LazyLock::new(|| {
    schema::builtin(&GroupVersionKind {
        group: String::new(),
        version: "v1".to_owned(),
        kind: "Pod".to_owned(),
    })
});

fn merge_checked(
    object: &Value,
    partial: &Value,
    schema: Option<&Schema>,
    guard: AtomicGuard,
) -> Result<Value, String> {
    let shape = root_shape(schema, &POD);
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
/// when a key without a real default is missing (see [`key_default`]); the live object's only
/// when all are missing, as SMD does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Object,
    ApplyConfiguration,
}

/// The path element of a list item, rendered as SMD renders it (`[name="app"]`,
/// `[containerPort=80,protocol="TCP"]`, `[="finalizer"]`); equal renderings are the same item.
fn item_key(kind: ListKind<'_>, item: &Value, side: Side) -> Result<String, String> {
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
        ListKind::Map(keys, object) => keyed_item_key(keys, object, item, side),
    }
}

/// The default of key field `key`, when the schema gives a real one (`protocol: TCP`): the zero
/// values that openapi-gen records for required fields (`name: ""`) are not defaults here, so an
/// apply configuration item without its `name` is an error rather than a new item named `""`.
fn key_default(object: Option<&ObjectType>, key: &str) -> Option<Value> {
    let default = object?.field(key)?.default.as_ref()?;
    let zero = match default {
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
        _ => true,
    };
    (!zero).then(|| default.clone())
}

fn keyed_item_key(
    keys: &[String],
    object: Option<&ObjectType>,
    item: &Value,
    side: Side,
) -> Result<String, String> {
    let map = match item {
        Value::Object(map) => map,
        Value::Null => {
            return Err("associative list with keys may not have a null element".to_owned());
        }
        _ => return Err("associative list with keys may not have non-map elements".to_owned()),
    };
    let mut parts = Vec::with_capacity(keys.len());
    for key in keys {
        match (map.get(key.as_str()), key_default(object, key)) {
            (Some(value), _) => parts.push(format!("{key}={}", render(value))),
            (None, Some(default)) => parts.push(format!("{key}={}", render(&default))),
            (None, None) if side == Side::ApplyConfiguration => {
                return Err(format!(
                    "associative list with keys has an element that omits key field {key:?}"
                ));
            }
            (None, None) => {}
        }
    }
    if parts.is_empty() {
        let names: Vec<_> = keys.iter().map(|key| format!("{key:?}")).collect();
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

/// Go's `%v` of the value SMD holds, as its boolean, map and list checks print it (inside
/// `&{…}`: the pointer to SMD's wrapper). A list or map from a CEL literal, the usual source
/// in an apply configuration, prints as Go prints cel-go's `[]ref.Val` and
/// `map[ref.Val]ref.Val`: `[1 2]`, `map[a:1 b:x]`.
fn go_default(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_default).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(key, item)| format!("{key}:{}", go_default(item)))
                .collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}

/// Go's `%#v` of the value SMD holds, as its string check prints it (inside
/// `&value.valueUnstructured{Value:…}`), lists and maps as cel-go's literals hold them.
fn go_syntax(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => format!("{s:?}"),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_syntax).collect();
            format!("[]ref.Val{{{}}}", items.join(", "))
        }
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(key, item)| format!("{key:?}:{}", go_syntax(item)))
                .collect();
            format!("map[ref.Val]ref.Val{{{}}}", entries.join(", "))
        }
    }
}

/// A number as Go prints an `int64` or a `float64` (`%v`, `%#v`): the shortest digits that
/// read back, in exponent form (`1e+21`, `1e-07`) below 1e-4 and from 1e21.
fn go_number(number: &serde_json::Number) -> String {
    let Some(float) = number.as_f64().filter(|_| number.is_f64()) else {
        return number.to_string();
    };
    let scientific = format!("{float:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..21).contains(&exponent) {
        return format!("{float}");
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

/// `%T` of a value SMD holds unstructured, as its numeric check prints it.
fn go_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

// ---- Step 1: the apply configuration against the schema ----

/// Checks `value` against `shape` as SMD's validating walker does (`typed/validate.go`), with
/// duplicates refused.
fn validate(value: &Value, shape: Shape<'_>, path: &mut String, errors: &mut Vec<FieldError>) {
    if value.is_null() {
        return;
    }
    match shape {
        // Nothing to check: what lies beneath a deduced value is deduced too.
        Shape::Deduced => {}
        Shape::NotDeclared => errors.push(error(path, "field not declared in schema".to_owned())),
        Shape::Scalar(scalar) => {
            let message = match (scalar, value) {
                (Scalar::Untyped, _) => None,
                (Scalar::String, Value::String(_)) => None,
                (Scalar::Numeric, Value::Number(_)) => None,
                (Scalar::Boolean, Value::Bool(_)) => None,
                (Scalar::String, _) => Some(format!(
                    "expected string, got &value.valueUnstructured{{Value:{}}}",
                    go_syntax(value)
                )),
                (Scalar::Numeric, _) => Some(format!(
                    "expected numeric (int or float), got {}",
                    go_type_name(value)
                )),
                (Scalar::Boolean, _) => {
                    Some(format!("expected boolean, got &{{{}}}", go_default(value)))
                }
            };
            if let Some(message) = message {
                errors.push(error(path, message));
            }
        }
        Shape::Struct(..) | Shape::Map(..) | Shape::UnknownKind(_) => match value {
            Value::Object(map) => {
                for (key, child) in map {
                    let len = path.len();
                    path.push('.');
                    path.push_str(key);
                    let field = shape.field(key);
                    validate(child, field, path, errors);
                    path.truncate(len);
                    if matches!(field, Shape::NotDeclared) {
                        // SMD stops at the first undeclared field of a map.
                        break;
                    }
                }
            }
            _ => errors.push(error(
                path,
                format!("expected map, got &{{{}}}", go_default(value)),
            )),
        },
        Shape::List(schema, kind, items) => match value {
            Value::Array(list) => {
                let items = Shape::of(schema, items);
                let mut seen = HashSet::new();
                for (index, child) in list.iter().enumerate() {
                    let element = if matches!(kind, ListKind::Atomic) {
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
                    if !matches!(kind, ListKind::Atomic) && !seen.insert(element.clone()) {
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
                format!("expected list, got &{{{}}}", go_default(value)),
            )),
        },
    }
}

// ---- Step 2: no atomic values in the apply configuration ----

/// Collects the paths of atomic lists, maps and structs that `value` sets, as the apiserver's
/// `findAtomics` does: named fields and list items (by index) are walked; map-typed fields'
/// values are not. A deduced list is atomic.
fn find_atomics(value: &Value, shape: Shape<'_>, path: &mut String, atomics: &mut Vec<String>) {
    match (value, shape) {
        (Value::Object(_), Shape::Map(_, true, _)) => atomics.push(path.clone()),
        (Value::Object(map), Shape::Struct(..) | Shape::Deduced | Shape::UnknownKind(_)) => {
            if shape.atomic_object() {
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
        (Value::Array(list), Shape::List(schema, kind, items)) => {
            if matches!(kind, ListKind::Atomic) {
                atomics.push(path.clone());
            }
            let items = Shape::of(schema, items);
            for (index, child) in list.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                find_atomics(child, items, path, atomics);
                path.truncate(len);
            }
        }
        (Value::Array(list), Shape::Deduced) => {
            atomics.push(path.clone());
            for (index, child) in list.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                find_atomics(child, Shape::Deduced, path, atomics);
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
    shape: Shape<'_>,
    path: &mut String,
) -> Result<Option<Value>, Vec<FieldError>> {
    let Some(rhs_value) = rhs else {
        // Untouched by the apply configuration: SMD's walk rebuilds the same value.
        return Ok(lhs.cloned());
    };
    let rhs = Some(rhs_value);
    match shape {
        Shape::Struct(..) | Shape::Map(..) | Shape::UnknownKind(_) => {
            let left = lhs.and_then(Value::as_object);
            let right = rhs.and_then(Value::as_object);
            let empty = |map: Option<&Map<String, Value>>| map.is_none_or(Map::is_empty);
            if shape.atomic_object()
                || (empty(left) && empty(right))
                || is_other_type(rhs, Value::is_object)
            {
                return Ok(leaf(lhs, rhs));
            }
            merge_maps(left, right, shape, path)
        }
        Shape::List(schema, kind, items) => {
            let left = lhs.and_then(Value::as_array);
            let right = rhs.and_then(Value::as_array);
            let empty = |list: Option<&Vec<Value>>| list.is_none_or(Vec::is_empty);
            if matches!(kind, ListKind::Atomic)
                || (empty(left) && empty(right))
                || is_other_type(rhs, Value::is_array)
            {
                return Ok(leaf(lhs, rhs));
            }
            merge_lists(kind, Shape::of(schema, items), left, right, path)
        }
        Shape::Scalar(_) => Ok(leaf(lhs, rhs)),
        // Deduced: maps are merged key by key, everything else is atomic.
        Shape::Deduced | Shape::NotDeclared => match (lhs, rhs_value) {
            (None | Some(Value::Object(_)), Value::Object(right)) => {
                let left = lhs.and_then(Value::as_object);
                if left.is_none_or(Map::is_empty) && right.is_empty() {
                    return Ok(leaf(lhs, rhs));
                }
                merge_maps(left, Some(right), Shape::Deduced, path)
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
    shape: Shape<'_>,
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
    kind: ListKind<'_>,
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
    kind: ListKind<'_>,
    items: Shape<'_>,
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{convert_from_unstructured, go_default, go_number, go_syntax};
    use crate::admission::GroupVersionKind;

    #[test]
    fn numbers_convert_as_the_unstructured_converter_converts_them() {
        let deployment = crate::kubernetes::schema::builtin(&GroupVersionKind {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
        })
        .unwrap();
        let converted = |replicas: serde_json::Value| {
            let mut object = json!({"spec": {"replicas": replicas, "template": {"spec": {
                "containers": [{"name": "a", "ports": [{"containerPort": 80.0}]}]}}}});
            convert_from_unstructured(&deployment, &mut object).map(|()| object)
        };
        let object = converted(json!(3.0)).unwrap();
        assert_eq!(object["spec"]["replicas"], json!(3));
        assert_eq!(
            object["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
            json!(80)
        );
        assert_eq!(
            converted(json!(10_000_000_000_u64)).unwrap()["spec"]["replicas"],
            1_410_065_408
        );
        assert_eq!(
            converted(json!(1e10)).unwrap()["spec"]["replicas"],
            1_410_065_408
        );
        assert_eq!(converted(json!(1e19)).unwrap()["spec"]["replicas"], 0);
        assert_eq!(converted(json!(-0.0)).unwrap()["spec"]["replicas"], 0);
        assert_eq!(
            converted(json!(2.5)).unwrap_err(),
            "unable to convert unstructured object to apps/v1, Kind=Deployment: cannot convert \
             float64 to int32"
        );
    }

    #[test]
    fn values_print_as_go_prints_them() {
        let number = |value: serde_json::Value| go_number(value.as_number().unwrap());
        assert_eq!(number(json!(1)), "1");
        assert_eq!(number(json!(-7)), "-7");
        assert_eq!(number(json!(1.5)), "1.5");
        assert_eq!(number(json!(2.0)), "2");
        assert_eq!(number(json!(1e20)), "100000000000000000000");
        assert_eq!(number(json!(1e21)), "1e+21");
        assert_eq!(number(json!(-2.5e22)), "-2.5e+22");
        assert_eq!(number(json!(0.0001)), "0.0001");
        assert_eq!(number(json!(1e-7)), "1e-07");
        let composite = json!({"k": [1, "a", true, 2.5], "b": {"x": "y"}});
        assert_eq!(go_default(&composite), "map[b:map[x:y] k:[1 a true 2.5]]");
        assert_eq!(
            go_syntax(&composite),
            "map[ref.Val]ref.Val{\"b\":map[ref.Val]ref.Val{\"x\":\"y\"}, \
             \"k\":[]ref.Val{1, \"a\", true, 2.5}}"
        );
        assert_eq!(go_default(&json!("yes")), "yes");
        assert_eq!(go_syntax(&json!("yes")), "\"yes\"");
    }
}
