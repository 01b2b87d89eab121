//! ValidatingAdmissionPolicy: validations, messages, audit annotations and the binding's
//! validationActions, with the apiserver's wording
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/validating/{validator,dispatcher}.go`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::AdmissionPolicies;
use super::binding::{BindingCore, Bound, ParamSources, Undispatched};
use super::field_validation::{
    BINDING_ORDER, FieldErrors, MAX_VALUE_EXPRESSION_BYTES, VALIDATING_ORDER,
};
use super::params::ParamLookup;
use super::policy_core::PolicyCore;
use super::scope::Scope;
use crate::admission::AdmissionRequest;
use crate::engine::audit_annotation_key;
use crate::engine::cel_input::CelObject;
use crate::engine::cel_input::{CelInputCell, failure_message_from};
use crate::engine::{
    Decision, DenialStatus, NamespaceLookup, PolicyOutcome, Violation, ViolationForm,
};
use crate::expressions::{
    CelType, CostBudget, Expression, PER_CALL_COST_LIMIT, POLICY_COST_BUDGET,
};
use crate::policy::admission_policy::{
    Document, FailurePolicy, ValidatingBindingSpec, ValidatingPolicySpec, Validation,
    ValidationAction,
};
use crate::policy::{DocumentSource, PolicyError};

/// The longest audit annotation value published.
const MAX_AUDIT_VALUE_BYTES: usize = 10 * 1024;
/// The audit annotation of failures under the `Audit` action.
pub const VALIDATION_FAILURE_KEY: &str = "validation.policy.admission.k8s.io/validation_failure";

/// One compiled validation: its expression, and what words its failure.
pub(crate) struct PolicyValidation {
    pub(crate) expression: Expression,
    pub(crate) message: Option<String>,
    pub(crate) message_expression: Option<Expression>,
    pub(crate) reason: Option<String>,
}

pub(super) struct Binding {
    core: BindingCore,
    actions: Vec<ValidationAction>,
}

impl Bound for Binding {
    fn binding(&self) -> &BindingCore {
        &self.core
    }
}

/// A compiled ValidatingAdmissionPolicy with its bindings.
pub struct ValidatingPolicy {
    pub(super) core: PolicyCore,
    validations: Vec<PolicyValidation>,
    audit_annotations: Vec<(String, Expression)>,
    pub(super) bindings: Vec<Binding>,
}

impl ValidatingPolicy {
    /// Compiles the policy document; bindings are added with [`ValidatingPolicy::bind`].
    pub fn compile(
        source: &DocumentSource,
        document: &Document<ValidatingPolicySpec>,
    ) -> Result<Self, PolicyError> {
        let spec = &document.spec;
        let mut errors = FieldErrors::default();
        errors.policy_common(&document.metadata.name, &spec.common());
        if spec.validations.is_empty() && spec.audit_annotations.is_empty() {
            let detail = "validations or auditAnnotations must contain at least one item";
            errors.required("spec.validations", detail);
            errors.required("spec.auditAnnotations", detail);
        }
        for (i, validation) in spec.validations.iter().enumerate() {
            errors.validation(i, validation);
        }
        errors.audit_annotations(&document.metadata.name, &spec.audit_annotations);
        let core = PolicyCore::compile(source, &document.metadata.name, spec.common(), &mut errors);
        let mut validations = Vec::new();
        let mut audit_annotations = Vec::new();
        if let Some(core) = &core {
            for (i, validation) in spec.validations.iter().enumerate() {
                if let Some(compiled) = compile_validation(core, source, i, validation, &mut errors)
                {
                    validations.push(compiled);
                }
            }
            for (i, annotation) in spec.audit_annotations.iter().enumerate() {
                let value_field = format!("spec.auditAnnotations[{i}].valueExpression");
                let text = annotation.value_expression.trim();
                // Refused unseen when empty or too long (`FieldErrors::audit_annotations`).
                if text.is_empty() || text.len() > MAX_VALUE_EXPRESSION_BYTES {
                    continue;
                }
                let compiled =
                    core.expression(source, &value_field, &annotation.value_expression, false);
                let types = [CelType::String, CelType::Null];
                let expression = errors.typed(source, &value_field, compiled, &types);
                if let Some(expression) = expression {
                    audit_annotations.push((annotation.key.clone(), expression));
                }
            }
        }
        errors.result(source, VALIDATING_ORDER)?;
        let Some(mut core) = core else {
            return Err(PolicyError::at(
                source,
                "spec.matchConstraints",
                "Required value",
            ));
        };
        core.note_expressions(
            validations
                .iter()
                .flat_map(|v: &PolicyValidation| {
                    [Some(&v.expression), v.message_expression.as_ref()]
                })
                .flatten()
                .chain(audit_annotations.iter().map(|(_, expression)| expression)),
        );
        Ok(ValidatingPolicy {
            core,
            validations,
            audit_annotations,
            bindings: Vec::new(),
        })
    }

    /// Adds a binding of this policy.
    pub fn bind(
        &mut self,
        source: &DocumentSource,
        document: &Document<ValidatingBindingSpec>,
    ) -> Result<(), PolicyError> {
        let spec = &document.spec;
        let actions = &spec.validation_actions;
        let mut errors = FieldErrors::default();
        errors.binding(
            &document.metadata.name,
            &spec.policy_name,
            &spec.param_ref,
            &spec.match_resources,
        );
        errors.validation_actions(actions);
        errors.result(source, BINDING_ORDER)?;
        let core = BindingCore::compile(
            &document.metadata.name,
            &spec.param_ref,
            &spec.match_resources,
        )?;
        self.bindings.push(Binding {
            core,
            actions: actions.clone(),
        });
        Ok(())
    }

    /// Validations and audit annotations of a bound policy.
    pub fn rule_count(&self) -> usize {
        if self.bindings.is_empty() {
            0
        } else {
            self.validations.len() + self.audit_annotations.len()
        }
    }
}

/// One failed (or errored) validation, before the binding's actions route it.
pub(crate) struct Failure {
    pub(crate) message: String,
    reason: Option<String>,
    index: usize,
}

impl Failure {
    /// An evaluation error of the expression at `index`: a failure under failurePolicy Fail
    /// (routed by the binding's actions, as the apiserver does), nothing under Ignore.
    pub(crate) fn error(message: String, index: usize, fail: bool) -> Vec<Failure> {
        if !fail {
            return Vec::new();
        }
        vec![Failure {
            message,
            reason: None,
            index,
        }]
    }
}

/// What a policy's validations gave for one binding and parameter.
pub(crate) struct Validated {
    pub(crate) failures: Vec<Failure>,
    pub(crate) errored: bool,
    /// The validations overran their budget: nothing else of the policy runs.
    pub(crate) stopped: bool,
}

/// The validations of a policy, with what their evaluation is charged against.
#[derive(Clone, Copy)]
pub(crate) struct ValidationRun<'p> {
    pub(crate) validations: &'p [PolicyValidation],
    /// How many variables the policy declares (each may be evaluated again for messages).
    pub(crate) variable_count: usize,
    /// The cost budget of the validations and their messages together.
    pub(crate) budget: u64,
    /// Whether an evaluation error is a failure (failurePolicy Fail).
    pub(crate) fail: bool,
}

/// Runs the validations, then their `messageExpression`s, against one budget as the
/// apiserver does: an overrun by the validations stops the policy with one error; an overrun
/// by the messages turns every validation that did not fail to evaluate into the error
/// `failed messageExpression: …`.
pub(crate) fn run_validations<'s, 'a: 's>(
    run: ValidationRun<'_>,
    scope: &Scope<'_>,
    message_scope: &dyn Fn() -> &'s Scope<'a>,
) -> Validated {
    let fail = run.fail;
    let mut budget = CostBudget::new(run.budget);
    // The results other than true, by validation index (none, and nothing allocated, when
    // every validation holds).
    let mut exceptions: Vec<(usize, Result<bool, String>)> = Vec::new();
    for (index, validation) in run.validations.iter().enumerate() {
        let (result, cost) = validation
            .expression
            .evaluate_bool_with_cost(&scope.activation);
        if let Err(out_of_budget) = budget.spend(cost) {
            return Validated {
                failures: Failure::error(out_of_budget.into(), 0, fail),
                errored: true,
                stopped: true,
            };
        }
        if result != Ok(true) {
            exceptions.push((index, result));
        }
    }
    let mut validated = Validated {
        failures: Vec::new(),
        errored: false,
        stopped: false,
    };
    let mut messages = match message_values(run, message_scope, &exceptions, budget) {
        Ok(messages) => messages,
        Err(out_of_budget) => {
            // Every validation that evaluated, true or false, fails with the overrun.
            let mut exceptions = exceptions.into_iter().peekable();
            for index in 0..run.validations.len() {
                let failure = match exceptions.next_if(|(at, _)| *at == index) {
                    Some((_, Err(error))) => Failure::error(error, index, fail),
                    _ => Failure::error(
                        format!("failed messageExpression: {out_of_budget}"),
                        index,
                        fail,
                    ),
                };
                validated.errored = true;
                validated.failures.extend(failure);
            }
            return validated;
        }
    };
    for (index, result) in exceptions {
        match result {
            Ok(_) => {
                let validation = &run.validations[index];
                validated.failures.push(Failure {
                    message: failure_message_from(
                        &validation.expression,
                        messages.take(index),
                        validation.message.as_deref(),
                    ),
                    reason: validation.reason.clone(),
                    index,
                });
            }
            Err(error) => {
                validated.errored = true;
                validated
                    .failures
                    .extend(Failure::error(error, index, fail));
            }
        }
    }
    validated
}

/// The values of the failed validations' `messageExpression`s, by validation index (`None`
/// without one, or when it failed).
#[derive(Default)]
struct MessageValues(Vec<(usize, Option<cel::Value>)>);

impl MessageValues {
    fn take(&mut self, index: usize) -> Option<cel::Value> {
        self.0
            .iter_mut()
            .find(|(at, _)| *at == index)
            .and_then(|(_, value)| value.take())
    }
}

/// The values of the validations' `messageExpression`s where the validation was false
/// (`exceptions`: the results other than true, by index), charged to what the validations
/// left of the budget; `Err` on an overrun. The apiserver evaluates every one, whatever its
/// validation gave; only the failed validations' messages are read, so the others run only
/// when the budget left could be overrun: below two per-call limits for each
/// messageExpression and variable.
fn message_values<'s, 'a: 's>(
    run: ValidationRun<'_>,
    scope: &dyn Fn() -> &'s Scope<'a>,
    exceptions: &[(usize, Result<bool, String>)],
    mut budget: CostBudget,
) -> Result<MessageValues, &'static str> {
    let with_message = run
        .validations
        .iter()
        .filter(|v| v.message_expression.is_some())
        .count();
    let calls = (with_message + run.variable_count) as u64;
    let every_one = budget.remaining() < calls.saturating_mul(2 * PER_CALL_COST_LIMIT);
    let mut values = MessageValues::default();
    let mut exceptions = exceptions.iter().peekable();
    for (index, validation) in run.validations.iter().enumerate() {
        let failed = exceptions
            .next_if(|(at, _)| *at == index)
            .is_some_and(|(_, result)| *result == Ok(false));
        match &validation.message_expression {
            Some(expression) if every_one || failed => {
                let (value, cost) = scope().evaluate_with_cost(expression);
                budget.spend(cost)?;
                if failed {
                    values.0.push((index, value.ok()));
                }
            }
            _ => {}
        }
    }
    Ok(values)
}

/// An audit annotation's key, and its value or the error its expression gave.
type AuditAnnotationValue<'p> = (&'p str, Result<String, String>);

/// The values of a policy's audit annotations, in order: a value, or the error to deny with
/// under failurePolicy Fail; `Err` when together they overran their budget.
fn audit_annotation_values<'p>(
    policy: &'p ValidatingPolicy,
    scope: &Scope<'_>,
) -> Result<Vec<AuditAnnotationValue<'p>>, &'static str> {
    let mut budget = CostBudget::new(POLICY_COST_BUDGET);
    let mut values = Vec::new();
    for (key, expression) in &policy.audit_annotations {
        let (result, cost) = scope.evaluate_with_cost(expression);
        budget.spend(cost)?;
        let value = match result {
            Ok(cel::Value::String(value)) => {
                let value = value.trim();
                if value.is_empty() {
                    continue;
                }
                Ok(truncate(value, MAX_AUDIT_VALUE_BYTES).to_owned())
            }
            Ok(cel::Value::Null) => continue,
            Ok(other) => Err(format!(
                "valueExpression '{}' resulted in unsupported return type: {}. \
                 Return type must be either string or null.",
                expression.source(),
                crate::expressions::type_name(&other)
            )),
            Err(error) => Err(error),
        };
        values.push((key.as_str(), value));
    }
    Ok(values)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ValidationFailureValue<'a> {
    message: &'a str,
    policy: &'a str,
    binding: &'a str,
    expression_index: usize,
    validation_actions: &'a [ValidationAction],
}

fn truncate(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Runs every bound ValidatingAdmissionPolicy on `request`.
pub fn validate<'r>(
    set: &AdmissionPolicies,
    request: &'r AdmissionRequest,
    namespaces: &dyn NamespaceLookup,
    cluster_params: Option<&dyn ParamLookup>,
    cel: &CelInputCell<'r>,
    decision: &mut Decision,
) {
    for policy in &set.validating {
        let name = &policy.core.name;
        let fail = policy.core.failure_policy == FailurePolicy::Fail;
        // Audit annotation values per key, for this policy, across its bindings.
        let mut annotations: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let object = request.object.as_ref().map(CelObject::Request);
        let matched = policy.core.dispatch(
            &policy.bindings,
            ParamSources {
                files: &set.params,
                cluster: cluster_params,
                fill_type_meta: true,
                namespace_per_binding: true,
            },
            request,
            namespaces,
            cel,
            |binding, evaluation| {
                let evaluation = match evaluation {
                    Ok(evaluation) => evaluation,
                    Err(error) => {
                        record_outcome(policy, binding, "error", decision);
                        if fail {
                            deny(policy, binding, error, None, decision);
                        }
                        return;
                    }
                };
                let scope = evaluation.scope(object);
                // messageExpressions and auditAnnotations see no `authorizer`.
                let plain_scope = std::cell::OnceCell::new();
                let plain =
                    || plain_scope.get_or_init(|| evaluation.scope_without_authorizer(object));
                // As the apiserver: when matchConditions could not be evaluated, or the
                // expressions overran their budget, the policy is neither validated further
                // nor annotated.
                let Validated {
                    mut failures,
                    mut errored,
                    stopped,
                } = match scope.match_conditions(&policy.core.match_conditions) {
                    Ok(false) => return,
                    Ok(true) => run_validations(
                        ValidationRun {
                            validations: &policy.validations,
                            variable_count: policy.core.variables.names.len(),
                            budget: POLICY_COST_BUDGET,
                            fail,
                        },
                        &scope,
                        &plain,
                    ),
                    Err(error) => Validated {
                        failures: Failure::error(error, 0, fail),
                        errored: true,
                        stopped: true,
                    },
                };
                let values = if stopped {
                    Vec::new()
                } else {
                    match audit_annotation_values(policy, plain()) {
                        Ok(values) => values,
                        Err(out_of_budget) => {
                            errored = true;
                            failures = Failure::error(out_of_budget.into(), 0, fail);
                            Vec::new()
                        }
                    }
                };
                let result = if errored {
                    "error"
                } else if failures.is_empty() {
                    "pass"
                } else {
                    "fail"
                };
                record_outcome(policy, binding, result, decision);
                for failure in failures {
                    route(policy, binding, failure, decision);
                }
                for (key, value) in values {
                    match value {
                        Ok(value) => {
                            let values = annotations.entry(key).or_default();
                            if !values.contains(&value) {
                                values.push(value);
                            }
                        }
                        Err(error) if fail => deny(policy, binding, error, None, decision),
                        Err(_) => {}
                    }
                }
            },
        );
        // A policy that could not be configured evaluated nothing: it took no time.
        let took = match matched {
            Ok(started) => started.map(|started| started.elapsed()),
            Err(Undispatched::Policy(error)) => {
                deny_policy(policy, error, fail, decision);
                Some(Duration::ZERO)
            }
            Err(Undispatched::NamespaceUnreadable(failure)) => {
                // The apiserver returns the read's error from its dispatcher: the request
                // fails with it alone (a Status as the API gave it, else a 500 of reason
                // Unknown), whatever the failurePolicy.
                let status = match &failure.status {
                    Some((code, reason)) => DenialStatus::of_api(*code, reason),
                    None => DenialStatus::of_api(500, ""),
                };
                record_policy_error(policy, decision);
                decision.fail_request(name, status, failure.message);
                return;
            }
        };
        if let Some(took) = took {
            decision.timings.push((policy.core.name.clone(), took));
        }
        for (key, values) in annotations {
            decision.audit_annotations.insert(
                audit_annotation_key(&format!("{name}/{key}")),
                values.join(", "),
            );
        }
    }
}

/// Counts a policy that evaluated nothing for an error of its own.
fn record_policy_error(policy: &ValidatingPolicy, decision: &mut Decision) {
    decision.outcomes.push(PolicyOutcome {
        kind: "ValidatingAdmissionPolicy",
        policy: policy.core.name.clone(),
        binding: None,
        action: "Deny",
        result: "error",
    });
}

/// A policy that cannot be configured (its paramKind's resource is unknown, its
/// matchConstraints' namespace labels could not be read): counted as an error, and the
/// request refused under `failurePolicy: Fail`.
fn deny_policy(policy: &ValidatingPolicy, error: String, fail: bool, decision: &mut Decision) {
    let name = &policy.core.name;
    record_policy_error(policy, decision);
    if !fail {
        return;
    }
    if decision.violations.is_empty() {
        decision.denial_status = Some(DenialStatus::for_policy_reason(None));
    }
    decision.violations.push(Violation {
        policy: name.to_string(),
        rule: String::new(),
        path: String::new(),
        message: format!("ValidatingAdmissionPolicy '{name}' denied request: {error}"),
        form: ViolationForm::AdmissionPolicy,
    });
}

/// Counts one evaluation of `binding` under each of its actions.
fn record_outcome(
    policy: &ValidatingPolicy,
    binding: &Binding,
    result: &'static str,
    decision: &mut Decision,
) {
    for action in &binding.actions {
        decision.outcomes.push(PolicyOutcome {
            kind: "ValidatingAdmissionPolicy",
            policy: policy.core.name.clone(),
            binding: Some(binding.core.name.clone()),
            action: action.as_str(),
            result,
        });
    }
}

/// Refuses the request for `binding`: the first denial sets the answer's status.
fn deny(
    policy: &ValidatingPolicy,
    binding: &Binding,
    message: String,
    reason: Option<&str>,
    decision: &mut Decision,
) {
    if decision.violations.is_empty() {
        decision.denial_status = Some(DenialStatus::for_policy_reason(reason));
    }
    let name = &policy.core.name;
    let binding = &binding.core.name;
    decision.violations.push(Violation {
        policy: name.to_string(),
        rule: binding.to_string(),
        path: String::new(),
        message: format!(
            "ValidatingAdmissionPolicy '{name}' with binding '{binding}' denied request: {message}"
        ),
        form: ViolationForm::AdmissionPolicy,
    });
}

fn route(policy: &ValidatingPolicy, binding: &Binding, failure: Failure, decision: &mut Decision) {
    let name = &policy.core.name;
    for action in &binding.actions {
        match action {
            ValidationAction::Deny => {
                deny(
                    policy,
                    binding,
                    failure.message.clone(),
                    failure.reason.as_deref(),
                    decision,
                );
            }
            ValidationAction::Warn => decision.warn(format!(
                "Validation failed for ValidatingAdmissionPolicy '{name}' with binding '{}': {}",
                binding.core.name, failure.message
            )),
            ValidationAction::Audit => {
                let value = ValidationFailureValue {
                    message: &failure.message,
                    policy: name,
                    binding: &binding.core.name,
                    expression_index: failure.index,
                    validation_actions: &binding.actions,
                };
                let key = audit_annotation_key(VALIDATION_FAILURE_KEY);
                // Serialized from the struct, so the fields keep the apiserver's order.
                let item = go_json_escape(&serde_json::to_string(&value).unwrap_or_default());
                // The apiserver keeps one failure per request; we keep every one, in the list.
                let list = match decision.audit_annotations.get(&key) {
                    Some(existing) if existing.ends_with(']') => {
                        format!("{},{item}]", &existing[..existing.len() - 1])
                    }
                    _ => format!("[{item}]"),
                };
                decision.audit_annotations.insert(key, list);
            }
        }
    }
}

/// JSON text as Go's encoding/json writes it, which the apiserver uses for audit annotations:
/// `<`, `>` and `&` (and the line and paragraph separators) escaped as `\u003c` …
fn go_json_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Compiles one `spec.validations` entry's CEL (its other fields are checked by
/// [`FieldErrors::validation`]); errors go to `errors`. What the apiserver does not compile
/// (an empty expression, a blank `messageExpression`) is skipped: it was refused already.
fn compile_validation(
    core: &PolicyCore,
    source: &DocumentSource,
    index: usize,
    validation: &Validation,
    errors: &mut FieldErrors,
) -> Option<PolicyValidation> {
    let field = format!("spec.validations[{index}]");
    let expression_field = format!("{field}.expression");
    let expression = if validation.expression.trim().is_empty() {
        None
    } else {
        let compiled = core.expression(source, &expression_field, &validation.expression, false);
        errors.typed(source, &expression_field, compiled, &[CelType::Bool])
    };
    let message_expression = match validation.message_expression.as_deref() {
        Some(text) if !text.trim().is_empty() => {
            let message_field = format!("{field}.messageExpression");
            let compiled = core.message_expression(source, &message_field, text);
            Some(errors.typed(source, &message_field, compiled, &[CelType::String])?)
        }
        _ => None,
    };
    Some(PolicyValidation {
        expression: expression?,
        message: validation.message.clone(),
        message_expression,
        reason: validation.reason.clone(),
    })
}
