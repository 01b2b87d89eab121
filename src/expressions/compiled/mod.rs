//! The compiled evaluator: the expressions most policies are made of, translated at load into
//! a tree of resolved operations that reads the request's JSON where it lies.
//!
//! The interpreter ([`cel::Value::resolve_val`]) converts every JSON level it touches into
//! interpreter maps, resolves names prefix by prefix and looks functions up by name on every
//! call. Here names are resolved once (admission variables to slots, comprehension variables
//! to frame positions), functions to operations, regexes with a constant pattern compiled at
//! load, and values borrow the JSON ([`value::Value`]).
//!
//! It covers a subset, and takes the interpreter's answers as the definition:
//! - at load, an expression with anything outside the subset (`authorizer`, a bare
//!   `variables`, bytes literals, …) is not compiled, and the interpreter evaluates it;
//!   `variables.x` reads the composition variable, evaluated on first read by its own
//!   program and held as this evaluator's value, borrowing the request
//!   ([`run_variable`]);
//! - a library function without an operation of its own here, and a map or message
//!   literal, is evaluated by the interpreter on operands evaluated here
//!   ([`Node::Interpreted`]), except the calls that charge cost from inside (regexes,
//!   formats' `validate`, the authorizer's selectors);
//! - at evaluation, the compiled tree only produces values: any error, and any operation on
//!   types it does not handle exactly as the interpreter does (mixed numeric types, equality
//!   of lists or maps, …), gives up, and the interpreter evaluates the expression again from
//!   the start with the budget as it was. Evaluating has no side effects but cost, so the
//!   second run gives exactly the interpreter's answer, error text included.
//!
//! It runs the instrumented tree ([`super::cost`], [`super::check::instrument`]) and charges
//! the same units through the same functions, in the interpreter's order, so that an
//! evaluation costs the same either way.

mod compile;
mod eval;
mod memo;
mod value;

pub(super) use compile::compile;
pub(super) use eval::{Outcome, run, run_variable};
pub use eval::{compiled_evaluation_gave_up, map_order_observed};
pub(super) use value::Value;

use super::cost::SizeRule;

/// A compiled expression.
#[derive(Debug)]
pub(super) struct CompiledProgram {
    root: Node,
    /// Frame positions the comprehensions use (two each).
    locals: usize,
    /// The memo slots of field lookups read more than once.
    memos: memo::Memos,
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comparison {
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

/// Arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arithmetic {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
}

/// String functions of two strings (receiver, argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextTest {
    StartsWith,
    EndsWith,
    Contains,
}

/// A regex pattern: compiled at load when constant.
#[derive(Debug)]
enum Pattern {
    Constant(regex::Regex, u64),
    Computed(Box<Node>),
}

/// One operation of the tree.
#[derive(Debug)]
enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Text(String),
    /// An admission variable (`object`, `oldObject`, `request`, `params`,
    /// `namespaceObject`), by its slot in the activation.
    Slot(usize),
    /// Another variable bound by name.
    Named(Box<str>),
    /// A composition variable (`variables.x`), evaluated on first read.
    Variable(Box<str>),
    /// A comprehension variable, by frame position.
    Local(usize),
    /// Fields selected one after the other (`object.spec.containers`).
    Select(Box<Node>, Box<[Box<str>]>),
    Has(Box<Node>, Box<str>),
    Index(Box<Node>, Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>),
    Conditional(Box<[Node; 3]>),
    NotStrictlyFalse(Box<Node>),
    Compare(Comparison, Box<Node>, Box<Node>),
    Arithmetic(Arithmetic, Box<Node>, Box<Node>),
    Negate(Box<Node>),
    In(Box<Node>, Box<Node>),
    Size(Box<Node>),
    /// `receiver.f(argument)`: the argument is evaluated first, as the interpreter does.
    TextTest(TextTest, Box<Node>, Box<Node>),
    /// `text.matches(pattern)`; `pattern_first` when the pattern is evaluated before the text.
    Matches {
        text: Box<Node>,
        pattern: Pattern,
        pattern_first: bool,
    },
    /// `@cost(units, x)`: `x`, then `units` charged.
    Cost(u64, Box<Node>),
    /// `@sized(site, rule, x)`: `x`, then its size noted or charged.
    Sized(i64, SizeRule, Box<Node>),
    /// `@budget(x)`: `x`, then its size charged to the iteration budget.
    Budget(Box<Node>),
    List(Vec<Node>),
    Fold(Box<Fold>),
    /// `all` or `exists`.
    Quantifier(Box<Quantifier>),
    /// `a[?k]`.
    OptionalIndex(Box<Node>, Box<Node>),
    /// `a.?f`.
    OptionalSelect(Box<Node>, Box<str>),
    /// `optional.of(x)`.
    OptionalOf(Box<Node>),
    /// `optional.none()`.
    OptionalNone,
    /// `o.orValue(x)`: `x` is evaluated first, as the interpreter does.
    OrValue(Box<Node>, Box<Node>),
    /// `o.hasValue()`.
    HasValue(Box<Node>),
    /// `o.value()`.
    OptionalValue(Box<Node>),
    /// `string(x)`.
    ToText(Box<Node>),
    /// `int(x)`.
    ToInt(Box<Node>),
    /// `s.lowerAscii()` (`true`) or `s.upperAscii()`.
    AsciiCase(bool, Box<Node>),
    /// A library call with no operation of its own here, or a map or message literal: its
    /// operands are evaluated here, the call or literal itself by the interpreter.
    Interpreted(Box<InterpretedPart>),
    /// [`Node::Select`] with remembered lookups ([`memo`]).
    MemoSelect(Box<memo::MemoChain>),
    /// [`Node::Has`] of a chain's last field, with remembered lookups.
    MemoHas(Box<memo::MemoChain>),
}

/// A call or literal on operands bound to placeholder names
/// ([`InterpretedPart::operand_name`]).
struct InterpretedPart {
    /// The call or literal, its operands replaced by the placeholders.
    call: cel::common::ast::IdedExpr,
    /// The operands, in the interpreter's order (a call's arguments, then a value receiver;
    /// a literal's keys and values in turn).
    operands: Vec<Node>,
    env: std::sync::Arc<cel::Env>,
}

impl InterpretedPart {
    /// The placeholder bound to operand `index`.
    fn operand_name(index: usize) -> String {
        format!("@operand{index}")
    }
}

impl std::fmt::Debug for InterpretedPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterpretedPart")
            .field("call", &self.call)
            .field("operands", &self.operands)
            .finish_non_exhaustive()
    }
}

/// `range.all(x, p)` (`every`) or `range.exists(x, p)`: the comprehension the macro expands
/// to, evaluated without its accumulator's steps. The units its condition and step charge
/// per item are charged as the comprehension charges them, in its order.
#[derive(Debug)]
struct Quantifier {
    range: Node,
    item: usize,
    every: bool,
    condition_units: Option<u64>,
    step_units: Option<u64>,
    predicate: Node,
}

/// A comprehension.
#[derive(Debug)]
struct Fold {
    range: Node,
    init: Node,
    item: usize,
    accumulator: usize,
    condition: Node,
    step: Node,
    result: Node,
    /// `map`'s and `filter`'s steps, which only append to a list that starts empty: the
    /// guard, if any, and the one-item list appended.
    append: Option<(Option<Node>, Node)>,
}
