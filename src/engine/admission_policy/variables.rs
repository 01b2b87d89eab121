//! `spec.variables`: compiled in order, each with the variables it needs, and checked as the
//! apiserver checks them (names are CEL identifiers, unique; a variable uses only those
//! declared before it).

use super::field_validation::FieldErrors;
use super::policy_core::{compile_expression, expect_instantiable};
use crate::expressions::{CelType, Declarations, Expression, Variables as Declared};
use crate::policy::admission_policy::NamedExpression;
use crate::policy::{DocumentSource, PolicyError};

/// CEL's words that cannot name a variable.
pub(super) const CEL_RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// `[_a-zA-Z][_a-zA-Z0-9]*` and not reserved: what a variable's name must be.
pub(super) fn is_cel_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b == b'_' || b.is_ascii_alphabetic())
        && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
        && !CEL_RESERVED.contains(&name)
}

/// `spec.variables`, compiled, with what each one needs.
#[derive(Debug, Default)]
pub(crate) struct Variables {
    pub(crate) names: Vec<String>,
    pub(crate) expressions: Vec<Expression>,
    /// For each variable, the variables it needs (itself included), in order.
    pub(super) closures: Vec<Vec<usize>>,
    /// Each variable's name and the static type of its value, as later expressions see it.
    pub(crate) types: Vec<(String, CelType)>,
}

impl Variables {
    /// Compiles `spec.variables` in order, each seeing those before it; errors go to `errors`.
    /// A variable that does not compile is declared `dyn` to the ones after it (as the
    /// apiserver's composition compiler does) and has no expression; one without an
    /// expression is not declared. With errors, the variables only serve to check the rest of
    /// the policy, which is refused.
    pub(super) fn compile(
        specs: &[NamedExpression],
        source: &DocumentSource,
        params: bool,
        errors: &mut FieldErrors,
    ) -> Self {
        let mut variables = Variables::default();
        for (i, spec) in specs.iter().enumerate() {
            let field = format!("spec.variables[{i}].expression");
            // Names are validated before (`FieldErrors::policy_common`).
            // Without an expression the apiserver neither compiles nor declares the variable.
            if spec.expression.trim().is_empty() {
                errors.required(&field, "expression is not specified");
                continue;
            }
            let compiled = errors
                .keep(compile_expression(
                    source,
                    &field,
                    &spec.expression,
                    false,
                    &Declarations {
                        variables: Declared::Typed(&variables.types),
                        params,
                        authorizer: true,
                    },
                ))
                .and_then(|expression| {
                    errors.keep(expect_instantiable(source, &field, &expression))?;
                    Some(expression)
                });
            let closure = compiled.as_ref().and_then(|expression| {
                errors.keep(variables.needed(expression).map_err(|name| {
                    PolicyError::at(
                        source,
                        &field,
                        format!(
                            "Invalid value: {:?}: compilation failed: undefined field '{name}' \
                             (a variable can only use the variables declared before it)",
                            spec.expression
                        ),
                    )
                }))
            });
            let output = match (compiled, closure) {
                (Some(expression), Some(mut closure)) => {
                    closure.push(i);
                    let output = expression.output_type().as_variable();
                    variables.expressions.push(expression);
                    variables.closures.push(closure);
                    output
                }
                _ => {
                    variables.closures.push(vec![i]);
                    CelType::Dyn
                }
            };
            variables.types.push((spec.name.clone(), output));
            variables.names.push(spec.name.clone());
        }
        variables
    }

    /// Adds a variable compiled against those before it (declared as
    /// `Declarations::variables` `Typed(&self.types)`); `Err(name)` when it reads an unknown
    /// variable.
    pub(crate) fn push(&mut self, name: &str, expression: Expression) -> Result<(), String> {
        let mut closure = self.needed(&expression)?;
        closure.push(self.names.len());
        self.types
            .push((name.to_owned(), expression.output_type().as_variable()));
        self.names.push(name.to_owned());
        self.expressions.push(expression);
        self.closures.push(closure);
        Ok(())
    }

    /// The variables `expression` needs, in order; `Err(name)` for an unknown one.
    pub(super) fn needed(&self, expression: &Expression) -> Result<Vec<usize>, String> {
        let mut needed = Vec::new();
        for name in expression.variables_used() {
            let index = self
                .names
                .iter()
                .rposition(|n| n == name)
                .ok_or_else(|| name.clone())?;
            needed.extend(&self.closures[index]);
        }
        needed.sort_unstable();
        needed.dedup();
        Ok(needed)
    }

    /// Checks an expression of the policy against the variables.
    pub(super) fn check(
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
                    "Invalid value: {:?}: compilation failed: undefined field '{name}' in \
                     variables",
                    expression.source()
                ),
            )
        })
    }
}
