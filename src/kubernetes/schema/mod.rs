//! The Kubernetes object model: the schema of every built-in kind of Kubernetes v1.37 and of
//! custom resources, and what the apiserver does with an object because it has a schema.
//!
//! - [`builtin`]: the schema of a built-in kind, from the generated table `builtin.json`
//!   (written by `scripts/object-model`, `make schemas`; see docs/object-model.md).
//! - [`crd::schemas_from_crd`]: the structural schema of each served version of a
//!   `CustomResourceDefinition`.
//! - [`decode::check_decode`]: the apiserver's decode of a manifest into its Go type, as far as
//!   types go: the first type error, worded as the apiserver words it.
//! - [`round_trip::round_trip`]: an object as decoding into its Go type and encoding again
//!   leaves it (unknown fields dropped, empty `omitempty` fields dropped, zero-valued
//!   non-`omitempty` fields written).
//!
//! A [`Schema`] is one kind's root [`ObjectType`] in an arena of object types (built-in kinds
//! share one arena; each CRD version has its own), so that recursive types
//! (`JSONSchemaProps`) need no cycles of pointers. The built-in arena decodes each type from
//! the table when it is first reached: a policy set about Pods holds the 135 types a Pod
//! reaches, not all 850.

pub mod crd;
pub mod decode;
pub mod quantity;
pub mod round_trip;
pub mod time;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, OnceLock};

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::admission::GroupVersionKind;

/// The generated table of built-in schemas (see `scripts/object-model`).
pub(crate) const BUILTIN_TABLE: &str = include_str!("builtin.json");

/// One kind's schema: its root object type in an arena of object types.
#[derive(Debug, Clone)]
pub struct Schema {
    types: Arc<TypeArena>,
    root: usize,
    gvk: Arc<GroupVersionKind>,
    origin: Origin,
}

/// Where a schema comes from; it decides what the apiserver does with objects of the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A built-in kind: the apiserver decodes objects into its Go type.
    BuiltIn,
    /// A custom resource: the apiserver keeps objects unstructured.
    CustomResource,
}

/// An object type: a Go struct of a built-in kind, or an object schema with `properties` of a
/// custom resource.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectType {
    /// The Go struct's name (`PodSpec`), as decode errors print it; empty for custom resources.
    pub go_name: String,
    /// The Go type with its package name (`v1.PodSpec`); empty for custom resources.
    pub go_type: String,
    /// `x-kubernetes-map-type: atomic` on the struct (`+structType=atomic`): replaced whole by
    /// merges.
    pub atomic: bool,
    /// `x-kubernetes-preserve-unknown-fields`: fields not in the schema are kept.
    pub preserve_unknown_fields: bool,
    /// `x-kubernetes-embedded-resource`: an object with its own `apiVersion`, `kind` and
    /// `metadata`.
    pub embedded_resource: bool,
    /// The fields, in Go declaration order (CRDs: property order).
    pub fields: Vec<Field>,
}

/// A field of an [`ObjectType`].
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The JSON name.
    pub name: String,
    /// The value's shape.
    pub node: Node,
    /// The Go field has `omitempty`: encoding drops it when empty (false, 0, "", nil pointer,
    /// empty map or list; never a non-pointer struct).
    pub omit_empty: bool,
    /// The Go field has `omitzero`: encoding drops it when it is its zero value.
    pub omit_zero: bool,
    /// The Go field is a pointer: a present zero value (`false`, `0`) is not empty.
    pub pointer: bool,
    /// The allowed values, where the schema gives an enum.
    pub enum_values: Vec<Value>,
    /// `x-kubernetes-preserve-unknown-fields` on the field.
    pub preserve_unknown_fields: bool,
    /// `x-kubernetes-embedded-resource` on the field.
    pub embedded_resource: bool,
    /// The field's scalar default in the schema, if any (`protocol: TCP`).
    pub default: Option<Value>,
    /// The Go names of the inline embedded structs the field is reached through
    /// (`ProbeHandler` for a probe's `httpGet`, `TypeMeta` for `kind`): decode errors print
    /// them in the field path.
    pub embedded_in: Vec<String>,
}

/// The shape of a value (a field's, a list item's, a map value's).
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// What it is.
    pub kind: NodeKind,
    /// Its Go type as `encoding/json` prints it (`[]v1.Container`, `v1.Protocol`); empty for
    /// custom resources.
    pub go_type: String,
    /// The `format` of a custom resource's string schema (`date-time`, `date`, `duration`,
    /// `byte` …), which decides its CEL type; empty otherwise.
    pub format: String,
}

/// What a value is.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// A JSON string.
    String,
    /// A JSON integer of a Go integer type.
    Integer(IntKind),
    /// A JSON number (Go float).
    Number,
    /// A JSON boolean.
    Boolean,
    /// A `[]byte`: a base64 string.
    Bytes,
    /// `intstr.IntOrString` / `x-kubernetes-int-or-string`: an integer or a string.
    IntOrString,
    /// `resource.Quantity`: a string or a number.
    Quantity,
    /// `metav1.Time` / `MicroTime`: an RFC 3339 string or null.
    Time,
    /// Anything (`runtime.RawExtension`, `interface{}`, a type with its own JSON decoding, a
    /// custom-resource field with neither type nor properties).
    Any,
    /// An object of the type at this index of the schema's arena.
    Object(usize),
    /// A map (`map[string]T`, `additionalProperties`).
    Map {
        /// The shape of every value.
        values: Box<Node>,
        /// `x-kubernetes-map-type: atomic`.
        atomic: bool,
    },
    /// A list.
    List {
        /// The shape of every item.
        items: Box<Node>,
        /// `x-kubernetes-list-type` (atomic when not given).
        list_type: ListType,
        /// `x-kubernetes-list-map-keys` of a `map` list.
        keys: Vec<String>,
    },
}

/// A Go integer kind, for its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntKind {
    /// int8
    I8,
    /// int16
    I16,
    /// int32
    I32,
    /// int64 and int
    I64,
    /// uint8
    U8,
    /// uint16
    U16,
    /// uint32
    U32,
    /// uint64 and uint
    U64,
}

impl IntKind {
    /// Whether `n` fits.
    pub fn fits(self, n: i128) -> bool {
        let (min, max): (i128, i128) = match self {
            IntKind::I8 => (i8::MIN.into(), i8::MAX.into()),
            IntKind::I16 => (i16::MIN.into(), i16::MAX.into()),
            IntKind::I32 => (i32::MIN.into(), i32::MAX.into()),
            IntKind::I64 => (i64::MIN.into(), i64::MAX.into()),
            IntKind::U8 => (0, u8::MAX.into()),
            IntKind::U16 => (0, u16::MAX.into()),
            IntKind::U32 => (0, u32::MAX.into()),
            IntKind::U64 => (0, u64::MAX.into()),
        };
        (min..=max).contains(&n)
    }
}

/// `x-kubernetes-list-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    /// Replaced whole (the default).
    Atomic,
    /// Scalars, unioned.
    Set,
    /// Objects told apart by `x-kubernetes-list-map-keys`.
    Map,
}

impl Schema {
    /// The kind this schema is for.
    pub fn gvk(&self) -> &GroupVersionKind {
        &self.gvk
    }

    /// Whether it is a built-in kind's or a custom resource's.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// The root object type.
    pub fn root(&self) -> &ObjectType {
        self.types.get(self.root)
    }

    /// The object type at `index` of this schema's arena ([`NodeKind::Object`]).
    ///
    /// # Panics
    /// Never for an index taken from a node of this schema.
    pub fn object(&self, index: usize) -> &ObjectType {
        self.types.get(index)
    }

    /// A node for the root object.
    pub fn root_node(&self) -> Node {
        Node {
            kind: NodeKind::Object(self.root),
            go_type: self.root().go_type.clone(),
            format: String::new(),
        }
    }

    /// The node at a dotted path from the root (`spec.template.spec.containers.env`); list
    /// items and map values are looked through. `None` where the schema has no such field.
    pub fn node_at(&self, path: &str) -> Option<Node> {
        let mut node = self.root_node();
        for segment in path.split('.').filter(|s| !s.is_empty()) {
            node = self.child(&node, segment)?.clone();
        }
        Some(node)
    }

    /// The field `name` of the object at `node`, looking through lists and maps.
    pub fn child<'s>(&'s self, node: &'s Node, name: &str) -> Option<&'s Node> {
        match &node.kind {
            NodeKind::Object(index) => self.object(*index).field(name).map(|f| &f.node),
            NodeKind::List { items, .. } => self.child(items, name),
            NodeKind::Map { values, .. } => self.child(values, name),
            _ => None,
        }
    }
}

impl ObjectType {
    /// The field with JSON name `name`. Names of another length or first byte are passed
    /// over without a call to compare strings (built-in kinds have dozens of fields, and the
    /// decode check looks up every member of every object).
    pub fn field(&self, name: &str) -> Option<&Field> {
        let first = name.as_bytes().first();
        self.fields.iter().find(|field| {
            field.name.len() == name.len()
                && field.name.as_bytes().first() == first
                && field.name == name
        })
    }
}

impl Node {
    /// A node of `kind` with no Go type (custom resources).
    pub fn untyped(kind: NodeKind) -> Node {
        Node {
            kind,
            go_type: String::new(),
            format: String::new(),
        }
    }
}

// ---- Built-in kinds ----

/// An arena of object types: a custom resource's, built whole, or the built-in table's, whose
/// types are decoded from the table's text when first reached.
#[derive(Debug)]
pub(crate) struct TypeArena {
    types: Box<[OnceLock<ObjectType>]>,
    /// The table's text of each type, for the built-in arena.
    source: Box<[&'static RawValue]>,
}

impl TypeArena {
    fn built(types: Vec<ObjectType>) -> Self {
        TypeArena {
            types: types.into_iter().map(OnceLock::from).collect(),
            source: Box::default(),
        }
    }

    fn from_table(source: Vec<&'static RawValue>) -> Self {
        TypeArena {
            types: source.iter().map(|_| OnceLock::new()).collect(),
            source: source.into(),
        }
    }

    /// The type at `index`, decoded now if it was not yet.
    ///
    /// # Panics
    /// For an index out of the arena, or a type the table does not describe validly: both
    /// build defects, as every type of the table is decoded by its tests.
    pub(crate) fn get(&self, index: usize) -> &ObjectType {
        self.types[index].get_or_init(|| {
            decode_type(self.source[index], self.types.len())
                .expect("src/kubernetes/schema/builtin.json is a valid schema table")
        })
    }

    /// Decodes every type not decoded yet, returning the first error.
    #[cfg(test)]
    fn decode_all(&self) -> Result<(), String> {
        for (index, slot) in self.types.iter().enumerate() {
            if slot.get().is_none() {
                let decoded = decode_type(self.source[index], self.types.len())?;
                let _ = slot.set(decoded);
            }
        }
        Ok(())
    }
}

/// The parsed table: one arena for every built-in kind.
struct BuiltinTable {
    types: Arc<TypeArena>,
    /// Each kind and its root type, sorted by (group, version, kind).
    kinds: Vec<(Arc<GroupVersionKind>, usize)>,
    /// The same, by kind name, for a lookup without allocation (a name has few versions).
    by_kind: HashMap<String, Vec<(Arc<GroupVersionKind>, usize)>>,
    names: HashMap<&'static str, usize>,
}

static BUILTINS: LazyLock<BuiltinTable> = LazyLock::new(|| {
    // The table is generated and checked by tests; a broken one is a build defect.
    parse_table(BUILTIN_TABLE).expect("src/kubernetes/schema/builtin.json is a valid schema table")
});

/// The schema of a built-in kind (any group, version and kind the v1.37 apiserver serves), or
/// `None` for kinds it does not know (custom resources).
pub fn builtin(gvk: &GroupVersionKind) -> Option<Schema> {
    let table = &*BUILTINS;
    let (gvk, root) = table
        .by_kind
        .get(gvk.kind.as_str())?
        .iter()
        .find(|(known, _)| known.group == gvk.group && known.version == gvk.version)?;
    Some(Schema {
        types: table.types.clone(),
        root: *root,
        gvk: gvk.clone(),
        origin: Origin::BuiltIn,
    })
}

/// Every built-in kind in the table, sorted by group, version and kind.
pub fn builtin_kinds() -> Vec<GroupVersionKind> {
    BUILTINS
        .kinds
        .iter()
        .map(|(gvk, _)| GroupVersionKind::clone(gvk))
        .collect()
}

/// The arena of built-in object types and the index of the one with OpenAPI definition name
/// `name` (`io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`), for custom resources that embed
/// it.
pub(crate) fn builtin_type(name: &str) -> Option<(&'static TypeArena, usize)> {
    let table = &*BUILTINS;
    table.names.get(name).map(|&index| (&*table.types, index))
}

#[derive(Deserialize)]
struct RawTable<'t> {
    kinds: Vec<(String, String, String, usize)>,
    #[serde(borrow)]
    types: Vec<&'t RawValue>,
}

/// A type's definition name, read without decoding the rest of it.
#[derive(Deserialize)]
struct TypeName<'t> {
    n: &'t str,
}

#[derive(Deserialize)]
struct RawType {
    n: String,
    go: String,
    #[serde(default)]
    a: bool,
    #[serde(default)]
    pu: bool,
    f: Option<Vec<RawField>>,
}

#[derive(Deserialize)]
struct RawField {
    n: String,
    t: RawNode,
    #[serde(default)]
    oe: bool,
    #[serde(default)]
    oz: bool,
    #[serde(default)]
    p: bool,
    #[serde(default)]
    e: Vec<Value>,
    #[serde(default)]
    pu: bool,
    #[serde(default)]
    emb: bool,
    d: Option<Value>,
    #[serde(default, rename = "in")]
    embedded_in: Vec<String>,
}

#[derive(Deserialize)]
struct RawNode {
    k: String,
    go: String,
    r: Option<usize>,
    i: Option<Box<RawNode>>,
    v: Option<Box<RawNode>>,
    #[serde(default)]
    lt: String,
    #[serde(default)]
    lk: Vec<String>,
    #[serde(default)]
    mt: String,
    #[serde(default)]
    gk: String,
}

/// Parses the generated table: its kinds, and where each type's text lies; the types are
/// decoded when first reached ([`TypeArena::get`]).
fn parse_table(text: &'static str) -> Result<BuiltinTable, String> {
    let raw: RawTable<'static> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let count = raw.types.len();
    let names = raw
        .types
        .iter()
        .enumerate()
        .map(|(index, source)| {
            let name: TypeName<'static> =
                serde_json::from_str(source.get()).map_err(|e| format!("type {index}: {e}"))?;
            Ok((name.n, index))
        })
        .collect::<Result<_, String>>()?;
    let types = TypeArena::from_table(raw.types);
    let mut kinds = raw.kinds;
    if let Some((group, version, kind, index)) = kinds.iter().find(|k| k.3 >= count) {
        return Err(format!("{group}/{version} {kind}: no type {index}"));
    }
    kinds.sort();
    kinds.dedup_by(|a, b| (&a.0, &a.1, &a.2) == (&b.0, &b.1, &b.2));
    let kinds = kinds
        .into_iter()
        .map(|(group, version, kind, index)| {
            (
                Arc::new(GroupVersionKind {
                    group,
                    version,
                    kind,
                }),
                index,
            )
        })
        .collect::<Vec<_>>();
    let mut by_kind: HashMap<String, Vec<_>> = HashMap::new();
    for (gvk, index) in &kinds {
        by_kind
            .entry(gvk.kind.clone())
            .or_default()
            .push((gvk.clone(), *index));
    }
    Ok(BuiltinTable {
        types: Arc::new(types),
        kinds,
        by_kind,
        names,
    })
}

/// Decodes one type of the table, checking its references against the `count` types.
fn decode_type(source: &RawValue, count: usize) -> Result<ObjectType, String> {
    let t: RawType = serde_json::from_str(source.get()).map_err(|e| e.to_string())?;
    let raw_fields = t.f.unwrap_or_default();
    let mut fields = Vec::with_capacity(raw_fields.len());
    for f in raw_fields {
        fields.push(Field {
            node: convert_node(f.t, count).map_err(|e| format!("{}.{}: {e}", t.n, f.n))?,
            name: f.n,
            omit_empty: f.oe,
            omit_zero: f.oz,
            pointer: f.p,
            enum_values: f.e,
            preserve_unknown_fields: f.pu,
            embedded_resource: f.emb,
            default: f.d,
            embedded_in: f.embedded_in,
        });
    }
    // io.k8s.api.core.v1.PodSpec: the package is the last path element, v1.
    let package = t.n.rsplit('.').nth(1).unwrap_or_default();
    Ok(ObjectType {
        go_type: format!("{package}.{}", t.go),
        go_name: t.go,
        atomic: t.a,
        preserve_unknown_fields: t.pu,
        embedded_resource: false,
        fields,
    })
}

fn convert_node(raw: RawNode, count: usize) -> Result<Node, String> {
    let kind = match raw.k.as_str() {
        "string" => NodeKind::String,
        "integer" => NodeKind::Integer(match raw.gk.as_str() {
            "int8" => IntKind::I8,
            "int16" => IntKind::I16,
            "int32" => IntKind::I32,
            "int64" | "int" => IntKind::I64,
            "uint8" => IntKind::U8,
            "uint16" => IntKind::U16,
            "uint32" => IntKind::U32,
            "uint64" | "uint" => IntKind::U64,
            other => return Err(format!("integer of Go kind {other:?}")),
        }),
        "number" => NodeKind::Number,
        "boolean" => NodeKind::Boolean,
        "bytes" => NodeKind::Bytes,
        "int-or-string" => NodeKind::IntOrString,
        "quantity" => NodeKind::Quantity,
        "time" => NodeKind::Time,
        "raw" => NodeKind::Any,
        "object" => match raw.r {
            Some(index) if index < count => NodeKind::Object(index),
            _ => return Err("object without a valid type reference".to_owned()),
        },
        "map" => NodeKind::Map {
            values: Box::new(convert_node(*raw.v.ok_or("map without values")?, count)?),
            atomic: raw.mt == "atomic",
        },
        "list" => NodeKind::List {
            items: Box::new(convert_node(*raw.i.ok_or("list without items")?, count)?),
            list_type: match raw.lt.as_str() {
                "" | "atomic" => ListType::Atomic,
                "set" => ListType::Set,
                "map" => ListType::Map,
                other => return Err(format!("list type {other:?}")),
            },
            keys: raw.lk,
        },
        other => return Err(format!("node kind {other:?}")),
    };
    Ok(Node {
        kind,
        go_type: raw.go,
        format: String::new(),
    })
}

/// Builds a schema from an arena (custom resources).
pub(crate) fn schema_from_parts(
    types: Vec<ObjectType>,
    root: usize,
    gvk: GroupVersionKind,
) -> Schema {
    Schema {
        types: Arc::new(TypeArena::built(types)),
        root,
        gvk: Arc::new(gvk),
        origin: Origin::CustomResource,
    }
}

#[cfg(test)]
mod tests;
