//! CEL for Kubernetes admission: the environment ValidatingAdmissionPolicy and
//! MutatingAdmissionPolicy define, compiled once and evaluated per request.
//!
//! - [`CelEnvironment::kubernetes`] declares the top-level variables (`object`, `oldObject`,
//!   `request`, `params`, `namespaceObject`, `variables`, `authorizer`) and registers the
//!   Kubernetes libraries on top of what the `cel` crate provides (see [`library`]).
//! - [`CelEnvironment::compile`] parses with optional syntax on, rejects sources over
//!   [`CelLimits::max_source_bytes`] or nested deeper than [`CelLimits::max_tree_depth`]
//!   (before parsing: the parser, checks and evaluation recurse), and checks statically that
//!   every variable and function referenced is declared and called with a valid number of
//!   arguments.
//! - [`CelProgram::evaluate`] runs against an [`Activation`]: the request's values, converted
//!   from JSON once and borrowed (strings are not copied), plus lazily evaluated `variables`.
//!   Every evaluation is charged the apiserver's runtime cost as it runs ([`cost`]) and is
//!   cancelled past Kubernetes' per-call limit, as the apiserver cancels it; an iteration
//!   budget and a deadline stay as backstops ([`CelLimits`]).
//!
//! Limits (defaults, see [`CelLimits`]): 64 KiB of source, nesting depth 64 (syntax tree
//! depth 256, chains included), a cost of 1 000 000 per evaluation (the apiserver's), and as
//! backstops 100 000 000 comprehension iterations per evaluation (the sizes of the ranges
//! iterated, nested ones multiplied) and 1 s of evaluation time.

mod activation;
mod ast_walk;
mod check;
mod compiled;
mod convert;
mod cost;
mod expression;
mod fold;
pub mod library;
mod macros;
mod nesting;
mod types;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use cel::common::ast::SourceInfo;
use cel::parser::Expression as ParsedExpression;
use cel::{Context, Env, ExecutionError};

pub use activation::{
    Activation, AuthorizationCheck, AuthorizationDecision, Authorizer, JsonSource, VariableValue,
};
pub use compiled::{compiled_evaluation_gave_up, map_order_observed};
pub use convert::{cel_to_json, json_to_cel, json_to_val, object_type_mismatches};
pub use expression::{Declarations, Expression, Variables, type_name};
pub use types::{
    CelType, DeclaredObject, ObjectFields, admission_request_type, apply_configuration_type,
    json_patch_list_type, namespace_object_type,
};

/// The top-level variables of the admission environment (VAP; MAP adds none).
pub const ADMISSION_VARIABLES: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
    "authorizer",
];

/// Bounds on what a program may be and do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CelLimits {
    /// Largest accepted source, in bytes (default 64 KiB).
    pub max_source_bytes: usize,
    /// Comprehension iterations one evaluation may perform, nested ones included, counted as
    /// the size of each range a comprehension iterates (default 100 000 000: a backstop, the
    /// cost limit ends evaluations first).
    pub max_iterations: u64,
    /// Time one evaluation may take, checked as cost is charged (default 1 s: a backstop far
    /// above what the cost limit lets an evaluation take): CPU time of the evaluating thread
    /// on Linux, so that it does not depend on the machine's load; wall time elsewhere.
    pub max_eval_time: Duration,
    /// The runtime cost one evaluation may reach, in cel-go's units ([`cost`]): Kubernetes'
    /// per-call limit, 1 000 000, unless a test lowers it.
    pub max_cost: u64,
    /// Deepest nesting the parser accepts (default 64; the `cel` parser's own default is 96).
    /// Parsing and evaluating recurse: measured here, release builds handle nesting of 95
    /// within a 2 MiB thread stack (a tokio worker's), debug builds overflow 2 MiB from about
    /// 20 levels of parentheses, so tests that compile deep expressions need a larger stack.
    ///
    /// The parser does not count chains (`a + b + c`, `a.b.c`), which nest the syntax tree
    /// as deeply as they are long: the tree may be [`CelLimits::max_tree_depth`] deep.
    pub max_nesting: u16,
}

/// Kubernetes' runtime cost limit of one expression evaluation (`celconfig.PerCallLimit`).
pub const PER_CALL_COST_LIMIT: u64 = 1_000_000;

/// Kubernetes' runtime cost budget of one policy evaluation for one binding and parameter
/// (`celconfig.RuntimeCELCostBudget`): its validations share it, and so, separately, do its
/// audit annotations.
pub const POLICY_COST_BUDGET: u64 = 10_000_000;

/// Kubernetes' runtime cost budget of a policy's `matchConditions`
/// (`celconfig.RuntimeCELCostBudgetMatchConditions`).
pub const MATCH_CONDITIONS_COST_BUDGET: u64 = 2_500_000;

/// The apiserver's error when a policy's expressions together overrun their budget.
pub const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// What is left of a budget shared by several expression calls (see [`POLICY_COST_BUDGET`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CostBudget {
    remaining: u64,
}

impl CostBudget {
    /// A budget of `units`.
    pub fn new(units: u64) -> Self {
        CostBudget { remaining: units }
    }

    /// What is left.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Takes what one call cost; `Err(OUT_OF_BUDGET)` when that is more than is left, after
    /// which nothing more may run.
    pub fn spend(&mut self, cost: u64) -> Result<(), &'static str> {
        match self.remaining.checked_sub(cost) {
            Some(left) => {
                self.remaining = left;
                Ok(())
            }
            None => Err(OUT_OF_BUDGET),
        }
    }
}

/// Whether programs run on the compiled evaluator where they can (`--cel-evaluator`).
static COMPILED_EVALUATION: AtomicBool = AtomicBool::new(true);

/// Chooses, for the whole process, whether programs run on the compiled evaluator where they
/// can (the default) or on the interpreter alone (`--cel-evaluator interpreter`).
pub fn set_compiled_evaluation(enabled: bool) {
    COMPILED_EVALUATION.store(enabled, Ordering::Relaxed);
}

/// The process-wide limits of [`CelEnvironment::kubernetes`], fixed at first use.
static CONFIGURED_LIMITS: OnceLock<CelLimits> = OnceLock::new();

impl CelLimits {
    /// The limits [`CelEnvironment::kubernetes`] compiles with: those given to
    /// [`CelLimits::configure`], else the defaults. Fixed from the first call on.
    pub fn configured() -> CelLimits {
        *CONFIGURED_LIMITS.get_or_init(CelLimits::default)
    }

    /// Sets the process-wide limits (the `--cel-*` flags). Must come before the first
    /// compile; afterwards it fails and returns the limits already in force.
    pub fn configure(limits: CelLimits) -> Result<(), CelLimits> {
        CONFIGURED_LIMITS
            .set(limits)
            .map_err(|_| CelLimits::configured())
    }

    /// Deepest syntax tree accepted: 4 × [`CelLimits::max_nesting`] (256 by default). That
    /// fits long chains (`&&` and `||` are balanced, so they hardly count) and keeps parsing,
    /// checking and evaluating within a thread's stack: measured on trees at this limit,
    /// under 1 MiB in a release build, under 5 MiB in the AddressSanitizer build the fuzz
    /// targets run.
    pub fn max_tree_depth(&self) -> usize {
        4 * usize::from(self.max_nesting)
    }
}

impl Default for CelLimits {
    fn default() -> Self {
        CelLimits {
            max_source_bytes: 64 * 1024,
            max_iterations: 100_000_000,
            max_eval_time: Duration::from_secs(1),
            max_cost: PER_CALL_COST_LIMIT,
            max_nesting: 64,
        }
    }
}

/// The declared variables, the function registry and the limits: built once, shared by every
/// program it compiles.
pub struct CelEnvironment {
    env: Arc<Env>,
    variables: Vec<String>,
    limits: CelLimits,
}

impl std::fmt::Debug for CelEnvironment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelEnvironment")
            .field("variables", &self.variables)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// A compile error: the message names the expression and the position (`<input>:line:column`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CelCompileError {
    /// Kubernetes-style text, e.g. `ERROR: <input>:1:1: undeclared reference to 'foo' (in
    /// container '')`, followed by the source line and a caret.
    pub message: String,
}

/// An evaluation error, worded like Kubernetes' where practical (`no such key: foo`,
/// `no matching overload for 'x' applied to '(int, string)'`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelEvalError {
    /// The iteration budget or the deadline ran out.
    #[error("operation cancelled: {0}")]
    Cancelled(String),
    /// Any other runtime error.
    #[error("{0}")]
    Runtime(String),
}

impl CelEvalError {
    pub(crate) fn runtime(message: impl Into<String>) -> Self {
        CelEvalError::Runtime(message.into())
    }
}

/// A compiled expression: immutable, `Send + Sync`, cheap to evaluate many times.
pub struct CelProgram {
    expression: ParsedExpression,
    /// The same expression compiled, when every part of it is covered ([`compiled`]).
    compiled: Option<Box<compiled::CompiledProgram>>,
    env: Arc<Env>,
    limits: CelLimits,
    source: Arc<str>,
    /// Why cel-go would refuse to make the program (a conversion of a constant that fails, a
    /// literal `find` pattern that does not compile; see `fold.rs`), worded as cel-go words it.
    instantiation_error: Option<String>,
}

impl std::fmt::Debug for CelProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelProgram")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl CelEnvironment {
    /// The admission environment: [`ADMISSION_VARIABLES`], the Kubernetes libraries, the
    /// process-wide [`CelLimits::configured`].
    pub fn kubernetes() -> Self {
        Self::with_variables(ADMISSION_VARIABLES.iter().copied(), CelLimits::configured())
    }

    /// An environment declaring `variables` (plus the libraries), for callers that bind other
    /// names (tests, `matchConditions` with a subset).
    pub fn with_variables<'s>(
        variables: impl IntoIterator<Item = &'s str>,
        limits: CelLimits,
    ) -> Self {
        let mut env = Env::stdlib();
        library::register(&mut env);
        macros::register(&mut env);
        CelEnvironment {
            env: Arc::new(env),
            variables: variables.into_iter().map(str::to_owned).collect(),
            limits,
        }
    }

    /// Replaces the limits.
    #[must_use]
    pub fn limits(mut self, limits: CelLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The declared top-level variables.
    pub fn variables(&self) -> &[String] {
        &self.variables
    }

    /// Parses `source` (optional syntax on), enforces the size limit and the static checks
    /// (declared variables and functions, argument counts), and instruments comprehensions
    /// for the evaluation budget. MAP's `Object{...}` and `JSONPatch{...}` literals evaluate
    /// to maps (see [`cel_to_json`]).
    pub fn compile(&self, source: &str) -> Result<CelProgram, CelCompileError> {
        self.compile_checked(source, None)
    }

    /// Like [`CelEnvironment::compile`], and also checks that every `variables.<name>` names
    /// one of `composition_variables` (VAP `spec.variables` declared so far), as Kubernetes
    /// does (`undefined field 'name'`).
    pub fn compile_with_variables(
        &self,
        source: &str,
        composition_variables: &[&str],
    ) -> Result<CelProgram, CelCompileError> {
        self.compile_checked(source, Some(composition_variables))
    }

    fn compile_checked(
        &self,
        source: &str,
        composition: Option<&[&str]>,
    ) -> Result<CelProgram, CelCompileError> {
        if source.len() > self.limits.max_source_bytes {
            return Err(CelCompileError {
                message: format!(
                    "expression of {} bytes exceeds the limit of {} bytes",
                    source.len(),
                    self.limits.max_source_bytes
                ),
            });
        }
        // The parser recurses once per level of the tree, so what would be too deep is
        // refused before parsing (and measured again after, macros included).
        let max_depth = self.limits.max_tree_depth();
        if let Err((offset, depth)) = nesting::scan(source, max_depth) {
            return Err(CelCompileError {
                message: message_at(source, offset, &too_deep(depth, max_depth)),
            });
        }
        let (mut expression, info) = self
            .env
            .parser()
            .enable_optional_syntax(true)
            .max_recursion_depth(self.limits.max_nesting)
            .parse_with_source_info(source)
            .map_err(|errors| CelCompileError {
                // cel-go indents the source and caret lines by one space.
                message: errors.to_string().replace("\n| ", "\n | "),
            })?;
        if let Some((id, depth)) = nesting::deepest(&expression, max_depth) {
            return Err(CelCompileError {
                message: position_message(source, &info, id, &too_deep(depth, max_depth)),
            });
        }
        if let Err(issues) = check::check(&expression, &self.variables, composition) {
            let mut located: Vec<(usize, String)> = issues
                .iter()
                .map(|(id, message)| {
                    let offset = info.offset_for(*id).map_or(0, |(start, _)| start as usize);
                    let offset = source
                        .char_indices()
                        .map(|(i, _)| i)
                        .nth(offset)
                        .unwrap_or(source.len());
                    // A macro-expanded `math.greatest(…)` has no node for `math`: point at it.
                    let offset = if message.starts_with("undeclared reference to 'math'") {
                        source[..offset].rfind("math").unwrap_or(offset)
                    } else {
                        offset
                    };
                    (offset, message_at(source, offset, message))
                })
                .collect();
            located.sort_by_key(|(offset, _)| *offset);
            return Err(CelCompileError {
                message: located
                    .into_iter()
                    .map(|(_, message)| message)
                    .collect::<Vec<_>>()
                    .join("\n"),
            });
        }
        fold::fold_empty_membership(&mut expression);
        let instantiation_error = fold::first_instantiation_error(&expression, &|constant| {
            self.evaluate_constant(constant)
        });
        cost::instrument(&mut expression);
        check::instrument(&mut expression);
        let compiled = compiled::compile(&expression, &self.env).map(Box::new);
        // The compiled evaluator writes doubles itself; the interpreter needs the wrapper.
        library::wrap_string_conversions(&mut expression);
        Ok(CelProgram {
            compiled,
            expression,
            env: Arc::clone(&self.env),
            limits: self.limits,
            source: source.into(),
            instantiation_error,
        })
    }
}

impl CelEnvironment {
    /// Type-checks `source` with `declared` variables typed, as the apiserver's type checker
    /// does for `status.typeChecking`: the output type, or every issue found, each as cel-go
    /// prints it (`ERROR: <input>:1:12: undefined field 'x'` with the line and a caret), in
    /// source order, joined by newlines. An expression that does not parse has no type
    /// issues (`dyn`): compiling it reports the error. `undeclared` names environment
    /// variables this expression may not use.
    pub fn type_check(
        &self,
        source: &str,
        declared: &[(&str, CelType)],
        undeclared: &[&str],
    ) -> Result<CelType, String> {
        let Ok((expression, info)) = self
            .env
            .parser()
            .enable_optional_syntax(true)
            .max_recursion_depth(self.limits.max_nesting)
            .parse_with_source_info(source)
        else {
            return Ok(CelType::Dyn);
        };
        let (output, mut issues) = types::infer(&expression, declared, undeclared);
        if issues.is_empty() {
            issues = self.constant_argument_issues(&expression);
        }
        if issues.is_empty() {
            return Ok(output);
        }
        let mut located: Vec<(usize, String)> = issues
            .iter()
            .map(|issue| {
                let offset = info
                    .offset_for(issue.id)
                    .map_or(0, |(start, _)| start as usize);
                (
                    offset,
                    position_message(source, &info, issue.id, &issue.message),
                )
            })
            .collect();
        located.sort_by_key(|(offset, _)| *offset);
        located.dedup_by(|a, b| a.1 == b.1);
        Err(located
            .into_iter()
            .map(|(_, message)| message)
            .collect::<Vec<_>>()
            .join("\n"))
    }
}

impl CelEnvironment {
    /// Evaluates a constant part of an expression (no variables), as cel-go does when it
    /// folds it: the error as an evaluation would word it.
    fn evaluate_constant(&self, constant: &cel::IdedExpr) -> Result<(), String> {
        let context = Context::with_env(Arc::clone(&self.env));
        cel::Value::resolve_val(constant, &context)
            .map(|_| ())
            .map_err(|error| Activation::new().explain(error).to_string())
    }
}

impl CelEnvironment {
    /// cel-go's validators of constant arguments: a `timestamp('…')`, `duration('…')` or
    /// `matches('…')` whose literal argument does not parse is refused at create (`invalid
    /// timestamp argument`), where evaluating it would fail anyway.
    fn constant_argument_issues(&self, expression: &cel::IdedExpr) -> Vec<types::TypeIssue> {
        let mut calls = Vec::new();
        constant_calls(expression, &mut calls);
        calls
            .into_iter()
            .filter(|(_, function, literal)| {
                let argument = format!("'{literal}'");
                let source = match *function {
                    "matches" => format!("''.matches({argument})"),
                    other => format!("{other}({argument})"),
                };
                self.compile(&source)
                    .is_ok_and(|program| program.evaluate(&Activation::new()).is_err())
            })
            .map(|(id, function, _)| types::TypeIssue {
                id,
                message: format!("invalid {function} argument"),
            })
            .collect()
    }
}

/// Calls of `timestamp`, `duration` and `matches` whose argument is a plain string literal
/// (no quotes or backslashes, so that it can be written back as a literal): the argument's
/// node, the function, the text.
fn constant_calls<'e>(expr: &'e cel::IdedExpr, calls: &mut Vec<(u64, &'static str, &'e str)>) {
    use cel::common::ast::{Expr, LiteralValue};
    if let Expr::Call(call) = &expr.expr {
        let function = match (call.func_name.as_str(), call.target.is_some()) {
            ("timestamp", false) => Some("timestamp"),
            ("duration", false) => Some("duration"),
            ("matches", true) => Some("matches"),
            _ => None,
        };
        if let (Some(function), [argument]) = (function, call.args.as_slice())
            && let Expr::Literal(LiteralValue::String(text)) = &argument.expr
            && !text.contains(['\'', '"', '\\', '\n', '\r'])
        {
            calls.push((argument.id, function, text.as_ref()));
        }
    }
    ast_walk::visit_children(expr, &mut |child| constant_calls(child, calls));
}

fn too_deep(depth: usize, max_depth: usize) -> String {
    format!(
        "expression nested too deeply: {depth} levels, over the limit of {max_depth} \
         (chains of operators and selections count as levels)"
    )
}

/// `ERROR: <input>:line:column: message`, then the line and a caret, as cel-go prints.
fn position_message(source: &str, info: &SourceInfo, id: u64, message: &str) -> String {
    let offset = info.offset_for(id).map_or(0, |(start, _)| start as usize);
    let offset = source
        .char_indices()
        .map(|(i, _)| i)
        .nth(offset)
        .unwrap_or(source.len());
    message_at(source, offset, message)
}

/// Like [`position_message`], at byte `offset`.
fn message_at(source: &str, offset: usize, message: &str) -> String {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    let text = source[line_start..].lines().next().unwrap_or_default();
    format!(
        "ERROR: <input>:{line}:{column}: {message}\n | {text}\n | {}^",
        ".".repeat(column - 1)
    )
}

impl CelProgram {
    /// The source this program was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Why the apiserver would refuse to instantiate this program, after it compiled and
    /// type-checked: a conversion of a constant that fails (`type conversion error from
    /// 'string' to 'int'`), which cel-go evaluates when it makes the program, or a literal
    /// pattern of `find`/`findAll` that Go's `regexp` refuses.
    pub fn instantiation_error(&self) -> Option<&str> {
        self.instantiation_error.as_deref()
    }

    /// Whether the compiled evaluator runs this program (else only the interpreter does).
    pub fn is_compiled(&self) -> bool {
        self.compiled.is_some()
    }

    /// Like [`CelProgram::evaluate_with_cost`], with the interpreter only: the oracle the
    /// compiled evaluator is tested against.
    pub fn interpret_with_cost(
        &self,
        activation: &Activation<'_>,
    ) -> (Result<cel::Value, CelEvalError>, u64) {
        self.interpret(activation, Carried::default())
    }

    /// Evaluates against `activation`. Nested evaluations (of `variables`) share the outer
    /// evaluation's budget and deadline.
    pub fn evaluate(&self, activation: &Activation<'_>) -> Result<cel::Value, CelEvalError> {
        self.evaluate_with_cost(activation).0
    }

    /// Like [`CelProgram::evaluate`], with the runtime cost the evaluation was charged, in
    /// cel-go's units: its own, plus what the `variables` it evaluated on the way cost (each
    /// a call of its own, as the apiserver's composition context counts them against the
    /// policy's budget). A cancelled evaluation reports what it had been charged when
    /// cancelled, past the limit as cel-go does.
    pub fn evaluate_with_cost(
        &self,
        activation: &Activation<'_>,
    ) -> (Result<cel::Value, CelEvalError>, u64) {
        let mut carried = Carried::default();
        if let Some(program) = &self.compiled
            && COMPILED_EVALUATION.load(Ordering::Relaxed)
        {
            let mut budget = LocalBudget::enter(&self.limits);
            match compiled::run(program, activation, &mut budget) {
                compiled::Outcome::Value(value) => return (Ok(value), budget.leave()),
                compiled::Outcome::Cancelled(message) => {
                    return (Err(CelEvalError::Cancelled(message)), budget.leave());
                }
                // Evaluated again from the start, by the interpreter; the variables it
                // evaluated stay evaluated, and charged (cost and iterations).
                compiled::Outcome::Interpret => carried = budget.carried(),
            }
        }
        self.interpret(activation, carried)
    }

    /// Evaluates a composition variable (`variables.x`, see [`Activation::variables`]) as
    /// [`CelProgram::evaluate`] does; its value as the compiled evaluator holds it where that
    /// evaluator computed it (read by later compiled expressions without conversion).
    pub fn evaluate_variable<'a>(
        &'a self,
        activation: &Activation<'a>,
    ) -> Result<VariableValue<'a>, CelEvalError> {
        let mut carried = Carried::default();
        if let Some(program) = &self.compiled
            && COMPILED_EVALUATION.load(Ordering::Relaxed)
        {
            let mut budget = LocalBudget::enter(&self.limits);
            let outcome = compiled::run_variable(program, activation, &mut budget);
            match outcome {
                compiled::Outcome::Value(value) => {
                    budget.leave();
                    return Ok(VariableValue::compiled(value));
                }
                compiled::Outcome::Cancelled(message) => {
                    budget.leave();
                    return Err(CelEvalError::Cancelled(message));
                }
                compiled::Outcome::Interpret => carried = budget.carried(),
            }
        }
        let (result, _) = self.interpret(activation, carried);
        result.map(VariableValue::from)
    }

    /// Evaluates on the interpreter; `carried`: what an evaluation of the same call that gave
    /// up had spent that stays spent.
    fn interpret(
        &self,
        activation: &Activation<'_>,
        carried: Carried,
    ) -> (Result<cel::Value, CelEvalError>, u64) {
        let budget = Budget::enter(&self.limits);
        if carried != Carried::default() {
            BUDGET.with(|b| {
                if let Some(mut remaining) = b.get() {
                    remaining.deadline = remaining.deadline.or(carried.deadline);
                    remaining.composed = remaining.composed.saturating_add(carried.composed);
                    remaining.iterations = remaining
                        .iterations
                        .saturating_sub(carried.nested_iterations);
                    b.set(Some(remaining));
                }
            });
        }
        let resolver = activation.resolver();
        let mut context = Context::with_env(Arc::clone(&self.env));
        context.set_variable_resolver(&resolver);
        let result = cel::Value::resolve_val(&self.expression, &context)
            .and_then(|value| cel::Value::try_from(value.as_ref()));
        let (spent, cancelled) = budget.spent();
        let result = match (result, cancelled) {
            // A cancellation is final even where an operator absorbed the error.
            (Ok(_), true) => Err(self::cancelled("actual cost limit exceeded")),
            (result, _) => result,
        };
        (result.map_err(|error| activation.explain(error)), spent)
    }
}

// ---- evaluation budget ------------------------------------------------------------------

/// What the evaluation running on this thread may still spend.
#[derive(Clone, Copy)]
struct Remaining {
    iterations: u64,
    cost: u64,
    /// Units charged past the per-call limit by the charge that cancelled the evaluation.
    overshoot: u64,
    /// What the nested evaluations of `variables` were charged, each against its own limit.
    composed: u64,
    /// The evaluation thread's CPU time (see [`evaluation_clock`]) past which it is cancelled;
    /// `None` until the clock is first read, after [`CHARGES_PER_CLOCK_READING`] charges (most
    /// evaluations end before, and reading a thread's CPU time is a system call).
    deadline: Option<Duration>,
    /// `--cel-timeout`, which the deadline is set from.
    max_eval_time: Duration,
    /// Charges left before the clock is read again.
    until_clock: u32,
}

/// Charges between two readings of the clock (the deadline is a backstop).
const CHARGES_PER_CLOCK_READING: u32 = 64;

thread_local! {
    static BUDGET: Cell<Option<Remaining>> = const { Cell::new(None) };
}

/// The budget of the evaluation running on this thread. The outermost evaluation sets it
/// and clears it on drop; a nested one (a `variables` entry evaluated lazily) gets a cost
/// limit of its own, as the apiserver evaluates each variable as its own call, shares the
/// iteration budget and the deadline, and adds what it cost to the outer one's `composed`.
struct Budget {
    outer: Option<Remaining>,
    limit: u64,
}

impl Remaining {
    /// The budget of an evaluation starting inside `outer` (or at the top).
    fn entered(outer: Option<Remaining>, limits: &CelLimits) -> Remaining {
        match outer {
            Some(outer) => Remaining {
                cost: limits.max_cost,
                overshoot: 0,
                composed: 0,
                ..outer
            },
            None => Remaining {
                iterations: limits.max_iterations,
                cost: limits.max_cost,
                overshoot: 0,
                composed: 0,
                deadline: None,
                max_eval_time: limits.max_eval_time,
                until_clock: CHARGES_PER_CLOCK_READING,
            },
        }
    }

    /// What an evaluation with this cost `limit` was charged (its own units and its
    /// variables').
    fn charged(&self, limit: u64) -> u64 {
        (limit.saturating_sub(self.cost))
            .saturating_add(self.overshoot)
            .saturating_add(self.composed)
    }

    /// The outer evaluation's budget once the inner one, with this `limit`, is done.
    fn restored(
        outer: Option<Remaining>,
        inner: Option<Remaining>,
        limit: u64,
    ) -> Option<Remaining> {
        match (outer, inner) {
            (Some(outer), Some(inner)) => Some(Remaining {
                iterations: inner.iterations,
                until_clock: inner.until_clock,
                composed: outer.composed.saturating_add(inner.charged(limit)),
                ..outer
            }),
            (outer, _) => outer,
        }
    }
}

impl Budget {
    fn enter(limits: &CelLimits) -> Budget {
        BUDGET.with(|b| {
            let outer = b.get();
            b.set(Some(Remaining::entered(outer, limits)));
            Budget {
                outer,
                limit: limits.max_cost,
            }
        })
    }

    /// What this evaluation was charged (its own units and its variables'), and whether the
    /// per-call cost limit cancelled it.
    fn spent(&self) -> (u64, bool) {
        BUDGET.with(|b| {
            b.get()
                .map_or((0, false), |r| (r.charged(self.limit), r.overshoot > 0))
        })
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        BUDGET.with(|b| b.set(Remaining::restored(self.outer, b.get(), self.limit)));
    }
}

/// The clock of `--cel-timeout`: the calling thread's CPU time on Linux, so that the backstop
/// does not depend on how many evaluations share the cores; wall time elsewhere.
fn evaluation_clock() -> Duration {
    #[cfg(target_os = "linux")]
    {
        let now = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Duration::new(
            now.tv_sec.max(0) as u64,
            now.tv_nsec.clamp(0, 999_999_999) as u32,
        )
    }
    #[cfg(not(target_os = "linux"))]
    {
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed()
    }
}

fn cancelled(message: &str) -> ExecutionError {
    ExecutionError::function_error("budget", message)
}

/// Charges `iterations` to the running evaluation's iteration budget.
pub(crate) fn charge(iterations: u64) -> Result<(), ExecutionError> {
    spend(|remaining| remaining.charge_iterations(iterations))
}

/// Charges `units` of runtime cost to the running evaluation.
pub(crate) fn charge_cost(units: u64) -> Result<(), ExecutionError> {
    spend(|remaining| remaining.charge_cost(units))
}

impl Remaining {
    fn charge_iterations(&mut self, iterations: u64) -> Result<(), ExecutionError> {
        // Once over, every later charge fails too, so that no operator absorbs the error.
        match self.iterations.checked_sub(iterations) {
            Some(left) => {
                self.iterations = left;
                self.tick()
            }
            None => {
                self.iterations = 0;
                Err(cancelled(
                    "comprehension iteration limit exceeded (--cel-max-iterations)",
                ))
            }
        }
    }

    fn charge_cost(&mut self, units: u64) -> Result<(), ExecutionError> {
        match self.cost.checked_sub(units) {
            Some(left) => {
                self.cost = left;
                self.tick()
            }
            None => {
                if self.overshoot == 0 {
                    self.overshoot = units - self.cost;
                }
                self.cost = 0;
                Err(cancelled("actual cost limit exceeded"))
            }
        }
    }

    /// Counts one charge; every [`CHARGES_PER_CLOCK_READING`] charges, reads the clock.
    fn tick(&mut self) -> Result<(), ExecutionError> {
        self.until_clock = self.until_clock.saturating_sub(1);
        if self.until_clock == 0 {
            let now = evaluation_clock();
            match self.deadline {
                None => self.deadline = Some(now + self.max_eval_time),
                Some(deadline) if now > deadline => {
                    return Err(cancelled("deadline exceeded (--cel-timeout)"));
                }
                Some(_) => {}
            }
            self.until_clock = CHARGES_PER_CLOCK_READING;
        }
        Ok(())
    }
}

fn spend(
    take: impl FnOnce(&mut Remaining) -> Result<(), ExecutionError>,
) -> Result<(), ExecutionError> {
    BUDGET.with(|b| {
        let Some(mut remaining) = b.get() else {
            return Ok(());
        };
        let result = take(&mut remaining);
        // A deadline overrun leaves the budget as it was before the charge.
        if !matches!(&result, Err(ExecutionError::FunctionError { message, .. }) if message.starts_with("deadline")) {
            b.set(Some(remaining));
        }
        result
    })
}

/// The budget of one evaluation by the compiled evaluator, held where it runs (no
/// thread-local access per charge): taken from the evaluation it runs in, if any, and given
/// back by [`LocalBudget::leave`]. A `variables` entry it reads is evaluated with the budget
/// lent back to the thread ([`LocalBudget::lend`]), as the interpreter's would be.
pub(crate) struct LocalBudget {
    outer: Option<Remaining>,
    remaining: Remaining,
    limit: u64,
    /// Iterations the `variables` it evaluated performed.
    nested_iterations: u64,
}

/// What an evaluation by the compiled evaluator that gave up leaves spent for the
/// interpreter's evaluation of the same call ([`LocalBudget::carried`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Carried {
    deadline: Option<Duration>,
    composed: u64,
    nested_iterations: u64,
}

impl LocalBudget {
    /// The budget of an evaluation with `limits`, starting now.
    fn enter(limits: &CelLimits) -> Self {
        let outer = BUDGET.with(Cell::get);
        LocalBudget {
            outer,
            remaining: Remaining::entered(outer, limits),
            limit: limits.max_cost,
            nested_iterations: 0,
        }
    }

    /// Charges `units` of runtime cost.
    pub(crate) fn charge_cost(&mut self, units: u64) -> Result<(), ExecutionError> {
        self.remaining.charge_cost(units)
    }

    /// Charges `iterations` to the iteration budget.
    pub(crate) fn charge_iterations(&mut self, iterations: u64) -> Result<(), ExecutionError> {
        self.remaining.charge_iterations(iterations)
    }

    /// Ends the evaluation: what it cost, charged to the one it ran in.
    fn leave(self) -> u64 {
        if self.outer.is_some() {
            BUDGET.with(|b| {
                b.set(Remaining::restored(
                    self.outer,
                    Some(self.remaining),
                    self.limit,
                ));
            });
        }
        self.remaining.charged(self.limit)
    }

    /// What stays spent if the evaluation is made again from the start by the interpreter:
    /// the deadline, if the clock was read, and what the variables it evaluated were charged.
    fn carried(&self) -> Carried {
        Carried {
            deadline: self.remaining.deadline,
            composed: self.remaining.composed,
            nested_iterations: self.nested_iterations,
        }
    }

    /// Runs `nested` (which evaluates a `variables` entry) with this budget on the thread,
    /// where a nested evaluation finds its outer one's, then takes it back.
    pub(crate) fn lend<T>(&mut self, nested: impl FnOnce() -> T) -> T {
        BUDGET.with(|b| b.set(Some(self.remaining)));
        let result = nested();
        BUDGET.with(|b| {
            if let Some(remaining) = b.get() {
                self.nested_iterations = self.nested_iterations.saturating_add(
                    self.remaining
                        .iterations
                        .saturating_sub(remaining.iterations),
                );
                self.remaining = remaining;
            }
            b.set(self.outer);
        });
        result
    }
}

/// The types with cel-go's `Comparer` trait.
const COMPARABLE: &[&str] = &[
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "google.protobuf.Duration",
    "google.protobuf.Timestamp",
];

/// The types with cel-go's `Receiver` trait, which answer an operator they lack themselves.
const RECEIVERS: &[&str] = &[
    "string",
    "google.protobuf.Duration",
    "google.protobuf.Timestamp",
];

/// cel-go's words (v0.29.2) for a call that no overload takes, at runtime: an operator whose
/// operand's type has the operator's trait, or is a receiver type (`string`, durations,
/// timestamps), answers as that type does (`no such overload`); on any other type it names
/// the operator (`no such overload: _+_`), as `size` does; `!`, `in`, `matches` and the string
/// tests answer bare; any other function dispatches over its overloads and prints the call's
/// signature, receiver first (`no such overload: string(list)`, `no such overload:
/// isSorted(int)`).
fn no_such_overload(function: &str, types: &[&str]) -> String {
    const ADDABLE: &[&str] = &[
        "int",
        "uint",
        "double",
        "string",
        "bytes",
        "list",
        "google.protobuf.Duration",
        "google.protobuf.Timestamp",
    ];
    const SUBTRACTABLE: &[&str] = &[
        "int",
        "uint",
        "double",
        "google.protobuf.Duration",
        "google.protobuf.Timestamp",
    ];
    let with_trait: Option<&[&str]> = match function {
        "_+_" => Some(ADDABLE),
        "_-_" => Some(SUBTRACTABLE),
        "_*_" | "_/_" => Some(&["int", "uint", "double"]),
        "_%_" => Some(&["int", "uint"]),
        "_<_" | "_<=_" | "_>_" | "_>=_" => Some(COMPARABLE),
        // `-` of a bool is refused by the operator itself.
        "-_" => Some(&["int", "double", "google.protobuf.Duration", "bool"]),
        // Types of sizes never get here.
        "size" => Some(&[]),
        _ => None,
    };
    let left = types.first().copied().unwrap_or_default();
    match with_trait {
        Some(typed) if typed.contains(&left) || RECEIVERS.contains(&left) => {
            "no such overload".to_owned()
        }
        Some(_) => format!("no such overload: {function}"),
        None => match function {
            "!_" | "@in" | "matches" | "startsWith" | "endsWith" | "contains" => {
                "no such overload".to_owned()
            }
            _ => format!("no such overload: {function}({})", types.join(", ")),
        },
    }
}

/// Kubernetes-style text for a `cel` error.
pub(crate) fn eval_error(error: &ExecutionError) -> CelEvalError {
    match error {
        ExecutionError::FunctionError { function, message } if function == "budget" => {
            CelEvalError::Cancelled(message.clone())
        }
        // cel-go: `int('x')` is "type conversion error from 'string' to 'int'", and so for
        // `uint` and `double`; `bool('maybe')` is worded so too, in lower case.
        ExecutionError::FunctionError { function, message }
            if message.starts_with("string parse error")
                && matches!(function.as_str(), "int" | "uint" | "double") =>
        {
            CelEvalError::runtime(format!(
                "type conversion error from 'string' to '{function}'"
            ))
        }
        ExecutionError::FunctionError { message, .. }
            if message.starts_with("Type conversion error") =>
        {
            CelEvalError::runtime(message.replacen('T', "t", 1))
        }
        ExecutionError::FunctionError { message, .. } => CelEvalError::runtime(message.clone()),
        ExecutionError::NoSuchKey(key) => CelEvalError::runtime(format!("no such key: {key}")),
        ExecutionError::UndeclaredReference(name) => {
            CelEvalError::runtime(format!("no such attribute: {name}"))
        }
        ExecutionError::NoSuchOverload(overload) => {
            let types: Vec<&str> = overload
                .argument_types()
                .iter()
                .map(String::as_str)
                .collect();
            CelEvalError::runtime(no_such_overload(overload.function(), &types))
        }
        ExecutionError::UnsupportedBinaryOperator(op, lhs, rhs) => {
            let function = match *op {
                "add" => "_+_",
                "sub" => "_-_",
                "mul" => "_*_",
                "div" => "_/_",
                "rem" => "_%_",
                other => other,
            };
            CelEvalError::runtime(no_such_overload(
                function,
                &[convert::type_name(lhs), convert::type_name(rhs)],
            ))
        }
        ExecutionError::ValuesNotComparable(lhs, rhs) => {
            let types = [convert::type_name(lhs), convert::type_name(rhs)];
            CelEvalError::runtime(if COMPARABLE.contains(&types[0]) {
                no_such_overload("_<_", &types)
            } else {
                format!(
                    "no matching overload for comparison applied to '({}, {})'",
                    types[0], types[1]
                )
            })
        }
        ExecutionError::DivisionByZero(_) => CelEvalError::runtime("division by zero"),
        ExecutionError::RemainderByZero(_) => CelEvalError::runtime("modulus by zero"),
        ExecutionError::IndexOutOfBounds(index) => {
            CelEvalError::runtime(format!("index out of bounds: {}", convert::display(index)))
        }
        ExecutionError::Overflow(..) => CelEvalError::runtime("integer overflow"),
        other => CelEvalError::runtime(other.to_string()),
    }
}

#[cfg(test)]
mod tests;
