//! What CEL rules share, native `cel` rules and admission policies alike: the request as
//! expressions see it, and the message a failed validation reports.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use serde_json::Value;

use super::NamespaceLookup;
use crate::admission::{AdmissionRequest, RequestObject};
use crate::authorization::{self, AccessReviewer};
use crate::expressions::{Activation, AuthorizationCheck, Authorizer, Expression, JsonSource};

/// The longest messageExpression result used (`celconfig.MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// The request as CEL sees it: `request`, `namespaceObject`, `oldObject` and `authorizer`,
/// set up once per request when the first CEL rule matches (`request` and `namespaceObject`
/// are built when an expression first reads them).
pub struct CelInput<'r> {
    request: RequestJson<'r>,
    namespace_object: NamespaceObjectJson<'r>,
    old_object: Option<&'r RequestObject>,
    /// Boxed: few policies use `authorizer`, and the input is moved into its cell.
    authorizer: Option<Box<(Arc<dyn Authorizer>, AuthorizationCheck)>>,
}

impl<'r> CelInput<'r> {
    /// The input of `request`. `namespaceObject` is the request's namespace from
    /// `namespaces` ([`NamespaceLookup::namespace_object`]); null for cluster-scoped requests,
    /// and for a Namespace's own request (whose namespace is its name), as the apiserver
    /// unsets it.
    pub fn new(request: &'r AdmissionRequest, namespaces: &'r dyn NamespaceLookup) -> Self {
        let kind = &request.kind;
        let is_namespace =
            kind.group.is_empty() && kind.version == "v1" && kind.kind == "Namespace";
        let namespace = match request.namespace.as_deref() {
            Some(name) if !name.is_empty() && !is_namespace => Some(name),
            _ => None,
        };
        CelInput {
            request: RequestJson {
                request,
                json: OnceLock::new(),
            },
            namespace_object: NamespaceObjectJson {
                namespace,
                namespaces,
                json: OnceLock::new(),
            },
            old_object: request.old_object.as_ref(),
            authorizer: None,
        }
    }

    /// Binds `authorizer` to the request user's questions, answered by `reviewer` before
    /// `deadline`; without a reviewer, every check fails its expression
    /// ([`authorization::NO_AUTHORIZER`]).
    #[must_use]
    pub fn with_authorizer(
        mut self,
        request: &AdmissionRequest,
        reviewer: Option<&Arc<dyn AccessReviewer>>,
        deadline: Option<Instant>,
    ) -> Self {
        self.authorizer = Some(Box::new((
            authorization::request_authorizer(reviewer, request, deadline),
            authorization::request_resource(request),
        )));
        self
    }

    /// The activation for one evaluation on `object` (the object as sent, or as edited so
    /// far); params and variables are added by the caller.
    pub fn activation<'a>(&'a self, object: Option<CelObject<'a>>) -> Activation<'a> {
        let mut activation = self.activation_without_authorizer(object);
        if let Some((authorizer, request_resource)) = self.authorizer.as_deref() {
            activation = activation.authorizer(authorizer.clone(), Some(request_resource.clone()));
        }
        activation
    }

    /// Like [`CelInput::activation`], with `authorizer` unbound: the apiserver evaluates a
    /// ValidatingAdmissionPolicy's messageExpressions and auditAnnotations so, and an
    /// expression (or a variable it reads) that uses `authorizer` there fails.
    pub fn activation_without_authorizer<'a>(
        &'a self,
        object: Option<CelObject<'a>>,
    ) -> Activation<'a> {
        let mut activation = Activation::new()
            .request_built(&self.request)
            .namespace_object_built(&self.namespace_object);
        if let Some(object) = object {
            activation = object.bind_object(activation);
        }
        if let Some(old_object) = self.old_object {
            activation = CelObject::Request(old_object).bind_old_object(activation);
        }
        activation
    }
}

/// The object an evaluation sees as `object`.
#[derive(Clone, Copy)]
pub enum CelObject<'a> {
    /// A tree: an object as edited so far, or given as JSON.
    Tree(&'a Value),
    /// The request's object, read from its object view where it is held in one.
    Request(&'a RequestObject),
}

impl<'a> CelObject<'a> {
    /// `activation` with this object bound as `object`: a request's object in its view where
    /// it is held in one.
    pub fn bind_object(self, activation: Activation<'a>) -> Activation<'a> {
        match self {
            CelObject::Tree(object) => activation.object(object),
            CelObject::Request(object) => match object.view() {
                Some(view) => activation.object_view(view.root(), object),
                None => activation.object(object.tree()),
            },
        }
    }

    /// `activation` with this object bound as `oldObject`, as [`CelObject::bind_object`].
    pub fn bind_old_object(self, activation: Activation<'a>) -> Activation<'a> {
        match self {
            CelObject::Tree(object) => activation.old_object(object),
            CelObject::Request(object) => match object.view() {
                Some(view) => activation.old_object_view(view.root(), object),
                None => activation.old_object(object.tree()),
            },
        }
    }
}

impl<'a> From<&'a Value> for CelObject<'a> {
    fn from(object: &'a Value) -> Self {
        CelObject::Tree(object)
    }
}

impl<'a> From<&'a RequestObject> for CelObject<'a> {
    fn from(object: &'a RequestObject) -> Self {
        CelObject::Request(object)
    }
}

/// A request's object as the interpreter needs it: its tree, built from the view the first
/// time an expression the compiled evaluator leaves to the interpreter reads it.
impl JsonSource for RequestObject {
    fn json(&self) -> &Value {
        self.tree()
    }
}

/// `request` as CEL sees it: the request's attributes as JSON, built when an expression
/// first reads `request` (most never do), once per request.
struct RequestJson<'r> {
    request: &'r AdmissionRequest,
    json: OnceLock<Value>,
}

impl JsonSource for RequestJson<'_> {
    fn json(&self) -> &Value {
        self.json.get_or_init(|| self.request.attributes_json())
    }
}

/// `namespaceObject` as CEL sees it: the namespace's object from the lookup, built when an
/// expression first reads `namespaceObject` (most never do), once per request; null without
/// a namespace.
struct NamespaceObjectJson<'r> {
    namespace: Option<&'r str>,
    namespaces: &'r dyn NamespaceLookup,
    json: OnceLock<Value>,
}

impl JsonSource for NamespaceObjectJson<'_> {
    fn json(&self) -> &Value {
        self.json.get_or_init(|| match self.namespace {
            Some(name) => self.namespaces.namespace_object(name),
            None => Value::Null,
        })
    }
}

/// The request's [`CelInput`], built when the first CEL rule of any policy needs it and then
/// shared by every rule of the request.
pub struct CelInputCell<'r> {
    input: std::cell::OnceCell<CelInput<'r>>,
    namespaces: &'r dyn NamespaceLookup,
    authorizer: Option<AuthorizerBinding>,
}

/// How a request's `authorizer` is bound: who answers (none: every check fails its
/// expression), and by when.
#[derive(Clone, Default)]
pub struct AuthorizerBinding {
    /// Who answers.
    pub reviewer: Option<Arc<dyn AccessReviewer>>,
    /// When the request is due.
    pub deadline: Option<Instant>,
}

impl<'r> CelInputCell<'r> {
    /// An empty cell; `namespaceObject` comes from `namespaces`; `authorizer` is bound as
    /// `authorizer` says, or left unbound when no policy uses it (saving its per-request
    /// allocations).
    pub fn new(namespaces: &'r dyn NamespaceLookup, authorizer: Option<AuthorizerBinding>) -> Self {
        CelInputCell {
            input: std::cell::OnceCell::new(),
            namespaces,
            authorizer,
        }
    }

    /// The input of `request`, built on first use.
    pub fn get(&self, request: &'r AdmissionRequest) -> &CelInput<'r> {
        self.input.get_or_init(|| {
            let input = CelInput::new(request, self.namespaces);
            match &self.authorizer {
                Some(binding) => {
                    input.with_authorizer(request, binding.reviewer.as_ref(), binding.deadline)
                }
                None => input,
            }
        })
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
    let computed = message_expression.and_then(|e| e.evaluate(activation).ok());
    failure_message_from(expression, computed, message)
}

/// [`failure_message`] with the `messageExpression`'s value already computed (`None` when
/// there is none, or it failed).
pub fn failure_message_from(
    expression: &Expression,
    computed: Option<cel::Value>,
    message: Option<&str>,
) -> String {
    let computed = match computed {
        Some(cel::Value::String(text)) => Some(text),
        _ => None,
    };
    let computed = computed
        .as_deref()
        .map(|text| text.trim())
        .filter(|text| !text.is_empty() && text.len() <= MAX_MESSAGE_BYTES && !text.contains('\n'));
    match computed.or(message.map(str::trim).filter(|m| !m.is_empty())) {
        Some(text) => text.to_owned(),
        None => format!("failed expression: {}", expression.source().trim()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::{NoNamespaces, StaticNamespaces};

    fn request(kind: &str, namespace: Option<&str>) -> AdmissionRequest {
        serde_json::from_value(json!({
            "uid": "u",
            "kind": {"group": "", "version": "v1", "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": "things"},
            "namespace": namespace,
            "operation": "CREATE",
            "object": {"metadata": {"name": "x"}},
        }))
        .unwrap()
    }

    fn evaluate(input: &CelInput<'_>, source: &str) -> Result<cel::Value, String> {
        Expression::compile(source, false)
            .unwrap()
            .evaluate(&input.activation(None))
    }

    fn namespaces() -> StaticNamespaces {
        let mut namespaces = StaticNamespaces::default();
        namespaces.insert_object(&json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "team-a", "annotations": {"x": "allow"}},
            "status": {"phase": "Active"},
        }));
        namespaces
    }

    #[test]
    fn namespace_object_is_the_requests_namespace() {
        let namespaces = namespaces();
        let configmap = request("ConfigMap", Some("team-a"));
        let input = CelInput::new(&configmap, &namespaces);
        for (source, expected) in [
            ("namespaceObject.metadata.annotations['x']", "allow"),
            ("namespaceObject.status.phase", "Active"),
            (
                "namespaceObject.metadata.labels['kubernetes.io/metadata.name']",
                "team-a",
            ),
        ] {
            assert_eq!(
                evaluate(&input, source),
                Ok(cel::Value::String(expected.to_owned().into())),
                "{source}"
            );
        }
        // As in the apiserver, there is no apiVersion or kind.
        let object = input.namespace_object.json().as_object().unwrap();
        assert!(!object.contains_key("kind") && !object.contains_key("apiVersion"));

        // A namespace nothing is known about: its name and label, no annotations or phase.
        let elsewhere = request("ConfigMap", Some("other"));
        let input = CelInput::new(&elsewhere, &namespaces);
        assert_eq!(
            evaluate(&input, "namespaceObject.metadata.name"),
            Ok(cel::Value::String("other".to_owned().into()))
        );
        let missing = evaluate(&input, "namespaceObject.status.phase").unwrap_err();
        assert!(missing.contains("phase"), "{missing}");
    }

    #[test]
    fn namespace_object_is_null_without_a_namespace_and_for_namespaces() {
        let namespaces = namespaces();
        for request in [
            request("ClusterRole", None),
            request("ClusterRole", Some("")),
            request("Namespace", Some("team-a")),
        ] {
            let input = CelInput::new(&request, &namespaces);
            assert!(
                input.namespace_object.json().is_null(),
                "{:?}",
                request.kind
            );
        }
        let configmap = request("ConfigMap", Some("team-a"));
        let input = CelInput::new(&configmap, &NoNamespaces);
        assert_eq!(
            evaluate(&input, "namespaceObject.metadata.name"),
            Ok(cel::Value::String("team-a".to_owned().into()))
        );
    }

    /// A lookup that counts the `namespaceObject`s it builds.
    #[derive(Default)]
    struct CountingNamespaces {
        built: std::sync::atomic::AtomicUsize,
    }

    impl NamespaceLookup for CountingNamespaces {
        fn labels(&self, _: &str) -> Option<crate::engine::Labels> {
            None
        }

        fn namespace_object(&self, name: &str) -> Value {
            self.built
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            json!({"metadata": {"name": name}})
        }
    }

    #[test]
    fn namespace_object_is_built_only_when_read_and_once_per_request() {
        let namespaces = CountingNamespaces::default();
        let built = || namespaces.built.load(std::sync::atomic::Ordering::Relaxed);
        let configmap = request("ConfigMap", Some("team-a"));
        let input = CelInput::new(&configmap, &namespaces);
        assert_eq!(
            evaluate(&input, "object == null && oldObject == null"),
            Ok(cel::Value::Bool(true))
        );
        assert_eq!(built(), 0);
        for _ in 0..2 {
            assert_eq!(
                evaluate(&input, "namespaceObject.metadata.name"),
                Ok(cel::Value::String("team-a".to_owned().into()))
            );
        }
        assert_eq!(built(), 1);

        let cluster_role = request("ClusterRole", None);
        let input = CelInput::new(&cluster_role, &namespaces);
        assert_eq!(
            evaluate(&input, "namespaceObject == null"),
            Ok(cel::Value::Bool(true))
        );
        assert_eq!(built(), 1);
    }
}
