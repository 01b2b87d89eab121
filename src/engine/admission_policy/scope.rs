//! One evaluation's CEL scope: the request's input, the object, the parameter, and the
//! policy's variables evaluated when first read.

use serde_json::Value as Json;

use super::variables::Variables;
use crate::engine::cel_input::{CelInput, CelObject};
use crate::expressions::{
    Activation, CelEvalError, CostBudget, Expression, MATCH_CONDITIONS_COST_BUDGET,
};

/// One evaluation's variables: the request's, the object, the parameter, and `variables.*`
/// evaluated when an expression first reads them (an error only fails the expressions that
/// read the variable).
pub(crate) struct Scope<'a> {
    pub(crate) activation: Activation<'a>,
}

impl<'a> Scope<'a> {
    /// The scope; `authorizer` says whether `authorizer` is bound (see
    /// [`CelInput::activation_without_authorizer`]).
    pub(super) fn new(
        input: &'a CelInput<'a>,
        object: Option<CelObject<'a>>,
        params: Option<&'a Json>,
        variables: &'a Variables,
        authorizer: bool,
    ) -> Self {
        let activation = if authorizer {
            input.activation(object)
        } else {
            input.activation_without_authorizer(object)
        };
        Scope::of(activation, params, variables)
    }

    /// The scope of `activation` (the request's variables bound) with `params` and
    /// `variables` added.
    pub(crate) fn of(
        mut activation: Activation<'a>,
        params: Option<&'a Json>,
        variables: &'a Variables,
    ) -> Self {
        if let Some(params) = params {
            activation = activation.params(params);
        }
        if !variables.names.is_empty() {
            activation = activation.variables(
                variables.names.iter().map(String::as_str),
                move |name, activation| {
                    let index = variables.names.iter().position(|n| n == name);
                    let Some(expression) = index.map(|i| &variables.expressions[i]) else {
                        return Err(CelEvalError::Runtime(format!("no such variable: {name}")));
                    };
                    expression
                        .evaluate_variable(activation)
                        .map_err(CelEvalError::Runtime)
                },
            );
        }
        Scope { activation }
    }

    /// Evaluates `expression`, worded as the apiserver words an error, with the runtime cost
    /// it was charged (the variables it read included).
    pub(crate) fn evaluate_with_cost(
        &self,
        expression: &Expression,
    ) -> (Result<cel::Value, String>, u64) {
        expression.evaluate_worded_with_cost(&self.activation)
    }

    /// `matchConditions`: `Ok(false)` when one is false; errors only when none is. As the
    /// apiserver, every condition runs, against a budget they share
    /// ([`MATCH_CONDITIONS_COST_BUDGET`]), whose overrun is an error.
    pub(crate) fn match_conditions(
        &self,
        conditions: &[(String, Expression)],
    ) -> Result<bool, String> {
        let mut budget = CostBudget::new(MATCH_CONDITIONS_COST_BUDGET);
        let mut errors = Vec::new();
        let mut any_false = false;
        for (_, condition) in conditions {
            let (result, cost) = condition.evaluate_bool_with_cost(&self.activation);
            budget.spend(cost)?;
            match result {
                Ok(true) => {}
                Ok(false) => any_false = true,
                Err(error) => errors.push(error),
            }
        }
        if any_false {
            return Ok(false);
        }
        match errors.len() {
            0 => Ok(true),
            1 => Err(errors.remove(0)),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }
}
