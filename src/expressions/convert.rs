//! JSON ↔ CEL. Integers are `int`, as in Kubernetes; floats are `double`.

use std::collections::HashMap;
use std::sync::Arc;

use cel::Value;
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use cel::objects::{Key, Map};

use super::CelEvalError;

/// Converts JSON to a CEL value: integers → `int` (beyond `i64`: `uint`, then `double`),
/// floats → `double`, objects → maps with string keys.
pub fn json_to_cel(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::UInt(u)
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
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

/// Converts JSON straight to the interpreter's representation, borrowing its strings: what
/// [`super::Activation`] binds, so a request body is converted once and not copied again.
pub fn json_to_val(value: &serde_json::Value) -> Box<dyn Val + '_> {
    match value {
        serde_json::Value::Null => Box::new(CelNull),
        serde_json::Value::Bool(b) => Box::new(CelBool::from(*b)),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Box::new(CelInt::from(i))
            } else if let Some(u) = n.as_u64() {
                Box::new(CelUInt::from(u))
            } else {
                Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN)))
            }
        }
        serde_json::Value::String(s) => Box::new(CelString::from(s.as_str())),
        serde_json::Value::Array(items) => Box::new(CelList::from(
            items.iter().map(json_to_val).collect::<Vec<_>>(),
        )),
        serde_json::Value::Object(fields) => Box::new(CelMap::from(
            fields
                .iter()
                .map(|(k, v)| (CelMapKey::from(k.as_str()), json_to_val(v)))
                .collect::<HashMap<_, _>>(),
        )),
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
        Value::Timestamp(t) => serde_json::Value::String(t.to_rfc3339()),
        other => {
            return Err(CelEvalError::runtime(format!(
                "cannot convert {} to JSON",
                display(other)
            )));
        }
    })
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
