//! What a ValidatingAdmissionPolicy and a MutatingAdmissionPolicy have in common, compiled
//! and checked as the apiserver checks it: matchConstraints, matchConditions, variables,
//! failurePolicy, paramKind.

use std::sync::Arc;

use super::binding::BindingCore;
use super::field_validation::FieldErrors;
use super::resource_match::ResourceMatcher;
use super::variables::Variables;
use crate::admission::AdmissionRequest;
use crate::expressions::{CelType, Declarations, Expression, Variables as Declared};
use crate::kubernetes::names;
use crate::policy::admission_policy::{FailurePolicy, ParamKind, PolicyCommon};
use crate::policy::{DocumentSource, PolicyError};

/// A compiled expression with where it came from, for load errors.
pub(crate) fn compile_expression(
    source: &DocumentSource,
    field: &str,
    text: &str,
    structs: bool,
    declarations: &Declarations<'_>,
) -> Result<Expression, PolicyError> {
    Expression::compile_in(text, structs, declarations).map_err(|e| {
        PolicyError::at(
            source,
            field,
            format!("Invalid value: {text:?}: compilation failed: {e}"),
        )
    })
}

/// Refuses an expression whose static type is not one of `expected`, as the apiserver does
/// at create (`must evaluate to bool but got dyn`).
pub(crate) fn expect_output(
    source: &DocumentSource,
    field: &str,
    expression: &Expression,
    expected: &[CelType],
) -> Result<(), PolicyError> {
    expression.expect_output(expected).map_err(|reason| {
        PolicyError::at(
            source,
            field,
            format!("Invalid value: {:?}: {reason}", expression.source()),
        )
    })
}

/// Refuses an expression that compiled and type-checked but that the apiserver cannot make a
/// program of (a conversion of a constant that fails, a literal `find` pattern that does not
/// compile), as it does at create.
pub(super) fn expect_instantiable(
    source: &DocumentSource,
    field: &str,
    expression: &Expression,
) -> Result<(), PolicyError> {
    match expression.instantiation_error() {
        None => Ok(()),
        Some(error) => Err(PolicyError::at(
            source,
            field,
            format!("Internal error: program instantiation failed: {error}"),
        )),
    }
}

/// The most `matchConditions` a policy may have.
pub(super) const MAX_MATCH_CONDITIONS: usize = 64;

/// What a policy and a binding have in common between the validating and mutating kinds.
pub(super) struct PolicyCore {
    pub(super) name: Arc<str>,
    pub(super) param_kind: Option<ParamKind>,
    pub(super) constraints: ResourceMatcher,
    pub(super) failure_policy: FailurePolicy,
    pub(super) match_conditions: Vec<(String, Expression)>,
    pub(super) variables: Variables,
    /// Whether an expression of the policy nests comprehensions (see
    /// [`PolicyCore::note_expressions`]).
    pub(super) nested_comprehensions: bool,
    /// Whether an expression of the policy uses `authorizer`, whose checks wait for the
    /// cluster's answer.
    pub(super) uses_authorizer: bool,
    /// Whether an expression of the policy names `oldObject`.
    pub(super) uses_old_object: bool,
}

impl PolicyCore {
    /// Compiles what both kinds of policy have; errors go to `errors` (after those of
    /// [`FieldErrors::policy_common`]). `None` without `matchConstraints`.
    pub(super) fn compile(
        source: &DocumentSource,
        name: &str,
        common: PolicyCommon<'_>,
        errors: &mut FieldErrors,
    ) -> Option<Self> {
        if common.match_conditions.len() > MAX_MATCH_CONDITIONS {
            errors.add(PolicyError::at(
                source,
                "spec.matchConditions",
                format!(
                    "Too many: {}: must have at most {MAX_MATCH_CONDITIONS} items",
                    common.match_conditions.len()
                ),
            ));
        }
        let mut conditions = Vec::new();
        let mut names: Vec<&str> = Vec::new();
        for (i, condition) in common.match_conditions.iter().enumerate() {
            let field = format!("spec.matchConditions[{i}].expression");
            let name_field = format!("spec.matchConditions[{i}].name");
            // The apiserver compiles match conditions without `variables`.
            let declarations = Declarations {
                variables: Declared::Undeclared,
                params: common.param_kind.is_some(),
                authorizer: true,
            };
            let expression = if condition.expression.trim().is_empty() {
                errors.required(&field, "");
                None
            } else {
                let compiled =
                    compile_expression(source, &field, &condition.expression, false, &declarations);
                errors.typed(source, &field, compiled, &[CelType::Bool])
            };
            if condition.name.is_empty() {
                errors.required(&name_field, "");
            } else {
                for error in names::qualified_name_errors(&condition.name) {
                    errors.add(PolicyError::at(
                        source,
                        &name_field,
                        format!("Invalid value: {:?}: {error}", condition.name),
                    ));
                }
                if names.contains(&condition.name.as_str()) {
                    errors.add(PolicyError::at(
                        source,
                        &name_field,
                        format!("Duplicate value: {:?}", condition.name),
                    ));
                }
                names.push(&condition.name);
            }
            if let Some(expression) = expression {
                conditions.push((condition.name.clone(), expression));
            }
        }
        let variables = Variables::compile(
            common.variables,
            source,
            common.param_kind.is_some(),
            errors,
        );
        // Required, and refused before (`FieldErrors::policy_common`).
        let constraints = common.match_constraints?;
        let mut core = PolicyCore {
            name: Arc::from(name),
            param_kind: common.param_kind.cloned(),
            constraints: ResourceMatcher::new(constraints),
            failure_policy: common.failure_policy.unwrap_or_default(),
            match_conditions: conditions,
            variables,
            nested_comprehensions: false,
            uses_authorizer: false,
            uses_old_object: false,
        };
        let expressions: Vec<&Expression> = core
            .match_conditions
            .iter()
            .map(|(_, expression)| expression)
            .chain(&core.variables.expressions)
            .collect();
        core.nested_comprehensions = expressions.iter().any(|e| nests_comprehensions(e));
        core.uses_authorizer = expressions.iter().any(|e| e.uses("authorizer"));
        core.uses_old_object = expressions.iter().any(|e| e.uses("oldObject"));
        Some(core)
    }

    /// Notes whether one of the policy's `expressions` nests comprehensions (such an
    /// evaluation can take time that grows as a power of the object's list lengths) or uses
    /// `authorizer` (it waits for SubjectAccessReviews): either is run off the async workers
    /// (see [`crate::engine::Engine::may_run_long`]); and whether one names `oldObject` (see
    /// [`crate::engine::Engine::wanted_objects`]).
    pub(super) fn note_expressions<'e>(
        &mut self,
        expressions: impl IntoIterator<Item = &'e Expression>,
    ) {
        for expression in expressions {
            self.nested_comprehensions |= nests_comprehensions(expression);
            self.uses_authorizer |= expression.uses("authorizer");
            self.uses_old_object |= expression.uses("oldObject");
        }
    }

    /// Whether the policy nests comprehensions or uses `authorizer`, and its constraints
    /// match the request's resource and operation.
    pub(super) fn may_run_long(&self, request: &AdmissionRequest) -> bool {
        (self.nested_comprehensions || self.uses_authorizer)
            && self.constraints.matches_resource(request)
    }

    /// Whether the policy, with these bindings, may read the `oldObject` of a request its
    /// constraints match: an expression names it, or an object selector (the policy's or a
    /// binding's) matches an UPDATE on the old labels too.
    pub(super) fn reads_old_object<'b>(
        &self,
        request: &AdmissionRequest,
        mut bindings: impl Iterator<Item = &'b BindingCore>,
    ) -> bool {
        (self.uses_old_object
            || self.constraints.has_object_selector()
            || bindings.any(|binding| {
                binding
                    .matcher
                    .as_ref()
                    .is_some_and(ResourceMatcher::has_object_selector)
            }))
            && self.constraints.matches_resource(request)
    }

    /// What the policy's fields other than match conditions declare: `params` with a
    /// `paramKind`, `variables` (typed) with `spec.variables`.
    fn declarations(&self) -> Declarations<'_> {
        Declarations {
            variables: if self.variables.names.is_empty() {
                Declared::Undeclared
            } else {
                Declared::Typed(&self.variables.types)
            },
            params: self.param_kind.is_some(),
            authorizer: true,
        }
    }

    /// Compiles one more expression of the policy (validations, mutations …).
    pub(super) fn expression(
        &self,
        source: &DocumentSource,
        field: &str,
        text: &str,
        structs: bool,
    ) -> Result<Expression, PolicyError> {
        let expression = compile_expression(source, field, text, structs, &self.declarations())?;
        self.variables.check(&expression, source, field)?;
        Ok(expression)
    }

    /// Compiles a validation's `messageExpression`: as the apiserver compiles it, without
    /// `authorizer` (a variable that uses it may still be read).
    pub(super) fn message_expression(
        &self,
        source: &DocumentSource,
        field: &str,
        text: &str,
    ) -> Result<Expression, PolicyError> {
        let declarations = Declarations {
            authorizer: false,
            ..self.declarations()
        };
        let expression = compile_expression(source, field, text, false, &declarations)?;
        self.variables.check(&expression, source, field)?;
        Ok(expression)
    }
}

fn nests_comprehensions(expression: &Expression) -> bool {
    expression.comprehension_nesting() >= 2
}
