//! What a ValidatingAdmissionPolicy and a MutatingAdmissionPolicy have in common, compiled
//! and checked as the apiserver checks it: matchConstraints, matchConditions, variables,
//! failurePolicy, paramKind.

use std::sync::Arc;

use super::resource_match::ResourceMatcher;
use super::variables::Variables;
use crate::expressions::{CelType, Expression};
use crate::names;
use crate::policy::admission_policy::{FailurePolicy, MatchResources, ParamKind, PolicyCommon};
use crate::policy::{DocumentSource, LabelSelector, PolicyError};

/// A compiled expression with where it came from, for load errors.
pub(super) fn compile_expression(
    source: &DocumentSource,
    field: &str,
    text: &str,
    structs: bool,
    variables: Option<&[(String, CelType)]>,
) -> Result<Expression, PolicyError> {
    Expression::compile_with_variables(text, structs, variables).map_err(|e| {
        PolicyError::at(
            source,
            field,
            format!("Invalid value: {text:?}: compilation failed: {e}"),
        )
    })
}

/// Refuses an expression whose static type is not one of `expected`, as the apiserver does
/// at create (`must evaluate to bool but got dyn`).
pub(super) fn expect_output(
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
}

pub(super) fn check_selector(
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

pub(super) fn check_match_resources(
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
    pub(super) fn compile(
        source: &DocumentSource,
        name: &str,
        common: PolicyCommon<'_>,
    ) -> Result<Self, PolicyError> {
        let Some(constraints) = common.match_constraints else {
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
        let variables = Variables::compile(common.variables, source)?;
        let mut conditions = Vec::new();
        if common.match_conditions.len() > MAX_MATCH_CONDITIONS {
            return Err(PolicyError::at(
                source,
                "spec.matchConditions",
                format!(
                    "Too many: {}: must have at most {MAX_MATCH_CONDITIONS} items",
                    common.match_conditions.len()
                ),
            ));
        }
        for (i, condition) in common.match_conditions.iter().enumerate() {
            let field = format!("spec.matchConditions[{i}].expression");
            let name_field = format!("spec.matchConditions[{i}].name");
            if condition.name.is_empty() {
                return Err(PolicyError::at(source, name_field, "Required value"));
            }
            if let Some(error) = names::qualified_name_errors(&condition.name).first() {
                return Err(PolicyError::at(
                    source,
                    name_field,
                    format!("Invalid value: {:?}: {error}", condition.name),
                ));
            }
            if conditions.iter().any(|(n, _)| n == &condition.name) {
                return Err(PolicyError::at(
                    source,
                    name_field,
                    format!("Duplicate value: {:?}", condition.name),
                ));
            }
            let expression =
                compile_expression(source, &field, &condition.expression, false, None)?;
            // The apiserver compiles match conditions in an environment without `variables`.
            if expression.uses("variables") {
                return Err(PolicyError::at(
                    source,
                    &field,
                    format!(
                        "Invalid value: {:?}: compilation failed: undeclared reference to \
                         'variables' (match conditions cannot use variables)",
                        condition.expression
                    ),
                ));
            }
            expect_output(source, &field, &expression, &[CelType::Bool])?;
            conditions.push((condition.name.clone(), expression));
        }
        Ok(PolicyCore {
            name: Arc::from(name),
            param_kind: common.param_kind.cloned(),
            constraints: ResourceMatcher::new(constraints),
            failure_policy: common.failure_policy.unwrap_or_default(),
            match_conditions: conditions,
            variables,
        })
    }

    /// Compiles one more expression of the policy (validations, messages, mutations …).
    pub(super) fn expression(
        &self,
        source: &DocumentSource,
        field: &str,
        text: &str,
        structs: bool,
    ) -> Result<Expression, PolicyError> {
        let expression =
            compile_expression(source, field, text, structs, Some(&self.variables.types))?;
        self.variables.check(&expression, source, field)?;
        Ok(expression)
    }
}
