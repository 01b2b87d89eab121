//! The review read in one pass, envelope first: `object` and `oldObject` are decoded into JSON
//! values only when the request's envelope (kind, resource, operation, namespace, user …), as
//! read before them, is one that something wants, and `oldObject` only when something may
//! read it.
//!
//! The apiserver writes the request's fields in the order of its Go struct, every envelope
//! field before `object`. A body in another order is still read right: when a field that
//! arrives after a skipped object changes the answer, the body is read again, whole.

use std::cell::Cell;
use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::object::{ObjectForm, RequestObject};
use super::object_view::{JsonKind, JsonRead, ObjectView};
use super::request::{
    AdmissionRequest, GroupVersionKind, GroupVersionResource, Operation, WantedObjects,
};

/// What the parse of a review's `request` gave: the request, what was wanted of its objects
/// when they were reached, and which were skipped (present, but not decoded: `None`).
pub(super) struct ReadRequest {
    pub request: AdmissionRequest,
    /// The answer of `wants` at the first of `object` and `oldObject` (`Both` when neither
    /// was there).
    pub wanted: WantedObjects,
    /// Whether a non-null `object` (`.0`) or `oldObject` (`.1`) was skipped.
    pub skipped: (bool, bool),
    /// Whether a skipped `object` (`.0`) or `oldObject` (`.1`) is neither a JSON object nor
    /// null.
    pub not_an_object: (bool, bool),
    /// The `apiVersion` and `kind` strings of each skipped object.
    pub skipped_types: Vec<TypeMeta>,
}

/// Reads a `request` map, asking `wants` (with the envelope read so far, objects absent) at
/// the first of `object` and `oldObject` which of them to decode.
pub(super) struct RequestSeed<'w> {
    pub wants: &'w dyn Fn(&AdmissionRequest) -> WantedObjects,
    /// When set, reading stops with an error at the first object if `wants` asks for any,
    /// and this is set to say why.
    pub stop_if_wanted: Option<&'w Cell<bool>>,
    /// How a wanted object is decoded.
    pub form: ObjectForm,
    /// The length of the whole body, which bounds an object's.
    pub body_bytes: usize,
}

/// Each field of the request, as a bit of [`RequestVisitor`]'s record of what it has read.
const UID: u16 = 1;
const KIND: u16 = 1 << 1;
const RESOURCE: u16 = 1 << 2;
const OPERATION: u16 = 1 << 3;
const SUB_RESOURCE: u16 = 1 << 4;
const REQUEST_KIND: u16 = 1 << 5;
const REQUEST_RESOURCE: u16 = 1 << 6;
const REQUEST_SUB_RESOURCE: u16 = 1 << 7;
const NAME: u16 = 1 << 8;
const NAMESPACE: u16 = 1 << 9;
const USER_INFO: u16 = 1 << 10;
const OBJECT: u16 = 1 << 11;
const OLD_OBJECT: u16 = 1 << 12;
const DRY_RUN: u16 = 1 << 13;
const OPTIONS: u16 = 1 << 14;

/// The request's fields, as `AdmissionRequest`'s derived decoding names them.
fn field_bit(name: &str) -> Option<(u16, &'static str)> {
    Some(match name {
        "uid" => (UID, "uid"),
        "kind" => (KIND, "kind"),
        "resource" => (RESOURCE, "resource"),
        "subResource" => (SUB_RESOURCE, "subResource"),
        "requestKind" => (REQUEST_KIND, "requestKind"),
        "requestResource" => (REQUEST_RESOURCE, "requestResource"),
        "requestSubResource" => (REQUEST_SUB_RESOURCE, "requestSubResource"),
        "name" => (NAME, "name"),
        "namespace" => (NAMESPACE, "namespace"),
        "operation" => (OPERATION, "operation"),
        "userInfo" => (USER_INFO, "userInfo"),
        "object" => (OBJECT, "object"),
        "oldObject" => (OLD_OBJECT, "oldObject"),
        "dryRun" => (DRY_RUN, "dryRun"),
        "options" => (OPTIONS, "options"),
        _ => return None,
    })
}

impl<'de> DeserializeSeed<'de> for RequestSeed<'_> {
    type Value = Option<ReadRequest>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(OptionalRequest(self))
    }
}

/// `request: null` is no request, as for the derived `Option<AdmissionRequest>`.
struct OptionalRequest<'w>(RequestSeed<'w>);

impl<'de> Visitor<'de> for OptionalRequest<'_> {
    type Value = Option<ReadRequest>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("option")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer
            .deserialize_map(RequestVisitor {
                wants: self.0.wants,
                stop_if_wanted: self.0.stop_if_wanted,
                form: self.0.form,
                body_bytes: self.0.body_bytes,
            })
            .map(Some)
    }
}

struct RequestVisitor<'w> {
    wants: &'w dyn Fn(&AdmissionRequest) -> WantedObjects,
    stop_if_wanted: Option<&'w Cell<bool>>,
    form: ObjectForm,
    body_bytes: usize,
}

impl<'de> Visitor<'de> for RequestVisitor<'_> {
    type Value = ReadRequest;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("struct AdmissionRequest")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // Required fields hold placeholders until read (`seen` says which were).
        let mut request = AdmissionRequest {
            uid: String::new(),
            kind: GroupVersionKind::default(),
            resource: GroupVersionResource::default(),
            sub_resource: None,
            request_kind: None,
            request_resource: None,
            request_sub_resource: None,
            name: None,
            namespace: None,
            operation: Operation::Create,
            user_info: Default::default(),
            object: None,
            old_object: None,
            dry_run: None,
            options: None,
        };
        let mut seen = 0u16;
        // Decided at the first of `object` and `oldObject`, from the envelope read before it.
        let mut wanted: Option<WantedObjects> = None;
        let mut skipped = (false, false);
        let mut not_an_object = (false, false);
        let mut skipped_types = Vec::new();
        while let Some(key) = map.next_key::<FieldName>()? {
            let Some((bit, name)) = key.0 else {
                map.next_value::<de::IgnoredAny>()?;
                continue;
            };
            if seen & bit != 0 {
                return Err(de::Error::duplicate_field(name));
            }
            seen |= bit;
            match bit {
                UID => request.uid = map.next_value()?,
                KIND => request.kind = map.next_value()?,
                RESOURCE => request.resource = map.next_value()?,
                SUB_RESOURCE => request.sub_resource = map.next_value()?,
                REQUEST_KIND => request.request_kind = map.next_value()?,
                REQUEST_RESOURCE => request.request_resource = map.next_value()?,
                REQUEST_SUB_RESOURCE => request.request_sub_resource = map.next_value()?,
                NAME => request.name = map.next_value()?,
                NAMESPACE => request.namespace = map.next_value()?,
                OPERATION => request.operation = map.next_value()?,
                USER_INFO => request.user_info = map.next_value()?,
                OBJECT | OLD_OBJECT => {
                    let wanted = *wanted.get_or_insert_with(|| (self.wants)(&request));
                    if let Some(stopped) = self.stop_if_wanted
                        && wanted != WantedObjects::Neither
                    {
                        stopped.set(true);
                        return Err(de::Error::custom("an object is wanted"));
                    }
                    let (slot, skip, was_skipped) = if bit == OBJECT {
                        (
                            &mut request.object,
                            wanted == WantedObjects::Neither,
                            &mut skipped.0,
                        )
                    } else {
                        (
                            &mut request.old_object,
                            wanted != WantedObjects::Both,
                            &mut skipped.1,
                        )
                    };
                    if skip {
                        match map.next_value::<SkippedValue>()? {
                            SkippedValue::Null => {}
                            SkippedValue::Object(type_meta) => {
                                *was_skipped = true;
                                skipped_types.push(type_meta);
                            }
                            SkippedValue::Other if bit == OBJECT => not_an_object.0 = true,
                            SkippedValue::Other => not_an_object.1 = true,
                        }
                    } else {
                        *slot = match self.form {
                            ObjectForm::Tree => {
                                map.next_value::<Option<Value>>()?.map(RequestObject::from)
                            }
                            ObjectForm::View => map.next_value_seed(ViewOf(self.body_bytes))?,
                        };
                    }
                }
                DRY_RUN => request.dry_run = map.next_value()?,
                _ => request.options = map.next_value()?,
            }
        }
        for (bit, name) in [
            (UID, "uid"),
            (KIND, "kind"),
            (RESOURCE, "resource"),
            (OPERATION, "operation"),
        ] {
            if seen & bit == 0 {
                return Err(de::Error::missing_field(name));
            }
        }
        Ok(ReadRequest {
            request,
            wanted: wanted.unwrap_or(WantedObjects::Both),
            skipped,
            not_an_object,
            skipped_types,
        })
    }
}

/// An object decoded into an [`ObjectView`] with room for about as many bytes (`None` for
/// `null`).
struct ViewOf(usize);

impl<'de> DeserializeSeed<'de> for ViewOf {
    type Value = Option<RequestObject>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        let view = ObjectView::deserialize_from(deserializer, self.0)?;
        Ok((view.root().kind() != JsonKind::Null).then(|| RequestObject::from_view(view)))
    }
}

/// A key of the request map: one of its fields, or another (ignored, as the derive does).
struct FieldName(Option<(u16, &'static str)>);

impl<'de> de::Deserialize<'de> for FieldName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = FieldName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("field identifier")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<FieldName, E> {
                Ok(FieldName(field_bit(text)))
            }
        }
        deserializer.deserialize_identifier(Name)
    }
}

/// The `apiVersion` and `kind` of an object, where they are strings.
#[derive(Default)]
pub(super) struct TypeMeta {
    pub api_version: Option<String>,
    pub kind: Option<String>,
}

/// An object read without being kept: the parser checks it as it would for a JSON value
/// (syntax, numbers, the recursion limit), keeping only its `apiVersion` and `kind`.
enum SkippedValue {
    Null,
    Object(TypeMeta),
    Other,
}

impl<'de> de::Deserialize<'de> for SkippedValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SkippedObject)
    }
}

/// The top level of a skipped object: its members are skipped, but for the type strings.
struct SkippedObject;

impl<'de> Visitor<'de> for SkippedObject {
    type Value = SkippedValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<SkippedValue, E> {
        Ok(SkippedValue::Other)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<SkippedValue, E> {
        Ok(SkippedValue::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<SkippedValue, E> {
        Ok(SkippedValue::Other)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<SkippedValue, E> {
        Ok(SkippedValue::Other)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<SkippedValue, E> {
        Ok(SkippedValue::Other)
    }

    fn visit_unit<E: de::Error>(self) -> Result<SkippedValue, E> {
        Ok(SkippedValue::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SkippedValue, A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(SkippedValue::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SkippedValue, A::Error> {
        let mut type_meta = TypeMeta::default();
        while let Some(key) = map.next_key::<TypeMetaKey>()? {
            let slot = match key {
                TypeMetaKey::ApiVersion => &mut type_meta.api_version,
                TypeMetaKey::Kind => &mut type_meta.kind,
                TypeMetaKey::Other => {
                    map.next_value_seed(Skip)?;
                    continue;
                }
            };
            // As a decoded object's map, the last of duplicate members counts.
            *slot = map.next_value_seed(KeepString)?;
        }
        Ok(SkippedValue::Object(type_meta))
    }
}

enum TypeMetaKey {
    ApiVersion,
    Kind,
    Other,
}

impl<'de> de::Deserialize<'de> for TypeMetaKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = TypeMetaKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<TypeMetaKey, E> {
                Ok(match text {
                    "apiVersion" => TypeMetaKey::ApiVersion,
                    "kind" => TypeMetaKey::Kind,
                    _ => TypeMetaKey::Other,
                })
            }
        }
        deserializer.deserialize_str(Name)
    }
}

/// Any JSON value, kept when it is a string.
struct KeepString;

impl<'de> DeserializeSeed<'de> for KeepString {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Option<String>, D::Error> {
        struct Keep;
        impl<'de> Visitor<'de> for Keep {
            type Value = Option<String>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Option<String>, E> {
                Ok(Some(text.to_owned()))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<String>, E> {
                Ok(None)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Option<String>, E> {
                Ok(None)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Option<String>, E> {
                Ok(None)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Option<String>, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Option<String>, E> {
                Ok(None)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<String>, A::Error> {
                Skip.visit_seq(seq).map(|_| None)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<String>, A::Error> {
                Skip.visit_map(map).map(|_| None)
            }
        }
        deserializer.deserialize_any(Keep)
    }
}

/// Visits any JSON value, recursing through `deserialize_any` (so nesting is bounded as for a
/// decoded value) and keeping nothing.
#[derive(Clone, Copy)]
struct Skip;

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Skip)?.is_some() {
            map.next_value_seed(Skip)?;
        }
        Ok(())
    }
}

/// The AdmissionReview around the request: `apiVersion`, `kind`, `request` (other fields are
/// ignored).
pub(super) struct ReadReview {
    pub api_version: String,
    pub kind: String,
    pub request: Option<ReadRequest>,
}

/// Reads the AdmissionReview map, its `request` with [`RequestSeed`].
pub(super) struct ReviewSeed<'w> {
    pub wants: &'w dyn Fn(&AdmissionRequest) -> WantedObjects,
    /// [`RequestSeed::stop_if_wanted`].
    pub stop_if_wanted: Option<&'w Cell<bool>>,
    /// [`RequestSeed::form`].
    pub form: ObjectForm,
    /// [`RequestSeed::body_bytes`].
    pub body_bytes: usize,
}

impl<'de> DeserializeSeed<'de> for ReviewSeed<'_> {
    type Value = ReadReview;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<ReadReview, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ReviewSeed<'_> {
    type Value = ReadReview;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("struct ReviewEnvelope")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ReadReview, A::Error> {
        let mut api_version: Option<String> = None;
        let mut kind: Option<String> = None;
        let mut request: Option<Option<ReadRequest>> = None;
        while let Some(key) = map.next_key::<ReviewField>()? {
            match key {
                ReviewField::ApiVersion if api_version.is_some() => {
                    return Err(de::Error::duplicate_field("apiVersion"));
                }
                ReviewField::ApiVersion => api_version = Some(map.next_value()?),
                ReviewField::Kind if kind.is_some() => {
                    return Err(de::Error::duplicate_field("kind"));
                }
                ReviewField::Kind => kind = Some(map.next_value()?),
                ReviewField::Request if request.is_some() => {
                    return Err(de::Error::duplicate_field("request"));
                }
                ReviewField::Request => {
                    request = Some(map.next_value_seed(RequestSeed {
                        wants: self.wants,
                        stop_if_wanted: self.stop_if_wanted,
                        form: self.form,
                        body_bytes: self.body_bytes,
                    })?);
                }
                ReviewField::Other => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        Ok(ReadReview {
            api_version: api_version.ok_or_else(|| de::Error::missing_field("apiVersion"))?,
            kind: kind.ok_or_else(|| de::Error::missing_field("kind"))?,
            request: request.flatten(),
        })
    }
}

enum ReviewField {
    ApiVersion,
    Kind,
    Request,
    Other,
}

impl<'de> de::Deserialize<'de> for ReviewField {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = ReviewField;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("field identifier")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<ReviewField, E> {
                Ok(match text {
                    "apiVersion" => ReviewField::ApiVersion,
                    "kind" => ReviewField::Kind,
                    "request" => ReviewField::Request,
                    _ => ReviewField::Other,
                })
            }
        }
        deserializer.deserialize_identifier(Name)
    }
}
