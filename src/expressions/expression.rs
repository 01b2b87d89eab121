//! One CEL expression of a policy (admission policies and native `cel` rules alike), on the
//! shared Kubernetes environment: compiled at load (parse errors, undeclared variables and
//! functions), evaluated per request against an [`Activation`].
//!
//! Besides the environment's checks, this file finds what an expression reads of
//! `variables.*`, so that a reference to an unknown or later variable is a load error, and
//! refuses struct literals (`Object{…}`, `JSONPatch{…}`) outside mutations.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use cel::Env;
use cel::common::ast::{EntryExpr, Expr, IdedExpr};

use super::{
    Activation, CelEnvironment, CelProgram, CelType, DeclaredObject, VariableValue,
    admission_request_type, namespace_object_type,
};

static ENVIRONMENT: LazyLock<CelEnvironment> = LazyLock::new(CelEnvironment::kubernetes);
/// Only parses, to read references; the environment above compiles and checks.
static PARSER: LazyLock<Env> = LazyLock::new(Env::stdlib);

/// What an admission policy's field declares besides the variables every expression has.
#[derive(Debug, Clone, Copy)]
pub struct Declarations<'a> {
    /// `variables`.
    pub variables: Variables<'a>,
    /// Whether `params` is declared (the policy has a `paramKind`).
    pub params: bool,
    /// Whether `authorizer` is declared (not in a ValidatingAdmissionPolicy's
    /// `messageExpression`).
    pub authorizer: bool,
}

impl Default for Declarations<'_> {
    /// Everything declared, `variables` as `dyn` (native rules, tests).
    fn default() -> Self {
        Declarations {
            variables: Variables::Dyn,
            params: true,
            authorizer: true,
        }
    }
}

/// How an expression sees `variables`.
#[derive(Debug, Clone, Copy)]
pub enum Variables<'a> {
    /// Declared, untyped.
    Dyn,
    /// Not declared (a policy without `spec.variables`, a match condition).
    Undeclared,
    /// The policy's variables declared so far, each with its expression's type.
    Typed(&'a [(String, CelType)]),
}

/// A compiled expression.
pub struct Expression {
    program: CelProgram,
    variables_used: BTreeSet<String>,
    identifiers: BTreeSet<String>,
    output_type: CelType,
    comprehension_nesting: usize,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Expression").field(&self.source()).finish()
    }
}

#[derive(Default)]
struct References<'e> {
    idents: BTreeSet<&'e str>,
    structs: BTreeSet<&'e str>,
    variables: BTreeSet<&'e str>,
    /// Comprehensions around the node being walked, and the most seen.
    nesting: usize,
    deepest_nesting: usize,
}

fn walk<'e>(expr: &'e IdedExpr, bound: &mut Vec<&'e str>, refs: &mut References<'e>) {
    match &expr.expr {
        Expr::Ident(name) => {
            if !name.starts_with('@') && !bound.contains(&name.as_str()) {
                refs.idents.insert(name);
            }
        }
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                // `jsonpatch.escapeKey(…)`, `math.abs(…)`: a namespace, not a variable.
                if !matches!(&target.expr, Expr::Ident(ns) if matches!(ns.as_str(), "jsonpatch" | "math" | "base64" | "strings" | "lists"))
                {
                    walk(target, bound, refs);
                }
            }
            for arg in &call.args {
                walk(arg, bound, refs);
            }
        }
        Expr::Comprehension(comp) => {
            walk(&comp.iter_range, bound, refs);
            walk(&comp.accu_init, bound, refs);
            let depth = bound.len();
            bound.push(&comp.iter_var);
            if let Some(second) = &comp.iter_var2 {
                bound.push(second);
            }
            bound.push(&comp.accu_var);
            refs.nesting += 1;
            refs.deepest_nesting = refs.deepest_nesting.max(refs.nesting);
            walk(&comp.loop_cond, bound, refs);
            walk(&comp.loop_step, bound, refs);
            refs.nesting -= 1;
            walk(&comp.result, bound, refs);
            bound.truncate(depth);
        }
        Expr::List(list) => {
            for element in &list.elements {
                walk(element, bound, refs);
            }
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    walk(&entry.key, bound, refs);
                    walk(&entry.value, bound, refs);
                }
            }
        }
        Expr::Select(select) => {
            if let Expr::Ident(root) = &select.operand.expr
                && root == "variables"
                && !bound.contains(&"variables")
            {
                refs.variables.insert(&select.field);
            }
            walk(&select.operand, bound, refs);
        }
        Expr::Struct(strct) => {
            refs.structs.insert(&strct.type_name);
            for entry in &strct.entries {
                if let EntryExpr::StructField(field) = &entry.expr {
                    walk(&field.value, bound, refs);
                }
            }
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

impl Expression {
    /// Compiles `source`; struct literals are allowed when `structs` says so (mutations).
    /// Type errors are compile errors, as in the apiserver: `request` and `namespaceObject`
    /// have their types; `object`, `oldObject`, `params` and `variables` are `dyn`.
    pub fn compile(source: &str, structs: bool) -> Result<Self, String> {
        Self::compile_in(source, structs, &Declarations::default())
    }

    /// Like [`Expression::compile`], in the environment of one field of an admission policy.
    pub fn compile_in(
        source: &str,
        structs: bool,
        declarations: &Declarations<'_>,
    ) -> Result<Self, String> {
        let program = ENVIRONMENT.compile(source).map_err(|e| e.message)?;
        let mut declared = vec![
            ("request", admission_request_type()),
            ("namespaceObject", namespace_object_type()),
            (
                "authorizer",
                CelType::Opaque("kubernetes.authorization.Authorizer"),
            ),
        ];
        let mut undeclared = Vec::new();
        match declarations.variables {
            Variables::Dyn => {}
            Variables::Undeclared => undeclared.push("variables"),
            Variables::Typed(variables) => declared.push((
                "variables",
                DeclaredObject::object_type("kubernetes.variables", variables.to_vec()),
            )),
        }
        if !declarations.params {
            undeclared.push("params");
        }
        if !declarations.authorizer {
            declared.retain(|(name, _)| *name != "authorizer");
            undeclared.push("authorizer");
        }
        if !structs {
            undeclared.push("jsonpatch");
        }
        let output_type = ENVIRONMENT.type_check(source, &declared, &undeclared)?;
        let mut variables_used = BTreeSet::new();
        let mut identifiers = BTreeSet::new();
        let mut comprehension_nesting = 0;
        // The environment parsed it already; a parse failure here (a macro only the
        // environment knows) only skips the checks below.
        if let Ok((expression, _)) = PARSER
            .parser()
            .enable_optional_syntax(true)
            .parse_with_source_info(source)
        {
            let mut refs = References::default();
            walk(&expression, &mut Vec::new(), &mut refs);
            if !structs && let Some(name) = refs.structs.first() {
                return Err(format!(
                    "undeclared reference to '{name}': Object and JSONPatch values are for \
                     mutations"
                ));
            }
            variables_used = refs.variables.iter().map(|v| (*v).to_owned()).collect();
            identifiers = refs.idents.iter().map(|v| (*v).to_owned()).collect();
            comprehension_nesting = refs.deepest_nesting;
        }
        Ok(Expression {
            program,
            variables_used,
            identifiers,
            output_type,
            comprehension_nesting,
        })
    }

    /// The static type of the expression's value (`dyn` where it depends on the object).
    pub fn output_type(&self) -> &CelType {
        &self.output_type
    }

    /// The `must evaluate to …` refusal of the apiserver when the expression's static type
    /// is not exactly one of `expected` (`dyn` is not `bool`).
    pub fn expect_output(&self, expected: &[CelType]) -> Result<(), String> {
        if expected.iter().any(|t| self.output_type.is_exactly(t)) {
            return Ok(());
        }
        let got = &self.output_type;
        Err(match expected {
            [one] => format!("must evaluate to {one} but got {got}"),
            many => format!(
                "must evaluate to one of [{}] but got {got}",
                many.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        })
    }

    /// How deeply its comprehensions nest (`all`, `exists`, `map`, `filter`, …): 0 without
    /// any, 2 for a comprehension inside another. The work of an evaluation can grow with the
    /// object's lists to this power.
    pub fn comprehension_nesting(&self) -> usize {
        self.comprehension_nesting
    }

    /// The `variables.<name>` it reads.
    pub fn variables_used(&self) -> &BTreeSet<String> {
        &self.variables_used
    }

    /// Whether the expression references the top-level variable `name`.
    pub fn uses(&self, name: &str) -> bool {
        self.identifiers.contains(name)
    }

    /// Why the apiserver would refuse to instantiate the program (see
    /// [`CelProgram::instantiation_error`]).
    pub fn instantiation_error(&self) -> Option<&str> {
        self.program.instantiation_error()
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        self.program.source()
    }

    /// Evaluates the expression; the error is the environment's text.
    pub fn evaluate(&self, activation: &Activation<'_>) -> Result<cel::Value, String> {
        self.program
            .evaluate(activation)
            .map_err(|error| error.to_string())
    }

    /// Evaluates the expression as a composition variable (see
    /// [`CelProgram::evaluate_variable`]); the error as [`Expression::evaluate`] gives it.
    pub fn evaluate_variable<'a>(
        &'a self,
        activation: &Activation<'a>,
    ) -> Result<VariableValue<'a>, String> {
        self.program
            .evaluate_variable(activation)
            .map_err(|error| error.to_string())
    }

    /// Evaluates the expression; the error is worded as the apiserver words it:
    /// `expression '<source>' resulted in error: <error>`.
    pub fn evaluate_worded(&self, activation: &Activation<'_>) -> Result<cel::Value, String> {
        self.evaluate(activation)
            .map_err(|error| self.resulted_in_error(&error))
    }

    /// Like [`Expression::evaluate_worded`], with the runtime cost charged.
    pub fn evaluate_worded_with_cost(
        &self,
        activation: &Activation<'_>,
    ) -> (Result<cel::Value, String>, u64) {
        let (result, cost) = self.program.evaluate_with_cost(activation);
        (
            result.map_err(|error| self.resulted_in_error(&error.to_string())),
            cost,
        )
    }

    /// Evaluates an expression that must give a bool (a validation, a match condition); any
    /// other type is an error: `expression '<source>' resulted in error: expected bool, got
    /// <type>`.
    pub fn evaluate_bool(&self, activation: &Activation<'_>) -> Result<bool, String> {
        self.evaluate_bool_with_cost(activation).0
    }

    /// Like [`Expression::evaluate_bool`], with the runtime cost charged (see
    /// [`crate::expressions::CelProgram::evaluate_with_cost`]), which the apiserver counts
    /// against a policy's budget.
    pub fn evaluate_bool_with_cost(
        &self,
        activation: &Activation<'_>,
    ) -> (Result<bool, String>, u64) {
        let (result, cost) = self.program.evaluate_with_cost(activation);
        let result = match result {
            Ok(cel::Value::Bool(value)) => Ok(value),
            Ok(other) => {
                Err(self.resulted_in_error(&format!("expected bool, got {}", type_name(&other))))
            }
            Err(error) => Err(self.resulted_in_error(&error.to_string())),
        };
        (result, cost)
    }

    fn resulted_in_error(&self, error: &str) -> String {
        format!("expression '{}' resulted in error: {error}", self.source())
    }
}

/// The CEL type name of a value, as messages name it.
pub fn type_name(value: &cel::Value) -> String {
    value.type_of().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(source: &str, object: serde_json::Value) -> Result<cel::Value, String> {
        let expression = Expression::compile(source, true)?;
        expression.evaluate(&Activation::new().object(&object))
    }

    #[test]
    fn string_format_is_a_string() {
        let typed =
            |source: &str| Expression::compile(source, false).map(|e| e.output_type().to_string());
        assert_eq!(
            typed("'%s has %d'.format([object.metadata.name, 1])").as_deref(),
            Ok("string")
        );
        assert_eq!(typed("'%s'.format(object.list)").as_deref(), Ok("string"));
        assert!(typed("'%s'.format('a')").is_err());
    }

    #[test]
    fn evaluates_and_checks_references() {
        assert_eq!(
            eval(
                "object.spec.replicas <= 5",
                json!({"spec": {"replicas": 3}})
            ),
            Ok(cel::Value::Bool(true))
        );
        assert_eq!(
            eval(
                "object.spec.containers.all(c, c.image.startsWith('r/'))",
                json!({"spec": {"containers": [{"image": "r/a"}]}})
            ),
            Ok(cel::Value::Bool(true))
        );
        let undeclared = Expression::compile("objekt.spec", false).unwrap_err();
        assert!(
            undeclared.contains("undeclared reference to 'objekt'"),
            "{undeclared}"
        );
        assert!(Expression::compile("object.spec ==", false).is_err());
        assert!(Expression::compile("Object{}", false).is_err());
        let uses = Expression::compile("variables.a + variables.b.c", false).unwrap();
        assert_eq!(uses.variables_used().iter().collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn builds_patches_and_objects() {
        let value = eval(
            "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('a/b~c'), value: 'x'}]",
            json!({}),
        )
        .unwrap();
        assert_eq!(
            crate::expressions::cel_to_json(&value).unwrap(),
            json!([{"op": "add", "path": "/metadata/labels/a~1b~0c", "value": "x"}])
        );
        let value = eval(
            "Object{metadata: Object.metadata{labels: {'env': 'test'}}}",
            json!({}),
        )
        .unwrap();
        assert_eq!(
            crate::expressions::cel_to_json(&value).unwrap(),
            json!({"metadata": {"labels": {"env": "test"}}})
        );
    }
}
