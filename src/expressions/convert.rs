//! JSON ↔ CEL. Integers are `int`, as in Kubernetes; floats are `double`.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::ExecutionError;
use cel::Value;
use cel::common::traits::{Adder, Container, Indexer, Iterable, Sizer, Zeroer};
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt, Type,
};
use cel::common::value::{Builtin, BuiltinRef, CowVal, Val};
use cel::objects::{Key, Map};

use super::CelEvalError;
use super::check::OBJECT_TYPE_KEY;

/// A JSON number as CEL types it: `int`, beyond `i64` `uint`, then `double`.
pub(crate) enum JsonNumber {
    Int(i64),
    Uint(u64),
    Double(f64),
}

impl JsonNumber {
    pub(crate) fn of(number: &serde_json::Number) -> Self {
        if let Some(i) = number.as_i64() {
            JsonNumber::Int(i)
        } else if let Some(u) = number.as_u64() {
            JsonNumber::Uint(u)
        } else {
            JsonNumber::Double(number.as_f64().unwrap_or(f64::NAN))
        }
    }
}

/// Converts JSON to a CEL value: integers → `int` (beyond `i64`: `uint`, then `double`),
/// floats → `double`, objects → maps with string keys.
pub fn json_to_cel(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match JsonNumber::of(n) {
            JsonNumber::Int(i) => Value::Int(i),
            JsonNumber::Uint(u) => Value::UInt(u),
            JsonNumber::Double(d) => Value::Float(d),
        },
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(items) => {
            Value::List(Arc::new(items.iter().map(json_to_cel).collect()))
        }
        serde_json::Value::Object(fields) => {
            let map: HashMap<Key, Value> = fields
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), json_to_cel(v)))
                .collect();
            Value::Map(Map { map: Arc::new(map) })
        }
    }
}

/// Converts JSON straight to the interpreter's representation, borrowing it: scalars become
/// the built-in values (strings borrowed), objects and arrays a [`JsonView`] that converts
/// members only as they are read. What [`super::Activation`] binds, so a request body is not
/// copied, and a comprehension over `object.spec.containers` does not deep-copy each element.
pub fn json_to_val(value: &serde_json::Value) -> Box<dyn Val + '_> {
    match value {
        serde_json::Value::Null => Box::new(CelNull),
        serde_json::Value::Bool(b) => Box::new(CelBool::from(*b)),
        serde_json::Value::Number(n) => match JsonNumber::of(n) {
            JsonNumber::Int(i) => Box::new(CelInt::from(i)),
            JsonNumber::Uint(u) => Box::new(CelUInt::from(u)),
            JsonNumber::Double(d) => Box::new(CelDouble::from(d)),
        },
        serde_json::Value::String(s) => Box::new(CelString::from(s.as_str())),
        serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
            Box::new(JsonView::new(value))
        }
    }
}

/// A JSON object (a CEL `map`) or array (a `list`), borrowed, converted one level at a time
/// on first use: into a [`CelMap`] or [`CelList`] whose members are views in turn. Every
/// operation goes to that built-in container, which is also what `downcast_ref` finds, so a
/// view behaves exactly as the container would. Only the paths an expression reads get
/// converted, once per request; cloning a view (as a comprehension does with each element)
/// shares what has been converted rather than copying it deeply.
#[derive(Debug)]
pub struct JsonView<'a> {
    json: &'a serde_json::Value,
    shallow: OnceLock<Arc<Shallow<'a>>>,
}

#[derive(Debug)]
enum Shallow<'a> {
    Map(CelMap<'a>),
    List(CelList<'a>),
}

impl<'a> JsonView<'a> {
    fn new(json: &'a serde_json::Value) -> Self {
        JsonView {
            json,
            shallow: OnceLock::new(),
        }
    }

    fn shallow(&self) -> &Shallow<'a> {
        self.shallow.get_or_init(|| {
            Arc::new(match self.json {
                serde_json::Value::Object(fields) => Shallow::Map(CelMap::from(
                    fields
                        .iter()
                        .map(|(k, v)| (CelMapKey::from(k.as_str()), json_to_val(v)))
                        .collect::<HashMap<_, _>>(),
                )),
                serde_json::Value::Array(items) => Shallow::List(CelList::from(
                    items.iter().map(json_to_val).collect::<Vec<_>>(),
                )),
                _ => Shallow::List(CelList::from(Vec::new())),
            })
        })
    }

    fn inner(&self) -> &(dyn Val + 'a) {
        match self.shallow() {
            Shallow::Map(m) => m,
            Shallow::List(l) => l,
        }
    }
}

impl Val for JsonView<'_> {
    fn get_type(&self) -> &Type {
        if self.json.is_object() {
            <CelMap as Val>::cel_type()
        } else {
            <CelList as Val>::cel_type()
        }
    }

    fn cel_type() -> &'static Type {
        // A view is a map or a list, depending on the value.
        <CelMap as Val>::cel_type()
    }

    fn as_adder<'b, 'w>(&'b self) -> Option<&'b (dyn Adder + 'w)>
    where
        Self: 'w,
    {
        // lists concatenate; maps have no `+`
        self.json.is_array().then_some(self as &dyn Adder)
    }

    fn as_container(&self) -> Option<&dyn Container> {
        Some(self)
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn into_indexer<'w>(self: Box<Self>) -> Option<Box<dyn Indexer + 'w>>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn Iterable + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(self)
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        Some(self)
    }

    fn equals(&self, other: &dyn Val) -> bool {
        self.inner().equals(other)
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        // Convert the original, so that every clone (each comprehension over a list binds
        // clones of its elements) shares one conversion rather than making its own.
        self.shallow();
        let shallow = OnceLock::new();
        if let Some(converted) = self.shallow.get() {
            let _ = shallow.set(Arc::clone(converted));
        }
        Box::new(JsonView {
            json: self.json,
            shallow,
        })
    }

    fn as_builtin<'b, 'w>(&'b self) -> BuiltinRef<'b, 'w>
    where
        Self: 'w,
    {
        match self.shallow() {
            Shallow::Map(m) => BuiltinRef::Map(m),
            Shallow::List(l) => BuiltinRef::List(l),
        }
    }

    fn into_builtin<'w>(self: Box<Self>) -> Option<Builtin<'w>>
    where
        Self: 'w,
    {
        self.shallow();
        let shallow = self.shallow.into_inner()?;
        Some(match Arc::try_unwrap(shallow) {
            Ok(Shallow::Map(m)) => Builtin::Map(m),
            Ok(Shallow::List(l)) => Builtin::List(l),
            Err(shared) => match &*shared {
                Shallow::Map(m) => Builtin::Map(m.clone()),
                Shallow::List(l) => Builtin::List(l.clone()),
            },
        })
    }
}

impl Adder for JsonView<'_> {
    fn add<'b, 'w>(&'b self, rhs: &(dyn Val + 'w)) -> Result<CowVal<'b, 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.inner().as_adder().expect("lists add").add(rhs)
    }
}

impl Container for JsonView<'_> {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        self.inner()
            .as_container()
            .expect("maps and lists are containers")
            .contains(value)
    }
}

impl Indexer for JsonView<'_> {
    fn get<'b, 'w>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.inner()
            .as_indexer()
            .expect("maps and lists are indexers")
            .get(idx)
    }

    fn steal<'w>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

impl Iterable for JsonView<'_> {
    fn iter<'b, 'w>(&'b self) -> Box<dyn cel::common::traits::Iterator<'b, 'w> + 'b>
    where
        Self: 'w,
    {
        self.inner()
            .as_iterable()
            .expect("maps and lists are iterable")
            .iter()
    }
}

impl Sizer for JsonView<'_> {
    fn size(&self) -> CelInt {
        let len = match self.json {
            serde_json::Value::Object(fields) => fields.len(),
            serde_json::Value::Array(items) => items.len(),
            _ => 0,
        };
        CelInt::from(len as i64)
    }
}

impl Zeroer for JsonView<'_> {
    fn is_zero_value(&self) -> bool {
        match self.json {
            serde_json::Value::Object(fields) => fields.is_empty(),
            serde_json::Value::Array(items) => items.is_empty(),
            _ => true,
        }
    }
}

/// Converts a CEL value to JSON: maps need string (or int, uint, bool) keys, doubles must be
/// finite; bytes become base64 strings, durations and timestamps their string forms.
pub fn cel_to_json(value: &Value) -> Result<serde_json::Value, CelEvalError> {
    Ok(match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(i) => serde_json::Value::from(*i),
        Value::UInt(u) => serde_json::Value::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .ok_or_else(|| CelEvalError::runtime(format!("cannot convert {f} to JSON")))?,
        Value::String(s) => serde_json::Value::String(s.to_string()),
        Value::Bytes(b) => {
            use base64::Engine;
            serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(&**b))
        }
        Value::List(items) => {
            serde_json::Value::Array(items.iter().map(cel_to_json).collect::<Result<_, _>>()?)
        }
        Value::Map(map) => {
            let mut object = serde_json::Map::with_capacity(map.map.len());
            for (k, v) in map.map.iter() {
                let key = match k {
                    Key::String(s) if s.as_str() == OBJECT_TYPE_KEY => continue,
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                object.insert(key, cel_to_json(v)?);
            }
            serde_json::Value::Object(object)
        }
        Value::Duration(d) => serde_json::Value::String(display(&Value::Duration(*d))),
        Value::Timestamp(_) => {
            serde_json::Value::String(super::library::go_rfc3339_nano(value).unwrap_or_default())
        }
        other => {
            return Err(CelEvalError::runtime(format!(
                "cannot convert {} to JSON",
                display(other)
            )));
        }
    })
}

/// cel-go's check of an apply configuration (`ObjectVal.CheckTypeNamesMatchFieldPathNames`):
/// each `Object…{}` in `value` must be named by its field path from the root (`Object.spec`
/// under `spec`; a list's or map's items by the path of the field holding them). One message
/// per literal named otherwise, in no particular order (cel-go walks Go maps).
pub fn object_type_mismatches(value: &Value) -> Vec<String> {
    let mut mismatches = Vec::new();
    let mut path = object_type_name(value).unwrap_or("Object").to_owned();
    check_object_type_names(value, &mut path, &mut mismatches);
    mismatches
}

fn object_type_name(value: &Value) -> Option<&str> {
    let Value::Map(map) = value else { return None };
    match map
        .map
        .get(&Key::String(Arc::new(OBJECT_TYPE_KEY.to_owned())))
    {
        Some(Value::String(name)) => Some(name.as_str()),
        _ => None,
    }
}

fn check_object_type_names(value: &Value, path: &mut String, mismatches: &mut Vec<String>) {
    match value {
        Value::Map(map) => match object_type_name(value) {
            Some(name) => {
                if name != path.as_str() {
                    mismatches.push(format!(
                        "unexpected type name {name:?}, expected {path:?}, which matches field \
                         name path from root Object type"
                    ));
                }
                let mut fields: Vec<(&str, &Value)> = map
                    .map
                    .iter()
                    .filter_map(|(key, field)| match key {
                        Key::String(key) if key.as_str() != OBJECT_TYPE_KEY => {
                            Some((key.as_str(), field))
                        }
                        _ => None,
                    })
                    .collect();
                // In field order, for messages that read the same each time.
                fields.sort_unstable_by_key(|(key, _)| *key);
                for (key, field) in fields {
                    let len = path.len();
                    path.push('.');
                    path.push_str(key);
                    check_object_type_names(field, path, mismatches);
                    path.truncate(len);
                }
            }
            None => {
                for item in map.map.values() {
                    check_object_type_names(item, path, mismatches);
                }
            }
        },
        Value::List(items) => {
            for item in items.iter() {
                check_object_type_names(item, path, mismatches);
            }
        }
        _ => {}
    }
}

/// CEL-ish text for a value in messages.
pub(crate) fn display(value: &Value) -> String {
    match value {
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => format!("{u}u"),
        Value::Float(f) => f.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".to_owned(),
        Value::Duration(d) => format!("{}s", d.num_milliseconds() as f64 / 1000.0),
        other => format!("{other:?}"),
    }
}

/// The CEL type name of a value, for messages.
pub(crate) fn type_name(v: &Value) -> &str {
    match v {
        Value::List(_) => "list",
        Value::Map(_) => "map",
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "double",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::Bool(_) => "bool",
        Value::Null => "null_type",
        Value::Duration(_) => "google.protobuf.Duration",
        Value::Timestamp(_) => "google.protobuf.Timestamp",
        Value::Opaque(o) => o.runtime_type_name(),
        _ => "dyn",
    }
}
