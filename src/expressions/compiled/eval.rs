//! Evaluating a [`CompiledProgram`].

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;

use super::memo::MemoChain;
use super::value::Value;
use super::{
    Arithmetic, Comparison, CompiledProgram, Fold, InterpretedPart, Node, Pattern, Quantifier,
    TextTest,
};
use crate::admission::object_view::{Items as ViewItems, UniqueMembers};
use crate::admission::{JsonRead, Node as ViewNode, unique_members};
use crate::expressions::activation::Held;
use crate::expressions::cost::SizeRule;
use crate::expressions::{Activation, LocalBudget};

/// How a compiled evaluation ended.
pub(in crate::expressions) enum Outcome<T = cel::Value> {
    /// Its value.
    Value(T),
    /// It gave up: the interpreter decides.
    Interpret,
    /// `--cel-timeout` ran out (final: evaluating again would only take as long again).
    Cancelled(String),
}

/// An evaluation stopped: cancelled if [`Frame::cancelled`] holds the message, else given up
/// (the interpreter decides). Zero-sized, so that a [`Step`] of a [`Value`] is two words.
struct Stop;

type Step<T> = Result<T, Stop>;

thread_local! {
    static MAP_ORDER_OBSERVED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static GAVE_UP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the last compiled evaluation on this thread gave up, leaving the expression to
/// the interpreter.
pub fn compiled_evaluation_gave_up() -> bool {
    GAVE_UP.with(std::cell::Cell::get)
}

/// Whether the last compiled evaluation on this thread iterated a map's keys. CEL leaves
/// their order open (the interpreter's and the apiserver's maps iterate in random order, the
/// compiled evaluator in the JSON's), so where a comprehension stops early or builds a list,
/// the cost or the list may differ between them.
pub fn map_order_observed() -> bool {
    MAP_ORDER_OBSERVED.with(std::cell::Cell::get)
}

fn observe_map_order(range: &Value<'_>) {
    if matches!(range, Value::Json(serde_json::Value::Object(_))) || range.view_map().is_some() {
        MAP_ORDER_OBSERVED.with(|observed| observed.set(true));
    }
}

/// Comprehension variables held on the stack (two per comprehension): a program with more
/// allocates them.
const INLINE_LOCALS: usize = 8;

/// Memo slots kept on the stack (more are allocated).
const INLINE_MEMOS: usize = 16;

/// Programs with at most this many locals and memo slots run with small stack arrays (most
/// validations: one comprehension, a few remembered lookups), which cost less to set up and
/// drop than the largest inline ones.
const SMALL_LOCALS: usize = 2;
const SMALL_MEMOS: usize = 4;

/// Runs `program` against `activation`, charging `budget`.
pub(in crate::expressions) fn run(
    program: &CompiledProgram,
    activation: &Activation<'_>,
    budget: &mut LocalBudget,
) -> Outcome {
    run_then(program, activation, budget, true, |value| value.to_cel())
}

/// Runs the program of a composition variable (`variables.x`), read while another
/// expression is evaluated: its value as this evaluator holds it, borrowing the request (a
/// value holding an optional is left to the interpreter, whose view of it is converted).
pub(in crate::expressions) fn run_variable<'a>(
    program: &'a CompiledProgram,
    activation: &Activation<'a>,
    budget: &mut LocalBudget,
) -> Outcome<Value<'a>> {
    run_then(program, activation, budget, false, |value| {
        value.is_plain().then_some(value)
    })
}

/// [`run`] with the comprehension variables and memo slots set up for `program`; `finish`
/// takes the value (`None`: the interpreter decides); `outermost`: not nested in another
/// evaluation (a nested one adds to what the outer one observed).
fn run_then<'r, 'a: 'r, T>(
    program: &'r CompiledProgram,
    activation: &Activation<'a>,
    budget: &mut LocalBudget,
    outermost: bool,
    finish: impl FnOnce(Value<'r>) -> Option<T>,
) -> Outcome<T> {
    let (locals, memos) = (program.locals, program.memos.count);
    let run = |locals: &mut [Value<'r>], memos: &mut [Memo<'r>]| {
        run_with(
            program, activation, budget, locals, memos, outermost, finish,
        )
    };
    if locals == 0 && memos == 0 {
        run(&mut [], &mut [])
    } else if locals <= SMALL_LOCALS && memos <= SMALL_MEMOS {
        let mut inline_locals: [Value<'_>; SMALL_LOCALS] = Default::default();
        let mut inline_memos = [Memo::Unknown; SMALL_MEMOS];
        run(&mut inline_locals[..locals], &mut inline_memos[..memos])
    } else if locals <= INLINE_LOCALS && memos <= INLINE_MEMOS {
        let mut inline_locals: [Value<'_>; INLINE_LOCALS] = Default::default();
        let mut inline_memos = [Memo::Unknown; INLINE_MEMOS];
        run(&mut inline_locals[..locals], &mut inline_memos[..memos])
    } else {
        run(
            &mut vec![Value::Null; locals],
            &mut vec![Memo::Unknown; memos],
        )
    }
}

/// [`run_then`] with the comprehension variables and memo slots in place.
fn run_with<'r, 'a: 'r, T>(
    program: &'r CompiledProgram,
    activation: &Activation<'a>,
    budget: &mut LocalBudget,
    locals: &mut [Value<'r>],
    memos: &mut [Memo<'r>],
    outermost: bool,
    finish: impl FnOnce(Value<'r>) -> Option<T>,
) -> Outcome<T> {
    let observed_before = MAP_ORDER_OBSERVED.with(|observed| observed.replace(false));
    let mut frame = Frame {
        activation,
        locals,
        memos,
        resets: &program.memos.resets,
        noted: Vec::new(),
        budget,
        cancelled: None,
    };
    let outcome = match frame.eval(&program.root) {
        Ok(value) => finish(value).map_or(Outcome::Interpret, Outcome::Value),
        Err(Stop) => match frame.cancelled.take() {
            Some(message) => Outcome::Cancelled(message),
            None => Outcome::Interpret,
        },
    };
    if !outermost && observed_before {
        MAP_ORDER_OBSERVED.with(|observed| observed.set(true));
    }
    GAVE_UP.with(|gave_up| gave_up.set(matches!(outcome, Outcome::Interpret)));
    outcome
}

/// A remembered lookup of a member of a JSON object.
#[derive(Debug, Clone, Copy)]
enum Memo<'r> {
    Unknown,
    Absent,
    Present(&'r serde_json::Value),
    /// Present in a view.
    PresentNode(ViewNode<'r>),
}

impl<'r> Memo<'r> {
    /// The lookup of `field` in `value`, if it is a map of the request's JSON (a tree's or a
    /// view's).
    fn of_member(value: &Value<'r>, field: &str) -> Option<Self> {
        if let Value::Json(json @ serde_json::Value::Object(_)) = value {
            let json: &'r serde_json::Value = json;
            return Some(json.get(field).map_or(Memo::Absent, Memo::Present));
        }
        let map = value.view_map()?;
        Some(map.get(field).map_or(Memo::Absent, Memo::PresentNode))
    }

    /// The member found, if it was.
    fn member(self) -> Option<Value<'r>> {
        match self {
            Memo::Present(json) => Some(Value::from_json(json)),
            Memo::PresentNode(node) => Some(Value::from_node(node)),
            Memo::Absent | Memo::Unknown => None,
        }
    }
}

struct Frame<'r, 'a, 'b, 'l> {
    activation: &'l Activation<'a>,
    locals: &'l mut [Value<'r>],
    memos: &'l mut [Memo<'r>],
    /// By frame position, the memo slots that binding it forgets.
    resets: &'r [Box<[usize]>],
    /// The first operands' sizes of two-operand sized calls being evaluated, by site.
    noted: Vec<(i64, (u64, bool))>,
    budget: &'b mut LocalBudget,
    /// Why the evaluation was cancelled.
    cancelled: Option<String>,
}

fn boolean(value: Value<'_>) -> Step<bool> {
    match value {
        Value::Bool(b) => Ok(b.get()),
        _ => Err(Stop),
    }
}

impl<'r, 'a: 'r> Frame<'r, 'a, '_, '_> {
    /// A charge refused: the deadline is final, anything else (the cost limit, the
    /// iteration budget) is left to the interpreter, which words it.
    fn refused(&mut self, error: cel::ExecutionError) -> Stop {
        match error {
            cel::ExecutionError::FunctionError { function, message }
                if function == "budget" && message.starts_with("deadline exceeded") =>
            {
                self.cancelled = Some(message);
                Stop
            }
            _ => Stop,
        }
    }

    fn charge_cost(&mut self, units: u64) -> Step<()> {
        self.budget
            .charge_cost(units)
            .map_err(|error| self.refused(error))
    }

    /// Evaluates a node that must give a bool (its result returns in a register, where
    /// [`Frame::eval`]'s goes through memory).
    fn eval_bool(&mut self, node: &'r Node) -> Step<bool> {
        match node {
            Node::Bool(b) => Ok(*b),
            Node::Local(position) => match &self.locals[*position] {
                Value::Bool(b) => Ok(b.get()),
                _ => Err(Stop),
            },
            Node::Has(operand, field) => {
                let operand = self.eval(operand)?;
                has_member(operand, field)
            }
            Node::MemoHas(chain) => self.memo_has(chain),
            Node::HasValue(optional) => match self.eval(optional)? {
                Value::Optional(value) => Ok(value.is_some()),
                _ => Err(Stop),
            },
            Node::And(left, right) => Ok(self.eval_bool(left)? && self.eval_bool(right)?),
            Node::Or(left, right) => Ok(self.eval_bool(left)? || self.eval_bool(right)?),
            Node::Not(operand) | Node::NotStrictlyFalse(operand) => {
                let value = self.eval_bool(operand)?;
                Ok(if matches!(node, Node::Not(_)) {
                    !value
                } else {
                    value
                })
            }
            Node::Conditional(parts) => {
                let [condition, then, otherwise] = &**parts;
                if self.eval_bool(condition)? {
                    self.eval_bool(then)
                } else {
                    self.eval_bool(otherwise)
                }
            }
            Node::Compare(comparison, left, right) => {
                let left = self.eval(left)?;
                let right = self.eval(right)?;
                compare(*comparison, &left, &right)
            }
            Node::In(element, container) => {
                let element = self.eval(element)?;
                let container = self.eval(container)?;
                contains(&container, &element)
            }
            Node::TextTest(test, receiver, argument) => {
                let argument = self.eval(argument)?;
                let receiver = self.eval(receiver)?;
                let (Some(text), Some(part)) = (receiver.text(), argument.text()) else {
                    return Err(Stop);
                };
                Ok(match test {
                    TextTest::StartsWith => text.starts_with(part),
                    TextTest::EndsWith => text.ends_with(part),
                    TextTest::Contains => text.contains(part),
                })
            }
            Node::Matches {
                text,
                pattern,
                pattern_first,
            } => self.matches(text, pattern, *pattern_first),
            Node::Quantifier(quantifier) => self.quantifier(quantifier),
            Node::Cost(units, inner) => {
                let value = self.eval_bool(inner)?;
                self.charge_cost(*units)?;
                Ok(value)
            }
            _ => boolean(self.eval(node)?),
        }
    }

    fn eval(&mut self, node: &'r Node) -> Step<Value<'r>> {
        Ok(match node {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::from_bool(*b),
            Node::Int(i) => Value::Int(*i),
            Node::Uint(u) => Value::Uint(*u),
            Node::Double(d) => Value::from_double(*d),
            Node::Text(text) => Value::Text(text),
            Node::Slot(slot) => match self.activation.slot_node(*slot) {
                Some(node) => Value::from_node(node),
                None => match self.activation.slot_json(*slot) {
                    Ok(Some(json)) => Value::from_json(json),
                    Ok(None) => Value::Null,
                    Err(()) => return Err(Stop),
                },
            },
            Node::Named(name) => match self.activation.named_json(name) {
                Some(json) => Value::from_json(json),
                None => return Err(Stop),
            },
            Node::Variable(name) => self.variable(name)?,
            Node::Local(position) => self.locals[*position].clone(),
            Node::Select(operand, fields) => {
                let mut value = self.eval(operand)?;
                for field in fields {
                    value = select(value, field)?;
                }
                value
            }
            Node::MemoSelect(chain) => self.memo_prefix(chain, chain.fields.len())?,
            Node::Has(..)
            | Node::MemoHas(..)
            | Node::And(..)
            | Node::Or(..)
            | Node::Not(..)
            | Node::NotStrictlyFalse(..)
            | Node::Compare(..)
            | Node::In(..)
            | Node::TextTest(..)
            | Node::Matches { .. } => Value::from_bool(self.eval_bool(node)?),
            Node::Index(operand, index) => match self.eval(operand)? {
                Value::Optional(None) => Value::Optional(None),
                Value::Optional(Some(inner)) => {
                    let index = self.eval(index)?;
                    Value::Optional(optional_index(&inner, &index)?)
                }
                operand => {
                    let index = self.eval(index)?;
                    index_into(&operand, &index)?
                }
            },
            Node::OptionalIndex(operand, index) => {
                let operand = match self.eval(operand)? {
                    Value::Optional(None) => return Ok(Value::Optional(None)),
                    Value::Optional(Some(inner)) => (*inner).clone(),
                    operand => operand,
                };
                let index = self.eval(index)?;
                Value::Optional(optional_index(&operand, &index)?)
            }
            Node::OptionalSelect(operand, field) => match self.eval(operand)? {
                Value::Optional(None) => Value::Optional(None),
                Value::Optional(Some(inner)) => optional_field(&inner, field),
                operand => optional_field(&operand, field),
            },
            Node::OptionalOf(inner) => Value::Optional(Some(Arc::new(self.eval(inner)?))),
            Node::OptionalNone => Value::Optional(None),
            Node::OrValue(optional, otherwise) => {
                let otherwise = self.eval(otherwise)?;
                match self.eval(optional)? {
                    Value::Optional(Some(value)) => (*value).clone(),
                    Value::Optional(None) => otherwise,
                    _ => return Err(Stop),
                }
            }
            Node::OptionalValue(optional) => match self.eval(optional)? {
                Value::Optional(Some(value)) => (*value).clone(),
                _ => return Err(Stop),
            },
            Node::HasValue(..) => Value::from_bool(self.eval_bool(node)?),
            Node::ToText(inner) => match self.eval(inner)? {
                text if text.text().is_some() => text,
                Value::Int(i) => Value::OwnedText(Arc::new(i.to_string())),
                Value::Uint(u) => Value::OwnedText(Arc::new(u.to_string())),
                Value::Bool(b) => Value::OwnedText(Arc::new(b.get().to_string())),
                Value::Double(d) => {
                    Value::OwnedText(Arc::new(crate::expressions::library::go_format_g(d.get())))
                }
                _ => return Err(Stop),
            },
            Node::ToInt(inner) => match self.eval(inner)? {
                Value::Int(i) => Value::Int(i),
                Value::Uint(u) => Value::Int(i64::try_from(u).map_err(|_| Stop)?),
                value => match value.text().map(str::parse::<i64>) {
                    Some(Ok(i)) => Value::Int(i),
                    _ => return Err(Stop),
                },
            },
            Node::Interpreted(part) => self.interpreted(part)?,
            Node::AsciiCase(lower, inner) => {
                let value = self.eval(inner)?;
                let text = value.text().ok_or(Stop)?;
                Value::OwnedText(Arc::new(if *lower {
                    text.to_ascii_lowercase()
                } else {
                    text.to_ascii_uppercase()
                }))
            }
            Node::Conditional(parts) => {
                let [condition, then, otherwise] = &**parts;
                if self.eval_bool(condition)? {
                    self.eval(then)?
                } else {
                    self.eval(otherwise)?
                }
            }
            Node::Arithmetic(operator, left, right) => {
                let left = self.eval(left)?;
                let right = self.eval(right)?;
                arithmetic(*operator, left, right)?
            }
            Node::Negate(operand) => match self.eval(operand)? {
                Value::Int(i) => Value::Int(i.checked_neg().ok_or(Stop)?),
                Value::Double(d) => Value::from_double(-d.get()),
                _ => return Err(Stop),
            },
            Node::Size(operand) => {
                let value = self.eval(operand)?;
                let size = value.size().ok_or(Stop)?;
                Value::Int(i64::try_from(size).map_err(|_| Stop)?)
            }
            Node::Cost(units, inner) => {
                let value = self.eval(inner)?;
                self.charge_cost(*units)?;
                value
            }
            Node::Sized(site, rule, inner) => {
                let value = self.eval(inner)?;
                self.charge_sized(*site, *rule, &value)?;
                value
            }
            Node::Budget(inner) => {
                let value = self.eval(inner)?;
                let size = value.size().map_or(1, |size| size.max(1));
                self.budget
                    .charge_iterations(size)
                    .map_err(|error| self.refused(error))?;
                value
            }
            Node::List(items) => {
                let mut list = Vec::with_capacity(items.len());
                for item in items {
                    list.push(self.eval(item)?);
                }
                Value::List(Arc::new(list))
            }
            Node::Fold(fold) => self.fold(fold)?,
            Node::Quantifier(quantifier) => Value::from_bool(self.quantifier(quantifier)?),
        })
    }

    fn matches(&mut self, text: &'r Node, pattern: &'r Pattern, pattern_first: bool) -> Step<bool> {
        let computed = |frame: &mut Self| match pattern {
            Pattern::Computed(node) => frame.eval(node).map(Some),
            Pattern::Constant(..) => Ok(None),
        };
        let (text, computed) = if pattern_first {
            let computed = computed(self)?;
            (self.eval(text)?, computed)
        } else {
            let text = self.eval(text)?;
            (text, computed(self)?)
        };
        let Some(text) = text.text() else {
            return Err(Stop);
        };
        // cel-go's cost: (1 + the text's length) / 10 times the pattern's length / 4, each
        // rounded up (as the interpreter's `@matches` charges).
        let text_units = (1 + text.chars().count() as u64).div_ceil(10);
        match (pattern, computed) {
            (Pattern::Constant(regex, pattern_units), _) => {
                self.charge_cost(text_units * pattern_units)?;
                Ok(regex.is_match(text))
            }
            (Pattern::Computed(_), Some(pattern)) => {
                let Some(pattern) = pattern.text() else {
                    return Err(Stop);
                };
                self.charge_cost(text_units * (pattern.chars().count() as u64).div_ceil(4))?;
                crate::expressions::library::cached_regex_match(pattern, text).ok_or(Stop)
            }
            (Pattern::Computed(_), None) => Err(Stop),
        }
    }

    /// Evaluates the operands, then the call or literal through the interpreter; any error
    /// gives up.
    fn interpreted(&mut self, part: &'r InterpretedPart) -> Step<Value<'r>> {
        let mut operands: Vec<Box<dyn Val + 'r>> = Vec::with_capacity(part.operands.len());
        for operand in &part.operands {
            operands.push(match self.eval(operand)? {
                // The request's JSON as the interpreter binds it: read in place, not copied.
                Value::Json(json) => crate::expressions::json_to_val(json),
                value => value.to_cel().ok_or(Stop)?.try_into().map_err(|_| Stop)?,
            });
        }
        let resolver = Operands(&operands);
        let mut context = cel::Context::with_env(Arc::clone(&part.env));
        context.set_variable_resolver(&resolver);
        let result = cel::Value::resolve_val(&part.call, &context)
            .and_then(|value| cel::Value::try_from(value.as_ref()))
            .map_err(|_| Stop)?;
        Ok(Value::from_cel(result))
    }

    fn charge_sized(&mut self, site: i64, rule: SizeRule, value: &Value<'r>) -> Step<()> {
        let size = match rule {
            SizeRule::Traversal
            | SizeRule::ContainsIp
            | SizeRule::ContainsIpString
            | SizeRule::ContainsCidr
            | SizeRule::ContainsCidrString => {
                let value = value.to_cel().ok_or(Stop)?;
                crate::expressions::library::library_size(rule, &value)
            }
            SizeRule::NoteInt => match value {
                Value::Int(depth) => Some(depth.unsigned_abs()),
                _ => None,
            },
            _ => value.size(),
        };
        let textlike = match rule {
            SizeRule::InList => value.is_list(),
            SizeRule::NoteInt => matches!(value, Value::Int(depth) if *depth < 0),
            SizeRule::SelfCompare => value
                .list_items()
                .and_then(|mut items| items.next())
                .is_some_and(|first| first.is_text_or_bytes()),
            _ => value.is_text_or_bytes(),
        };
        let operand = (size.unwrap_or(1), textlike);
        match rule {
            SizeRule::Note | SizeRule::NoteInt => {
                match self.noted.iter_mut().find(|(s, _)| *s == site) {
                    Some(entry) => entry.1 = operand,
                    None => self.noted.push((site, operand)),
                }
                Ok(())
            }
            SizeRule::InList
            | SizeRule::Text
            | SizeRule::TextTwice
            | SizeRule::Traversal
            | SizeRule::ListAllocation
            | SizeRule::SelfCompare => self.charge_cost(rule.units((0, false), operand)),
            SizeRule::Min
            | SizeRule::MinOfText
            | SizeRule::SumOfText
            | SizeRule::Product
            | SizeRule::ContainsIp
            | SizeRule::ContainsIpString
            | SizeRule::ContainsCidr
            | SizeRule::ContainsCidrString
            | SizeRule::SetsProduct
            | SizeRule::SetsProductTwice
            | SizeRule::FlattenDepth => match self.noted.iter().position(|(s, _)| *s == site) {
                Some(at) => {
                    let first = self.noted.swap_remove(at).1;
                    self.charge_cost(rule.units(first, operand))
                }
                None => Ok(()),
            },
        }
    }

    /// `variables.name`: evaluated by its own program the first time any expression reads it
    /// (charged as the interpreter charges it); an error gives up, and the interpreter
    /// reports it.
    fn variable(&mut self, name: &str) -> Step<Value<'r>> {
        let activation = self.activation;
        match self.budget.lend(|| activation.variable_value(name)) {
            Some(Ok(value)) => Ok(match value.held() {
                Held::Compiled(value) => value.clone(),
                Held::Interpreted(value) => Value::from_cel(value.clone()),
            }),
            Some(Err(_)) | None => Err(Stop),
        }
    }

    /// Binds a comprehension's item, forgetting the lookups remembered from the previous one.
    fn bind(&mut self, position: usize, item: Value<'r>) {
        self.locals[position] = item;
        for &slot in self.resets.get(position).into_iter().flatten() {
            self.memos[slot] = Memo::Unknown;
        }
    }

    /// The value of `chain`'s first `length` fields selected from its root (the root itself
    /// for 0), from the longest remembered prefix on; lookups with a slot are remembered.
    fn memo_prefix(&mut self, chain: &'r MemoChain, length: usize) -> Step<Value<'r>> {
        let mut start = 0;
        let mut value = None;
        for known in (1..=length).rev() {
            if let Some(slot) = chain.memos[known - 1] {
                match self.memos[slot] {
                    Memo::Unknown => {}
                    memo => {
                        start = known;
                        value = Some(memo.member().ok_or(Stop)?);
                        break;
                    }
                }
            }
        }
        let mut value = match value {
            Some(value) => value,
            None => self.eval(&chain.root)?,
        };
        for index in start..length {
            let field = &*chain.fields[index];
            let looked_up =
                chain.memos[index].and_then(|slot| Some((slot, Memo::of_member(&value, field)?)));
            value = match looked_up {
                Some((slot, memo)) => {
                    self.memos[slot] = memo;
                    memo.member().ok_or(Stop)?
                }
                None => select(value, field)?,
            };
        }
        Ok(value)
    }

    /// `has(chain)`: the last field's presence, remembered when it has a slot.
    fn memo_has(&mut self, chain: &'r MemoChain) -> Step<bool> {
        let last = chain.fields.len() - 1;
        let slot = chain.memos[last];
        if let Some(slot) = slot {
            match self.memos[slot] {
                Memo::Unknown => {}
                memo => return Ok(!matches!(memo, Memo::Absent)),
            }
        }
        let parent = self.memo_prefix(chain, last)?;
        let field = &*chain.fields[last];
        match slot.and_then(|slot| Some((slot, Memo::of_member(&parent, field)?))) {
            Some((slot, memo)) => {
                self.memos[slot] = memo;
                Ok(!matches!(memo, Memo::Absent))
            }
            None => has_member(parent, field),
        }
    }

    fn fold(&mut self, fold: &'r Fold) -> Step<Value<'r>> {
        let init = self.eval(&fold.init)?;
        let range = self.eval(&fold.range)?;
        if let Some((guard, items)) = &fold.append
            && matches!(&init, Value::List(list) if list.is_empty())
        {
            return self.append(fold, &range, guard.as_ref(), items);
        }
        self.locals[fold.accumulator] = init;
        observe_map_order(&range);
        let items = FoldItems::of(&range)?;
        for item in items {
            if !self.eval_bool(&fold.condition)? {
                break;
            }
            self.bind(fold.item, item);
            let accumulated = self.eval(&fold.step)?;
            self.locals[fold.accumulator] = accumulated;
        }
        let result = self.eval(&fold.result)?;
        self.locals[fold.accumulator] = Value::Null;
        self.locals[fold.item] = Value::Null;
        Ok(result)
    }

    /// The comprehension of `all` or `exists`, step by step: per item, the condition (the
    /// accumulator not yet flipped) and its units, then the predicate, the step's units, and
    /// the predicate's value as the new accumulator (`true && p`, `false || p`).
    fn quantifier(&mut self, quantifier: &'r Quantifier) -> Step<bool> {
        let range = self.eval(&quantifier.range)?;
        observe_map_order(&range);
        let mut accumulator = quantifier.every;
        for item in FoldItems::of(&range)? {
            if let Some(units) = quantifier.condition_units {
                self.charge_cost(units)?;
            }
            if accumulator != quantifier.every {
                break;
            }
            self.bind(quantifier.item, item);
            accumulator = self.eval_bool(&quantifier.predicate)?;
            if let Some(units) = quantifier.step_units {
                self.charge_cost(units)?;
            }
        }
        self.locals[quantifier.item] = Value::Null;
        Ok(accumulator)
    }

    fn append(
        &mut self,
        fold: &'r Fold,
        range: &Value<'r>,
        guard: Option<&'r Node>,
        items: &'r Node,
    ) -> Step<Value<'r>> {
        observe_map_order(range);
        let elements = FoldItems::of(range)?;
        let mut accumulated = Vec::with_capacity(elements.size_hint().0);
        for element in elements {
            if !self.eval_bool(&fold.condition)? {
                break;
            }
            self.bind(fold.item, element);
            if let Some(guard) = guard
                && !self.eval_bool(guard)?
            {
                continue;
            }
            match self.eval(items)? {
                Value::List(list) => accumulated.extend(list.iter().cloned()),
                _ => return Err(Stop),
            }
        }
        self.locals[fold.item] = Value::Null;
        Ok(Value::List(Arc::new(accumulated)))
    }
}

/// Binds an interpreted part's placeholders to its operands.
struct Operands<'o, 'r>(&'o [Box<dyn Val + 'r>]);

impl VariableResolver for Operands<'_, '_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        let index: usize = variable.strip_prefix("@operand")?.parse().ok()?;
        self.0
            .get(index)
            .map(|operand| CowVal::Borrowed(&**operand))
    }
}

/// The member `key` of a map the interpreter built; a missing one (the interpreter's error)
/// or another value gives up.
fn built_map_member<'r>(map: &Value<'r>, key: &str) -> Step<Value<'r>> {
    match map.cel_map_member(key) {
        Some(Some(member)) => Ok(Value::from_cel(member.clone())),
        _ => Err(Stop),
    }
}

/// `has(value.field)`.
fn has_member(value: Value<'_>, field: &str) -> Step<bool> {
    if let Some(map) = value.view_map() {
        return Ok(map.get(field).is_some());
    }
    match value {
        Value::Json(serde_json::Value::Object(fields)) => Ok(fields.contains_key(field)),
        Value::Optional(None) => Ok(false),
        Value::Optional(Some(inner)) => match &*inner {
            Value::Json(serde_json::Value::Object(fields)) => Ok(fields.contains_key(field)),
            inner if inner.view_map().is_some() => {
                Ok(inner.view_map().and_then(|map| map.get(field)).is_some())
            }
            inner if inner.is_list() => Ok(false),
            _ => Err(Stop),
        },
        value => value
            .cel_map_member(field)
            .map(|member| member.is_some())
            .ok_or(Stop),
    }
}

/// `value.field`: a map's member, the member of an optional map as an optional.
fn select<'r>(value: Value<'r>, field: &str) -> Step<Value<'r>> {
    if let Some(map) = value.view_map() {
        return map.get(field).map(Value::from_node).ok_or(Stop);
    }
    match value {
        Value::Json(serde_json::Value::Object(members)) => {
            members.get(field).map(Value::from_json).ok_or(Stop)
        }
        Value::Cel(_) => built_map_member(&value, field),
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) => match &*inner {
            Value::Json(serde_json::Value::Object(_)) => Ok(optional_field(&inner, field)),
            inner if inner.view_map().is_some() => Ok(optional_field(inner, field)),
            inner if inner.is_list() => Ok(Value::Optional(None)),
            _ => Err(Stop),
        },
        _ => Err(Stop),
    }
}

/// `value.?field`: the member as an optional, none for anything but a map holding it.
fn optional_field<'r>(value: &Value<'r>, field: &str) -> Value<'r> {
    Value::Optional(match value {
        Value::Json(serde_json::Value::Object(members)) => members
            .get(field)
            .map(|found| Arc::new(Value::from_json(found))),
        _ => value
            .view_map()
            .and_then(|map| map.get(field))
            .map(|found| Arc::new(Value::from_node(found))),
    })
}

/// `value[?index]` (or an index into an optional): the item as an optional, none where
/// there is none. Only the lookups whose failure is certainly a missing item are decided.
fn optional_index<'r>(value: &Value<'r>, index: &Value<'r>) -> Step<Option<Arc<Value<'r>>>> {
    match (value, index) {
        (Value::Json(serde_json::Value::Object(members)), _) if index.text().is_some() => {
            Ok(members
                .get(index.text().unwrap_or_default())
                .map(|found| Arc::new(Value::from_json(found))))
        }
        (Value::Json(serde_json::Value::Array(_)) | Value::List(_), Value::Int(_)) => {
            Ok(index_into(value, index).ok().map(Arc::new))
        }
        (Value::View(..), _) => match (value.view_map(), value.view_list(), index) {
            (Some(map), _, _) => {
                let key = index.text().ok_or(Stop)?;
                Ok(map.get(key).map(|found| Arc::new(Value::from_node(found))))
            }
            (_, Some(_), Value::Int(_)) => Ok(index_into(value, index).ok().map(Arc::new)),
            _ => Err(Stop),
        },
        _ => Err(Stop),
    }
}

fn index_into<'r>(operand: &Value<'r>, index: &Value<'r>) -> Step<Value<'r>> {
    match (operand, index) {
        (Value::Json(serde_json::Value::Object(fields)), _) => {
            let key = index.text().ok_or(Stop)?;
            fields.get(key).map(Value::from_json).ok_or(Stop)
        }
        (Value::Cel(_), _) => built_map_member(operand, index.text().ok_or(Stop)?),
        (Value::Json(serde_json::Value::Array(items)), Value::Int(i)) => usize::try_from(*i)
            .ok()
            .and_then(|i| items.get(i))
            .map(Value::from_json)
            .ok_or(Stop),
        (Value::List(items), Value::Int(i)) => usize::try_from(*i)
            .ok()
            .and_then(|i| items.get(i))
            .cloned()
            .ok_or(Stop),
        (Value::View(..), _) => match (operand.view_map(), operand.view_list(), index) {
            (Some(map), _, _) => {
                let key = index.text().ok_or(Stop)?;
                map.get(key).map(Value::from_node).ok_or(Stop)
            }
            (_, Some(list), Value::Int(i)) => usize::try_from(*i)
                .ok()
                .and_then(|i| list.items().nth(i))
                .map(Value::from_node)
                .ok_or(Stop),
            _ => Err(Stop),
        },
        _ => Err(Stop),
    }
}

fn compare(comparison: Comparison, left: &Value<'_>, right: &Value<'_>) -> Step<bool> {
    if let Comparison::Equal | Comparison::NotEqual = comparison {
        let equal = left.equals(right).ok_or(Stop)?;
        return Ok(equal == (comparison == Comparison::Equal));
    }
    let numbers =
        |value: &Value<'_>| matches!(value, Value::Int(_) | Value::Uint(_) | Value::Double(_));
    let ordering = match (left, right) {
        _ if numbers(left) && numbers(right) => {
            super::value::numeric_order(left, right).ok_or(Stop)?
        }
        _ => match (left.text(), right.text()) {
            (Some(a), Some(b)) => a.cmp(b),
            _ => return Err(Stop),
        },
    };
    Ok(match comparison {
        Comparison::Less => ordering == Ordering::Less,
        Comparison::LessOrEqual => ordering != Ordering::Greater,
        Comparison::Greater => ordering == Ordering::Greater,
        Comparison::GreaterOrEqual => ordering != Ordering::Less,
        Comparison::Equal | Comparison::NotEqual => unreachable!("handled above"),
    })
}

fn arithmetic<'r>(operator: Arithmetic, left: Value<'r>, right: Value<'r>) -> Step<Value<'r>> {
    use Arithmetic::*;
    Ok(match (operator, &left, &right) {
        (Add, Value::Int(a), Value::Int(b)) => Value::Int(a.checked_add(*b).ok_or(Stop)?),
        (Subtract, Value::Int(a), Value::Int(b)) => Value::Int(a.checked_sub(*b).ok_or(Stop)?),
        (Multiply, Value::Int(a), Value::Int(b)) => Value::Int(a.checked_mul(*b).ok_or(Stop)?),
        (Divide, Value::Int(a), Value::Int(b)) => Value::Int(a.checked_div(*b).ok_or(Stop)?),
        (Modulo, Value::Int(a), Value::Int(b)) => Value::Int(a.checked_rem(*b).ok_or(Stop)?),
        (Add, Value::Uint(a), Value::Uint(b)) => Value::Uint(a.checked_add(*b).ok_or(Stop)?),
        (Subtract, Value::Uint(a), Value::Uint(b)) => Value::Uint(a.checked_sub(*b).ok_or(Stop)?),
        (Multiply, Value::Uint(a), Value::Uint(b)) => Value::Uint(a.checked_mul(*b).ok_or(Stop)?),
        (Divide, Value::Uint(a), Value::Uint(b)) => Value::Uint(a.checked_div(*b).ok_or(Stop)?),
        (Modulo, Value::Uint(a), Value::Uint(b)) => Value::Uint(a.checked_rem(*b).ok_or(Stop)?),
        (Add, Value::Double(a), Value::Double(b)) => Value::from_double(a.get() + b.get()),
        (Subtract, Value::Double(a), Value::Double(b)) => Value::from_double(a.get() - b.get()),
        (Multiply, Value::Double(a), Value::Double(b)) => Value::from_double(a.get() * b.get()),
        (Add, _, _) if left.text().is_some() && right.text().is_some() => {
            let (a, b) = (
                left.text().unwrap_or_default(),
                right.text().unwrap_or_default(),
            );
            let mut joined = String::with_capacity(a.len() + b.len());
            joined.push_str(a);
            joined.push_str(b);
            Value::OwnedText(Arc::new(joined))
        }
        (Add, _, _) if left.is_list() && right.is_list() => {
            let mut joined: Vec<Value<'r>> = left.list_items().ok_or(Stop)?.collect();
            joined.extend(right.list_items().ok_or(Stop)?);
            Value::List(Arc::new(joined))
        }
        _ => return Err(Stop),
    })
}

fn contains(container: &Value<'_>, element: &Value<'_>) -> Step<bool> {
    if let Some(map) = container.view_map() {
        let key = element.text().ok_or(Stop)?;
        return Ok(map.get(key).is_some());
    }
    match container {
        Value::Json(serde_json::Value::Object(fields)) => {
            let key = element.text().ok_or(Stop)?;
            Ok(fields.contains_key(key))
        }
        Value::Cel(_) => {
            let member = container.cel_map_member(element.text().ok_or(Stop)?);
            member.map(|member| member.is_some()).ok_or(Stop)
        }
        _ => {
            let items = container.list_items().ok_or(Stop)?;
            for item in items {
                if item.equals(element).ok_or(Stop)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
    }
}

/// What a comprehension iterates: a map's keys, a list's items.
enum FoldItems<'r> {
    Keys(serde_json::map::Keys<'r>),
    /// A view's map: its keys as a decoded map holds them (each once, in key order).
    ViewKeys(UniqueMembers<'r, ViewNode<'r>>),
    Json(std::slice::Iter<'r, serde_json::Value>),
    View(ViewItems<'r>),
    Built(Arc<Vec<Value<'r>>>, usize),
}

impl<'r> FoldItems<'r> {
    fn of(range: &Value<'r>) -> Step<Self> {
        Ok(match range {
            Value::Json(serde_json::Value::Object(fields)) => FoldItems::Keys(fields.keys()),
            Value::Json(serde_json::Value::Array(items)) => FoldItems::Json(items.iter()),
            Value::List(items) => FoldItems::Built(Arc::clone(items), 0),
            Value::View(..) => match (range.view_map(), range.view_list()) {
                (Some(map), _) => FoldItems::ViewKeys(unique_members(map)),
                (_, Some(list)) => FoldItems::View(list.items()),
                _ => return Err(Stop),
            },
            _ => return Err(Stop),
        })
    }
}

impl<'r> Iterator for FoldItems<'r> {
    type Item = Value<'r>;

    fn next(&mut self) -> Option<Value<'r>> {
        match self {
            FoldItems::Keys(keys) => keys.next().map(Value::Text),
            FoldItems::ViewKeys(members) => members
                .next()
                .map(|(_, member)| Value::ViewKey(member.index(), member.view())),
            FoldItems::View(items) => items.next().map(Value::from_node),
            FoldItems::Json(items) => items.next().map(Value::from_json),
            FoldItems::Built(items, next) => {
                let item = items.get(*next).cloned();
                *next += 1;
                item
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = match self {
            FoldItems::Keys(keys) => keys.len(),
            FoldItems::ViewKeys(members) => return members.size_hint(),
            FoldItems::View(items) => return items.size_hint(),
            FoldItems::Json(items) => items.len(),
            FoldItems::Built(items, next) => items.len().saturating_sub(*next),
        };
        (left, Some(left))
    }
}
