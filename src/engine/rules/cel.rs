//! The `cel` rule family of native policies: a validation that must evaluate to true, and a
//! default that yields `JSONPatch{op: "add", path, value}` operations, applied only where the
//! path is missing. Expressions see `object`, `oldObject`, `request` and `namespaceObject`
//! (the whole object, also when the policy reaches a workload through its pod template).

use serde_json::Value;

use crate::admission::AdmissionRequest;
use crate::engine::{Labels, NamespaceLookup};
use crate::expressions::Expression;
use crate::expressions::{Activation, cel_to_json};
use crate::patch::{ObjectEditor, PathSegment, pointer};

/// Compiles a native CEL expression: no params and no variables in native policies.
pub fn compile(source: &str, structs: bool) -> Result<Expression, String> {
    let expression = Expression::compile(source, structs)?;
    for name in ["params", "variables", "authorizer"] {
        if expression.uses(name) {
            return Err(format!(
                "undeclared reference to '{name}': native policies have no params, variables \
                 or authorizer (use a ValidatingAdmissionPolicy for those)"
            ));
        }
    }
    Ok(expression)
}

/// The request's values as the expressions see them.
pub struct CelInput {
    request: Value,
    namespace_object: Value,
}

impl CelInput {
    /// Built once per request and policy.
    pub fn new(request: &AdmissionRequest, namespaces: &dyn NamespaceLookup) -> Self {
        let value = request.attributes_json();
        let namespace_object = match request.namespace.as_deref().filter(|n| !n.is_empty()) {
            None => Value::Null,
            Some(name) => {
                let labels = namespaces.labels(name).unwrap_or_else(|| {
                    Labels::from([("kubernetes.io/metadata.name".to_owned(), name.to_owned())])
                });
                serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": labels}})
            }
        };
        CelInput {
            request: value,
            namespace_object,
        }
    }

    fn activation<'a>(
        &'a self,
        request: &'a AdmissionRequest,
        object: &'a Value,
    ) -> Activation<'a> {
        let mut activation = Activation::new()
            .object(object)
            .request(&self.request)
            .namespace_object(&self.namespace_object);
        if let Some(old) = &request.old_object {
            activation = activation.old_object(old);
        }
        activation
    }
}

/// A compiled `cel` validation.
pub struct CelCheck {
    expression: Expression,
    message_expression: Option<Expression>,
}

impl CelCheck {
    /// Wraps the compiled expressions.
    pub fn new(expression: Expression, message_expression: Option<Expression>) -> Self {
        CelCheck {
            expression,
            message_expression,
        }
    }

    /// `None` when the expression is true; otherwise the message (the messageExpression's,
    /// else `message`, else `failed expression: …`). An evaluation error is a failure whose
    /// message is the error: native policies fail closed.
    pub fn check(
        &self,
        input: &CelInput,
        request: &AdmissionRequest,
        object: &Value,
        message: Option<&str>,
    ) -> Option<String> {
        let activation = input.activation(request, object);
        match self.expression.evaluate(&activation) {
            Ok(cel::Value::Bool(true)) => None,
            Ok(cel::Value::Bool(false)) => {
                let computed = self
                    .message_expression
                    .as_ref()
                    .and_then(|e| match e.evaluate(&activation) {
                        Ok(cel::Value::String(text)) => Some(text.trim().to_owned()),
                        _ => None,
                    })
                    .filter(|text| !text.is_empty() && !text.contains('\n'));
                Some(
                    computed
                        .or_else(|| message.map(str::to_owned))
                        .unwrap_or_else(|| {
                            format!("failed expression: {}", self.expression.source().trim())
                        }),
                )
            }
            Ok(other) => Some(format!(
                "expression '{}' resulted in error: expected bool, got {}",
                self.expression.source(),
                other.type_of()
            )),
            Err(error) => Some(format!(
                "expression '{}' resulted in error: {error}",
                self.expression.source()
            )),
        }
    }
}

/// A compiled `cel` default.
pub struct CelDefaultRule {
    expression: Expression,
}

fn segments<'t>(object: &Value, tokens: &'t [String]) -> Vec<PathSegment<'t>> {
    let mut node = Some(object);
    tokens
        .iter()
        .map(|token| {
            let segment = match (node, token.parse::<usize>()) {
                (Some(Value::Array(_)), Ok(index)) => PathSegment::Index(index),
                _ => PathSegment::Key(token),
            };
            node = node.and_then(|n| match segment {
                PathSegment::Index(i) => n.get(i),
                PathSegment::Key(k) => n.get(k),
            });
            segment
        })
        .collect()
}

impl CelDefaultRule {
    /// Wraps the compiled expression.
    pub fn new(expression: Expression) -> Self {
        CelDefaultRule { expression }
    }

    /// Evaluates against the object as edited so far and adds each value where missing;
    /// with `metadata_only`, only paths under `/metadata`. Returns an error to report.
    pub fn apply(
        &self,
        input: &CelInput,
        request: &AdmissionRequest,
        editor: &mut ObjectEditor<'_>,
        metadata_only: bool,
    ) -> Result<(), String> {
        let result = {
            let activation = input.activation(request, editor.current());
            self.expression.evaluate(&activation)
        }
        .map_err(|e| {
            format!(
                "expression '{}' resulted in error: {e}",
                self.expression.source()
            )
        })?;
        let Ok(Value::Array(operations)) = cel_to_json(&result) else {
            return Err(format!(
                "expression '{}' must return a list of JSONPatch",
                self.expression.source()
            ));
        };
        for operation in operations {
            let op = operation.get("op").and_then(Value::as_str);
            let path = operation.get("path").and_then(Value::as_str).unwrap_or("");
            let (Some("add"), Some(value)) = (op, operation.get("value")) else {
                return Err(format!(
                    "defaults only add values: {}",
                    serde_json::to_string(&operation).unwrap_or_default()
                ));
            };
            // `""` (the whole object) is a valid pointer but never a default's.
            let tokens = match pointer::tokens(path)? {
                tokens if tokens.is_empty() => return Err("invalid JSON Pointer \"\"".into()),
                tokens => tokens,
            };
            if metadata_only && tokens.first().map(String::as_str) != Some("metadata") {
                continue;
            }
            let path = segments(editor.current(), &tokens);
            editor.set_if_missing(&path, value.clone());
        }
        Ok(())
    }
}
