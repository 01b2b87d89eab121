//! What a program evaluates against: the request's values and the lazily evaluated
//! `variables`.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cel::common::types::{CelMap, CelNull};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{ExecutionError, Value};

use super::{CelEvalError, compiled, convert, eval_error};
use crate::admission::Node;

/// Evaluates the composition variable `name` (VAP `spec.variables`) for an activation.
pub type VariableEvaluator<'a> =
    dyn Fn(&str, &Activation<'a>) -> Result<VariableValue<'a>, CelEvalError> + Send + Sync + 'a;

/// A composition variable's value, as its evaluator gives it: a [`Value`], or what
/// [`super::CelProgram::evaluate_variable`] gives (the compiled evaluator's value, borrowing
/// the request, where it computed the variable).
#[derive(Debug)]
pub struct VariableValue<'a>(Held<'a>);

/// What a [`VariableValue`] holds.
#[derive(Debug)]
pub(super) enum Held<'a> {
    Compiled(compiled::Value<'a>),
    Interpreted(Value),
}

impl<'a> VariableValue<'a> {
    pub(super) fn compiled(value: compiled::Value<'a>) -> Self {
        VariableValue(Held::Compiled(value))
    }

    pub(super) fn held(&self) -> &Held<'a> {
        &self.0
    }
}

impl From<Value> for VariableValue<'_> {
    fn from(value: Value) -> Self {
        VariableValue(Held::Interpreted(value))
    }
}

/// A composition variable once evaluated: what it is, and the interpreter's view of it,
/// built when the interpreter first reads it (the compiled evaluator reads the value).
struct EvaluatedVariable<'a> {
    value: VariableValue<'a>,
    val: OnceLock<Result<Box<dyn Val + 'a>, CelEvalError>>,
}

impl<'a> EvaluatedVariable<'a> {
    fn val(&self) -> Result<&(dyn Val + 'a), CelEvalError> {
        let val = self.val.get_or_init(|| match self.value.held() {
            Held::Compiled(compiled::Value::Json(json)) => Ok(convert::json_to_val(json)),
            Held::Compiled(value) => value
                .to_cel()
                .ok_or_else(|| CelEvalError::runtime("an optional held as a variable"))?
                .try_into()
                .map_err(|e| eval_error(&e)),
            Held::Interpreted(value) => value.clone().try_into().map_err(|e| eval_error(&e)),
        });
        val.as_ref().map(|val| &**val).map_err(Clone::clone)
    }
}

/// One authorization question, as `authorizer.group(..).resource(..)...check(verb)` builds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct AuthorizationCheck {
    /// `authorizer.path(p)`: a non-resource URL; empty for resource checks.
    pub path: String,
    /// API group, `""` for the core group.
    pub group: String,
    /// Resource, e.g. `deployments`.
    pub resource: String,
    /// Subresource, e.g. `status`.
    pub subresource: String,
    /// Namespace, empty for cluster-scoped checks.
    pub namespace: String,
    /// Object name, empty for all.
    pub name: String,
    /// The verb given to `check`.
    pub verb: String,
    /// `authorizer.serviceAccount(ns, name)`: the user asked about; empty for the requester.
    pub service_account: Option<(String, String)>,
    /// `.fieldSelector(s)`: the field selector of a list or watch check.
    pub field_selector: String,
    /// `.labelSelector(s)`: the label selector of a list or watch check.
    pub label_selector: String,
}

/// The answer to an [`AuthorizationCheck`]: `allowed()`, `reason()`, `errored()`, `error()`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizationDecision {
    /// `allowed()`.
    pub allowed: bool,
    /// `reason()`.
    pub reason: String,
    /// `error()`; `errored()` is true when it is not empty.
    pub error: String,
}

/// Answers `authorizer` checks (a SubjectAccessReview, in a cluster).
pub trait Authorizer: Send + Sync {
    /// Decides `check` for the requesting user. A question that could not be put (the
    /// authorizer could not be asked) is a [`AuthorizationDecision::error`]; `Err` fails the
    /// expression itself (no answers configured at all), as a CEL runtime error.
    fn authorize(&self, check: &AuthorizationCheck) -> Result<AuthorizationDecision, String>;
}

thread_local! {
    /// The composition variables being evaluated on this thread, by activation address and
    /// position among the activation's variables.
    static EVALUATING: std::cell::RefCell<Vec<(usize, usize)>> = const {
        std::cell::RefCell::new(Vec::new())
    };
}

/// Slots of the fixed admission variables, in slot order (the compiled evaluator resolves
/// these names to their positions at load).
pub(super) const SLOTS: [&str; 5] = [
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
];

/// The position of `name` in [`SLOTS`], checked when compiling.
const fn slot_index(name: &str) -> usize {
    let mut index = 0;
    while index < SLOTS.len() {
        let (slot, name) = (SLOTS[index].as_bytes(), name.as_bytes());
        if slot.len() == name.len() {
            let mut at = 0;
            while at < slot.len() && slot[at] == name[at] {
                at += 1;
            }
            if at == slot.len() {
                return index;
            }
        }
        index += 1;
    }
    panic!("not an admission slot")
}

const OBJECT_SLOT: usize = slot_index("object");
const OLD_OBJECT_SLOT: usize = slot_index("oldObject");
const REQUEST_SLOT: usize = slot_index("request");
const PARAMS_SLOT: usize = slot_index("params");
const NAMESPACE_OBJECT_SLOT: usize = slot_index("namespaceObject");

/// JSON built only when an expression first reads it (the request's attributes, which most
/// expressions never read).
pub trait JsonSource: Send + Sync {
    /// The JSON, built on the first call.
    fn json(&self) -> &serde_json::Value;
}

/// Where a bound variable's JSON comes from.
#[derive(Clone, Copy)]
enum JsonOrigin<'a> {
    Given(&'a serde_json::Value),
    Built(&'a dyn JsonSource),
    /// Read in place from an object view by the compiled evaluator; the tree, for the
    /// interpreter, built from `source` when first asked for.
    View(Node<'a>, &'a dyn JsonSource),
}

impl std::fmt::Debug for JsonOrigin<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JsonOrigin::Given(_) => "Given",
            JsonOrigin::Built(_) => "Built",
            JsonOrigin::View(..) => "View",
        })
    }
}

/// A bound value: JSON converted on first reference (most expressions never read `request`
/// or `oldObject`), or a value given as is.
#[derive(Debug)]
struct Binding<'a> {
    json: Option<JsonOrigin<'a>>,
    val: OnceLock<Box<dyn Val + 'a>>,
}

impl<'a> Binding<'a> {
    fn json(json: &'a serde_json::Value) -> Self {
        Binding {
            json: Some(JsonOrigin::Given(json)),
            val: OnceLock::new(),
        }
    }

    fn built(source: &'a dyn JsonSource) -> Self {
        Binding {
            json: Some(JsonOrigin::Built(source)),
            val: OnceLock::new(),
        }
    }

    fn view(node: Node<'a>, source: &'a dyn JsonSource) -> Self {
        Binding {
            json: Some(JsonOrigin::View(node, source)),
            val: OnceLock::new(),
        }
    }

    fn val(val: Box<dyn Val + 'a>) -> Self {
        Binding {
            json: None,
            val: OnceLock::from(val),
        }
    }

    /// The bound JSON, built now if it is built on demand; `None` for a value given as is.
    fn json_value(&self) -> Option<&'a serde_json::Value> {
        match self.json? {
            JsonOrigin::Given(json) => Some(json),
            JsonOrigin::Built(source) | JsonOrigin::View(_, source) => Some(source.json()),
        }
    }

    /// The bound view's node, for a value bound from an object view.
    fn node(&self) -> Option<Node<'a>> {
        match self.json? {
            JsonOrigin::View(node, _) => Some(node),
            _ => None,
        }
    }

    fn get(&self) -> &(dyn Val + 'a) {
        &**self.val.get_or_init(|| match self.json_value() {
            Some(json) => convert::json_to_val(json),
            None => Box::new(CelNull),
        })
    }
}

struct LazyVariable<'a> {
    name: Cow<'a, str>,
    value: OnceLock<Result<EvaluatedVariable<'a>, CelEvalError>>,
}

/// The values one evaluation sees. Unset admission variables are `null`, as on CREATE
/// (`oldObject`) or without a param kind (`params`). Variables from [`Activation::variables`]
/// are evaluated the first time an expression references them and cached for the life of
/// the activation (one request); an error propagates only to expressions that reference it.
pub struct Activation<'a> {
    slots: [Option<Binding<'a>>; 5],
    extra: Vec<(String, Binding<'a>)>,
    lazy: Vec<LazyVariable<'a>>,
    evaluator: Option<Box<VariableEvaluator<'a>>>,
    authorizer: Option<Box<dyn Val + 'a>>,
    failed: Mutex<Option<CelEvalError>>,
    fail_bare_variables: AtomicBool,
}

impl Default for Activation<'_> {
    fn default() -> Self {
        Activation::new()
    }
}

impl std::fmt::Debug for Activation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Activation")
            .field("slots", &self.slots)
            .finish_non_exhaustive()
    }
}

impl<'a> Activation<'a> {
    /// An activation where every variable is `null`.
    #[inline]
    pub fn new() -> Self {
        Activation {
            slots: Default::default(),
            extra: Vec::new(),
            lazy: Vec::new(),
            evaluator: None,
            authorizer: None,
            failed: Mutex::new(None),
            fail_bare_variables: AtomicBool::new(false),
        }
    }

    /// Binds `object`, borrowing the JSON (converted once, strings not copied).
    #[must_use]
    #[inline]
    pub fn object(self, json: &'a serde_json::Value) -> Self {
        self.bind_slot(OBJECT_SLOT, Binding::json(json))
    }

    /// Binds `object` to a value of an object view, which the compiled evaluator reads in
    /// place; `tree` gives the same value as a tree, built only if the interpreter needs it.
    #[must_use]
    #[inline]
    pub fn object_view(self, node: Node<'a>, tree: &'a dyn JsonSource) -> Self {
        self.bind_slot(OBJECT_SLOT, Binding::view(node, tree))
    }

    /// Binds `oldObject` as [`Activation::object_view`] binds `object`.
    #[must_use]
    #[inline]
    pub fn old_object_view(self, node: Node<'a>, tree: &'a dyn JsonSource) -> Self {
        self.bind_slot(OLD_OBJECT_SLOT, Binding::view(node, tree))
    }

    /// Binds `oldObject`.
    #[must_use]
    #[inline]
    pub fn old_object(self, json: &'a serde_json::Value) -> Self {
        self.bind_slot(OLD_OBJECT_SLOT, Binding::json(json))
    }

    /// Binds `request` (the AdmissionRequest as JSON).
    #[must_use]
    pub fn request(self, json: &'a serde_json::Value) -> Self {
        self.bind_slot(REQUEST_SLOT, Binding::json(json))
    }

    /// Binds `request` to JSON built when an expression first reads it.
    #[must_use]
    #[inline]
    pub fn request_built(self, source: &'a dyn JsonSource) -> Self {
        self.bind_slot(REQUEST_SLOT, Binding::built(source))
    }

    /// Binds `params`.
    #[must_use]
    #[inline]
    pub fn params(self, json: &'a serde_json::Value) -> Self {
        self.bind_slot(PARAMS_SLOT, Binding::json(json))
    }

    /// Binds `namespaceObject`.
    #[must_use]
    pub fn namespace_object(self, json: &'a serde_json::Value) -> Self {
        self.bind_slot(NAMESPACE_OBJECT_SLOT, Binding::json(json))
    }

    /// Binds `namespaceObject` to JSON built when an expression first reads it.
    #[must_use]
    #[inline]
    pub fn namespace_object_built(self, source: &'a dyn JsonSource) -> Self {
        self.bind_slot(NAMESPACE_OBJECT_SLOT, Binding::built(source))
    }

    /// Binds any variable to JSON (converted once, on first reference, borrowed).
    #[must_use]
    pub fn json(self, name: &str, json: &'a serde_json::Value) -> Self {
        self.bind(name, Binding::json(json))
    }

    /// Binds any variable to a CEL value (e.g. an object built by a mutation).
    pub fn value(self, name: &str, value: Value) -> Result<Self, CelEvalError> {
        let val: Box<dyn Val> = value.try_into().map_err(|e| eval_error(&e))?;
        Ok(self.bind(name, Binding::val(val)))
    }

    fn bind(mut self, name: &str, binding: Binding<'a>) -> Self {
        match SLOTS.iter().position(|slot| *slot == name) {
            Some(i) => self.slots[i] = Some(binding),
            None => {
                self.extra.retain(|(n, _)| n != name);
                self.extra.push((name.to_owned(), binding));
            }
        }
        self
    }

    #[inline]
    fn bind_slot(mut self, index: usize, binding: Binding<'a>) -> Self {
        self.slots[index] = Some(binding);
        self
    }

    /// Declares the composition variables `names`, evaluated on first reference by
    /// `evaluator` (which typically runs another [`super::CelProgram`] against this same
    /// activation). Variables may reference earlier ones; a cycle is the caller's to reject.
    #[must_use]
    pub fn variables<S: Into<Cow<'a, str>>, V: Into<VariableValue<'a>>>(
        mut self,
        names: impl IntoIterator<Item = S>,
        evaluator: impl Fn(&str, &Activation<'a>) -> Result<V, CelEvalError> + Send + Sync + 'a,
    ) -> Self {
        self.lazy = names
            .into_iter()
            .map(|name| LazyVariable {
                name: name.into(),
                value: OnceLock::new(),
            })
            .collect();
        self.evaluator = Some(Box::new(move |name: &str, activation: &Activation<'a>| {
            evaluator(name, activation).map(Into::into)
        }));
        self
    }

    /// Binds `authorizer` to `authorizer`; `request_resource` (the request's group, resource,
    /// subresource, namespace and name) is what `authorizer.requestResource` checks.
    #[must_use]
    pub fn authorizer(
        mut self,
        authorizer: Arc<dyn Authorizer>,
        request_resource: Option<AuthorizationCheck>,
    ) -> Self {
        self.authorizer = Some(super::library::authorizer_value(
            authorizer,
            request_resource,
        ));
        self
    }

    /// The JSON bound to admission slot `index` (see `SLOTS`): `Ok(None)` when unbound
    /// (`null`), `Err` when it holds a value that is not JSON.
    pub(super) fn slot_json(&self, index: usize) -> Result<Option<&'a serde_json::Value>, ()> {
        match self.slots.get(index) {
            Some(Some(binding)) => binding.json_value().map(Some).ok_or(()),
            _ => Ok(None),
        }
    }

    /// The view's node bound to admission slot `index`, where one is bound from a view.
    pub(super) fn slot_node(&self, index: usize) -> Option<Node<'a>> {
        self.slots.get(index)?.as_ref()?.node()
    }

    /// The JSON bound to another variable by name, if any.
    pub(super) fn named_json(&self, name: &str) -> Option<&'a serde_json::Value> {
        self.extra
            .iter()
            .find(|(bound, _)| bound == name)
            .and_then(|(_, binding)| binding.json_value())
    }

    /// The value of composition variable `name`, evaluated now if not yet. A variable that
    /// references itself, directly or through others, is an error rather than a deadlock.
    pub fn variable(&self, name: &str) -> Option<Result<&(dyn Val + 'a), CelEvalError>> {
        Some(self.evaluated(name)?.and_then(EvaluatedVariable::val))
    }

    /// Like [`Activation::variable`], the value as the evaluator gave it.
    pub(super) fn variable_value(
        &self,
        name: &str,
    ) -> Option<Result<&VariableValue<'a>, CelEvalError>> {
        Some(self.evaluated(name)?.map(|evaluated| &evaluated.value))
    }

    fn evaluated(&self, name: &str) -> Option<Result<&EvaluatedVariable<'a>, CelEvalError>> {
        let index = self.lazy.iter().position(|v| v.name == name)?;
        let slot = &self.lazy[index];
        if let Some(result) = slot.value.get() {
            return Some(result.as_ref().map_err(Clone::clone));
        }
        let key = (std::ptr::from_ref(self).addr(), index);
        let cycle = EVALUATING.with(|stack| {
            let mut stack = stack.borrow_mut();
            let cycle = stack.contains(&key);
            if !cycle {
                stack.push(key);
            }
            cycle
        });
        if cycle {
            return Some(Err(CelEvalError::runtime(format!(
                "variable '{name}' references itself"
            ))));
        }
        let result = slot.value.get_or_init(|| {
            let evaluator = self
                .evaluator
                .as_ref()
                .expect("lazy variables have an evaluator");
            // The apiserver's wording for an expression reading a variable that failed.
            let value = evaluator(name, self).map_err(|error| match error {
                CelEvalError::Runtime(message) => CelEvalError::Runtime(format!(
                    "composited variable \"{name}\" fails to evaluate: {message}"
                )),
                cancelled => cancelled,
            })?;
            Ok(EvaluatedVariable {
                value,
                val: OnceLock::new(),
            })
        });
        EVALUATING.with(|stack| stack.borrow_mut().retain(|k| *k != key));
        Some(result.as_ref().map_err(Clone::clone))
    }

    /// The variables a bare `variables` (as in `has(variables.x)`) holds here: inside a
    /// variable's own expression, only those declared before it (the only ones it may
    /// reference, so that neither itself nor a later variable that reads it is evaluated);
    /// elsewhere, all of them.
    fn visible_variables(&self) -> &[LazyVariable<'a>] {
        let address = std::ptr::from_ref(self).addr();
        let innermost = EVALUATING.with(|stack| {
            stack
                .borrow()
                .iter()
                .rev()
                .find(|(a, _)| *a == address)
                .map(|(_, index)| *index)
        });
        match innermost {
            Some(index) => &self.lazy[..index],
            None => &self.lazy,
        }
    }

    pub(super) fn resolver(&self) -> ActivationResolver<'_, 'a> {
        ActivationResolver { activation: self }
    }

    /// The error to report for `error`: a variable's own error when referencing it failed.
    pub(super) fn explain(&self, error: ExecutionError) -> CelEvalError {
        if let ExecutionError::UndeclaredReference(name) = &error
            && name.as_str() == "variables"
            && let Some(failed) = self.failed.lock().ok().and_then(|f| f.clone())
        {
            return failed;
        }
        // cel-go's words for a declared variable the activation does not hold.
        if let ExecutionError::UndeclaredReference(name) = &error
            && name.as_str() == "authorizer"
        {
            return CelEvalError::runtime("no such attribute(s): authorizer");
        }
        eval_error(&error)
    }

    fn record(&self, error: &CelEvalError) {
        if let Ok(mut failed) = self.failed.lock() {
            *failed = Some(error.clone());
        }
        self.fail_bare_variables.store(true, Ordering::Relaxed);
    }
}

pub(super) struct ActivationResolver<'x, 'a> {
    activation: &'x Activation<'a>,
}

impl VariableResolver for ActivationResolver<'_, '_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        let activation = self.activation;
        if let Some(i) = SLOTS.iter().position(|slot| *slot == variable) {
            return Some(match &activation.slots[i] {
                Some(binding) => CowVal::Borrowed(binding.get()),
                None => CowVal::owned(CelNull),
            });
        }
        if let Some(name) = variable.strip_prefix("variables.") {
            return match activation.variable(name)? {
                Ok(val) => Some(CowVal::Borrowed(val)),
                Err(error) => {
                    activation.record(&error);
                    None
                }
            };
        }
        match variable {
            "variables" => {
                if activation
                    .fail_bare_variables
                    .swap(false, Ordering::Relaxed)
                {
                    return None;
                }
                Some(CowVal::owned(LazyVariables {
                    activation,
                    visible: activation.visible_variables(),
                }))
            }
            // Unbound where the apiserver evaluates without it (a VAP's messageExpressions
            // and auditAnnotations): referencing it is an error (see `explain`).
            "authorizer" => activation
                .authorizer
                .as_ref()
                .map(|val| CowVal::Borrowed(&**val)),
            _ => activation
                .extra
                .iter()
                .find(|(n, _)| n == variable)
                .map(|(_, binding)| CowVal::Borrowed(binding.get())),
        }
    }
}

/// `variables` as a whole, as `has(variables.x)` reads it: looking a name up evaluates that
/// variable only (the apiserver's lazy map does the same), so `has()` is true for a variable
/// that evaluates, an error for one that fails, false for an unknown name; other variables,
/// failing or not, are not evaluated.
struct LazyVariables<'x, 'a> {
    activation: &'x Activation<'a>,
    visible: &'x [LazyVariable<'a>],
}

impl std::fmt::Debug for LazyVariables<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.visible.iter().map(|v| &v.name))
            .finish()
    }
}

impl Val for LazyVariables<'_, '_> {
    fn get_type(&self) -> &cel::common::types::Type {
        <CelMap as Val>::cel_type()
    }

    fn cel_type() -> &'static cel::common::types::Type {
        <CelMap as Val>::cel_type()
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn cel::common::traits::Indexer + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_sizer(&self) -> Option<&dyn cel::common::traits::Sizer> {
        Some(self)
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(LazyVariables {
            activation: self.activation,
            visible: self.visible,
        })
    }
}

impl cel::common::traits::Sizer for LazyVariables<'_, '_> {
    fn size(&self) -> cel::common::types::CelInt {
        cel::common::types::CelInt::from(self.visible.len() as i64)
    }
}

impl cel::common::traits::Indexer for LazyVariables<'_, '_> {
    fn get<'b, 'w>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'w>, ExecutionError>
    where
        Self: 'w,
    {
        let name =
            match <cel::common::types::CelString as cel::common::value::FromVal>::from_val(idx) {
                Some(name) => name.inner().to_owned(),
                None => return Err(ExecutionError::NoSuchKey(Arc::new(String::new()))),
            };
        if !self.visible.iter().any(|v| v.name == name) {
            return Err(ExecutionError::NoSuchKey(Arc::new(name)));
        }
        match self.activation.variable(&name) {
            Some(Ok(val)) => Ok(CowVal::Owned(val.clone_as_boxed())),
            Some(Err(CelEvalError::Cancelled(message))) => Err(ExecutionError::FunctionError {
                function: "budget".into(),
                message,
            }),
            Some(Err(error)) => Err(ExecutionError::FunctionError {
                function: "variables".into(),
                message: error.to_string(),
            }),
            None => Err(ExecutionError::NoSuchKey(Arc::new(name))),
        }
    }

    fn steal<'w>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}
