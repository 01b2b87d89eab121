//! The apiserver's typed decode of a built-in object, as far as JSON types go.
//!
//! The apiserver decodes a request body into the kind's Go type with `sigs.k8s.io/json` (a
//! fork of `encoding/json`, case-sensitive). A JSON value of the wrong type for a field is an
//! `UnmarshalTypeError`, printed as
//! `json: cannot unmarshal <what> into Go struct field <Struct>.<json.path> of type <Go type>`,
//! where `<Struct>` is the innermost Go struct holding the field and the path is the JSON field
//! names from the root (list indices and map keys are not written). The request handler wraps
//! it as `<Kind> in version "<version>" cannot be handled as a <Kind>: …`
//! (`transformDecodeError`, k8s.io/apiserver `endpoints/handlers/rest.go`).
//!
//! Unknown fields are not errors here: the apiserver drops them (with a warning, or an error
//! under `fieldValidation=Strict`). `null` is never a type error. Fields reached through an
//! inline embedded struct have its Go name in the path (`livenessProbe.ProbeHandler.httpGet`).
//! Types with their own JSON decoding are checked the way their decoders fail: `IntOrString`
//! decodes a non-string into an `int32` and `Time` into a `string` (with the field context);
//! `Quantity` refuses what `ParseQuantity` refuses, and a `[]byte` what Go's base64 decoder
//! refuses (`illegal base64 data at input byte 4`), and a `Time` what Go's `time.Parse` with
//! the RFC 3339 layout refuses (`parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": …`),
//! all without context. `MicroTime` strings are not checked. All of these wordings were compared with a
//! v1.37.2 apiserver's answers to `create --dry-run=server`.
//!
//! Two differences remain. Go reports the first error in document order; `serde_json` sorts
//! object keys, so with several errors in one object the first here is the first by key. And
//! a body that is not an object at all, or whose `apiVersion`/`kind` are not strings, fails in
//! the apiserver before the typed decode (`the object provided is unrecognized …`); here a
//! non-object root is `cannot unmarshal … into Go value of type v1.Pod`.

use std::fmt;

use serde_json::Value;

use super::quantity::{QuantityError, check_quantity};
use super::time::check_time;
use super::{Field, IntKind, Node, NodeKind, Origin, Schema};
use crate::admission::GroupVersionKind;
use crate::admission::object_view::{JsonKind, JsonRead, JsonRef};

/// The first type error of a manifest, worded as the apiserver words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The kind of the manifest (`Pod`).
    pub kind: String,
    /// Its API version without the group (`v1`).
    pub version: String,
    /// The decoder's message (`json: cannot unmarshal …`).
    pub message: String,
    /// The JSON path of the offending value (`spec.containers[0].image`), with list indices.
    pub path: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in version {:?} cannot be handled as a {}: {}",
            self.kind, self.version, self.kind, self.message
        )
    }
}

impl std::error::Error for DecodeError {}

/// Checks `object` against the built-in `schema` as the apiserver's decode into the Go type
/// does, returning the first type error. Schemas of custom resources are not decoded into a
/// Go type by the apiserver, so nothing is checked for them.
pub fn check_decode(schema: &Schema, object: &Value) -> Result<(), DecodeError> {
    check_decode_json(schema, JsonRef::Tree(object))
}

/// [`check_decode`] of an object held as a [`JsonRef`]. An object in a view is answered as
/// its decoded tree would be: a view also walks the earlier of duplicate members, which the
/// tree drops, so where the view's walk fails the tree's answers.
pub fn check_decode_json(schema: &Schema, object: JsonRef<'_>) -> Result<(), DecodeError> {
    check_decode_fields(schema, object, every_field)
}

/// How much of a Go struct a check walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StructWalk {
    /// Every field, and everything below them.
    Whole,
    /// The fields named, and everything below them.
    Fields(&'static [&'static str]),
    /// Every field, but of a struct, list or map field only its JSON kind (an object, a list).
    Shallow,
}

/// How much of the Go struct named `go_name` a check walks.
pub type FieldsWalked = fn(go_name: &str) -> StructWalk;

/// The [`FieldsWalked`] of the apiserver's decode: every field of every struct.
fn every_field(_go_name: &str) -> StructWalk {
    StructWalk::Whole
}

/// [`check_decode_json`] of the fields `fields` names only: a struct's other fields, and
/// everything below them, are not walked. The errors found are worded as the whole check
/// words them; where the object has several, the first one walked here is answered.
pub fn check_decode_fields(
    schema: &Schema,
    object: JsonRef<'_>,
    fields: FieldsWalked,
) -> Result<(), DecodeError> {
    if schema.origin() != Origin::BuiltIn {
        return Ok(());
    }
    let walker = Walker { schema, fields };
    let root = schema.root_node();
    let walked = match object {
        JsonRef::Tree(value) => walker.value(value, &root),
        JsonRef::View(node) => match walker.value(node, &root) {
            Ok(()) => Ok(()),
            Err(_) => {
                return check_decode_fields(schema, JsonRef::Tree(&node.to_value()), fields);
            }
        },
    };
    match walked {
        Ok(()) => Ok(()),
        Err(broken) => {
            let (message, path) = broken.describe();
            Err(DecodeError {
                kind: schema.gvk().kind.clone(),
                version: schema.gvk().version.clone(),
                message,
                path,
            })
        }
    }
}

/// [`check_decode`] for an object of kind `gvk`, with the built-in kind's schema; objects of
/// kinds without one (custom resources) are not checked.
pub fn check_object(gvk: &GroupVersionKind, object: JsonRef<'_>) -> Result<(), DecodeError> {
    check_object_fields(gvk, object, every_field)
}

/// [`check_object`] of the fields `fields` names only (see [`check_decode_fields`]).
pub fn check_object_fields(
    gvk: &GroupVersionKind,
    object: JsonRef<'_>,
    fields: FieldsWalked,
) -> Result<(), DecodeError> {
    match super::builtin(gvk) {
        Some(schema) => check_decode_fields(&schema, object, fields),
        None => Ok(()),
    }
}

/// The decoder's walk. Nothing is recorded on the way down: a failure collects the steps to
/// it as it returns, from which the error's context (the innermost struct, the field names)
/// and path are written out.
struct Walker<'s> {
    schema: &'s Schema,
    fields: FieldsWalked,
}

/// One step of a JSON path.
enum Step<'s, 'v> {
    /// A struct's field: the struct's Go name and the field.
    Field(&'s str, &'s Field),
    Key(&'v str),
    Index(usize),
}

/// What the decoder refused, before its context is known.
enum Problem<'s> {
    /// `json: cannot unmarshal <what> into … of type <go type>`.
    Type { what: String, go_type: &'s str },
    /// A type's own decoder's message, without context.
    Plain(String),
}

/// A failure and the steps from it back to the root (innermost first).
struct Broken<'s, 'v> {
    problem: Problem<'s>,
    steps: Vec<Step<'s, 'v>>,
}

type Walked<'s, 'v> = Result<(), Box<Broken<'s, 'v>>>;

fn type_error<'s, 'v>(what: String, go_type: &'s str) -> Walked<'s, 'v> {
    Err(Box::new(Broken {
        problem: Problem::Type { what, go_type },
        steps: Vec::new(),
    }))
}

fn plain_error<'s, 'v>(message: String) -> Walked<'s, 'v> {
    Err(Box::new(Broken {
        problem: Problem::Plain(message),
        steps: Vec::new(),
    }))
}

/// Adds the step through which a failure was reached.
fn through<'s, 'v>(walked: Walked<'s, 'v>, step: Step<'s, 'v>) -> Walked<'s, 'v> {
    walked.map_err(|mut broken| {
        broken.steps.push(step);
        broken
    })
}

/// What `encoding/json` calls a JSON value in `cannot unmarshal <what>`.
fn what<'v, J: JsonRead<'v>>(value: J) -> String {
    match value.kind() {
        JsonKind::Null => "null",
        JsonKind::Bool => "bool",
        JsonKind::Number => "number",
        JsonKind::String => "string",
        JsonKind::Array => "array",
        JsonKind::Object => "object",
    }
    .to_owned()
}

/// The integer a JSON number holds, if it is written as one (Go's `ParseInt` refuses `1.0`).
fn integer(number: &serde_json::Number) -> Option<i128> {
    number
        .as_i64()
        .map(i128::from)
        .or_else(|| number.as_u64().map(i128::from))
}

impl Broken<'_, '_> {
    /// The decoder's message and the JSON path (`spec.containers[0].image`,
    /// `metadata.labels["app"]`).
    fn describe(&self) -> (String, String) {
        let root_first = || self.steps.iter().rev();
        let mut path = String::new();
        for step in root_first() {
            match step {
                Step::Field(_, field) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(&field.name);
                }
                Step::Key(key) => path.push_str(&format!("[{key:?}]")),
                Step::Index(index) => path.push_str(&format!("[{index}]")),
            }
        }
        let message = match &self.problem {
            Problem::Plain(message) => message.clone(),
            Problem::Type { what, go_type } => {
                // Go's decoder names the innermost struct and the JSON names of the fields on
                // the way (those of embedded structs included), without keys or indices.
                let mut innermost = None;
                let mut fields = Vec::new();
                for step in root_first() {
                    if let Step::Field(strukt, field) = step {
                        innermost = Some(*strukt);
                        fields.extend(field.embedded_in.iter().map(String::as_str));
                        fields.push(field.name.as_str());
                    }
                }
                match innermost {
                    None => {
                        format!("json: cannot unmarshal {what} into Go value of type {go_type}")
                    }
                    Some(strukt) => format!(
                        "json: cannot unmarshal {what} into Go struct field {strukt}.{} of type {go_type}",
                        fields.join(".")
                    ),
                }
            }
        };
        (message, path)
    }
}

/// Whether `value` decodes into `node` with nothing to walk or parse: the common leaves,
/// checked here without a call.
#[inline]
fn plainly_valid<'v, J: JsonRead<'v>>(value: J, node: &Node) -> bool {
    matches!(
        (&node.kind, value.kind()),
        (_, JsonKind::Null)
            | (NodeKind::Any, _)
            | (NodeKind::String | NodeKind::IntOrString, JsonKind::String)
            | (NodeKind::Boolean, JsonKind::Bool)
            | (NodeKind::Number, JsonKind::Number)
    )
}

impl<'s> Walker<'s> {
    fn value<'v, J: JsonRead<'v>>(&self, value: J, node: &'s Node) -> Walked<'s, 'v> {
        let kind = value.kind();
        if kind == JsonKind::Null {
            return Ok(());
        }
        let expect = |expected: JsonKind, go_type: &'s str| {
            if kind == expected {
                Ok(())
            } else {
                type_error(what(value), go_type)
            }
        };
        match &node.kind {
            NodeKind::Any => Ok(()),
            NodeKind::String => expect(JsonKind::String, &node.go_type),
            // A []byte is a base64 string; the base64 decoder's error carries no context.
            NodeKind::Bytes => match value.as_str() {
                Some(s) => match base64_error(s.as_bytes()) {
                    None => Ok(()),
                    Some(offset) => {
                        plain_error(format!("illegal base64 data at input byte {offset}"))
                    }
                },
                None => type_error(what(value), &node.go_type),
            },
            NodeKind::Boolean => expect(JsonKind::Bool, &node.go_type),
            NodeKind::Number => expect(JsonKind::Number, &node.go_type),
            NodeKind::Integer(int) => match value.as_number() {
                Some(n) => match integer(&n) {
                    Some(i) if int.fits(i) => Ok(()),
                    _ => type_error(format!("number {n}"), &node.go_type),
                },
                None => type_error(what(value), &node.go_type),
            },
            // IntOrString decodes a non-string into its int32, Time decodes into a string;
            // the decoder adds its field context to their errors.
            NodeKind::IntOrString => match (kind, value.as_number()) {
                (JsonKind::String, _) => Ok(()),
                (_, Some(n)) => match integer(&n) {
                    Some(i) if IntKind::I32.fits(i) => Ok(()),
                    _ => type_error(format!("number {n}"), "int32"),
                },
                _ => type_error(what(value), "int32"),
            },
            // Time's own parse errors carry no context; MicroTime's layout is not checked.
            NodeKind::Time => match value.as_str() {
                Some(s) if node.go_type == "v1.Time" => match check_time(s) {
                    Ok(()) => Ok(()),
                    Err(message) => plain_error(message),
                },
                Some(_) => Ok(()),
                None => type_error(what(value), "string"),
            },
            // Quantity's decoder parses a string's contents, or else the raw JSON text; its
            // errors carry no field context.
            NodeKind::Quantity => {
                let checked = match kind {
                    JsonKind::String => check_quantity(value.as_str().unwrap_or_default().trim()),
                    JsonKind::Number => check_quantity(
                        &value.as_number().map(|n| n.to_string()).unwrap_or_default(),
                    ),
                    JsonKind::Bool => {
                        check_quantity(&value.as_bool().unwrap_or_default().to_string())
                    }
                    _ => Err(QuantityError::FormatWrong),
                };
                match checked {
                    Ok(()) => Ok(()),
                    Err(error) => plain_error(error.message().to_owned()),
                }
            }
            NodeKind::Object(index) => {
                if kind != JsonKind::Object {
                    return type_error(what(value), &node.go_type);
                }
                let object = self.schema.object(*index);
                let walk = (self.fields)(&object.go_name);
                for (key, child) in value.members() {
                    if let StructWalk::Fields(names) = walk
                        && !names.contains(&key)
                    {
                        continue;
                    }
                    // Unknown fields are dropped, not refused.
                    let Some(field) = object.field(key) else {
                        continue;
                    };
                    if plainly_valid(child, &field.node) {
                        continue;
                    }
                    let walked = if walk == StructWalk::Shallow {
                        self.kind_only(child, &field.node)
                    } else {
                        self.value(child, &field.node)
                    };
                    through(walked, Step::Field(&object.go_name, field))?;
                }
                Ok(())
            }
            NodeKind::Map { values, .. } => {
                if kind != JsonKind::Object {
                    return type_error(what(value), &node.go_type);
                }
                for (key, child) in value.members() {
                    if plainly_valid(child, values) {
                        continue;
                    }
                    through(self.value(child, values), Step::Key(key))?;
                }
                Ok(())
            }
            NodeKind::List { items, .. } => {
                if kind != JsonKind::Array {
                    return type_error(what(value), &node.go_type);
                }
                for (index, child) in value.items().enumerate() {
                    if plainly_valid(child, items) {
                        continue;
                    }
                    through(self.value(child, items), Step::Index(index))?;
                }
                Ok(())
            }
        }
    }

    /// [`Walker::value`] of a scalar; of a struct, list or map only whether the JSON value is
    /// an object or a list, as its decoder first checks.
    fn kind_only<'v, J: JsonRead<'v>>(&self, value: J, node: &'s Node) -> Walked<'s, 'v> {
        let expected = match node.kind {
            NodeKind::Object(_) | NodeKind::Map { .. } => JsonKind::Object,
            NodeKind::List { .. } => JsonKind::Array,
            _ => return self.value(value, node),
        };
        match value.kind() {
            JsonKind::Null => Ok(()),
            kind if kind == expected => Ok(()),
            _ => type_error(what(value), &node.go_type),
        }
    }
}

/// Where Go's `base64.StdEncoding.Decode` finds `s` corrupt, if it does: padding is required,
/// `\r` and `\n` are skipped, nothing may follow the padding, and the unused bits of the last
/// quantum are not checked.
pub(crate) fn base64_error(s: &[u8]) -> Option<usize> {
    let alphabet = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    let newline = |c: u8| c == b'\n' || c == b'\r';
    let mut at = 0;
    loop {
        // One quantum of four symbols.
        let mut symbols = 0;
        while symbols < 4 {
            let Some(&c) = s.get(at) else {
                return (symbols != 0).then_some(at - symbols);
            };
            at += 1;
            if alphabet(c) {
                symbols += 1;
                continue;
            }
            if newline(c) {
                continue;
            }
            if c != b'=' || symbols < 2 {
                return Some(at - 1);
            }
            if symbols == 2 {
                // A second '=' must follow, after any newlines.
                while s.get(at).is_some_and(|&c| newline(c)) {
                    at += 1;
                }
                match s.get(at) {
                    None => return Some(s.len()),
                    Some(b'=') => at += 1,
                    Some(_) => return Some(at - 1),
                }
            }
            while s.get(at).is_some_and(|&c| newline(c)) {
                at += 1;
            }
            return (at < s.len()).then_some(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::object_view::ObjectView;
    use crate::kubernetes::schema::builtin;

    fn pod_schema() -> Schema {
        builtin(&GroupVersionKind {
            group: String::new(),
            version: "v1".to_owned(),
            kind: "Pod".to_owned(),
        })
        .expect("Pod is built in")
    }

    fn pod(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    }

    /// The error of `object`, read from its tree and from its view alike.
    fn error_of(object: &Value) -> String {
        let error = check_decode(&pod_schema(), object).expect_err("a type error");
        let view = ObjectView::parse(&object.to_string()).expect("JSON");
        assert_eq!(
            check_decode_json(&pod_schema(), view.root().into()),
            Err(error.clone())
        );
        error.to_string()
    }

    #[test]
    fn a_view_with_duplicate_members_answers_as_its_tree() {
        // The tree keeps the last `hostNetwork`; the view's walk also meets the first.
        let text = r#"{"apiVersion": "v1", "kind": "Pod", "spec": {"hostNetwork": "yes",
            "hostNetwork": true, "containers": []}}"#;
        let view = ObjectView::parse(text).expect("JSON");
        assert_eq!(check_decode_json(&pod_schema(), view.root().into()), Ok(()));
        let text = text.replace("true", "1");
        let view = ObjectView::parse(&text).expect("JSON");
        let tree: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(
            check_decode_json(&pod_schema(), view.root().into()),
            check_decode(&pod_schema(), &tree)
        );
        assert!(check_decode(&pod_schema(), &tree).is_err());
    }

    #[test]
    fn members_out_of_declaration_order_are_all_checked() {
        // `containers` is declared before `hostNetwork` and `volumes` before both: each
        // wrong type is found whatever member the walk met before it.
        let spec = r#"{"hostNetwork": true, "containers": [], "volumes": 1}"#;
        let object: Value = serde_json::from_str(spec).expect("JSON");
        let error = error_of(&pod(object));
        assert!(error.contains("PodSpec.spec.volumes of type"), "{error}");
        let text = r#"{"apiVersion": "v1", "kind": "Pod",
            "spec": {"volumes": [], "hostNetwork": true, "containers": 1}}"#;
        let view = ObjectView::parse(text).expect("JSON");
        let error = check_decode_json(&pod_schema(), view.root().into()).expect_err("refused");
        assert!(
            error
                .to_string()
                .contains("PodSpec.spec.containers of type"),
            "{error}"
        );
    }

    #[test]
    fn a_well_typed_pod_decodes() {
        let object = pod(json!({
            "hostNetwork": true,
            "containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}],
                            "resources": {"limits": {"cpu": "500m", "memory": 1024}},
                            "livenessProbe": {"httpGet": {"port": "http"}}}],
            "unknownField": {"anything": [1, 2]},
            "priority": null
        }));
        assert_eq!(check_decode(&pod_schema(), &object), Ok(()));
        let view = ObjectView::parse(&object.to_string()).expect("JSON");
        assert_eq!(check_decode_json(&pod_schema(), view.root().into()), Ok(()));
    }

    #[test]
    fn objects_are_checked_by_their_kind() {
        let gvk = |group: &str, kind: &str| GroupVersionKind {
            group: group.to_owned(),
            version: "v1".to_owned(),
            kind: kind.to_owned(),
        };
        let bad = json!({"spec": {"replicas": "3"}});
        assert_eq!(
            check_object(&gvk("apps", "Deployment"), (&bad).into())
                .unwrap_err()
                .to_string(),
            "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot \
             unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
        assert_eq!(
            check_object(&gvk("example.com", "Widget"), (&bad).into()),
            Ok(())
        );
    }

    #[test]
    fn string_where_a_bool_is() {
        assert_eq!(
            error_of(&pod(json!({"hostNetwork": "true", "containers": []}))),
            "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal string \
             into Go struct field PodSpec.spec.hostNetwork of type bool"
        );
    }

    #[test]
    fn string_where_a_pointer_bool_is_names_the_struct_of_the_field() {
        let object = pod(json!({"containers": [
            {"name": "a", "securityContext": {"privileged": "yes"}}
        ]}));
        let error = check_decode(&pod_schema(), &object).unwrap_err();
        assert_eq!(
            error.message,
            "json: cannot unmarshal string into Go struct field \
             SecurityContext.spec.containers.securityContext.privileged of type bool"
        );
        assert_eq!(error.path, "spec.containers[0].securityContext.privileged");
    }

    #[test]
    fn object_where_a_list_is() {
        assert_eq!(
            error_of(&pod(json!({"containers": {}}))),
            "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal object \
             into Go struct field PodSpec.spec.containers of type []v1.Container"
        );
    }

    #[test]
    fn list_where_an_object_is() {
        assert_eq!(
            error_of(&pod(json!([]))),
            "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal array \
             into Go struct field Pod.spec of type v1.PodSpec"
        );
    }

    #[test]
    fn number_where_a_string_is() {
        assert_eq!(
            error_of(&pod(json!({"containers": [{"name": "a", "image": 5}]}))),
            "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal number \
             into Go struct field Container.spec.containers.image of type string"
        );
    }

    #[test]
    fn named_string_types_and_map_values() {
        let error = check_decode(
            &pod_schema(),
            &pod(json!({"containers": [{"name": "a", "imagePullPolicy": 1}]})),
        )
        .unwrap_err();
        assert!(
            error
                .message
                .ends_with("imagePullPolicy of type v1.PullPolicy"),
            "{error}"
        );
        let labels = json!({"kind": "Pod", "metadata": {"labels": {"a": 1}}});
        assert_eq!(
            check_decode(&pod_schema(), &labels).unwrap_err().message,
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of \
             type string"
        );
    }

    #[test]
    fn integers_out_of_range_or_fractional() {
        let error = check_decode(
            &pod_schema(),
            &pod(json!({"containers": [], "priority": 1.5})),
        )
        .unwrap_err();
        assert_eq!(
            error.message,
            "json: cannot unmarshal number 1.5 into Go struct field PodSpec.spec.priority of \
             type int32"
        );
        let error = check_decode(
            &pod_schema(),
            &pod(json!({"containers": [], "priority": 4_294_967_296_i64})),
        )
        .unwrap_err();
        assert!(error.message.contains("number 4294967296"), "{error}");
        assert!(
            check_decode(
                &pod_schema(),
                &pod(json!({"containers": [], "activeDeadlineSeconds": 4_294_967_296_i64}))
            )
            .is_ok()
        );
    }

    #[test]
    fn the_root_must_be_an_object() {
        assert_eq!(
            check_decode(&pod_schema(), &json!([1]))
                .unwrap_err()
                .message,
            "json: cannot unmarshal array into Go value of type v1.Pod"
        );
    }

    #[test]
    fn fields_of_inline_embedded_structs_name_the_struct_in_the_path() {
        let object =
            pod(json!({"containers": [], "volumes": [{"name": "v", "hostPath": {"path": 3}}]}));
        assert_eq!(
            check_decode(&pod_schema(), &object).unwrap_err().message,
            "json: cannot unmarshal number into Go struct field \
             HostPathVolumeSource.spec.volumes.VolumeSource.hostPath.path of type string"
        );
    }

    #[test]
    fn base64_errors_are_gos() {
        for (input, expected) in [
            ("", None),
            ("YWJj", None),
            ("YWI=", None),
            ("YQ==", None),
            ("YWJj\nZGVm", None),
            ("hunter2", Some(4)),
            ("abc", Some(0)),
            ("a", Some(0)),
            ("ab=", Some(3)),
            ("a===", Some(1)),
            ("ab!d", Some(2)),
            ("YWJj=", Some(4)),
            ("YWI=x", Some(4)),
            ("YQ=x", Some(2)),
            ("plain text", Some(5)),
        ] {
            assert_eq!(base64_error(input.as_bytes()), expected, "{input:?}");
        }
        let secret = builtin(&GroupVersionKind {
            group: String::new(),
            version: "v1".to_owned(),
            kind: "Secret".to_owned(),
        })
        .unwrap();
        assert_eq!(
            check_decode(&secret, &json!({"data": {"password": "hunter2"}}))
                .unwrap_err()
                .to_string(),
            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at \
             input byte 4"
        );
    }

    #[test]
    fn types_with_their_own_decoders() {
        let port = |port: Value| {
            pod(
                json!({"containers": [{"name": "a", "livenessProbe": {"httpGet": {"port": port}}}]}),
            )
        };
        assert!(check_decode(&pod_schema(), &port(json!(8080))).is_ok());
        assert!(check_decode(&pod_schema(), &port(json!("http"))).is_ok());
        assert_eq!(
            check_decode(&pod_schema(), &port(json!(true)))
                .unwrap_err()
                .message,
            "json: cannot unmarshal bool into Go struct field \
             HTTPGetAction.spec.containers.livenessProbe.ProbeHandler.httpGet.port of type int32"
        );
        let cpu = |cpu: Value| {
            pod(json!({"containers": [{"name": "a", "resources": {"limits": {"cpu": cpu}}}]}))
        };
        for good in [
            json!("500m"),
            json!("1.5"),
            json!(2),
            json!("1Gi"),
            json!("1e3"),
        ] {
            assert!(
                check_decode(&pod_schema(), &cpu(good.clone())).is_ok(),
                "{good}"
            );
        }
        for bad in [json!("lots"), json!(true), json!({}), json!("1Qi")] {
            assert!(
                check_decode(&pod_schema(), &cpu(bad.clone())).is_err(),
                "{bad}"
            );
        }
        let created = json!({"metadata": {"creationTimestamp": "yesterday"}});
        assert_eq!(
            check_decode(&pod_schema(), &created).unwrap_err().message,
            "parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \
             \"yesterday\" as \"2006\""
        );
        let created = json!({"metadata": {"creationTimestamp": 5}});
        assert_eq!(
            check_decode(&pod_schema(), &created).unwrap_err().message,
            "json: cannot unmarshal number into Go struct field \
             ObjectMeta.metadata.creationTimestamp of type string"
        );
        let secret = builtin(&GroupVersionKind {
            group: String::new(),
            version: "v1".to_owned(),
            kind: "Secret".to_owned(),
        })
        .unwrap();
        assert_eq!(
            check_decode(&secret, &json!({"data": {"a": 5}}))
                .unwrap_err()
                .message,
            "json: cannot unmarshal number into Go struct field Secret.data of type []uint8"
        );
    }

    /// A walk of the pod's `spec.hostNetwork` and `spec.volumes`, the volumes shallowly.
    fn host_network_and_volumes(go_name: &str) -> StructWalk {
        match go_name {
            "Pod" => StructWalk::Fields(&["spec"]),
            "PodSpec" => StructWalk::Fields(&["hostNetwork", "volumes"]),
            "Volume" => StructWalk::Shallow,
            _ => StructWalk::Whole,
        }
    }

    /// `check_decode_fields` of `object` with [`host_network_and_volumes`], from its tree
    /// and from its view alike.
    fn walked(object: &Value) -> Result<(), DecodeError> {
        let schema = pod_schema();
        let tree = check_decode_fields(&schema, JsonRef::Tree(object), host_network_and_volumes);
        let view = ObjectView::parse(&object.to_string()).expect("JSON");
        let flat = check_decode_fields(&schema, view.root().into(), host_network_and_volumes);
        assert_eq!(tree, flat, "{object}");
        tree
    }

    #[test]
    fn a_walk_of_some_fields_finds_their_errors_in_the_whole_checks_words() {
        for spec in [
            json!({"hostNetwork": "true"}),
            json!({"volumes": {"a": 1}}),
            json!({"volumes": [{"name": 5}]}),
            json!({"volumes": [{"name": "a", "configMap": "x"}]}),
            json!({"volumes": [{"name": "a", "projected": []}]}),
        ] {
            let object = pod(spec);
            assert_eq!(
                walked(&object),
                check_decode(&pod_schema(), &object),
                "{object}"
            );
            assert!(walked(&object).is_err(), "{object}");
        }
    }

    #[test]
    fn a_walk_of_some_fields_passes_over_errors_elsewhere() {
        for object in [
            pod(json!({"priority": "high", "hostNetwork": true})),
            pod(json!({"containers": [{"name": 5}]})),
            pod(json!({"volumes": [{"name": "a", "configMap": {"items": "x"}}]})),
            pod(json!({"volumes": [{"name": "a", "projected": {"defaultMode": "0644"}}]})),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": []}),
        ] {
            assert!(check_decode(&pod_schema(), &object).is_err(), "{object}");
            assert_eq!(walked(&object), Ok(()), "{object}");
        }
    }
}
