//! What CEL rules share, native `cel` rules and admission policies alike: the request as
//! expressions see it, and the message a failed validation reports.

use serde_json::Value;

use super::NamespaceLookup;
use crate::admission::AdmissionRequest;
use crate::expressions::{Activation, Expression};

/// The longest messageExpression result used (`celconfig.MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// The request as CEL sees it: `request`, `namespaceObject` and `oldObject`, built once per
/// request when the first CEL rule matches.
pub struct CelInput<'r> {
    request: Value,
    namespace_object: Value,
    old_object: Option<&'r Value>,
}

impl<'r> CelInput<'r> {
    /// Builds the input of `request`. `namespaceObject` is null for cluster-scoped requests,
    /// and for a Namespace's own request (whose namespace is its name), as the apiserver
    /// unsets it.
    pub fn new(request: &'r AdmissionRequest, namespaces: &dyn NamespaceLookup) -> Self {
        let is_namespace = request.kind.group.is_empty() && request.kind.kind == "Namespace";
        let namespace = request
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty() && !is_namespace);
        let namespace_object = match namespace {
            None => Value::Null,
            Some(name) => serde_json::json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": namespaces.labels_or_default(name)},
            }),
        };
        CelInput {
            request: request.attributes_json(),
            namespace_object,
            old_object: request.old_object.as_ref(),
        }
    }

    /// The activation for one evaluation on `object` (the object as sent, or as edited so
    /// far); params and variables are added by the caller.
    pub fn activation<'a>(&'a self, object: Option<&'a Value>) -> Activation<'a> {
        let mut activation = Activation::new()
            .request(&self.request)
            .namespace_object(&self.namespace_object);
        if let Some(object) = object {
            activation = activation.object(object);
        }
        if let Some(old_object) = self.old_object {
            activation = activation.old_object(old_object);
        }
        activation
    }
}

/// The request's [`CelInput`], built when the first CEL rule of any policy needs it and then
/// shared by every rule of the request.
#[derive(Default)]
pub struct CelInputCell<'r>(std::cell::OnceCell<CelInput<'r>>);

impl<'r> CelInputCell<'r> {
    /// An empty cell.
    pub fn new() -> Self {
        CelInputCell(std::cell::OnceCell::new())
    }

    /// The input of `request`, built on first use.
    pub fn get(
        &self,
        request: &'r AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> &CelInput<'r> {
        self.0.get_or_init(|| CelInput::new(request, namespaces))
    }
}

/// The message of a failed validation, as the apiserver chooses it: the messageExpression's
/// string when it evaluates to one that is non-empty, at most 5 KiB and on one line; else
/// `message`; else `failed expression: <expression>`. All trimmed.
pub fn failure_message(
    expression: &Expression,
    message_expression: Option<&Expression>,
    message: Option<&str>,
    activation: &Activation<'_>,
) -> String {
    let computed = message_expression.and_then(|e| match e.evaluate(activation) {
        Ok(cel::Value::String(text)) => Some(text),
        _ => None,
    });
    let computed = computed
        .as_deref()
        .map(|text| text.trim())
        .filter(|text| !text.is_empty() && text.len() <= MAX_MESSAGE_BYTES && !text.contains('\n'));
    match computed.or(message.map(str::trim).filter(|m| !m.is_empty())) {
        Some(text) => text.to_owned(),
        None => format!("failed expression: {}", expression.source().trim()),
    }
}
