//! Values of the compiled evaluator: scalars, strings and JSON containers borrowed from the
//! request, and the few values an evaluation builds (concatenated strings, lists).

use std::sync::Arc;

use crate::admission::{JsonKind, JsonRead, Node, ObjectView, unique_members};
use crate::expressions::convert::JsonNumber;

/// A value during one evaluation, borrowing what lives at least as long as `'r` (the
/// request's JSON, the program's literals).
///
/// Two words, a tag and a payload that is one integer or pointer for every variant (strings
/// by `&String`, shared ones by `Arc<String>` (shared as the interpreter shares them), bools and doubles as [`Flag`] and [`Float`]
/// words): such a value, and a [`Result`] of one with a zero-sized error, is returned in two
/// registers. Returned through memory, the caller's copies straddled the callee's narrower
/// stores and stalled.
#[derive(Debug, Clone, Default)]
pub(in crate::expressions) enum Value<'r> {
    #[default]
    Null,
    Bool(Flag),
    Int(i64),
    Uint(u64),
    Double(Float),
    Text(&'r String),
    OwnedText(Arc<String>),
    /// A JSON object (a CEL map) or array (a list).
    Json(&'r serde_json::Value),
    /// A string, list or map of a request's object held in an [`ObjectView`]: its position
    /// there (beside the tag, in the first word) and the view.
    View(u32, &'r ObjectView),
    /// The key of a member of a map held in an [`ObjectView`], by the member's position (a
    /// map's key as a comprehension gives it).
    ViewKey(u32, &'r ObjectView),
    List(Arc<Vec<Value<'r>>>),
    /// An optional: `optional.none()` or `optional.of(v)`.
    Optional(Option<Arc<Value<'r>>>),
    /// What a library call returned that has no variant here (maps, bytes, quantities, …):
    /// only passed on to other library calls.
    Cel(Arc<cel::Value>),
}

const _: () = assert!(std::mem::size_of::<Value<'static>>() == 16);

/// A bool held in a word (see [`Value`]).
#[derive(Debug, Clone, Copy)]
pub(in crate::expressions) struct Flag(u64);

impl Flag {
    pub(super) fn get(self) -> bool {
        self.0 != 0
    }
}

/// A double held in a word by its bits (see [`Value`]).
#[derive(Debug, Clone, Copy)]
pub(in crate::expressions) struct Float(u64);

impl Float {
    pub(super) fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

impl<'r> Value<'r> {
    pub(super) fn from_bool(b: bool) -> Self {
        Value::Bool(Flag(u64::from(b)))
    }

    pub(super) fn from_double(d: f64) -> Self {
        Value::Double(Float(d.to_bits()))
    }

    /// A JSON value as the interpreter sees it: integers `int`, beyond `i64` `uint`, then
    /// `double` (see [`crate::expressions::json_to_cel`]).
    pub(super) fn from_json(json: &'r serde_json::Value) -> Self {
        match json {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::from_bool(*b),
            serde_json::Value::Number(n) => match JsonNumber::of(n) {
                JsonNumber::Int(i) => Value::Int(i),
                JsonNumber::Uint(u) => Value::Uint(u),
                JsonNumber::Double(d) => Value::from_double(d),
            },
            serde_json::Value::String(s) => Value::Text(s),
            serde_json::Value::Array(_) | serde_json::Value::Object(_) => Value::Json(json),
        }
    }

    /// A value of a view, as this evaluator holds it: scalars as themselves, strings, lists
    /// and maps by their position.
    pub(super) fn from_node(node: Node<'r>) -> Self {
        match node.kind() {
            JsonKind::Null => Value::Null,
            JsonKind::Bool => Value::from_bool(node.as_bool().unwrap_or_default()),
            JsonKind::Number => match node.as_number().map(|n| JsonNumber::of(&n)) {
                Some(JsonNumber::Int(i)) => Value::Int(i),
                Some(JsonNumber::Uint(u)) => Value::Uint(u),
                Some(JsonNumber::Double(d)) => Value::from_double(d),
                None => Value::Null,
            },
            JsonKind::String | JsonKind::Array | JsonKind::Object => {
                Value::View(node.index(), node.view())
            }
        }
    }

    /// The view's node, for a string, list or map of a view.
    pub(super) fn node(&self) -> Option<Node<'r>> {
        match self {
            Value::View(index, view) => Some(view.node(*index)),
            _ => None,
        }
    }

    /// The view's node if it is a map.
    pub(super) fn view_map(&self) -> Option<Node<'r>> {
        self.node().filter(|node| node.kind() == JsonKind::Object)
    }

    /// The view's node if it is a list.
    pub(super) fn view_list(&self) -> Option<Node<'r>> {
        self.node().filter(|node| node.kind() == JsonKind::Array)
    }

    pub(super) fn text(&self) -> Option<&str> {
        match self {
            Value::Text(text) => Some(text.as_str()),
            Value::OwnedText(text) => Some(text.as_str()),
            Value::View(index, view) => view.node(*index).as_str(),
            Value::ViewKey(index, view) => Some(view.node(*index).key()),
            _ => None,
        }
    }

    /// Whether the interpreter takes this value as it is ([`Value::to_cel`] converts it):
    /// it neither is nor holds an optional.
    pub(super) fn is_plain(&self) -> bool {
        match self {
            Value::Optional(_) => false,
            Value::List(items) => items.iter().all(Value::is_plain),
            _ => true,
        }
    }

    pub(super) fn is_list(&self) -> bool {
        matches!(
            self,
            Value::List(_) | Value::Json(serde_json::Value::Array(_))
        ) || self.view_list().is_some()
    }

    /// Whether this is a string or bytes (cel-go sizes some calls differently for them).
    pub(super) fn is_text_or_bytes(&self) -> bool {
        self.text().is_some()
            || matches!(self, Value::Cel(value) if matches!(**value, cel::Value::Bytes(_)))
    }

    /// The member `key` of a map the interpreter built, if this is one (`Some(None)`: it has
    /// no such key).
    pub(super) fn cel_map_member(&self, key: &str) -> Option<Option<&cel::Value>> {
        match self {
            Value::Cel(value) => match &**value {
                cel::Value::Map(map) => Some(map.get(&cel::objects::KeyRef::String(key))),
                _ => None,
            },
            _ => None,
        }
    }

    /// A value a library call returned: scalars, strings and lists in this evaluator's
    /// variants, anything else held as it is.
    pub(super) fn from_cel(value: cel::Value) -> Self {
        match value {
            cel::Value::Null => Value::Null,
            cel::Value::Bool(b) => Value::from_bool(b),
            cel::Value::Int(i) => Value::Int(i),
            cel::Value::UInt(u) => Value::Uint(u),
            cel::Value::Float(d) => Value::from_double(d),
            cel::Value::String(text) => Value::OwnedText(text),
            cel::Value::List(items) => Value::List(Arc::new(
                items.iter().cloned().map(Value::from_cel).collect(),
            )),
            other => Value::Cel(Arc::new(other)),
        }
    }

    /// cel-go's `actualSize`: a string's code points, a list's or map's items; `None` for
    /// values without a size.
    pub(super) fn size(&self) -> Option<u64> {
        match self {
            Value::Text(_) | Value::OwnedText(_) => {
                Some(self.text().map_or(0, |t| t.chars().count() as u64))
            }
            Value::Json(serde_json::Value::Array(items)) => Some(items.len() as u64),
            Value::Json(serde_json::Value::Object(fields)) => Some(fields.len() as u64),
            Value::View(index, view) => {
                let node = view.node(*index);
                match node.kind() {
                    JsonKind::String => node.as_str().map(|t| t.chars().count() as u64),
                    JsonKind::Array => node.list_len().map(|len| len as u64),
                    _ => Some(unique_members(node).count() as u64),
                }
            }
            Value::ViewKey(..) => self.text().map(|t| t.chars().count() as u64),
            Value::List(items) => Some(items.len() as u64),
            Value::Cel(value) => match &**value {
                cel::Value::Bytes(bytes) => Some(bytes.len() as u64),
                cel::Value::Map(map) => Some(map.map.len() as u64),
                _ => None,
            },
            _ => None,
        }
    }

    /// The items of a list, if it is one.
    pub(super) fn list_items(&self) -> Option<ListItems<'_, 'r>> {
        match self {
            Value::Json(serde_json::Value::Array(items)) => Some(ListItems::Json(items.iter())),
            Value::View(..) => self.view_list().map(|list| ListItems::View(list.items())),
            Value::List(items) => Some(ListItems::Built(items.iter())),
            _ => None,
        }
    }

    /// Equality where it is certain to be the interpreter's: scalars of one type, `null`
    /// with `null`. `None` for anything else (mixed types, lists, maps).
    pub(super) fn equals(&self, other: &Value<'r>) -> Option<bool> {
        match (self, other) {
            (Value::Null, Value::Null) => Some(true),
            // `null` equals nothing else (optionals aside).
            (Value::Null, Value::Optional(_)) | (Value::Optional(_), Value::Null) => None,
            (Value::Null, _) | (_, Value::Null) => Some(false),
            (Value::Int(_) | Value::Uint(_) | Value::Double(_), _)
                if matches!(other, Value::Int(_) | Value::Uint(_) | Value::Double(_)) =>
            {
                numeric_order(self, other).map(|ordering| ordering.is_eq())
            }
            (Value::Bool(a), Value::Bool(b)) => Some(a.get() == b.get()),
            (Value::Int(a), Value::Int(b)) => Some(a == b),
            (Value::Uint(a), Value::Uint(b)) => Some(a == b),
            (Value::Double(a), Value::Double(b)) => Some(a.get() == b.get()),
            _ => match (self.text(), other.text()) {
                (Some(a), Some(b)) => Some(a == b),
                _ => None,
            },
        }
    }

    /// The value as the interpreter returns it; `None` for a value that is or holds an
    /// optional (left to the interpreter's own conversion).
    pub(in crate::expressions) fn to_cel(&self) -> Option<cel::Value> {
        Some(match self {
            Value::Null => cel::Value::Null,
            Value::Bool(b) => cel::Value::Bool(b.get()),
            Value::Int(i) => cel::Value::Int(*i),
            Value::Uint(u) => cel::Value::UInt(*u),
            Value::Double(d) => cel::Value::Float(d.get()),
            Value::Text(text) => cel::Value::String(Arc::new((*text).clone())),
            Value::OwnedText(text) => cel::Value::String(Arc::clone(text)),
            Value::Json(json) => crate::expressions::json_to_cel(json),
            Value::View(index, view) => match view.node(*index).as_str() {
                Some(text) => cel::Value::String(Arc::new(text.to_owned())),
                None => crate::expressions::json_to_cel(&view.node(*index).to_value()),
            },
            Value::ViewKey(index, view) => {
                cel::Value::String(Arc::new(view.node(*index).key().to_owned()))
            }
            Value::List(items) => cel::Value::List(Arc::new(
                items.iter().map(Value::to_cel).collect::<Option<_>>()?,
            )),
            Value::Optional(_) => return None,
            Value::Cel(value) => (**value).clone(),
        })
    }
}

/// The items of a list value, borrowed.
pub(super) enum ListItems<'v, 'r> {
    Json(std::slice::Iter<'r, serde_json::Value>),
    View(crate::admission::object_view::Items<'r>),
    Built(std::slice::Iter<'v, Value<'r>>),
}

impl<'r> Iterator for ListItems<'_, 'r> {
    type Item = Value<'r>;

    fn next(&mut self) -> Option<Value<'r>> {
        match self {
            ListItems::Json(items) => items.next().map(Value::from_json),
            ListItems::View(items) => items.next().map(Value::from_node),
            ListItems::Built(items) => items.next().cloned(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            ListItems::Json(items) => items.size_hint(),
            ListItems::View(items) => items.size_hint(),
            ListItems::Built(items) => items.size_hint(),
        }
    }
}

/// The order of two numbers of different types, where it is certain: an `int` or `uint` and a
/// `double` compared exactly when the integer is within ±2^53 and the double is not NaN; an
/// `int` and a `uint` always.
pub(super) fn numeric_order(a: &Value<'_>, b: &Value<'_>) -> Option<std::cmp::Ordering> {
    const EXACT: u64 = 1 << 53;
    let as_double = |value: &Value<'_>| match value {
        Value::Int(i) if i.unsigned_abs() <= EXACT => Some(*i as f64),
        Value::Uint(u) if *u <= EXACT => Some(*u as f64),
        Value::Double(d) if !d.get().is_nan() => Some(d.get()),
        _ => None,
    };
    match (a, b) {
        (Value::Int(i), Value::Uint(u)) => Some(i128::from(*i).cmp(&i128::from(*u))),
        (Value::Uint(u), Value::Int(i)) => Some(i128::from(*u).cmp(&i128::from(*i))),
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Uint(x), Value::Uint(y)) => Some(x.cmp(y)),
        _ => as_double(a)?.partial_cmp(&as_double(b)?),
    }
}
