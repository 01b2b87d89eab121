//! Kubernetes admission policies from the policy folders: `admissionregistration.k8s.io`
//! ValidatingAdmissionPolicy and MutatingAdmissionPolicy with their bindings, evaluated with
//! the apiserver's semantics (see docs/admission-policies.md), and the parameter objects
//! their bindings refer to.
//!
//! Everything is compiled when policies load: expressions, selectors, matchers; a binding
//! naming a policy no document defines, or an expression that does not compile, is a load
//! error naming the file, the document and the expression.

pub mod apply_configuration;
mod expression;
mod json_patch;
mod mutating;
mod params;
mod resource_match;
mod types;
mod validating;

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::admission::AdmissionRequest;
use crate::engine::{Decision, Endpoint, NamespaceLookup, ResourceRule};
use crate::policy::{DocumentSource, LabelSelector, PolicyError, from_document};

pub use expression::Expression;
pub use json_patch::diff as json_patch_diff;
pub use params::ParamStore;
pub use types::AdmissionPolicyDocument;

use crate::expressions::{Activation, CelEvalError};
use resource_match::ResourceMatcher;
use types::{
    FailurePolicy, MatchResources, NamedExpression, ParamKind, ParamRef, ParameterNotFoundAction,
};

/// The API group of the documents read here.
pub const GROUP: &str = "admissionregistration.k8s.io";

/// Recognises an `admissionregistration.k8s.io` document. Any other kind or version in the
/// group is an error, so that a typo cannot silently become a parameter object.
pub fn recognise(
    source: &DocumentSource,
    value: Json,
) -> Result<AdmissionPolicyDocument, PolicyError> {
    let api_version = value
        .get("apiVersion")
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_owned();
    let kind = value
        .get("kind")
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_owned();
    if !types::API_VERSIONS.contains(&api_version.as_str()) {
        return Err(PolicyError::at(
            source,
            "apiVersion",
            format!(
                "unsupported apiVersion {api_version}; supported: {}",
                types::API_VERSIONS.join(", ")
            ),
        ));
    }
    let document = match kind.as_str() {
        "ValidatingAdmissionPolicy" => {
            AdmissionPolicyDocument::ValidatingPolicy(from_document(source, value)?)
        }
        "ValidatingAdmissionPolicyBinding" => {
            AdmissionPolicyDocument::ValidatingBinding(from_document(source, value)?)
        }
        "MutatingAdmissionPolicy" => {
            AdmissionPolicyDocument::MutatingPolicy(from_document(source, value)?)
        }
        "MutatingAdmissionPolicyBinding" => {
            AdmissionPolicyDocument::MutatingBinding(from_document(source, value)?)
        }
        _ => {
            return Err(PolicyError::at(
                source,
                "kind",
                format!(
                    "unsupported document {api_version} {kind}; supported kinds in {GROUP}: {}",
                    types::KINDS.join(", ")
                ),
            ));
        }
    };
    Ok(document)
}

// ---------------------------------------------------------------------------------------------
// Compiled pieces shared by validating and mutating policies.

/// A compiled expression with where it came from, for load errors.
fn compile_expression(
    source: &DocumentSource,
    field: &str,
    text: &str,
    structs: bool,
) -> Result<Expression, PolicyError> {
    Expression::compile(text, structs).map_err(|e| {
        PolicyError::at(
            source,
            field,
            format!("compilation failed for expression {text:?}: {e}"),
        )
    })
}

/// `spec.variables`, compiled, with what each one needs.
#[derive(Debug, Default)]
struct Variables {
    names: Vec<String>,
    expressions: Vec<Expression>,
    /// For each variable, the variables it needs (itself included), in order.
    closures: Vec<Vec<usize>>,
}

impl Variables {
    fn compile(specs: &[NamedExpression], source: &DocumentSource) -> Result<Self, PolicyError> {
        let mut variables = Variables::default();
        for (i, spec) in specs.iter().enumerate() {
            let field = format!("spec.variables[{i}].expression");
            if spec.name.is_empty() || variables.names.contains(&spec.name) {
                return Err(PolicyError::at(
                    source,
                    format!("spec.variables[{i}].name"),
                    "must be non-empty and unique",
                ));
            }
            let expression = compile_expression(source, &field, &spec.expression, false)?;
            let closure = variables.needed(&expression).map_err(|name| {
                PolicyError::at(
                    source,
                    &field,
                    format!(
                        "compilation failed for expression {:?}: undefined field '{name}' \
                         (a variable can only use the variables declared before it)",
                        spec.expression
                    ),
                )
            })?;
            let mut closure = closure;
            closure.push(i);
            variables.names.push(spec.name.clone());
            variables.expressions.push(expression);
            variables.closures.push(closure);
        }
        Ok(variables)
    }

    /// The variables `expression` needs, in order; `Err(name)` for an unknown one.
    fn needed(&self, expression: &Expression) -> Result<Vec<usize>, String> {
        let mut needed = Vec::new();
        for name in expression.variables_used() {
            let index = self
                .names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| name.clone())?;
            needed.extend(&self.closures[index]);
        }
        needed.sort_unstable();
        needed.dedup();
        Ok(needed)
    }

    /// Checks an expression of the policy against the variables.
    fn check(
        &self,
        expression: &Expression,
        source: &DocumentSource,
        field: &str,
    ) -> Result<(), PolicyError> {
        self.needed(expression).map(|_| ()).map_err(|name| {
            PolicyError::at(
                source,
                field,
                format!(
                    "compilation failed for expression {:?}: undefined field '{name}' in variables",
                    expression.source()
                ),
            )
        })
    }
}

/// One evaluation's variables: the request's, the object, the parameter, and `variables.*`
/// evaluated when an expression first reads them (an error only fails the expressions that
/// read the variable).
struct Scope<'a> {
    activation: Activation<'a>,
}

impl<'a> Scope<'a> {
    fn new(
        input: &'a RequestInput<'a>,
        object: Option<&'a Json>,
        params: Option<&'a Json>,
        variables: &'a Variables,
    ) -> Self {
        let mut activation = Activation::new()
            .request(&input.request)
            .namespace_object(&input.namespace_object);
        if let Some(object) = object {
            activation = activation.object(object);
        }
        if let Some(old_object) = input.old_object {
            activation = activation.old_object(old_object);
        }
        if let Some(params) = params {
            activation = activation.params(params);
        }
        if !variables.names.is_empty() {
            activation = activation.variables(variables.names.clone(), move |name, activation| {
                let index = variables.names.iter().position(|n| n == name);
                let Some(expression) = index.map(|i| &variables.expressions[i]) else {
                    return Err(CelEvalError::Runtime(format!("no such variable: {name}")));
                };
                expression
                    .evaluate(activation)
                    .map_err(CelEvalError::Runtime)
            });
        }
        Scope { activation }
    }

    /// Evaluates `expression`; an error is worded as the apiserver words it.
    fn evaluate(&self, expression: &Expression) -> Result<cel::Value, String> {
        expression.evaluate(&self.activation).map_err(|e| {
            format!(
                "expression '{}' resulted in error: {e}",
                expression.source()
            )
        })
    }

    /// `matchConditions`: `Ok(false)` as soon as one is false; errors only when none is.
    fn match_conditions(&self, conditions: &[(String, Expression)]) -> Result<bool, String> {
        let mut errors = Vec::new();
        for (_, condition) in conditions {
            match self.evaluate(condition) {
                Ok(cel::Value::Bool(true)) => {}
                Ok(cel::Value::Bool(false)) => return Ok(false),
                Ok(other) => errors.push(format!(
                    "expression '{}' resulted in error: expected bool, got {}",
                    condition.source(),
                    expression::type_name(&other)
                )),
                Err(error) => errors.push(error),
            }
        }
        match errors.len() {
            0 => Ok(true),
            1 => Err(errors.remove(0)),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }
}

/// What a policy and a binding have in common between the validating and mutating kinds.
struct PolicyCore {
    name: String,
    param_kind: Option<ParamKind>,
    constraints: ResourceMatcher,
    failure_policy: FailurePolicy,
    match_conditions: Vec<(String, Expression)>,
    variables: Variables,
}

fn check_selector(
    source: &DocumentSource,
    field: &str,
    selector: &Option<LabelSelector>,
) -> Result<(), PolicyError> {
    let Some(selector) = selector else {
        return Ok(());
    };
    for (i, requirement) in selector.match_expressions.iter().enumerate() {
        let ok = match requirement.operator.as_str() {
            "In" | "NotIn" => !requirement.values.is_empty(),
            "Exists" | "DoesNotExist" => requirement.values.is_empty(),
            _ => false,
        };
        if !ok {
            return Err(PolicyError::at(
                source,
                format!("{field}.matchExpressions[{i}]"),
                "operator must be In or NotIn with values, or Exists or DoesNotExist without",
            ));
        }
    }
    Ok(())
}

fn check_match_resources(
    source: &DocumentSource,
    field: &str,
    resources: &MatchResources,
) -> Result<(), PolicyError> {
    check_selector(
        source,
        &format!("{field}.namespaceSelector"),
        &resources.namespace_selector,
    )?;
    check_selector(
        source,
        &format!("{field}.objectSelector"),
        &resources.object_selector,
    )?;
    for (list, rules) in [
        ("resourceRules", &resources.resource_rules),
        ("excludeResourceRules", &resources.exclude_resource_rules),
    ] {
        for (i, rule) in rules.iter().enumerate() {
            for op in &rule.operations {
                if !matches!(
                    op.as_str(),
                    "*" | "CREATE" | "UPDATE" | "DELETE" | "CONNECT"
                ) {
                    return Err(PolicyError::at(
                        source,
                        format!("{field}.{list}[{i}].operations"),
                        format!("unsupported operation {op:?}"),
                    ));
                }
            }
            if let Some(scope) = &rule.scope
                && !matches!(scope.as_str(), "*" | "Cluster" | "Namespaced")
            {
                return Err(PolicyError::at(
                    source,
                    format!("{field}.{list}[{i}].scope"),
                    format!("unsupported scope {scope:?}: use *, Cluster or Namespaced"),
                ));
            }
        }
    }
    Ok(())
}

impl PolicyCore {
    #[allow(clippy::too_many_arguments)]
    fn compile(
        source: &DocumentSource,
        name: &str,
        param_kind: &Option<ParamKind>,
        constraints: &Option<MatchResources>,
        failure_policy: Option<FailurePolicy>,
        match_conditions: &[NamedExpression],
        variables: &[NamedExpression],
    ) -> Result<Self, PolicyError> {
        let Some(constraints) = constraints else {
            return Err(PolicyError::at(
                source,
                "spec.matchConstraints",
                "required: the requests the policy applies to",
            ));
        };
        if constraints.resource_rules.is_empty() {
            return Err(PolicyError::at(
                source,
                "spec.matchConstraints.resourceRules",
                "required: at least one rule",
            ));
        }
        check_match_resources(source, "spec.matchConstraints", constraints)?;
        let variables = Variables::compile(variables, source)?;
        let mut conditions = Vec::new();
        for (i, condition) in match_conditions.iter().enumerate() {
            let field = format!("spec.matchConditions[{i}].expression");
            if condition.name.is_empty() || conditions.iter().any(|(n, _)| n == &condition.name) {
                return Err(PolicyError::at(
                    source,
                    format!("spec.matchConditions[{i}].name"),
                    "must be non-empty and unique",
                ));
            }
            let expression = compile_expression(source, &field, &condition.expression, false)?;
            variables.check(&expression, source, &field)?;
            conditions.push((condition.name.clone(), expression));
        }
        Ok(PolicyCore {
            name: name.to_owned(),
            param_kind: param_kind.clone(),
            constraints: ResourceMatcher::new(constraints),
            failure_policy: failure_policy.unwrap_or_default(),
            match_conditions: conditions,
            variables,
        })
    }

    /// Compiles one more expression of the policy (validations, messages, mutations …).
    fn expression(
        &self,
        source: &DocumentSource,
        field: &str,
        text: &str,
        structs: bool,
    ) -> Result<Expression, PolicyError> {
        let expression = compile_expression(source, field, text, structs)?;
        self.variables.check(&expression, source, field)?;
        Ok(expression)
    }
}

/// A binding, compiled.
struct BindingCore {
    name: String,
    param_ref: Option<ParamRef>,
    matcher: Option<ResourceMatcher>,
}

impl BindingCore {
    fn compile(
        source: &DocumentSource,
        name: &str,
        param_ref: &Option<ParamRef>,
        match_resources: &Option<MatchResources>,
    ) -> Result<Self, PolicyError> {
        if let Some(param_ref) = param_ref {
            if param_ref.name.is_some() == param_ref.selector.is_some() {
                return Err(PolicyError::at(
                    source,
                    "spec.paramRef",
                    "set exactly one of name and selector",
                ));
            }
            if param_ref.parameter_not_found_action.is_none() {
                return Err(PolicyError::at(
                    source,
                    "spec.paramRef.parameterNotFoundAction",
                    "required: Allow or Deny",
                ));
            }
            check_selector(source, "spec.paramRef.selector", &param_ref.selector)?;
        }
        if let Some(resources) = match_resources {
            check_match_resources(source, "spec.matchResources", resources)?;
        }
        Ok(BindingCore {
            name: name.to_owned(),
            param_ref: param_ref.clone(),
            matcher: match_resources.as_ref().map(ResourceMatcher::new),
        })
    }

    fn matches(&self, request: &AdmissionRequest, namespaces: &dyn NamespaceLookup) -> bool {
        self.matcher
            .as_ref()
            .is_none_or(|matcher| matcher.matches(request, namespaces))
    }

    /// The parameter objects to evaluate with: `[None]` without `paramKind`, otherwise the
    /// objects `paramRef` finds; an error is a configuration error of the binding.
    fn params<'p>(
        &self,
        policy: &PolicyCore,
        store: &'p ParamStore,
        request: &AdmissionRequest,
    ) -> Result<Vec<Option<&'p Json>>, String> {
        let Some(kind) = &policy.param_kind else {
            return Ok(vec![None]);
        };
        let Some(param_ref) = &self.param_ref else {
            return Err(format!(
                "paramKind kind `{}` is set on the policy but the binding has no paramRef",
                kind.kind
            ));
        };
        let found = store.find(kind, param_ref, request)?;
        if found.is_empty()
            && param_ref.parameter_not_found_action == Some(ParameterNotFoundAction::Deny)
        {
            return Err(
                "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
            );
        }
        Ok(found.into_iter().map(Some).collect())
    }
}

/// The request as CEL sees it, built once per request when a policy matches.
struct RequestInput<'r> {
    request: Json,
    namespace_object: Json,
    old_object: Option<&'r Json>,
}

impl<'r> RequestInput<'r> {
    fn new(request: &'r AdmissionRequest, namespaces: &dyn NamespaceLookup) -> Self {
        let value = request.attributes_json();
        // A Namespace's own request has its name as namespace; the apiserver unsets it.
        let is_namespace = request.kind.group.is_empty() && request.kind.kind == "Namespace";
        let namespace = request
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty() && !is_namespace);
        let namespace_object = match namespace {
            None => Json::Null,
            Some(name) => {
                let labels = resource_match::namespace_labels(name, namespaces);
                serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": name, "labels": labels},
                })
            }
        };
        RequestInput {
            request: value,
            namespace_object,
            old_object: request.old_object.as_ref(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The compiled set.

/// Every admission policy and binding of the policy folders, compiled, with the parameter
/// objects.
#[derive(Default)]
pub struct AdmissionPolicies {
    validating: Vec<validating::ValidatingPolicy>,
    mutating: Vec<mutating::MutatingPolicy>,
    params: ParamStore,
}

impl std::fmt::Debug for AdmissionPolicies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionPolicies")
            .field("validating", &self.validating.len())
            .field("mutating", &self.mutating.len())
            .finish()
    }
}

impl AdmissionPolicies {
    /// Compiles the documents (in document order) with their parameter objects.
    pub fn compile(
        documents: &[(&DocumentSource, &AdmissionPolicyDocument)],
        params: &[(&DocumentSource, &Json)],
    ) -> Result<Self, PolicyError> {
        let mut validating: Vec<validating::ValidatingPolicy> = Vec::new();
        let mut mutating: Vec<mutating::MutatingPolicy> = Vec::new();
        let mut seen: BTreeMap<(&str, &str), &DocumentSource> = BTreeMap::new();
        let mut bindings = Vec::new();
        for (source, document) in documents {
            let (kind, name) = match document {
                AdmissionPolicyDocument::ValidatingPolicy(d) => {
                    validating.push(validating::ValidatingPolicy::compile(source, d)?);
                    ("ValidatingAdmissionPolicy", d.metadata.name.as_str())
                }
                AdmissionPolicyDocument::MutatingPolicy(d) => {
                    mutating.push(mutating::MutatingPolicy::compile(source, d)?);
                    ("MutatingAdmissionPolicy", d.metadata.name.as_str())
                }
                AdmissionPolicyDocument::ValidatingBinding(d) => {
                    bindings.push((*source, *document));
                    ("ValidatingAdmissionPolicyBinding", d.metadata.name.as_str())
                }
                AdmissionPolicyDocument::MutatingBinding(d) => {
                    bindings.push((*source, *document));
                    ("MutatingAdmissionPolicyBinding", d.metadata.name.as_str())
                }
            };
            if let Some(first) = seen.insert((kind, name), source) {
                return Err(PolicyError::at(
                    source,
                    "metadata.name",
                    format!("{kind} {name:?} is also defined in {first}"),
                ));
            }
        }
        for (source, document) in bindings {
            match document {
                AdmissionPolicyDocument::ValidatingBinding(d) => {
                    let Some(policy) = validating
                        .iter_mut()
                        .find(|p| p.core.name == d.spec.policy_name)
                    else {
                        return Err(unknown_policy(
                            source,
                            "ValidatingAdmissionPolicy",
                            &d.spec.policy_name,
                        ));
                    };
                    policy.bind(source, d)?;
                }
                AdmissionPolicyDocument::MutatingBinding(d) => {
                    let Some(policy) = mutating
                        .iter_mut()
                        .find(|p| p.core.name == d.spec.policy_name)
                    else {
                        return Err(unknown_policy(
                            source,
                            "MutatingAdmissionPolicy",
                            &d.spec.policy_name,
                        ));
                    };
                    policy.bind(source, d)?;
                }
                _ => {}
            }
        }
        Ok(AdmissionPolicies {
            validating,
            mutating,
            params: ParamStore::new(params),
        })
    }

    /// Whether there is nothing to evaluate.
    pub fn is_empty(&self) -> bool {
        self.validating.is_empty() && self.mutating.is_empty()
    }

    /// Whether some MutatingAdmissionPolicy is bound.
    pub fn mutates(&self) -> bool {
        self.mutating.iter().any(|p| !p.bindings.is_empty())
    }

    /// Bound policies (each counts as one rule per validation or mutation).
    pub fn rule_count(&self) -> usize {
        self.validating
            .iter()
            .map(validating::ValidatingPolicy::rule_count)
            .sum::<usize>()
            + self
                .mutating
                .iter()
                .map(mutating::MutatingPolicy::rule_count)
                .sum::<usize>()
    }

    /// What the webhook must register for `endpoint`: the `matchConstraints` of bound
    /// policies.
    pub fn webhook_rules(&self, endpoint: Endpoint) -> Vec<ResourceRule> {
        match endpoint {
            Endpoint::Validate => self
                .validating
                .iter()
                .filter(|p| !p.bindings.is_empty())
                .flat_map(|p| p.core.constraints.resource_rules())
                .collect(),
            Endpoint::Mutate => self
                .mutating
                .iter()
                .filter(|p| !p.bindings.is_empty())
                .flat_map(|p| p.core.constraints.resource_rules())
                .collect(),
        }
    }

    /// Runs the ValidatingAdmissionPolicies.
    pub fn validate(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        decision: &mut Decision,
    ) {
        validating::validate(self, request, namespaces, decision);
    }

    /// Runs the MutatingAdmissionPolicies on `object` (the object as edited so far) and
    /// returns the mutated object; errors under `failurePolicy: Fail` deny in `decision`.
    pub fn mutate(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        object: Json,
        decision: &mut Decision,
    ) -> Json {
        mutating::mutate(self, request, namespaces, object, decision)
    }
}

fn unknown_policy(source: &DocumentSource, kind: &str, name: &str) -> PolicyError {
    PolicyError::at(
        source,
        "spec.policyName",
        format!("no {kind} named {name:?} is defined in the policy folders"),
    )
}

/// An audit annotation key for the webhook response: the apiserver prefixes our keys with
/// `<webhook name>/`, so a key must be a qualified name without `/` (at most 63 characters of
/// letters, digits, `-`, `_`, `.`). `/` becomes `.`.
pub fn annotation_key(key: &str) -> String {
    let key: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '.'
            }
        })
        .take(63)
        .collect();
    key.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}
