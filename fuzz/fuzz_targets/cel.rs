//! A CEL expression (the input's first line) compiled as policies compile theirs and, when it
//! compiles, evaluated against a JSON document (the rest of the input) bound as the engine
//! binds a request: an AdmissionReview's `request.object`, `request.oldObject` and attributes,
//! or any other JSON as `object`. Compile and evaluation errors are fine; a panic, an abort
//! (stack overflow) or an evaluation running far past the 100 ms deadline is not. The result
//! is converted back to JSON, as mutations and messages do. The expression is evaluated again
//! with `object` read from an object view, as `serve` binds it.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use portcullis::admission::{AdmissionRequest, RequestObject};
use portcullis::expressions::Expression;
use portcullis::expressions::{Activation, cel_to_json};
use serde_json::{Value, json};

/// The request's attributes when the document is not an AdmissionReview.
fn attributes_for(object: &Value) -> Value {
    let kind = object["kind"].as_str().unwrap_or("Pod");
    json!({
        "uid": "fuzz",
        "kind": {"group": "", "version": "v1", "kind": kind},
        "resource": {"group": "", "version": "v1", "resource": format!("{}s", kind.to_lowercase())},
        "name": object.pointer("/metadata/name"),
        "namespace": "fuzz",
        "operation": "CREATE",
        "userInfo": {"username": "fuzz", "groups": ["system:authenticated"]},
        "dryRun": false,
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (source, document) = text.split_once('\n').unwrap_or((text, ""));
    // Mutations may build `Object{…}` and `JSONPatch{…}`, so allow them: the widest language.
    let Ok(expression) = Expression::compile(source, true) else {
        return;
    };
    let document: Value = serde_json::from_str(document).unwrap_or(Value::Null);
    let request = document
        .get("request")
        .and_then(|r| serde_json::from_value::<AdmissionRequest>(r.clone()).ok());
    let (object, old_object, attributes) = match &request {
        Some(request) => (
            request.object.as_deref().cloned().unwrap_or(Value::Null),
            request.old_object.as_deref().cloned(),
            request.attributes_json(),
        ),
        None => (document.clone(), None, attributes_for(&document)),
    };
    let namespace_object = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "fuzz", "labels": {"kubernetes.io/metadata.name": "fuzz"}}});
    let params = json!({"maxReplicas": 3, "allowed": ["a", "b"], "data": {"k": "v"}});
    let mut activation = Activation::new()
        .object(&object)
        .request(&attributes)
        .namespace_object(&namespace_object)
        .params(&params);
    if let Some(old_object) = &old_object {
        activation = activation.old_object(old_object);
    }
    // Two composition variables: `variables.name` is a string, `variables.loop` reads itself
    // (an error, not a deadlock).
    let activation = activation.variables(["name", "loop"], |name, activation| {
        if name == "name" {
            return Ok(cel::Value::String("fuzz".to_owned().into()));
        }
        match activation.variable(name) {
            Some(Err(error)) => Err(error),
            _ => Ok(cel::Value::Null),
        }
    });
    let started = Instant::now();
    let outcome = expression.evaluate(&activation);
    // The deadline (100 ms) is checked at each comprehension: far beyond it is a stall that
    // the budget misses, not the sanitizers' slowness.
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(2),
        "evaluation took {elapsed:?}"
    );
    if let Ok(value) = outcome {
        let _ = cel_to_json(&value);
    }
    // The same `object` read from an object view, as `serve` binds it at `/validate`.
    let in_view = RequestObject::from(object.clone()).in_view();
    if let Some(view) = in_view.view() {
        let activation = Activation::new()
            .object_view(view.root(), &in_view)
            .request(&attributes)
            .namespace_object(&namespace_object)
            .params(&params);
        let started = Instant::now();
        let outcome = expression.evaluate(&activation);
        let elapsed = started.elapsed();
        assert!(
            elapsed < Duration::from_secs(2),
            "evaluation from a view took {elapsed:?}"
        );
        if let Ok(value) = outcome {
            let _ = cel_to_json(&value);
        }
    }
});
