use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::DeserializeSeed;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::envelope::{ReadRequest, ReviewSeed};
use super::object::{ObjectForm, RequestObject};
use super::object_view::JsonKind;

/// The AdmissionReview API version a request arrived in; the response uses the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReviewVersion {
    /// `admission.k8s.io/v1`
    V1,
    /// `admission.k8s.io/v1beta1`
    V1Beta1,
}

impl ReviewVersion {
    /// The `apiVersion` string of this version.
    pub fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "admission.k8s.io/v1",
            ReviewVersion::V1Beta1 => "admission.k8s.io/v1beta1",
        }
    }

    fn from_api_version(api_version: &str) -> Option<Self> {
        match api_version {
            "admission.k8s.io/v1" => Some(ReviewVersion::V1),
            "admission.k8s.io/v1beta1" => Some(ReviewVersion::V1Beta1),
            _ => None,
        }
    }
}

/// Why a body is not an AdmissionReview request Portcullis can decide.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The body is not JSON, or its fields have the wrong shape.
    #[error("body is not a valid AdmissionReview: {0}")]
    Malformed(#[from] serde_json::Error),
    /// The body is JSON but not an object.
    #[error("body must be a JSON object (an AdmissionReview)")]
    NotAnObject,
    /// `kind` is not `AdmissionReview`.
    #[error("kind must be \"AdmissionReview\", got {0:?}")]
    WrongKind(String),
    /// `apiVersion` is not one Portcullis speaks.
    #[error(
        "unsupported apiVersion {0:?}: expected \"admission.k8s.io/v1\" or \"admission.k8s.io/v1beta1\""
    )]
    UnsupportedVersion(String),
    /// The envelope has no `request` (it may be a response sent back by mistake).
    #[error("AdmissionReview has no request")]
    MissingRequest,
    /// `request.uid` is empty, so no response could be matched to it.
    #[error("request.uid must not be empty")]
    EmptyUid,
    /// `request.object` or `request.oldObject` is present but not a JSON object.
    #[error("request.{0} must be a JSON object or null")]
    ObjectNotMap(&'static str),
}

/// An AdmissionReview request, parsed, with the version it came in.
#[derive(Debug, Clone)]
pub struct ParsedReview {
    /// The version the response must be written in.
    pub version: ReviewVersion,
    /// The request itself.
    pub request: AdmissionRequest,
    /// True when the body had an `object` or `oldObject` that was not decoded because nothing
    /// wanted the request ([`parse_review_for`]); the request then has neither.
    pub objects_skipped: bool,
    /// True when the body had an `oldObject` that was not decoded because no rule that wants
    /// the request reads it ([`WantedObjects::Object`]); the request then has none.
    pub old_object_skipped: bool,
}

/// Which of a request's objects the rules that may act on it need, judged from its envelope.
/// Ordered: each wants more than the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WantedObjects {
    /// No rule may act on the request: it is allowed unchanged, neither object is decoded.
    Neither,
    /// Rules may act on the request, but none reads `oldObject`: only `object` is decoded.
    Object,
    /// Both objects are decoded.
    Both,
}

/// Parses an AdmissionReview body. serde_json's recursion limit (128 levels) bounds nesting,
/// so a deeply nested body is an error, never a stack overflow.
pub fn parse_review(body: &[u8]) -> Result<ParsedReview, ReviewError> {
    parse_review_for(body, &|_| WantedObjects::Both)
}

/// Parses an AdmissionReview body as [`parse_review`] does, in one pass that decodes `object`
/// and `oldObject` only as `wants` answers for the request's envelope (the request with both
/// absent). An object not wanted is checked as JSON but not kept: with
/// [`WantedObjects::Neither`] the request has neither object and
/// [`ParsedReview::objects_skipped`] is set; with [`WantedObjects::Object`] it has no
/// `oldObject` and [`ParsedReview::old_object_skipped`] is set. Errors are the same.
pub fn parse_review_for(
    body: &[u8],
    wants: &dyn Fn(&AdmissionRequest) -> WantedObjects,
) -> Result<ParsedReview, ReviewError> {
    parse_review_as(body, wants, ObjectForm::Tree)
}

/// Parses an AdmissionReview body as [`parse_review_for`] does, decoding the objects wanted
/// in `form`.
pub fn parse_review_as(
    body: &[u8],
    wants: &dyn Fn(&AdmissionRequest) -> WantedObjects,
    form: ObjectForm,
) -> Result<ParsedReview, ReviewError> {
    match read_review(body, wants, None, form)? {
        Some(review) => Ok(review),
        // Nothing is skipped when both objects are wanted: no further reading.
        None => parse_review_as(body, &|_| WantedObjects::Both, form),
    }
}

/// Parses an AdmissionReview body as [`parse_review_for`] does when `wants` asks for neither
/// object; `None`, with the body read only as far as the request's first object, when it
/// asks for one. A server with no room to decode a large object yet learns this way, for
/// the cost of reading the envelope, whether the request needs that room.
pub fn parse_review_unless_wanted(
    body: &[u8],
    wants: &dyn Fn(&AdmissionRequest) -> WantedObjects,
) -> Result<Option<ParsedReview>, ReviewError> {
    read_review(body, wants, Some(&Cell::new(false)), ObjectForm::Tree)
}

/// [`parse_review_for`], but `None` where it would read the body again, whole; with
/// `stop_if_wanted`, also where `wants` asks for an object at the first of them (reading
/// stops there).
fn read_review(
    body: &[u8],
    wants: &dyn Fn(&AdmissionRequest) -> WantedObjects,
    stop_if_wanted: Option<&Cell<bool>>,
    form: ObjectForm,
) -> Result<Option<ParsedReview>, ReviewError> {
    // An envelope is only ever an object; say so before serde names what it expected.
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => {}
        Some(b'[' | b'"' | b'-' | b'0'..=b'9') => {
            return Err(ReviewError::NotAnObject);
        }
        _ => {}
    }
    let seed = ReviewSeed {
        wants,
        stop_if_wanted,
        form,
        body_bytes: body.len(),
    };
    // Checking the UTF-8 of the whole body at once lets serde_json skip checking each string
    // it reads; a body that is not UTF-8 goes the byte path, which names where it breaks.
    let read = match std::str::from_utf8(body) {
        Ok(text) => {
            let mut deserializer = serde_json::Deserializer::from_str(text);
            seed.deserialize(&mut deserializer)
                .and_then(|read| deserializer.end().map(|()| read))
        }
        Err(_) => {
            let mut deserializer = serde_json::Deserializer::from_slice(body);
            seed.deserialize(&mut deserializer)
                .and_then(|read| deserializer.end().map(|()| read))
        }
    };
    let read = match read {
        Err(_) if stop_if_wanted.is_some_and(Cell::get) => return Ok(None),
        read => read?,
    };
    if read.kind != "AdmissionReview" {
        return Err(ReviewError::WrongKind(read.kind));
    }
    let version = ReviewVersion::from_api_version(&read.api_version)
        .ok_or(ReviewError::UnsupportedVersion(read.api_version))?;
    let ReadRequest {
        request,
        wanted,
        skipped,
        not_an_object,
        skipped_types,
    } = read.request.ok_or(ReviewError::MissingRequest)?;
    if request.uid.is_empty() {
        return Err(ReviewError::EmptyUid);
    }
    for (field, value, skipped_not_a_map) in [
        ("object", &request.object, not_an_object.0),
        ("oldObject", &request.old_object, not_an_object.1),
    ] {
        if skipped_not_a_map || value.as_ref().is_some_and(|v| v.kind() != JsonKind::Object) {
            return Err(ReviewError::ObjectNotMap(field));
        }
    }
    // Read whole after all: a field written after a skipped object (not the apiserver's order)
    // asks for more, or a skipped object is not of the request's kind (never sent by the
    // apiserver; the engine answers that).
    if (skipped.0 || skipped.1)
        && (wants(&request) > wanted
            || skipped_types.iter().any(|meta| {
                matches!((&meta.api_version, &meta.kind), (Some(api_version), Some(kind))
                    if !request.kind.is_type_of(api_version, kind))
            }))
    {
        return Ok(None);
    }
    let objects_skipped = wanted == WantedObjects::Neither && (skipped.0 || skipped.1);
    Ok(Some(ParsedReview {
        version,
        request,
        objects_skipped,
        old_object_skipped: !objects_skipped && skipped.1,
    }))
}

/// The `request` of an AdmissionReview (identical in v1 and v1beta1).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Identifies this admission call; echoed in the response.
    pub uid: String,
    /// The kind of the object being admitted.
    pub kind: GroupVersionKind,
    /// The resource being admitted.
    pub resource: GroupVersionResource,
    /// The subresource, if any (`status`, `scale`, `exec` …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_resource: Option<String>,
    /// The kind originally requested, before conversion for `matchPolicy: Equivalent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_kind: Option<GroupVersionKind>,
    /// The resource originally requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_resource: Option<GroupVersionResource>,
    /// The subresource originally requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_sub_resource: Option<String>,
    /// Object name; may be empty on CREATE with `generateName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace; absent for cluster-scoped resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The operation.
    pub operation: Operation,
    /// Who asked.
    #[serde(default)]
    pub user_info: UserInfo,
    /// The new object (CREATE, UPDATE, CONNECT options); null on DELETE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<RequestObject>,
    /// The existing object (UPDATE, DELETE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<RequestObject>,
    /// True when the request will not be persisted; Portcullis decides it like any other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// The operation's options (CreateOptions, UpdateOptions, DeleteOptions …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Value>,
}

/// The request without `object` and `oldObject`: what CEL's `request` variable holds.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestAttributes<'a> {
    uid: &'a str,
    kind: &'a GroupVersionKind,
    resource: &'a GroupVersionResource,
    #[serde(skip_serializing_if = "Option::is_none")]
    sub_resource: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_kind: Option<&'a GroupVersionKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_resource: Option<&'a GroupVersionResource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_sub_resource: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    operation: Operation,
    user_info: &'a UserInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    dry_run: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    options: Option<&'a Value>,
}

impl AdmissionRequest {
    /// The request's attributes as JSON, without `object` and `oldObject` (which can be large
    /// and are bound separately): the value of CEL's `request` variable.
    pub fn attributes_json(&self) -> Value {
        let attributes = RequestAttributes {
            uid: &self.uid,
            kind: &self.kind,
            resource: &self.resource,
            sub_resource: self.sub_resource.as_deref(),
            request_kind: self.request_kind.as_ref(),
            request_resource: self.request_resource.as_ref(),
            request_sub_resource: self.request_sub_resource.as_deref(),
            name: self.name.as_deref(),
            namespace: self.namespace.as_deref(),
            operation: self.operation,
            user_info: &self.user_info,
            dry_run: self.dry_run,
            options: self.options.as_ref(),
        };
        // Plain structs of strings and JSON values always serialize.
        serde_json::to_value(attributes).unwrap_or(Value::Null)
    }

    /// The object the decision is about: `object`, or `oldObject` for DELETE.
    pub fn subject(&self) -> Option<&Value> {
        self.subject_object().map(|object| object.tree())
    }

    /// [`AdmissionRequest::subject`] as the request holds it (in its view, if it has one).
    pub fn subject_object(&self) -> Option<&RequestObject> {
        match self.operation {
            Operation::Delete => self.old_object.as_ref().or(self.object.as_ref()),
            _ => self.object.as_ref(),
        }
    }
}

/// Group, version and kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct GroupVersionKind {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl GroupVersionKind {
    /// Whether an object's `apiVersion` and `kind` name this group, version and kind
    /// (`group/version`, or `version` alone for the core group).
    pub fn is_type_of(&self, api_version: &str, kind: &str) -> bool {
        let version_matches = if self.group.is_empty() {
            api_version == self.version
        } else {
            api_version
                .strip_prefix(self.group.as_str())
                .and_then(|rest| rest.strip_prefix('/'))
                == Some(self.version.as_str())
        };
        version_matches && kind == self.kind
    }
}

/// Group, version and resource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct GroupVersionResource {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource (plural, lower case).
    pub resource: String,
}

/// An admission operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "UPPERCASE", try_from = "String")]
pub enum Operation {
    /// CREATE
    Create,
    /// UPDATE
    Update,
    /// DELETE
    Delete,
    /// CONNECT
    Connect,
}

impl TryFrom<String> for Operation {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        match value.as_str() {
            "CREATE" => Ok(Operation::Create),
            "UPDATE" => Ok(Operation::Update),
            "DELETE" => Ok(Operation::Delete),
            "CONNECT" => Ok(Operation::Connect),
            _ => Err(format!(
                "unknown operation {value:?}: expected CREATE, UPDATE, DELETE or CONNECT"
            )),
        }
    }
}

impl Operation {
    /// The operation as the API spells it: `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The requesting user as the apiserver authenticated them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct UserInfo {
    /// User name.
    #[serde(default)]
    pub username: String,
    /// User UID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Extra authenticator attributes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(request: &str) -> String {
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{request}}}"#
        )
    }

    const MINIMAL: &str = r#"{"uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},
        "resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE",
        "object":{"kind":"Pod"}}"#;

    #[test]
    fn parses_minimal_v1_request() {
        let parsed = parse_review(review(MINIMAL).as_bytes()).unwrap();
        assert_eq!(parsed.version, ReviewVersion::V1);
        assert_eq!(parsed.request.uid, "u1");
        assert_eq!(parsed.request.operation, Operation::Create);
        assert_eq!(parsed.request.kind.kind, "Pod");
    }

    #[test]
    fn v1beta1_is_recognised() {
        let body = review(MINIMAL).replace("admission.k8s.io/v1", "admission.k8s.io/v1beta1");
        assert_eq!(
            parse_review(body.as_bytes()).unwrap().version,
            ReviewVersion::V1Beta1
        );
    }

    #[test]
    fn errors_say_what_was_wrong() {
        let cases: &[(&str, &str)] = &[
            ("not json", "expected ident"),
            ("[]", "must be a JSON object"),
            ("", "EOF while parsing"),
            (
                r#"{"kind":"AdmissionReview"}"#,
                "missing field `apiVersion`",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":null}"#,
                "unsupported apiVersion \"admission.k8s.io/v2\"",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod"}"#,
                "kind must be \"AdmissionReview\"",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
                "has no request",
            ),
        ];
        for (body, expected) in cases {
            let error = parse_review(body.as_bytes()).unwrap_err().to_string();
            assert!(error.contains(expected), "{body}: {error}");
        }
        let no_uid = review(&MINIMAL.replace(r#""uid":"u1","#, ""));
        assert!(
            parse_review(no_uid.as_bytes())
                .unwrap_err()
                .to_string()
                .contains("missing field `uid`")
        );
        let empty_uid = review(&MINIMAL.replace("u1", ""));
        assert!(matches!(
            parse_review(empty_uid.as_bytes()),
            Err(ReviewError::EmptyUid)
        ));
        let bad_op = review(&MINIMAL.replace("CREATE", "PATCH"));
        assert!(
            parse_review(bad_op.as_bytes())
                .unwrap_err()
                .to_string()
                .contains("unknown operation \"PATCH\"")
        );
        let bad_object = review(&MINIMAL.replace(r#"{"kind":"Pod"}"#, "42"));
        assert!(matches!(
            parse_review(bad_object.as_bytes()),
            Err(ReviewError::ObjectNotMap("object"))
        ));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let depth = 100_000;
        let body = review(&MINIMAL.replace(
            r#"{"kind":"Pod"}"#,
            &format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
        ));
        let error = parse_review(body.as_bytes()).unwrap_err().to_string();
        assert!(error.contains("recursion limit exceeded"), "{error}");
    }

    #[test]
    fn a_skipped_object_is_checked_as_a_decoded_one() {
        let nothing = |_: &AdmissionRequest| WantedObjects::Neither;
        let parsed = parse_review_for(review(MINIMAL).as_bytes(), &nothing).unwrap();
        assert!(parsed.objects_skipped);
        assert_eq!(parsed.request.object, None);
        assert_eq!(parsed.request.kind.kind, "Pod");
        let bad_object = review(&MINIMAL.replace(r#"{"kind":"Pod"}"#, "42"));
        assert!(matches!(
            parse_review_for(bad_object.as_bytes(), &nothing),
            Err(ReviewError::ObjectNotMap("object"))
        ));
        for (object, error) in [
            (
                format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(200)),
                "recursion limit exceeded",
            ),
            (r#"{"a":1e400}"#.to_owned(), "number out of range"),
            (r#"{"a":"\x"}"#.to_owned(), "invalid escape"),
            (r#"{"a":1,}"#.to_owned(), "trailing comma"),
        ] {
            let body = review(&MINIMAL.replace(r#"{"kind":"Pod"}"#, &object));
            let full = parse_review(body.as_bytes()).unwrap_err().to_string();
            let skipped = parse_review_for(body.as_bytes(), &nothing)
                .unwrap_err()
                .to_string();
            assert!(full.contains(error), "{full}");
            assert_eq!(full, skipped);
        }
        let no_object = review(&MINIMAL.replace(r#""object":{"kind":"Pod"}"#, r#""name":"p""#));
        assert!(
            !parse_review_for(no_object.as_bytes(), &nothing)
                .unwrap()
                .objects_skipped
        );
    }

    #[test]
    fn a_wanted_object_ends_the_unless_wanted_read_where_it_starts() {
        let nothing = |_: &AdmissionRequest| WantedObjects::Neither;
        let object = |_: &AdmissionRequest| WantedObjects::Object;
        // Broken after the object: only a read that goes past the object sees it.
        let broken_after = review(&MINIMAL.replace(r#"{"kind":"Pod"}"#, r#"{"kind":"Pod"},]"#));
        assert!(parse_review_for(broken_after.as_bytes(), &object).is_err());
        assert!(matches!(
            parse_review_unless_wanted(broken_after.as_bytes(), &object),
            Ok(None)
        ));
        assert!(parse_review_unless_wanted(broken_after.as_bytes(), &nothing).is_err());
        // Broken before it: an error either way.
        let broken_before = review(&MINIMAL.replace(r#""operation":"CREATE""#, r#""operation":7"#));
        assert!(parse_review_unless_wanted(broken_before.as_bytes(), &object).is_err());
        // Nothing wanted: the review, as `parse_review_for` reads it.
        let unwanted = parse_review_unless_wanted(review(MINIMAL).as_bytes(), &nothing)
            .unwrap()
            .expect("nothing is wanted");
        assert!(unwanted.objects_skipped);
        assert_eq!(unwanted.request.uid, "u1");
        // A field after a skipped object that asks for it: not read whole here.
        let namespace_after = review(&MINIMAL.replace(
            r#""object":{"kind":"Pod"}"#,
            r#""object":{"kind":"Pod"},"namespace":"wanted""#,
        ));
        let wants_namespace = |request: &AdmissionRequest| {
            if request.namespace.as_deref() == Some("wanted") {
                WantedObjects::Both
            } else {
                WantedObjects::Neither
            }
        };
        assert!(matches!(
            parse_review_unless_wanted(namespace_after.as_bytes(), &wants_namespace),
            Ok(None)
        ));
        assert!(
            parse_review_for(namespace_after.as_bytes(), &wants_namespace)
                .unwrap()
                .request
                .object
                .is_some()
        );
    }

    #[test]
    fn delete_decides_on_old_object() {
        let body = review(
            r#"{"uid":"u","kind":{"version":"v1","kind":"ConfigMap"},
            "resource":{"version":"v1","resource":"configmaps"},"operation":"DELETE",
            "object":null,"oldObject":{"kind":"ConfigMap"}}"#,
        );
        let parsed = parse_review(body.as_bytes()).unwrap();
        assert_eq!(parsed.request.subject().unwrap()["kind"], "ConfigMap");
    }
}
