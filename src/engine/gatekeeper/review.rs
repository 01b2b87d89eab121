//! `input.review` as Gatekeeper builds it: at the webhook, the AdmissionRequest as Go encodes
//! it (`pkg/target/review.go`); offline (`gator`, audit), a request made from the object alone
//! (`unstructuredToAdmissionRequest`: kind, name, namespace and object; an empty uid,
//! resource, operation and userInfo). Both gain `namespaceObject` (frameworks' rego driver):
//! the request's Namespace, or null for a cluster-scoped object; gator's is always `{}`.

use std::collections::BTreeMap;

use regorus::Value as RegoValue;
use serde_json::{Map, Value, json};

use super::{EnforcementPoint, ReviewedObject};
use crate::admission::object_view::{JsonKind, JsonRead, JsonRef};
use crate::admission::{AdmissionRequest, Operation};
use crate::engine::NamespaceLookup;

/// The review of `request` at `point`: made from the object it was made from (as written, or
/// as an expansion generated it), or the request as sent. Built as regorus's value directly: the request's
/// small fields by way of JSON, `object` and `oldObject` read once from where they are (no copy
/// of them into an intermediate JSON review).
pub(super) fn review(
    request: &AdmissionRequest,
    namespaces: &dyn NamespaceLookup,
    point: EnforcementPoint,
    reviewed: Option<ReviewedObject<'_>>,
) -> RegoValue {
    let (mut review, objects) = match reviewed {
        Some(reviewed) => object_review(request, reviewed),
        None => webhook_review(request),
    };
    // The webhook clears the namespace of a request on a Namespace (`createReviewForRequest`).
    let is_namespace = request.kind.group.is_empty() && request.kind.kind == "Namespace";
    let cleared = point == EnforcementPoint::Webhook && is_namespace;
    if cleared {
        review.remove("namespace");
    }
    let namespace = request
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty() && !cleared);
    let namespace_object = match (point, namespace) {
        // gator gives every object an empty Namespace (seen on v3.23.1).
        (EnforcementPoint::Gator, _) => Value::Object(Map::new()),
        (_, Some(name)) => namespaces.namespace_object(name),
        (_, None) => Value::Null,
    };
    review.insert("namespaceObject".into(), namespace_object);
    let mut fields: BTreeMap<RegoValue, RegoValue> = review
        .iter()
        .map(|(key, value)| (RegoValue::from(key.as_str()), rego_value(value)))
        .collect();
    for (field, object) in [
        ("object", objects.object),
        ("oldObject", objects.old_object),
    ] {
        let value = match object {
            None => RegoValue::Null,
            Some(JsonRef::Tree(tree)) => rego_value(tree),
            Some(JsonRef::View(node)) => rego_value(node),
        };
        fields.insert(RegoValue::from(field), value);
    }
    RegoValue::from(fields)
}

/// `json` as regorus's value: what `RegoValue::from(json.clone())` makes (regorus's
/// deserializer), without the clone and the deserializer's detours, read from a tree or a view
/// (of a view's duplicate members, the last, as a decoded map keeps). Numbers as that visits
/// them: a non-negative integer as `u64`, a negative one as `i64`, any other as `f64` (finite:
/// JSON numbers are, so its refusal of a non-finite one cannot arise).
fn rego_value<'v, J: JsonRead<'v>>(json: J) -> RegoValue {
    match json.kind() {
        JsonKind::Null => RegoValue::Null,
        JsonKind::Bool => RegoValue::Bool(json.as_bool().unwrap_or_default()),
        JsonKind::Number => match json.as_number() {
            Some(number) => {
                if let Some(value) = number.as_u64() {
                    RegoValue::from(value)
                } else if let Some(value) = number.as_i64() {
                    RegoValue::from(value)
                } else if let Some(value) = number.as_f64() {
                    RegoValue::from(value)
                } else {
                    RegoValue::Undefined
                }
            }
            None => RegoValue::Undefined,
        },
        JsonKind::String => RegoValue::from(json.as_str().unwrap_or_default()),
        JsonKind::Array => RegoValue::from(json.items().map(rego_value).collect::<Vec<_>>()),
        JsonKind::Object => {
            // Inserted one by one into regorus's own object, in the map's order (a later
            // duplicate replaces the earlier): a fifth faster than collecting a `BTreeMap` it
            // then copies into a slice.
            let mut object = RegoValue::new_object();
            if let Ok(fields) = object.as_object_mut() {
                for (key, value) in json.members() {
                    fields.insert(RegoValue::from(key), rego_value(value));
                }
            }
            object
        }
    }
}

/// The review's `object` and `oldObject` (null when `None`), kept out of its JSON so that each
/// is converted once, from where it is.
struct Objects<'a> {
    object: Option<JsonRef<'a>>,
    old_object: Option<JsonRef<'a>>,
}

/// The AdmissionRequest (the webhook's, or an AdmissionReview given to gator) as Go's encoding
/// writes it: `object`, `oldObject` and `options` are
/// always there (null when empty), as are `uid`, `resource`, `operation` and `userInfo`. On
/// DELETE, `object` is the old object (`setObjectOnDelete`).
fn webhook_review(request: &AdmissionRequest) -> (Map<String, Value>, Objects<'_>) {
    let mut objects = Objects {
        object: request.object.as_ref().map(|object| object.json()),
        old_object: request.old_object.as_ref().map(|object| object.json()),
    };
    if request.operation == crate::admission::Operation::Delete
        && let Some(old) = &request.old_object
    {
        objects.object = Some(old.json());
    }
    // The request without `object` and `oldObject`, which `objects` holds.
    let Value::Object(mut review) = request.attributes_json() else {
        return (Map::new(), objects);
    };
    review.entry("options").or_insert(Value::Null);
    (review, objects)
}

/// The request gator and the audit make of an object (`unstructuredToAdmissionRequest`), with
/// the operation of the webhook's request for an expansion's resultant
/// (`augmentedUnstructuredToAdmissionRequest`): on DELETE the object is `oldObject`, and
/// `object` too (`setObjectOnDelete`).
fn object_review<'a>(
    request: &AdmissionRequest,
    reviewed: ReviewedObject<'a>,
) -> (Map<String, Value>, Objects<'a>) {
    let object = reviewed.object;
    let mut review = Map::new();
    review.insert("uid".into(), Value::String(String::new()));
    review.insert(
        "kind".into(),
        json!({
            "group": request.kind.group,
            "version": request.kind.version,
            "kind": request.kind.kind,
        }),
    );
    review.insert(
        "resource".into(),
        json!({"group": "", "version": "", "resource": ""}),
    );
    let field = |name: &str| object.pointer(name).and_then(Value::as_str).unwrap_or("");
    if !field("/metadata/name").is_empty() {
        review.insert("name".into(), Value::String(field("/metadata/name").into()));
    }
    if !field("/metadata/namespace").is_empty() {
        review.insert(
            "namespace".into(),
            Value::String(field("/metadata/namespace").into()),
        );
    }
    let operation = reviewed.operation.map_or("", Operation::as_str);
    review.insert("operation".into(), Value::String(operation.into()));
    review.insert("userInfo".into(), json!({}));
    review.insert("options".into(), Value::Null);
    let objects = Objects {
        object: Some(JsonRef::Tree(object)),
        old_object: (reviewed.operation == Some(Operation::Delete))
            .then_some(JsonRef::Tree(object)),
    };
    (review, objects)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::object_view::ObjectView;
    use crate::engine::{NoNamespaces, StaticNamespaces};

    fn request(json: Value) -> AdmissionRequest {
        serde_json::from_value(json).unwrap()
    }

    /// `actual` is regorus's value of `expected`, the same in JSON as well (where a number's
    /// form would show).
    fn assert_is(actual: RegoValue, expected: Value) {
        let expected = RegoValue::from(expected);
        assert_eq!(
            actual.to_json_str().unwrap(),
            expected.to_json_str().unwrap()
        );
        assert_eq!(actual, expected);
    }

    #[test]
    fn json_becomes_what_regorus_deserializes() {
        let json = json!({
            "zero": 0, "max": u64::MAX, "negative": -1, "min": i64::MIN,
            "float": 1.5, "whole float": 1.0, "negative zero": -0.0, "huge": 1e300,
            "tiny": 5e-324, "text": "ünïcode \u{1F600}", "": "",
            "array": [null, true, false, [], {}, [1, "x", -2.5]],
            "object": {"b": {"c": null}, "a": [{}]},
        });
        assert_is(rego_value(&json), json.clone());
        let view = ObjectView::parse(&json.to_string()).unwrap();
        assert_is(rego_value(view.root()), json);
        // Of duplicate members, the last, as the decoded tree keeps it.
        let text = r#"{"a": 1, "b": {"c": [1]}, "a": {"d": "e"}, "b": null}"#;
        let view = ObjectView::parse(text).unwrap();
        assert_is(rego_value(view.root()), serde_json::from_str(text).unwrap());
    }

    #[test]
    fn the_webhook_review_is_the_request_as_go_encodes_it() {
        let mut namespaces = StaticNamespaces::default();
        namespaces.insert("team-a", Default::default());
        let object = json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"}});
        let create = request(json!({
            "uid": "u1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "p", "namespace": "team-a", "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["g"]},
            "object": object, "dryRun": false,
        }));
        let expected = json!({
            "uid": "u1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "p", "namespace": "team-a", "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["g"]},
            "object": object, "oldObject": null, "options": null, "dryRun": false,
            "namespaceObject": namespaces.namespace_object("team-a"),
        });
        assert_is(
            review(&create, &namespaces, EnforcementPoint::Webhook, None),
            expected,
        );
        // On DELETE, `object` is the old object.
        let delete = request(json!({
            "uid": "u2",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "p", "namespace": "team-a", "operation": "DELETE",
            "userInfo": {"username": "alice"},
            "oldObject": object, "options": {"kind": "DeleteOptions"},
        }));
        let expected = json!({
            "uid": "u2",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "p", "namespace": "team-a", "operation": "DELETE",
            "userInfo": {"username": "alice"},
            "object": object, "oldObject": object, "options": {"kind": "DeleteOptions"},
            "namespaceObject": namespaces.namespace_object("team-a"),
        });
        assert_is(
            review(&delete, &namespaces, EnforcementPoint::Webhook, None),
            expected,
        );
        // Objects held in views make the same reviews.
        for request in [&create, &delete] {
            let mut in_views = request.clone();
            in_views.object = request.object.as_ref().map(|object| object.in_view());
            in_views.old_object = request.old_object.as_ref().map(|object| object.in_view());
            assert!(
                in_views
                    .object
                    .iter()
                    .chain(&in_views.old_object)
                    .all(|o| o.view().is_some())
            );
            assert_eq!(
                review(&in_views, &namespaces, EnforcementPoint::Webhook, None),
                review(request, &namespaces, EnforcementPoint::Webhook, None)
            );
        }
        // A Namespace's own request loses its namespace at the webhook.
        let namespace = request(json!({
            "uid": "u3",
            "kind": {"group": "", "version": "v1", "kind": "Namespace"},
            "resource": {"group": "", "version": "v1", "resource": "namespaces"},
            "name": "team-a", "namespace": "team-a", "operation": "UPDATE",
            "object": {"kind": "Namespace"}, "oldObject": {"kind": "Namespace"},
        }));
        let expected = json!({
            "uid": "u3",
            "kind": {"group": "", "version": "v1", "kind": "Namespace"},
            "resource": {"group": "", "version": "v1", "resource": "namespaces"},
            "name": "team-a", "operation": "UPDATE", "userInfo": {"username": ""},
            "object": {"kind": "Namespace"}, "oldObject": {"kind": "Namespace"},
            "options": null, "namespaceObject": null,
        });
        assert_is(
            review(&namespace, &namespaces, EnforcementPoint::Webhook, None),
            expected,
        );
    }

    #[test]
    fn the_offline_review_is_made_from_the_object() {
        let object = json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"}});
        let pod = request(json!({
            "uid": "u1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "p", "namespace": "team-a", "operation": "CREATE",
            "object": object,
        }));
        let made = |namespace_object: Value| {
            json!({
                "uid": "",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "", "resource": ""},
                "name": "p", "namespace": "team-a", "operation": "", "userInfo": {},
                "object": object, "oldObject": null, "options": null,
                "namespaceObject": namespace_object,
            })
        };
        let alone = Some(ReviewedObject {
            object: &object,
            operation: None,
        });
        assert_is(
            review(&pod, &NoNamespaces, EnforcementPoint::Gator, alone),
            made(json!({})),
        );
        assert_is(
            review(&pod, &NoNamespaces, EnforcementPoint::Audit, alone),
            made(NoNamespaces.namespace_object("team-a")),
        );
        // An expansion's resultant at the webhook: the parent's operation; on DELETE the
        // object is both `object` and `oldObject`.
        let generated = |operation| {
            Some(ReviewedObject {
                object: &object,
                operation: Some(operation),
            })
        };
        let mut update = made(NoNamespaces.namespace_object("team-a"));
        update["operation"] = json!("UPDATE");
        assert_is(
            review(
                &pod,
                &NoNamespaces,
                EnforcementPoint::Webhook,
                generated(Operation::Update),
            ),
            update,
        );
        let mut delete = made(NoNamespaces.namespace_object("team-a"));
        delete["operation"] = json!("DELETE");
        delete["oldObject"] = object.clone();
        assert_is(
            review(
                &pod,
                &NoNamespaces,
                EnforcementPoint::Webhook,
                generated(Operation::Delete),
            ),
            delete,
        );
    }
}
