//! MutatingAdmissionPolicy: `JSONPatch` and `ApplyConfiguration` mutations applied in order,
//! each to the object as the previous one left it, with `reinvocationPolicy: IfNeeded`
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/mutating/dispatcher.go`).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as Json;

use super::AdmissionPolicies;
use super::apply_configuration::{convert_from_unstructured, merge_apply_configuration_with};
use super::binding::{BindingCore, ParamSources, Undispatched};
use super::field_validation::{BINDING_ORDER, FieldErrors, MUTATING_ORDER};
use super::params::ParamLookup;
use super::policy_core::PolicyCore;
use crate::admission::{AdmissionRequest, GroupVersionKind};
use crate::engine::cel_input::CelInputCell;
use crate::engine::{
    Decision, DenialStatus, NamespaceLookup, PolicyOutcome, Violation, ViolationForm,
};
use crate::expressions::{
    CostBudget, Expression, POLICY_COST_BUDGET, apply_configuration_type, json_patch_list_type,
};
use crate::expressions::{cel_to_json, object_type_mismatches};
use crate::kubernetes::defaulting::apply_defaults;
use crate::kubernetes::schema::round_trip::{round_trip, unknown_fields};
use crate::kubernetes::schema::{self, Schema};
use crate::patch::json_patch::{PatchError, apply_operation};
use crate::policy::admission_policy::{
    Document, FailurePolicy, MutatingBindingSpec, MutatingPolicySpec, Mutation, PatchType,
    ReinvocationPolicy,
};
use crate::policy::{DocumentSource, PolicyError};

enum CompiledMutation {
    JsonPatch(Expression),
    ApplyConfiguration(Expression),
}

impl CompiledMutation {
    fn expression(&self) -> &Expression {
        match self {
            CompiledMutation::JsonPatch(e) | CompiledMutation::ApplyConfiguration(e) => e,
        }
    }

    /// The object with the mutation's result (`value`) applied; `object` is unchanged.
    /// `schema` is the kind's (list types, map keys, atomic fields of an ApplyConfiguration).
    fn apply(
        &self,
        value: &cel::Value,
        object: &Json,
        schema: Option<&Schema>,
    ) -> Result<Json, String> {
        match self {
            CompiledMutation::JsonPatch(expression) => json_patch(expression, value, object),
            CompiledMutation::ApplyConfiguration(expression) => {
                let mismatches = object_type_mismatches(value);
                if !mismatches.is_empty() {
                    return Err(format!("type mismatch: {}", mismatches.join("\n")));
                }
                let Ok(partial @ Json::Object(_)) = cel_to_json(value) else {
                    return Err(format!(
                        "ApplyConfiguration expression '{}' must return an Object",
                        expression.source()
                    ));
                };
                let mut merged = merge_apply_configuration_with(object, &partial, schema)
                    .map_err(|e| format!("error applying patch: {e}"))?;
                if let Some(schema) = schema {
                    convert_from_unstructured(schema, &mut merged)?;
                }
                Ok(merged)
            }
        }
    }
}

/// A compiled MutatingAdmissionPolicy with its bindings.
pub struct MutatingPolicy {
    pub(super) core: PolicyCore,
    mutations: Vec<CompiledMutation>,
    reinvocation: ReinvocationPolicy,
    pub(super) bindings: Vec<BindingCore>,
}

impl MutatingPolicy {
    /// Compiles the policy document; bindings are added with [`MutatingPolicy::bind`].
    pub fn compile(
        source: &DocumentSource,
        document: &Document<MutatingPolicySpec>,
    ) -> Result<Self, PolicyError> {
        let spec = &document.spec;
        let mut errors = FieldErrors::default();
        errors.policy_common(&document.metadata.name, &spec.common());
        if let Some(constraints) = &spec.match_constraints {
            for rule in &constraints.resource_rules {
                for op in rule
                    .operations
                    .iter()
                    .filter(|op| !matches!(op.as_str(), "*" | "CREATE" | "UPDATE" | "CONNECT"))
                {
                    errors.add(PolicyError::at(
                        source,
                        "spec.matchConstraints.resourceRules.operations",
                        format!(
                            "Unsupported value: {op:?}: supported values: \"*\", \"CONNECT\", \
                             \"CREATE\", \"UPDATE\""
                        ),
                    ));
                }
            }
        }
        let core = PolicyCore::compile(source, &document.metadata.name, spec.common(), &mut errors);
        if spec.mutations.is_empty() {
            errors.required("spec.mutations", "mutations must contain at least one item");
        }
        let mutations: Vec<CompiledMutation> = spec
            .mutations
            .iter()
            .enumerate()
            .filter_map(|(i, mutation)| {
                compile_mutation(core.as_ref(), source, i, mutation, &mut errors)
            })
            .collect();
        // The apiserver's API has no default here: a policy without it is refused at create.
        if spec.reinvocation_policy.is_none() {
            errors.required("spec.reinvocationPolicy", "");
        }
        errors.result(source, MUTATING_ORDER)?;
        let (Some(mut core), Some(reinvocation)) = (core, spec.reinvocation_policy) else {
            return Err(PolicyError::at(source, "spec", "Required value"));
        };
        core.note_expressions(mutations.iter().map(CompiledMutation::expression));
        Ok(MutatingPolicy {
            core,
            mutations,
            reinvocation,
            bindings: Vec::new(),
        })
    }

    /// Adds a binding of this policy.
    pub fn bind(
        &mut self,
        source: &DocumentSource,
        document: &Document<MutatingBindingSpec>,
    ) -> Result<(), PolicyError> {
        let spec = &document.spec;
        let mut errors = FieldErrors::default();
        errors.binding(
            &document.metadata.name,
            &spec.policy_name,
            &spec.param_ref,
            &spec.match_resources,
        );
        errors.result(source, BINDING_ORDER)?;
        self.bindings.push(BindingCore::compile(
            &document.metadata.name,
            &spec.param_ref,
            &spec.match_resources,
        )?);
        Ok(())
    }

    /// Mutations of a bound policy.
    pub fn rule_count(&self) -> usize {
        if self.bindings.is_empty() {
            0
        } else {
            self.mutations.len()
        }
    }
}

/// `object` with the JSON Patch `result` applied (one copy of the object, patched in place).
fn json_patch(expression: &Expression, result: &cel::Value, object: &Json) -> Result<Json, String> {
    let wrong = || {
        format!(
            "JSONPatch expression '{}' must return an array of JSONPatch",
            expression.source()
        )
    };
    let Ok(Json::Array(operations)) = cel_to_json(result) else {
        return Err(wrong());
    };
    let mut patched = object.clone();
    for operation in operations {
        let Json::Object(mut fields) = operation else {
            return Err(wrong());
        };
        let op = fields
            .get("op")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_owned();
        let path = fields
            .get("path")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_owned();
        let from = fields.get("from").and_then(Json::as_str).map(str::to_owned);
        let value = fields.remove("value").map(as_written_in_patch);
        match apply_operation(&mut patched, &op, &path, value, from.as_deref()) {
            Ok(()) => {}
            // As the apiserver: a failed test leaves the object as it was, without an error.
            Err(PatchError::TestFailed(_)) => return Ok(object.clone()),
            Err(error) => return Err(format!("JSON Patch: {error}")),
        }
    }
    Ok(patched)
}

/// The largest integer a double holds exactly with its neighbours (2^53 − 1): cel-go writes
/// integers beyond it into JSON as strings.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// A JSONPatch `value` as the apiserver writes it into the patch: converted to protobuf's
/// `structpb.Value`, where every number is a double (an `int` or `uint` beyond
/// ±[`MAX_SAFE_INTEGER`] becomes its decimal string, as cel-go converts it), printed as Go
/// prints a double (a whole number below 1e21 without a fraction or exponent).
fn as_written_in_patch(value: Json) -> Json {
    match value {
        Json::Number(number) => {
            if let Some(double) = number.as_f64().filter(|_| number.is_f64()) {
                let whole = double.fract() == 0.0 && double.abs() < 1e21;
                #[allow(clippy::cast_possible_truncation)]
                if whole && double.abs() < 2f64.powi(63) {
                    return Json::from(double as i64);
                }
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                if whole && double > 0.0 && double < 2f64.powi(64) {
                    return Json::from(double as u64);
                }
                return Json::Number(number);
            }
            let safe = number.as_u64().is_some_and(|n| n <= MAX_SAFE_INTEGER)
                || number
                    .as_i64()
                    .is_some_and(|n| n.unsigned_abs() <= MAX_SAFE_INTEGER);
            if safe {
                Json::Number(number)
            } else {
                Json::String(number.to_string())
            }
        }
        Json::Array(items) => Json::Array(items.into_iter().map(as_written_in_patch).collect()),
        Json::Object(map) => Json::Object(
            map.into_iter()
                .map(|(key, item)| (key, as_written_in_patch(item)))
                .collect(),
        ),
        other => other,
    }
}

/// The object as the apiserver holds it after each mutation: decoded into its kind's Go type,
/// which drops what Go's encoding drops (an empty optional map or list, unknown fields), then
/// defaulted, so that the next mutation sees what the apiserver's would. Custom resources stay
/// as they are (the apiserver keeps them unstructured). A result that does not decode is the
/// apiserver's internal error.
pub fn typed_form(kind: &GroupVersionKind, object: Json) -> Result<Json, String> {
    if let Cow::Owned(typed) = typed_form_of(kind, &object)? {
        return Ok(typed);
    }
    Ok(object)
}

/// A JSON Patch's result as the apiserver decodes it into the kind's Go type: strictly, so a
/// field the type does not have is an error too (`strict decoding error: unknown field
/// "spec.replicaz"`), after any value of the wrong type.
fn decode_patched(kind: &GroupVersionKind, patched: Json) -> Result<Json, String> {
    let unknown = schema::builtin(kind)
        .map(|schema| unknown_fields(&schema, &patched))
        .unwrap_or_default();
    let typed = typed_form(kind, patched)?;
    if unknown.is_empty() {
        return Ok(typed);
    }
    let fields: Vec<String> = unknown
        .iter()
        .map(|field| format!("unknown field {field:?}"))
        .collect();
    Err(format!(
        "Internal error occurred: strict decoding error: {}",
        fields.join(", ")
    ))
}

/// [`typed_form`] of a borrowed object: borrowed back when the kind is not built in (nothing
/// to do), so that the object is not copied.
pub fn typed_form_of<'a>(
    kind: &GroupVersionKind,
    object: &'a Json,
) -> Result<Cow<'a, Json>, String> {
    let Some(schema) = schema::builtin(kind) else {
        return Ok(Cow::Borrowed(object));
    };
    let mut typed = round_trip(&schema, object)
        .map_err(|error| format!("Internal error occurred: {}", error.message))?;
    apply_defaults(kind, &mut typed);
    Ok(Cow::Owned(typed))
}

/// Runs one policy (every matching binding and parameter); `None` when it does not match,
/// else whether it changed the object.
#[allow(clippy::too_many_arguments)]
/// What every policy of one [`mutate`] runs against.
#[derive(Clone, Copy)]
struct MutationPass<'s, 'r> {
    set: &'s AdmissionPolicies,
    request: &'r AdmissionRequest,
    namespaces: &'s dyn NamespaceLookup,
    cluster_params: Option<&'s dyn ParamLookup>,
    cel: &'s CelInputCell<'r>,
}

fn run_policy(
    pass: MutationPass<'_, '_>,
    policy: &MutatingPolicy,
    mutated: &mut MutatedObject,
    decision: &mut Decision,
) -> Option<bool> {
    let MutationPass {
        set,
        request,
        namespaces,
        cluster_params,
        cel,
    } = pass;
    let name = &policy.core.name;
    let fail = policy.core.failure_policy == FailurePolicy::Fail;
    let mut changed = false;
    let schema = set.schema(&request.kind);
    let mut outcomes = Vec::new();
    let mut internal_error = None;
    let matched = policy.core.dispatch(
        &policy.bindings,
        ParamSources {
            files: &set.params,
            cluster: cluster_params,
            fill_type_meta: false,
            namespace_per_binding: false,
        },
        request,
        namespaces,
        cel,
        |binding, evaluation| {
            if internal_error.is_some() {
                return;
            }
            // The apiserver answers 403; the reason is `Invalid` for what its mutating
            // dispatcher reports (conditions, mutations), `Forbidden` for the rest.
            let mut deny = |message: String, reason: &'static str| {
                if fail {
                    if decision.violations.is_empty() {
                        decision.denial_status = Some(DenialStatus { code: 403, reason });
                    }
                    decision.violations.push(Violation {
                        policy: name.to_string(),
                        rule: binding.name.to_string(),
                        path: String::new(),
                        message: format!(
                            "policy '{name}' with binding '{}' denied request: {message}",
                            binding.name
                        ),
                        form: ViolationForm::AdmissionPolicy,
                    });
                }
            };
            let outcome = |result: &'static str| PolicyOutcome {
                kind: "MutatingAdmissionPolicy",
                policy: policy.core.name.clone(),
                binding: Some(binding.name.clone()),
                action: "Mutate",
                result,
            };
            let evaluation = match evaluation {
                Ok(evaluation) => evaluation,
                Err(error) => {
                    outcomes.push(outcome("error"));
                    return deny(error, "Forbidden");
                }
            };
            match evaluation
                .scope(Some((&mutated.object).into()))
                .match_conditions(&policy.core.match_conditions)
            {
                Ok(true) => {}
                Ok(false) => return,
                Err(error) => {
                    outcomes.push(outcome("error"));
                    return deny(error, "Invalid");
                }
            }
            let mut errored = false;
            if !mutated.typed {
                // The apiserver sends its typed form already: then this changes nothing.
                if let Ok(Cow::Owned(typed)) = typed_form_of(&request.kind, &mutated.object) {
                    mutated.object = typed;
                }
                mutated.typed = true;
            }
            let object = &mut mutated.object;
            for mutation in &policy.mutations {
                // Each mutation sees the object as the previous ones left it, and has a
                // budget of its own for itself and the variables it reads.
                let (value, cost) = evaluation
                    .scope(Some((&*object).into()))
                    .evaluate_with_cost(mutation.expression());
                let applied = CostBudget::new(POLICY_COST_BUDGET)
                    .spend(cost)
                    .map_err(String::from)
                    .and(value)
                    .and_then(|value| mutation.apply(&value, object, schema.as_ref()));
                let decoded = applied.map(|patched| match mutation {
                    CompiledMutation::JsonPatch(_) => decode_patched(&request.kind, patched),
                    CompiledMutation::ApplyConfiguration(_) => typed_form(&request.kind, patched),
                });
                let result = match decoded {
                    // A JSON Patch's result that does not decode into the kind's Go type
                    // fails the whole request (the apiserver's internal error), whatever
                    // the failure policy.
                    Ok(Err(error)) if matches!(mutation, CompiledMutation::JsonPatch(_)) => {
                        internal_error = Some(error);
                        errored = true;
                        break;
                    }
                    Ok(typed) => typed,
                    Err(error) => Err(error),
                };
                match result {
                    Ok(patched) => {
                        if patched != *object {
                            *object = patched;
                            changed = true;
                        }
                    }
                    Err(error) => {
                        errored = true;
                        deny(error, "Invalid");
                    }
                }
            }
            outcomes.push(outcome(if errored { "error" } else { "pass" }));
        },
    );
    decision.outcomes.append(&mut outcomes);
    if let Some(message) = internal_error {
        // Only this error is answered, with a 500, and nothing after it runs.
        decision.violations = vec![Violation {
            policy: name.to_string(),
            rule: String::new(),
            path: String::new(),
            message,
            form: ViolationForm::AdmissionPolicy,
        }];
        decision.denial_status = Some(DenialStatus {
            code: 500,
            reason: "InternalError",
        });
        mutated.failed = true;
    }
    // A policy that could not be configured evaluated nothing: it took no time.
    let took = match matched {
        Ok(started) => started.map(|started| started.elapsed()),
        Err(Undispatched::NamespaceUnreadable(failure)) => {
            // The apiserver's mutating dispatcher returns a Status the read gave as it is, and
            // any other failure as the namespace not found; the request fails with it alone,
            // whatever the failurePolicy.
            decision.outcomes.push(policy_error_outcome(name));
            let namespace = request.namespace.as_deref().unwrap_or("");
            let (status, message) = match failure.status {
                Some((code, reason)) => (DenialStatus::of_api(code, &reason), failure.message),
                None => (
                    DenialStatus::of_api(404, "NotFound"),
                    format!("namespaces {namespace:?} not found"),
                ),
            };
            decision.fail_request(name, status, message);
            mutated.failed = true;
            Some(Duration::ZERO)
        }
        Err(Undispatched::Policy(error)) => {
            // A policy that cannot be configured: the apiserver's generic policy error.
            decision.outcomes.push(policy_error_outcome(name));
            if fail {
                if decision.violations.is_empty() {
                    decision.denial_status = Some(DenialStatus {
                        code: 403,
                        reason: "Forbidden",
                    });
                }
                decision.violations.push(Violation {
                    policy: name.to_string(),
                    rule: String::new(),
                    path: String::new(),
                    message: format!("policy {name:?} denied request: {error}"),
                    form: ViolationForm::AdmissionPolicy,
                });
            }
            Some(Duration::ZERO)
        }
    };
    let took = took?;
    decision.timings.push((policy.core.name.clone(), took));
    Some(changed)
}

/// The outcome of a policy that evaluated nothing for an error of its own.
fn policy_error_outcome(name: &Arc<str>) -> PolicyOutcome {
    PolicyOutcome {
        kind: "MutatingAdmissionPolicy",
        policy: name.clone(),
        binding: None,
        action: "Mutate",
        result: "error",
    }
}

/// Runs every bound MutatingAdmissionPolicy, in document order, on `object`. When any of them
/// changed the object, each policy with `reinvocationPolicy: IfNeeded` that ran runs once more.
pub fn mutate<'r>(
    set: &AdmissionPolicies,
    request: &'r AdmissionRequest,
    namespaces: &dyn NamespaceLookup,
    cluster_params: Option<&dyn ParamLookup>,
    cel: &CelInputCell<'r>,
    object: Json,
    decision: &mut Decision,
) -> MutatedObject {
    let mut object = MutatedObject {
        object,
        typed: false,
        failed: false,
    };
    // As the apiserver: once any policy changed the object, every `IfNeeded` policy that ran
    // (one that changed the object itself included) runs once more, in order.
    let pass = MutationPass {
        set,
        request,
        namespaces,
        cluster_params,
        cel,
    };
    let mut ran_if_needed: Vec<usize> = Vec::new();
    let mut changed_any = false;
    for (index, policy) in set.mutating.iter().enumerate() {
        let Some(changed) = run_policy(pass, policy, &mut object, decision) else {
            continue;
        };
        if object.failed {
            return object;
        }
        changed_any |= changed;
        if policy.reinvocation == ReinvocationPolicy::IfNeeded {
            ran_if_needed.push(index);
        }
    }
    // `ran_if_needed` is in document order already.
    if changed_any {
        for index in ran_if_needed {
            run_policy(pass, &set.mutating[index], &mut object, decision);
            if object.failed {
                break;
            }
        }
    }
    object
}

/// The object after the MutatingAdmissionPolicies.
#[derive(Debug)]
pub struct MutatedObject {
    /// The object as the policies left it.
    pub object: Json,
    /// Whether some mutation ran, so that the object is in its kind's typed form (see
    /// [`typed_form`]) and the patch must be taken from the typed form of the object sent.
    pub typed: bool,
    /// Whether a JSON Patch left an object its kind cannot decode: the request fails with
    /// that error alone, and the object is not answered.
    pub failed: bool,
}

/// Compiles one `spec.mutations` entry as the apiserver validates it (the patch of its
/// `patchType`, required and compiled; the other one, refused); errors go to `errors`.
/// Without `core` (the policy is refused already) the expression is not compiled.
fn compile_mutation(
    core: Option<&PolicyCore>,
    source: &DocumentSource,
    index: usize,
    mutation: &Mutation,
    errors: &mut FieldErrors,
) -> Option<CompiledMutation> {
    let field = format!("spec.mutations[{index}]");
    let (kind, other, patch_type, expected, expression, other_set) = match mutation.patch_type {
        PatchType::JsonPatch => (
            "jsonPatch",
            "applyConfiguration",
            "JSONPatch",
            json_patch_list_type(),
            mutation.json_patch.as_ref().map(|p| &p.expression),
            mutation.apply_configuration.is_some(),
        ),
        PatchType::ApplyConfiguration => (
            "applyConfiguration",
            "jsonPatch",
            "ApplyConfiguration",
            apply_configuration_type(),
            mutation.apply_configuration.as_ref().map(|a| &a.expression),
            mutation.json_patch.is_some(),
        ),
    };
    let at = format!("{field}.{kind}.expression");
    let compiled = match expression {
        None => {
            let detail = format!("must be specified when patchType is {patch_type}");
            errors.required(format!("{field}.{kind}"), &detail);
            None
        }
        Some(text) if text.trim().is_empty() => {
            errors.required(&at, "");
            None
        }
        Some(text) => core.and_then(|core| {
            let compiled = core.expression(source, &at, text, true);
            errors.typed(source, &at, compiled, std::slice::from_ref(&expected))
        }),
    };
    if other_set {
        errors.add(PolicyError::at(
            source,
            format!("{field}.{other}"),
            format!(
                "Invalid value: \"{{{other}}}\": must not be specified when patchType is \
                 {patch_type}"
            ),
        ));
    }
    Some(match mutation.patch_type {
        PatchType::JsonPatch => CompiledMutation::JsonPatch(compiled?),
        PatchType::ApplyConfiguration => CompiledMutation::ApplyConfiguration(compiled?),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::expressions::json_to_cel;

    fn patch(operations: Json, object: &Json) -> Result<Json, String> {
        let expression = Expression::compile("[]", false).unwrap();
        json_patch(&expression, &json_to_cel(&operations), object)
    }

    #[test]
    fn patch_values_are_written_as_the_apiserver_writes_them() {
        let written = |value: Json| as_written_in_patch(value);
        assert_eq!(written(json!(3.0)), json!(3));
        assert_eq!(written(json!(-3.0)), json!(-3));
        assert_eq!(written(json!(2.5)), json!(2.5));
        assert_eq!(written(json!(1e21)), json!(1e21));
        assert_eq!(written(json!(1e19)), json!(10_000_000_000_000_000_000_u64));
        assert_eq!(
            written(json!(9_007_199_254_740_991_i64)),
            json!(9_007_199_254_740_991_i64)
        );
        assert_eq!(
            written(json!(9_007_199_254_740_992_i64)),
            json!("9007199254740992")
        );
        assert_eq!(
            written(json!(-9_007_199_254_740_993_i64)),
            json!("-9007199254740993")
        );
        assert_eq!(
            written(json!({"a": [1.0, u64::MAX], "b": "x"})),
            json!({"a": [1, "18446744073709551615"], "b": "x"})
        );
        // A whole double tests equal to the integer the object holds.
        let object = json!({"spec": {"replicas": 1}});
        let tested = json!([
            {"op": "test", "path": "/spec/replicas", "value": 1.0},
            {"op": "add", "path": "/spec/paused", "value": true}
        ]);
        assert_eq!(patch(tested, &object).unwrap()["spec"]["paused"], true);
    }

    #[test]
    fn a_json_patch_applies_in_order_or_not_at_all() {
        let object = json!({"metadata": {"name": "a"}, "spec": {"replicas": 1}});
        let added = patch(
            json!([
                {"op": "add", "path": "/metadata/labels", "value": {"x": "y"}},
                {"op": "replace", "path": "/spec/replicas", "value": 3},
                {"op": "test", "path": "/spec/replicas", "value": 3},
            ]),
            &object,
        );
        assert_eq!(
            added.unwrap(),
            json!({"metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {"replicas": 3}})
        );
        // A failed test leaves the object as it was, the operations before it included.
        let tested = patch(
            json!([
                {"op": "replace", "path": "/spec/replicas", "value": 3},
                {"op": "test", "path": "/spec/replicas", "value": 1},
            ]),
            &object,
        );
        assert_eq!(tested.unwrap(), object);
        let failed = patch(json!([{"op": "remove", "path": "/spec/missing"}]), &object);
        assert!(failed.unwrap_err().starts_with("JSON Patch: "));
        assert_eq!(
            object,
            json!({"metadata": {"name": "a"}, "spec": {"replicas": 1}})
        );
    }
}
