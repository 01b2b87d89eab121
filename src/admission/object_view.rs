//! A request's object read into one flat table instead of a tree of allocations.
//!
//! [`ObjectView`] holds a JSON value as two buffers: its entries in document order (a container
//! followed by its members or items, each container knowing where its last descendant ends)
//! and the text of its strings and keys, unescaped. Decoding is serde_json's own (the same
//! escapes, numbers, UTF-8 and nesting limit as [`serde_json::Value`]), so a body is accepted or
//! refused exactly as before; building appends to the two buffers and dropping frees them,
//! where a `Value` allocates, and frees, every string, key, list and map node.
//!
//! Reads follow `Value`'s: [`JsonRead::get`] answers the last of duplicate members, as a decoded
//! map keeps it. [`JsonRead::members`] gives every member in document order, duplicates included,
//! so a walk of the view visits what a walk of the `Value` visits and possibly more, never
//! less. [`Node::to_value`] builds the `Value` for readers that need one.
//!
//! [`JsonRead`] is what a reader needs of either form, and [`JsonRef`] holds either, so a
//! reader written once reads both.

use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A JSON value decoded into one flat table (see the module docs).
#[derive(Clone)]
pub struct ObjectView {
    entries: Vec<Entry>,
    text: String,
}

impl fmt::Debug for ObjectView {
    /// Sizes only: a view holds a request's object, which may be a Secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectView")
            .field("entries", &self.entries.len())
            .field("text_bytes", &self.text.len())
            .finish()
    }
}

/// One value: its key when it is a member of an object, the index after it and its
/// descendants (its next sibling's, so that a scan of members steps by one load), and what it
/// holds ([`Slot`], stored as a tag and a word: the entry stays 24 bytes).
#[derive(Clone, Copy)]
struct Entry {
    key: Span,
    next: u32,
    tag: Tag,
    /// A boolean (0 or 1), an integer's bits, a float's bits, a string's span or a list's
    /// item count, by `tag`.
    payload: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Tag {
    Null,
    Bool,
    PosInt,
    NegInt,
    Float,
    Str,
    Array,
    Object,
}

impl Entry {
    /// The entry at `index` holding `slot` (a container's `end` is its `next`).
    fn new(key: Span, index: u32, slot: Slot) -> Entry {
        let (tag, payload, next) = match slot {
            Slot::Null => (Tag::Null, 0, index + 1),
            Slot::Bool(b) => (Tag::Bool, u64::from(b), index + 1),
            Slot::PosInt(u) => (Tag::PosInt, u, index + 1),
            Slot::NegInt(i) => (Tag::NegInt, i as u64, index + 1),
            Slot::Float(f) => (Tag::Float, f.to_bits(), index + 1),
            Slot::Str(span) => (Tag::Str, span.0, index + 1),
            Slot::Array { end, len } => (Tag::Array, u64::from(len), end),
            Slot::Object { end } => (Tag::Object, 0, end),
        };
        Entry {
            key,
            next,
            tag,
            payload,
        }
    }

    fn slot(self) -> Slot {
        match self.tag {
            Tag::Null => Slot::Null,
            Tag::Bool => Slot::Bool(self.payload != 0),
            Tag::PosInt => Slot::PosInt(self.payload),
            Tag::NegInt => Slot::NegInt(self.payload as i64),
            Tag::Float => Slot::Float(f64::from_bits(self.payload)),
            Tag::Str => Slot::Str(Span(self.payload)),
            Tag::Array => Slot::Array {
                end: self.next,
                len: self.payload as u32,
            },
            Tag::Object => Slot::Object { end: self.next },
        }
    }
}

const _: () = assert!(std::mem::size_of::<Entry>() == 24);

/// A run of the view's text: its start in the high half, its length in the low half (one
/// word, so that it moves in one store).
#[derive(Clone, Copy, Default)]
struct Span(u64);

impl Span {
    fn new(start: u32, len: u32) -> Span {
        Span((u64::from(start) << 32) | u64::from(len))
    }

    fn start(self) -> usize {
        (self.0 >> 32) as usize
    }

    fn len(self) -> usize {
        (self.0 & u64::from(u32::MAX)) as usize
    }
}

#[derive(Clone, Copy)]
enum Slot {
    Null,
    Bool(bool),
    /// A number serde_json reads as an integer ≥ 0.
    PosInt(u64),
    /// A number serde_json reads as a negative integer.
    NegInt(i64),
    Float(f64),
    Str(Span),
    /// `end`: the index after the list's last descendant; `len`: its items.
    Array {
        end: u32,
        len: u32,
    },
    /// `end`: the index after the map's last descendant.
    Object {
        end: u32,
    },
}

/// What kind of JSON value a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonKind {
    /// `null`
    Null,
    /// `true` or `false`
    Bool,
    /// A number.
    Number,
    /// A string.
    String,
    /// A list.
    Array,
    /// A map.
    Object,
}

impl ObjectView {
    /// The value at the top.
    ///
    /// # Panics
    /// Never for a view made by this module's constructors, which always hold one value.
    pub fn root(&self) -> Node<'_> {
        assert!(!self.entries.is_empty(), "a view holds one value");
        Node {
            view: self,
            index: 0,
        }
    }

    /// The node at `index`, as [`Node::index`] gave it.
    ///
    /// # Panics
    /// If `index` is not a position in this view.
    pub fn node(&self, index: u32) -> Node<'_> {
        assert!((index as usize) < self.entries.len(), "a node of this view");
        Node { view: self, index }
    }

    fn text(&self, span: Span) -> &str {
        &self.text[span.start()..span.start() + span.len()]
    }

    /// Whether the key `span` is `key`, compared as bytes (a span always lies on character
    /// boundaries, so no boundary check is needed).
    #[inline]
    fn key_is(&self, span: Span, key: &[u8]) -> bool {
        span.len() == key.len()
            && self
                .text
                .as_bytes()
                .get(span.start()..span.start() + span.len())
                == Some(key)
    }

    fn slot(&self, index: u32) -> Slot {
        self.entries[index as usize].slot()
    }

    /// The index after `index` and its descendants.
    fn end_of(&self, index: u32) -> u32 {
        self.entries[index as usize].next
    }
}

/// A value inside an [`ObjectView`]: a reference to the view and a position in it.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    view: &'a ObjectView,
    index: u32,
}

impl fmt::Debug for Node<'_> {
    /// The kind only (see [`ObjectView`]'s `Debug`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Node({:?})", self.kind())
    }
}

impl<'a> Node<'a> {
    fn slot(self) -> Slot {
        self.view.slot(self.index)
    }

    /// The view this node is in.
    pub fn view(self) -> &'a ObjectView {
        self.view
    }

    /// The node's position in its view ([`ObjectView::node`] finds it again).
    pub fn index(self) -> u32 {
        self.index
    }

    /// The key this node has as a member of a map (`""` for the root and list items).
    pub fn key(self) -> &'a str {
        self.view.text(self.view.entries[self.index as usize].key)
    }

    /// How many items a list has; `None` for any other value.
    pub fn list_len(self) -> Option<usize> {
        match self.slot() {
            Slot::Array { len, .. } => Some(len as usize),
            _ => None,
        }
    }

    /// This value as a [`Value`], built as serde_json would have decoded it.
    pub fn to_value(self) -> Value {
        match self.slot() {
            Slot::Null => Value::Null,
            Slot::Bool(b) => Value::Bool(b),
            Slot::PosInt(_) | Slot::NegInt(_) | Slot::Float(_) => {
                self.as_number().map_or(Value::Null, Value::Number)
            }
            Slot::Str(span) => Value::String(self.view.text(span).to_owned()),
            Slot::Array { len, .. } => {
                let mut items = Vec::with_capacity(len as usize);
                items.extend(self.items().map(Node::to_value));
                Value::Array(items)
            }
            Slot::Object { .. } => {
                let mut map = Map::new();
                for (key, member) in self.members() {
                    map.insert(key.to_owned(), member.to_value());
                }
                Value::Object(map)
            }
        }
    }
}

/// The items of a list: [`JsonRead::items`] of a [`Node`].
#[derive(Clone)]
pub struct Items<'a> {
    view: &'a ObjectView,
    next: u32,
    end: u32,
}

impl<'a> Iterator for Items<'a> {
    type Item = Node<'a>;

    fn next(&mut self) -> Option<Node<'a>> {
        if self.next >= self.end {
            return None;
        }
        let node = Node {
            view: self.view,
            index: self.next,
        };
        self.next = self.view.end_of(self.next);
        Some(node)
    }
}

/// The members of a map: [`JsonRead::members`] of a [`Node`].
#[derive(Clone)]
pub struct Members<'a>(Items<'a>);

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, Node<'a>);

    fn next(&mut self) -> Option<(&'a str, Node<'a>)> {
        let node = self.0.next()?;
        let key = node.view.entries[node.index as usize].key;
        Some((node.view.text(key), node))
    }
}

/// What a reader needs of a JSON value, implemented by a [`Value`] and a view's [`Node`]: a
/// reader generic over it is compiled for each, so a tree reads as fast as before.
pub trait JsonRead<'a>: Copy + 'a {
    /// The items of a list.
    type Items: Iterator<Item = Self>;
    /// The members of a map, with their keys: a `Value`'s in key order, a view's in document
    /// order with duplicates (see the module docs).
    type Members: Iterator<Item = (&'a str, Self)>;

    /// What kind of value this is.
    fn kind(self) -> JsonKind;
    /// The member `key` of a map (the last, if written more than once).
    fn get(self, key: &str) -> Option<Self>;
    /// The string, if this is one.
    fn as_str(self) -> Option<&'a str>;
    /// The boolean, if this is one.
    fn as_bool(self) -> Option<bool>;
    /// The number, if this is one.
    fn as_number(self) -> Option<Number>;
    /// The items of a list; nothing for any other value.
    fn items(self) -> Self::Items;
    /// The members of a map; nothing for any other value.
    fn members(self) -> Self::Members;

    /// Whether [`JsonRead::members`] gives each key once, in key order, as a decoded map
    /// holds them.
    const MEMBERS_UNIQUE: bool;

    /// This value as a [`Value`] (a copy of a tree's, built from a view's).
    fn to_value(self) -> Value;

    /// Whether this is `null`.
    fn is_null(self) -> bool {
        self.kind() == JsonKind::Null
    }

    /// The number as an `i64`, if it is one that fits (as [`Value::as_i64`]).
    fn as_i64(self) -> Option<i64> {
        self.as_number()?.as_i64()
    }
}

/// The members of a map as a decoded `Value` holds them: each key once, with the value written
/// last, in key order. A tree's members are that already, and so are a view's when written in
/// key order, as Go writes maps; other views' members are sorted and reduced (allocating).
pub fn unique_members<'a, J: JsonRead<'a>>(map: J) -> UniqueMembers<'a, J> {
    if J::MEMBERS_UNIQUE || map.members().is_sorted_by(|a, b| a.0 < b.0) {
        return UniqueMembers::Direct(map.members());
    }
    let mut members: Vec<(&'a str, J)> = map.members().collect();
    // Stable: of equal keys, the one written last stays last.
    members.sort_by(|a, b| a.0.cmp(b.0));
    let mut unique: Vec<(&'a str, J)> = Vec::with_capacity(members.len());
    for member in members {
        match unique.last_mut() {
            Some(last) if last.0 == member.0 => *last = member,
            _ => unique.push(member),
        }
    }
    UniqueMembers::Reduced(unique.into_iter())
}

/// The iterator of [`unique_members`].
pub enum UniqueMembers<'a, J: JsonRead<'a>> {
    /// A form whose members are unique already.
    Direct(J::Members),
    /// Members sorted and reduced.
    Reduced(std::vec::IntoIter<(&'a str, J)>),
}

impl<'a, J: JsonRead<'a>> Iterator for UniqueMembers<'a, J> {
    type Item = (&'a str, J);

    fn next(&mut self) -> Option<(&'a str, J)> {
        match self {
            UniqueMembers::Direct(members) => members.next(),
            UniqueMembers::Reduced(members) => members.next(),
        }
    }
}

impl<'a> JsonRead<'a> for &'a Value {
    type Items = std::slice::Iter<'a, Value>;
    type Members = TreeMembers<'a>;

    const MEMBERS_UNIQUE: bool = true;

    #[inline]
    fn kind(self) -> JsonKind {
        match self {
            Value::Null => JsonKind::Null,
            Value::Bool(_) => JsonKind::Bool,
            Value::Number(_) => JsonKind::Number,
            Value::String(_) => JsonKind::String,
            Value::Array(_) => JsonKind::Array,
            Value::Object(_) => JsonKind::Object,
        }
    }
    #[inline]
    fn get(self, key: &str) -> Option<Self> {
        self.as_object()?.get(key)
    }
    #[inline]
    fn as_str(self) -> Option<&'a str> {
        Value::as_str(self)
    }
    #[inline]
    fn as_bool(self) -> Option<bool> {
        Value::as_bool(self)
    }
    #[inline]
    fn is_null(self) -> bool {
        Value::is_null(self)
    }
    fn to_value(self) -> Value {
        self.clone()
    }
    #[inline]
    fn as_i64(self) -> Option<i64> {
        Value::as_i64(self)
    }
    #[inline]
    fn as_number(self) -> Option<Number> {
        match self {
            Value::Number(number) => Some(number.clone()),
            _ => None,
        }
    }
    #[inline]
    fn items(self) -> Self::Items {
        self.as_array().map_or([].iter(), |items| items.iter())
    }
    #[inline]
    fn members(self) -> TreeMembers<'a> {
        TreeMembers(self.as_object().map(|map| map.iter()))
    }
}

/// The members of a `Value` map, keys as `&str`.
#[derive(Clone)]
pub struct TreeMembers<'a>(Option<serde_json::map::Iter<'a>>);

impl<'a> Iterator for TreeMembers<'a> {
    type Item = (&'a str, &'a Value);

    #[inline]
    fn next(&mut self) -> Option<(&'a str, &'a Value)> {
        self.0
            .as_mut()?
            .next()
            .map(|(key, value)| (key.as_str(), value))
    }
}

impl<'a> JsonRead<'a> for Node<'a> {
    type Items = Items<'a>;
    type Members = Members<'a>;

    const MEMBERS_UNIQUE: bool = false;

    fn to_value(self) -> Value {
        Node::to_value(self)
    }

    fn kind(self) -> JsonKind {
        match self.slot() {
            Slot::Null => JsonKind::Null,
            Slot::Bool(_) => JsonKind::Bool,
            Slot::PosInt(_) | Slot::NegInt(_) | Slot::Float(_) => JsonKind::Number,
            Slot::Str(_) => JsonKind::String,
            Slot::Array { .. } => JsonKind::Array,
            Slot::Object { .. } => JsonKind::Object,
        }
    }

    fn get(self, key: &str) -> Option<Node<'a>> {
        let Slot::Object { end } = self.slot() else {
            return None;
        };
        let view = self.view;
        let key = key.as_bytes();
        let mut found = None;
        let mut index = self.index + 1;
        while let Some(entry) = view.entries.get(index as usize).filter(|_| index < end) {
            if view.key_is(entry.key, key) {
                found = Some(Node { view, index });
            }
            index = entry.next;
        }
        found
    }

    fn as_str(self) -> Option<&'a str> {
        match self.slot() {
            Slot::Str(span) => Some(self.view.text(span)),
            _ => None,
        }
    }

    fn as_bool(self) -> Option<bool> {
        match self.slot() {
            Slot::Bool(b) => Some(b),
            _ => None,
        }
    }

    fn as_number(self) -> Option<Number> {
        match self.slot() {
            Slot::PosInt(u) => Some(Number::from(u)),
            Slot::NegInt(i) => Some(Number::from(i)),
            Slot::Float(f) => Number::from_f64(f),
            _ => None,
        }
    }

    fn items(self) -> Items<'a> {
        let end = match self.slot() {
            Slot::Array { end, .. } => end,
            _ => self.index + 1,
        };
        Items {
            view: self.view,
            next: self.index + 1,
            end,
        }
    }

    fn members(self) -> Members<'a> {
        let end = match self.slot() {
            Slot::Object { end, .. } => end,
            _ => self.index + 1,
        };
        Members(Items {
            view: self.view,
            next: self.index + 1,
            end,
        })
    }
}

/// A JSON value held as a [`Value`] or in an [`ObjectView`], for a reader that takes either
/// (and reads each through [`JsonRead`]).
#[derive(Debug, Clone, Copy)]
pub enum JsonRef<'a> {
    /// A value of a decoded tree.
    Tree(&'a Value),
    /// A value of a view.
    View(Node<'a>),
}

impl<'a> From<&'a Value> for JsonRef<'a> {
    fn from(value: &'a Value) -> Self {
        JsonRef::Tree(value)
    }
}

impl<'a> From<Node<'a>> for JsonRef<'a> {
    fn from(node: Node<'a>) -> Self {
        JsonRef::View(node)
    }
}

/// The items of a [`JsonRef`] list.
#[derive(Clone)]
pub enum RefItems<'a> {
    /// A tree's.
    Tree(std::slice::Iter<'a, Value>),
    /// A view's.
    View(Items<'a>),
}

impl<'a> Iterator for RefItems<'a> {
    type Item = JsonRef<'a>;

    fn next(&mut self) -> Option<JsonRef<'a>> {
        match self {
            RefItems::Tree(items) => items.next().map(JsonRef::Tree),
            RefItems::View(items) => items.next().map(JsonRef::View),
        }
    }
}

/// The members of a [`JsonRef`] map.
#[derive(Clone)]
pub enum RefMembers<'a> {
    /// A tree's.
    Tree(TreeMembers<'a>),
    /// A view's.
    View(Members<'a>),
}

impl<'a> Iterator for RefMembers<'a> {
    type Item = (&'a str, JsonRef<'a>);

    fn next(&mut self) -> Option<(&'a str, JsonRef<'a>)> {
        match self {
            RefMembers::Tree(members) => members.next().map(|(k, v)| (k, JsonRef::Tree(v))),
            RefMembers::View(members) => members.next().map(|(k, v)| (k, JsonRef::View(v))),
        }
    }
}

/// Either form, read through the form it holds: for readers not worth compiling twice.
impl<'a> JsonRead<'a> for JsonRef<'a> {
    type Items = RefItems<'a>;
    type Members = RefMembers<'a>;

    const MEMBERS_UNIQUE: bool = false;

    fn kind(self) -> JsonKind {
        match self {
            JsonRef::Tree(value) => value.kind(),
            JsonRef::View(node) => node.kind(),
        }
    }

    fn get(self, key: &str) -> Option<Self> {
        match self {
            JsonRef::Tree(value) => value.get(key).map(JsonRef::Tree),
            JsonRef::View(node) => node.get(key).map(JsonRef::View),
        }
    }

    fn as_str(self) -> Option<&'a str> {
        match self {
            JsonRef::Tree(value) => value.as_str(),
            JsonRef::View(node) => node.as_str(),
        }
    }

    fn as_bool(self) -> Option<bool> {
        match self {
            JsonRef::Tree(value) => value.as_bool(),
            JsonRef::View(node) => node.as_bool(),
        }
    }

    fn as_number(self) -> Option<Number> {
        match self {
            JsonRef::Tree(value) => JsonRead::as_number(value),
            JsonRef::View(node) => node.as_number(),
        }
    }

    fn items(self) -> RefItems<'a> {
        match self {
            JsonRef::Tree(value) => RefItems::Tree(JsonRead::items(value)),
            JsonRef::View(node) => RefItems::View(node.items()),
        }
    }

    fn members(self) -> RefMembers<'a> {
        match self {
            JsonRef::Tree(value) => RefMembers::Tree(JsonRead::members(value)),
            JsonRef::View(node) => RefMembers::View(node.members()),
        }
    }

    fn to_value(self) -> Value {
        match self {
            JsonRef::Tree(value) => value.clone(),
            JsonRef::View(node) => node.to_value(),
        }
    }
}

// ---- Building ----

impl ObjectView {
    /// Decodes the JSON text `json` (tests, benchmarks and callers holding text).
    ///
    /// # Errors
    /// serde_json's error where `json` is not one JSON value, the error decoding it into a
    /// [`Value`] gives.
    pub fn parse(json: &str) -> Result<ObjectView, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(json);
        let view = ObjectView::deserialize_from(&mut deserializer, json.len())?;
        deserializer.end()?;
        Ok(view)
    }

    /// Decodes one value from `deserializer`, with room reserved for one of about
    /// `json_bytes` bytes of JSON text.
    ///
    /// # Errors
    /// The deserializer's error, or one saying the value is too large for the view's 32-bit
    /// offsets (4 GiB of text or 4 billion values).
    pub fn deserialize_from<'de, D: Deserializer<'de>>(
        deserializer: D,
        json_bytes: usize,
    ) -> Result<ObjectView, D::Error> {
        // Kubernetes objects hold one value per 16 bytes of JSON or fewer, and their strings
        // and keys about three quarters of their bytes.
        let mut view = ObjectView {
            entries: Vec::with_capacity(json_bytes / 16),
            text: String::with_capacity(json_bytes / 4 * 3),
        };
        ViewSeed {
            view: &mut view,
            key: Span::default(),
        }
        .deserialize(deserializer)?;
        Ok(view)
    }
}

/// Appends one value (with `key`, when it is a member) to `view`.
struct ViewSeed<'v> {
    view: &'v mut ObjectView,
    key: Span,
}

impl ViewSeed<'_> {
    fn push<E: de::Error>(self, slot: Slot) -> Result<u32, E> {
        let index = u32::try_from(self.view.entries.len())
            .ok()
            .filter(|index| *index < u32::MAX)
            .ok_or_else(too_large)?;
        self.view.entries.push(Entry::new(self.key, index, slot));
        Ok(index)
    }
}

fn too_large<E: de::Error>() -> E {
    E::custom("the object is too large to read")
}

fn push_text<E: de::Error>(view: &mut ObjectView, text: &str) -> Result<Span, E> {
    let start = u32::try_from(view.text.len()).map_err(|_| too_large())?;
    let len = u32::try_from(text.len()).map_err(|_| too_large())?;
    start.checked_add(len).ok_or_else(too_large)?;
    view.text.push_str(text);
    Ok(Span::new(start, len))
}

impl<'de> DeserializeSeed<'de> for ViewSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ViewSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<(), E> {
        self.push(Slot::Bool(b)).map(drop)
    }

    fn visit_i64<E: de::Error>(self, i: i64) -> Result<(), E> {
        // As `Number::from(i64)`: a non-negative integer is held as unsigned.
        let slot = u64::try_from(i).map_or(Slot::NegInt(i), Slot::PosInt);
        self.push(slot).map(drop)
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<(), E> {
        self.push(Slot::PosInt(u)).map(drop)
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<(), E> {
        // As `Value`'s visitor: a float with no JSON form is null.
        let slot = if f.is_finite() {
            Slot::Float(f)
        } else {
            Slot::Null
        };
        self.push(slot).map(drop)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        let span = push_text(self.view, s)?;
        self.push(Slot::Str(span)).map(drop)
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.push(Slot::Null).map(drop)
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let view = self.view;
        let at = ViewSeed {
            view: &mut *view,
            key: self.key,
        }
        .push(Slot::Array { end: 0, len: 0 })?;
        let mut len: u32 = 0;
        while seq
            .next_element_seed(ViewSeed {
                view: &mut *view,
                key: Span::default(),
            })?
            .is_some()
        {
            len += 1;
        }
        close(view, at, |end| Slot::Array { end, len })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let view = self.view;
        let at = ViewSeed {
            view: &mut *view,
            key: self.key,
        }
        .push(Slot::Object { end: 0 })?;
        while let Some(key) = map.next_key_seed(KeySeed { view: &mut *view })? {
            map.next_value_seed(ViewSeed {
                view: &mut *view,
                key,
            })?;
        }
        close(view, at, |end| Slot::Object { end })
    }
}

/// Sets the end of the container at `at` to the view's current end.
fn close<E: de::Error>(
    view: &mut ObjectView,
    at: u32,
    slot: impl Fn(u32) -> Slot,
) -> Result<(), E> {
    let end = u32::try_from(view.entries.len()).map_err(|_| too_large())?;
    let entry = &mut view.entries[at as usize];
    *entry = Entry::new(entry.key, at, slot(end));
    Ok(())
}

/// Reads a member's key into the view's text.
struct KeySeed<'v> {
    view: &'v mut ObjectView,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Span;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Span, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Span;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Span, E> {
        push_text(self.view, s)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Every value of `tree` read through the view at `node` reads the same.
    fn assert_reads_alike(node: Node<'_>, tree: &Value, path: &str) {
        assert_eq!(node.kind(), tree.kind(), "{path}");
        assert_eq!(node.to_value(), *tree, "{path}");
        assert_eq!(node.as_str(), tree.as_str(), "{path}");
        assert_eq!(node.as_bool(), tree.as_bool(), "{path}");
        assert_eq!(node.as_number(), JsonRead::as_number(tree), "{path}");
        match tree {
            Value::Array(items) => {
                assert_eq!(node.items().count(), items.len(), "{path}");
                for (index, (item, tree_item)) in node.items().zip(items).enumerate() {
                    assert_reads_alike(item, tree_item, &format!("{path}[{index}]"));
                }
            }
            Value::Object(map) => {
                for (key, member) in map {
                    let found = node.get(key).unwrap_or_else(|| panic!("{path}.{key}"));
                    assert_reads_alike(found, member, &format!("{path}.{key}"));
                }
                let keys: std::collections::BTreeSet<&str> =
                    node.members().map(|(key, _)| key).collect();
                assert!(
                    keys.iter().copied().eq(map.keys().map(String::as_str)),
                    "{path}"
                );
                assert!(node.get("no such member in any fixture").is_none());
            }
            _ => {
                assert_eq!(node.items().count() + node.members().count(), 0);
                assert!(node.get("a").is_none());
            }
        }
    }

    fn json_files(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("a fixtures folder") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                json_files(&path, found);
            } else if path.extension().is_some_and(|e| e == "json") {
                found.push(path);
            }
        }
    }

    #[test]
    fn every_json_fixture_reads_as_serde_json_reads_it() {
        let mut files = Vec::new();
        json_files(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"),
            &mut files,
        );
        let mut read = 0;
        for file in &files {
            let text = std::fs::read_to_string(file).expect("a fixture");
            let tree: Result<Value, _> = serde_json::from_str(&text);
            let view = ObjectView::parse(&text);
            match (tree, view) {
                (Ok(tree), Ok(view)) => {
                    assert_reads_alike(view.root(), &tree, &file.display().to_string());
                    read += 1;
                }
                (Err(tree), Err(view)) => assert_eq!(tree.to_string(), view.to_string()),
                (tree, view) => panic!("{}: {tree:?} against {view:?}", file.display()),
            }
        }
        assert!(read >= 20, "only {read} JSON fixtures were read");
    }

    #[test]
    fn duplicate_members_read_as_a_decoded_map_keeps_them() {
        let text = r#"{"a": 1, "b": [true, null], "a": {"x": "y"}, "c": -2}"#;
        let view = ObjectView::parse(text).expect("JSON");
        let tree: Value = serde_json::from_str(text).expect("JSON");
        let root = view.root();
        assert_eq!(root.get("a").map(Node::to_value), Some(tree["a"].clone()));
        assert_eq!(root.to_value(), tree);
        let keys: Vec<&str> = root.members().map(|(key, _)| key).collect();
        assert_eq!(keys, ["a", "b", "a", "c"]);
        assert_eq!(
            root.get("c").and_then(JsonRead::as_number),
            Some(Number::from(-2))
        );
    }

    #[test]
    fn every_key_of_a_wide_map_is_found_with_or_without_duplicates() {
        // A wide map, with a duplicate (the member written last answers) at its start, middle
        // or end; each nested map answers for its own members.
        let keys: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
        for duplicated in [None, Some(0), Some(117), Some(199)] {
            let mut members: Vec<String> = keys
                .iter()
                .enumerate()
                .map(|(i, key)| format!(r#""{key}": {{"i": {i}, "i": {}}}"#, i + 1))
                .collect();
            if let Some(d) = duplicated {
                members.push(format!(r#""k{d}": "last""#));
            }
            let text = format!("{{{}}}", members.join(", "));
            let view = ObjectView::parse(&text).expect("JSON");
            let tree: Value = serde_json::from_str(&text).expect("JSON");
            for key in &keys {
                let node = view.root().get(key).expect("a member");
                assert_eq!(node.to_value(), tree[key.as_str()], "{key}");
                if Some(key) != duplicated.map(|d| &keys[d]) {
                    assert_eq!(
                        node.get("i").map(Node::to_value),
                        Some(tree[key]["i"].clone())
                    );
                }
            }
            assert!(view.root().get("k200").is_none());
        }
    }

    #[test]
    fn numbers_strings_and_errors_are_serde_jsons() {
        for text in [
            r#"[0, -1, 18446744073709551615, -9223372036854775808, 1.5, -0.0, 1e300, 10]"#,
            r#"["\u00e9\n\"\\", "", "\ud83d\ude00", {"": {"\t": []}}]"#,
        ] {
            let view = ObjectView::parse(text).expect("JSON");
            let tree: Value = serde_json::from_str(text).expect("JSON");
            assert_reads_alike(view.root(), &tree, text);
        }
        for text in [
            "[1, 2",
            r#"{"a" 1}"#,
            "1e400",
            r#""\ud800""#,
            "[1] 2",
            &format!("{}{}", "[".repeat(200), "]".repeat(200)),
        ] {
            let view = ObjectView::parse(text).expect_err(text).to_string();
            let tree = serde_json::from_str::<Value>(text).expect_err(text);
            assert_eq!(view, tree.to_string(), "{text}");
        }
    }

    #[test]
    fn a_reader_written_once_reads_a_value_and_its_view_alike() {
        fn names<'a, J: JsonRead<'a>>(pod: J) -> Vec<&'a str> {
            pod.get("spec")
                .and_then(|spec| spec.get("containers"))
                .into_iter()
                .flat_map(JsonRead::items)
                .filter_map(|container| container.get("name")?.as_str())
                .collect()
        }
        fn members<'a, J: JsonRead<'a>>(pod: J) -> Vec<(&'a str, JsonKind)> {
            pod.get("spec")
                .into_iter()
                .flat_map(JsonRead::members)
                .map(|(key, value)| (key, value.kind()))
                .collect()
        }
        let text = r#"{"spec": {"containers": [{"name": "a"}, {"image": "x"}, {"name": "b"}]}}"#;
        let view = ObjectView::parse(text).expect("JSON");
        let tree: Value = serde_json::from_str(text).expect("JSON");
        assert_eq!(names(view.root()), ["a", "b"]);
        assert_eq!(names(&tree), ["a", "b"]);
        assert_eq!(members(view.root()), members(&tree));
        assert_eq!(members(view.root()), [("containers", JsonKind::Array)]);
        assert_eq!(JsonRead::items(&tree).count(), 0);
        assert_eq!(view.root().members().count(), 1);
    }
}
