//! `input.review` as Gatekeeper builds it: at the webhook, the AdmissionRequest as Go encodes
//! it (`pkg/target/review.go`); offline (`gator`, audit), a request made from the object alone
//! (`unstructuredToAdmissionRequest`: kind, name, namespace and object; an empty uid,
//! resource, operation and userInfo). Both gain `namespaceObject` (frameworks' rego driver):
//! the request's Namespace, or null for a cluster-scoped object; gator's is always `{}`.

use serde_json::{Map, Value, json};

use super::EnforcementPoint;
use crate::admission::AdmissionRequest;
use crate::engine::NamespaceLookup;

/// The review of `request` at `point`: made from the object it was made from, as written
/// (`from_object`), or the request as sent.
pub(super) fn review(
    request: &AdmissionRequest,
    namespaces: &dyn NamespaceLookup,
    point: EnforcementPoint,
    from_object: Option<&Value>,
) -> Value {
    let mut review = match from_object {
        Some(object) => object_review(request, object),
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
    Value::Object(review)
}

/// The AdmissionRequest (the webhook's, or an AdmissionReview given to gator) as Go's encoding
/// writes it: `object`, `oldObject` and `options` are
/// always there (null when empty), as are `uid`, `resource`, `operation` and `userInfo`. On
/// DELETE, `object` is the old object (`setObjectOnDelete`).
fn webhook_review(request: &AdmissionRequest) -> Map<String, Value> {
    let Ok(Value::Object(mut review)) = serde_json::to_value(request) else {
        return Map::new();
    };
    if request.operation == crate::admission::Operation::Delete
        && let Some(old) = &request.old_object
    {
        review.insert("object".into(), old.clone());
    }
    for field in ["object", "oldObject", "options"] {
        review.entry(field).or_insert(Value::Null);
    }
    review
}

/// The request gator makes of an object (its DELETE, with the object as `oldObject`, is not
/// made offline).
fn object_review(request: &AdmissionRequest, object: &Value) -> Map<String, Value> {
    let object = object.clone();
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
    review.insert("operation".into(), Value::String(String::new()));
    review.insert("userInfo".into(), json!({}));
    review.insert("object".into(), object);
    review.insert("oldObject".into(), Value::Null);
    review.insert("options".into(), Value::Null);
    review
}
