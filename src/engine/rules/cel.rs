//! The `cel` rule family of native policies: a validation that must evaluate to true, and a
//! default that yields `JSONPatch{op: "add", path, value}` operations, applied only where the
//! path is missing. Expressions see `object`, `oldObject`, `request` and `namespaceObject`
//! (the whole object, also when the policy reaches a workload through its pod template).

use serde_json::Value;

use crate::engine::cel_input::{CelInput, CelObject, failure_message};
use crate::expressions::{Expression, cel_to_json};
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

    /// `None` when the expression is true; otherwise the message (see [`failure_message`]).
    /// An evaluation error is a failure whose message is the error: native policies fail
    /// closed.
    pub fn check(
        &self,
        input: &CelInput<'_>,
        object: CelObject<'_>,
        message: Option<&str>,
    ) -> Option<String> {
        let activation = input.activation(Some(object));
        match self.expression.evaluate_bool(&activation) {
            Ok(true) => None,
            Ok(false) => Some(failure_message(
                &self.expression,
                self.message_expression.as_ref(),
                message,
                &activation,
            )),
            Err(error) => Some(error),
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
        input: &CelInput<'_>,
        editor: &mut ObjectEditor<'_>,
        metadata_only: bool,
    ) -> Result<(), String> {
        let result = self
            .expression
            .evaluate_worded(&input.activation(Some(editor.current().into())))?;
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
