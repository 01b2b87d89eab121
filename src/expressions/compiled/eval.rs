//! Evaluating a [`CompiledProgram`].

use std::cmp::Ordering;
use std::rc::Rc;

use super::value::Value;
use super::{Arithmetic, Comparison, CompiledProgram, Fold, Node, Pattern, TextTest};
use crate::expressions::cost::SizeRule;
use crate::expressions::{Activation, LocalBudget};

/// How a compiled evaluation ended.
pub(in crate::expressions) enum Outcome {
    /// Its value.
    Value(cel::Value),
    /// It gave up: the interpreter decides.
    Interpret,
    /// `--cel-timeout` ran out (final: evaluating again would only take as long again).
    Cancelled(String),
}

/// Why an evaluation stopped (a cancellation's message is in [`Frame::cancelled`]).
enum Stop {
    Interpret,
    Cancelled,
}

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
    if matches!(range, Value::Json(serde_json::Value::Object(_))) {
        MAP_ORDER_OBSERVED.with(|observed| observed.set(true));
    }
}

/// Runs `program` against `activation`, charging `budget`.
pub(in crate::expressions) fn run(
    program: &CompiledProgram,
    activation: &Activation<'_>,
    budget: &mut LocalBudget,
) -> Outcome {
    MAP_ORDER_OBSERVED.with(|observed| observed.set(false));
    let mut frame = Frame {
        activation,
        locals: vec![Value::Null; program.locals],
        noted: Vec::new(),
        budget,
        cancelled: None,
    };
    let outcome = match frame.eval(&program.root) {
        Ok(value) => value.to_cel().map_or(Outcome::Interpret, Outcome::Value),
        Err(Stop::Interpret) => Outcome::Interpret,
        Err(Stop::Cancelled) => Outcome::Cancelled(frame.cancelled.take().unwrap_or_default()),
    };
    GAVE_UP.with(|gave_up| gave_up.set(matches!(outcome, Outcome::Interpret)));
    outcome
}

struct Frame<'r, 'a, 'b> {
    activation: &'r Activation<'a>,
    locals: Vec<Value<'r>>,
    /// The first operands' sizes of two-operand sized calls being evaluated, by site.
    noted: Vec<(i64, (u64, bool))>,
    budget: &'b mut LocalBudget,
    /// Why the evaluation was cancelled.
    cancelled: Option<String>,
}

fn boolean(value: Value<'_>) -> Step<bool> {
    match value {
        Value::Bool(b) => Ok(b),
        _ => Err(Stop::Interpret),
    }
}

impl<'r, 'a: 'r> Frame<'r, 'a, '_> {
    /// A charge refused: the deadline is final, anything else (the cost limit, the
    /// iteration budget) is left to the interpreter, which words it.
    fn refused(&mut self, error: cel::ExecutionError) -> Stop {
        match error {
            cel::ExecutionError::FunctionError { function, message }
                if function == "budget" && message.starts_with("deadline exceeded") =>
            {
                self.cancelled = Some(message);
                Stop::Cancelled
            }
            _ => Stop::Interpret,
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
                Value::Bool(b) => Ok(*b),
                _ => Err(Stop::Interpret),
            },
            Node::Has(operand, field) => match self.eval(operand)? {
                Value::Json(serde_json::Value::Object(fields)) => Ok(fields.contains_key(&**field)),
                Value::Optional(None) => Ok(false),
                Value::Optional(Some(inner)) => match &*inner {
                    Value::Json(serde_json::Value::Object(fields)) => {
                        Ok(fields.contains_key(&**field))
                    }
                    inner if inner.is_list() => Ok(false),
                    _ => Err(Stop::Interpret),
                },
                _ => Err(Stop::Interpret),
            },
            Node::HasValue(optional) => match self.eval(optional)? {
                Value::Optional(value) => Ok(value.is_some()),
                _ => Err(Stop::Interpret),
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
                    return Err(Stop::Interpret);
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
            Node::Bool(b) => Value::Bool(*b),
            Node::Int(i) => Value::Int(*i),
            Node::Uint(u) => Value::Uint(*u),
            Node::Double(d) => Value::Double(*d),
            Node::Text(text) => Value::Text(text),
            Node::Slot(slot) => match self.activation.slot_json(*slot) {
                Ok(Some(json)) => Value::from_json(json),
                Ok(None) => Value::Null,
                Err(()) => return Err(Stop::Interpret),
            },
            Node::Named(name) => match self.activation.named_json(name) {
                Some(json) => Value::from_json(json),
                None => return Err(Stop::Interpret),
            },
            Node::Local(position) => self.locals[*position].clone(),
            Node::Select(operand, fields) => {
                let mut value = self.eval(operand)?;
                for field in fields {
                    value = select(value, field)?;
                }
                value
            }
            Node::Has(..)
            | Node::And(..)
            | Node::Or(..)
            | Node::Not(..)
            | Node::NotStrictlyFalse(..)
            | Node::Compare(..)
            | Node::In(..)
            | Node::TextTest(..)
            | Node::Matches { .. } => Value::Bool(self.eval_bool(node)?),
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
            Node::OptionalOf(inner) => Value::Optional(Some(Rc::new(self.eval(inner)?))),
            Node::OptionalNone => Value::Optional(None),
            Node::OrValue(optional, otherwise) => {
                let otherwise = self.eval(otherwise)?;
                match self.eval(optional)? {
                    Value::Optional(Some(value)) => (*value).clone(),
                    Value::Optional(None) => otherwise,
                    _ => return Err(Stop::Interpret),
                }
            }
            Node::OptionalValue(optional) => match self.eval(optional)? {
                Value::Optional(Some(value)) => (*value).clone(),
                _ => return Err(Stop::Interpret),
            },
            Node::HasValue(..) => Value::Bool(self.eval_bool(node)?),
            Node::ToText(inner) => match self.eval(inner)? {
                text @ (Value::Text(_) | Value::OwnedText(_)) => text,
                Value::Int(i) => Value::OwnedText(i.to_string().into()),
                Value::Uint(u) => Value::OwnedText(u.to_string().into()),
                Value::Bool(b) => Value::Text(if b { "true" } else { "false" }),
                _ => return Err(Stop::Interpret),
            },
            Node::ToInt(inner) => match self.eval(inner)? {
                Value::Int(i) => Value::Int(i),
                Value::Uint(u) => Value::Int(i64::try_from(u).map_err(|_| Stop::Interpret)?),
                value => match value.text().map(str::parse::<i64>) {
                    Some(Ok(i)) => Value::Int(i),
                    _ => return Err(Stop::Interpret),
                },
            },
            Node::AsciiCase(lower, inner) => {
                let value = self.eval(inner)?;
                let text = value.text().ok_or(Stop::Interpret)?;
                Value::OwnedText(if *lower {
                    text.to_ascii_lowercase().into()
                } else {
                    text.to_ascii_uppercase().into()
                })
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
                Value::Int(i) => Value::Int(i.checked_neg().ok_or(Stop::Interpret)?),
                Value::Double(d) => Value::Double(-d),
                _ => return Err(Stop::Interpret),
            },
            Node::Size(operand) => {
                let value = self.eval(operand)?;
                let size = value.size().ok_or(Stop::Interpret)?;
                Value::Int(i64::try_from(size).map_err(|_| Stop::Interpret)?)
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
                Value::List(Rc::new(list))
            }
            Node::Fold(fold) => self.fold(fold)?,
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
            return Err(Stop::Interpret);
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
                    return Err(Stop::Interpret);
                };
                self.charge_cost(text_units * (pattern.chars().count() as u64).div_ceil(4))?;
                crate::expressions::library::cached_regex_match(pattern, text)
                    .ok_or(Stop::Interpret)
            }
            (Pattern::Computed(_), None) => Err(Stop::Interpret),
        }
    }

    fn charge_sized(&mut self, site: i64, rule: SizeRule, value: &Value<'r>) -> Step<()> {
        let size = value.size();
        let textlike = match rule {
            SizeRule::InList => value.is_list(),
            _ => value.text().is_some(),
        };
        let operand = (size.unwrap_or(1), textlike);
        match rule {
            SizeRule::Note => {
                match self.noted.iter_mut().find(|(s, _)| *s == site) {
                    Some(entry) => entry.1 = operand,
                    None => self.noted.push((site, operand)),
                }
                Ok(())
            }
            SizeRule::InList | SizeRule::Text | SizeRule::TextTwice => {
                self.charge_cost(rule.units((0, false), operand))
            }
            SizeRule::Traversal
            | SizeRule::ContainsIp
            | SizeRule::ContainsIpString
            | SizeRule::ContainsCidr
            | SizeRule::ContainsCidrString => Err(Stop::Interpret),
            SizeRule::Min | SizeRule::MinOfText | SizeRule::SumOfText | SizeRule::Product => {
                match self.noted.iter().position(|(s, _)| *s == site) {
                    Some(at) => {
                        let first = self.noted.swap_remove(at).1;
                        self.charge_cost(rule.units(first, operand))
                    }
                    None => Ok(()),
                }
            }
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
            self.locals[fold.item] = item;
            let accumulated = self.eval(&fold.step)?;
            self.locals[fold.accumulator] = accumulated;
        }
        let result = self.eval(&fold.result)?;
        self.locals[fold.accumulator] = Value::Null;
        self.locals[fold.item] = Value::Null;
        Ok(result)
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
            self.locals[fold.item] = element;
            if let Some(guard) = guard
                && !self.eval_bool(guard)?
            {
                continue;
            }
            match self.eval(items)? {
                Value::List(list) => accumulated.extend(list.iter().cloned()),
                _ => return Err(Stop::Interpret),
            }
        }
        self.locals[fold.item] = Value::Null;
        Ok(Value::List(Rc::new(accumulated)))
    }
}

/// `value.field`: a map's member, the member of an optional map as an optional.
fn select<'r>(value: Value<'r>, field: &str) -> Step<Value<'r>> {
    match value {
        Value::Json(serde_json::Value::Object(members)) => members
            .get(field)
            .map(Value::from_json)
            .ok_or(Stop::Interpret),
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) => match &*inner {
            Value::Json(serde_json::Value::Object(_)) => Ok(optional_field(&inner, field)),
            inner if inner.is_list() => Ok(Value::Optional(None)),
            _ => Err(Stop::Interpret),
        },
        _ => Err(Stop::Interpret),
    }
}

/// `value.?field`: the member as an optional, none for anything but a map holding it.
fn optional_field<'r>(value: &Value<'r>, field: &str) -> Value<'r> {
    Value::Optional(match value {
        Value::Json(serde_json::Value::Object(members)) => members
            .get(field)
            .map(|member| Rc::new(Value::from_json(member))),
        _ => None,
    })
}

/// `value[?index]` (or an index into an optional): the item as an optional, none where
/// there is none. Only the lookups whose failure is certainly a missing item are decided.
fn optional_index<'r>(value: &Value<'r>, index: &Value<'r>) -> Step<Option<Rc<Value<'r>>>> {
    match (value, index) {
        (Value::Json(serde_json::Value::Object(members)), Value::Text(_) | Value::OwnedText(_)) => {
            Ok(members
                .get(index.text().unwrap_or_default())
                .map(|member| Rc::new(Value::from_json(member))))
        }
        (Value::Json(serde_json::Value::Array(_)) | Value::List(_), Value::Int(_)) => {
            Ok(index_into(value, index).ok().map(Rc::new))
        }
        _ => Err(Stop::Interpret),
    }
}

fn index_into<'r>(operand: &Value<'r>, index: &Value<'r>) -> Step<Value<'r>> {
    match (operand, index) {
        (Value::Json(serde_json::Value::Object(fields)), _) => {
            let key = index.text().ok_or(Stop::Interpret)?;
            fields.get(key).map(Value::from_json).ok_or(Stop::Interpret)
        }
        (Value::Json(serde_json::Value::Array(items)), Value::Int(i)) => usize::try_from(*i)
            .ok()
            .and_then(|i| items.get(i))
            .map(Value::from_json)
            .ok_or(Stop::Interpret),
        (Value::List(items), Value::Int(i)) => usize::try_from(*i)
            .ok()
            .and_then(|i| items.get(i))
            .cloned()
            .ok_or(Stop::Interpret),
        _ => Err(Stop::Interpret),
    }
}

fn compare(comparison: Comparison, left: &Value<'_>, right: &Value<'_>) -> Step<bool> {
    if let Comparison::Equal | Comparison::NotEqual = comparison {
        let equal = left.equals(right).ok_or(Stop::Interpret)?;
        return Ok(equal == (comparison == Comparison::Equal));
    }
    let numbers =
        |value: &Value<'_>| matches!(value, Value::Int(_) | Value::Uint(_) | Value::Double(_));
    let ordering = match (left, right) {
        _ if numbers(left) && numbers(right) => {
            super::value::numeric_order(left, right).ok_or(Stop::Interpret)?
        }
        _ => match (left.text(), right.text()) {
            (Some(a), Some(b)) => a.cmp(b),
            _ => return Err(Stop::Interpret),
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
        (Add, Value::Int(a), Value::Int(b)) => {
            Value::Int(a.checked_add(*b).ok_or(Stop::Interpret)?)
        }
        (Subtract, Value::Int(a), Value::Int(b)) => {
            Value::Int(a.checked_sub(*b).ok_or(Stop::Interpret)?)
        }
        (Multiply, Value::Int(a), Value::Int(b)) => {
            Value::Int(a.checked_mul(*b).ok_or(Stop::Interpret)?)
        }
        (Divide, Value::Int(a), Value::Int(b)) => {
            Value::Int(a.checked_div(*b).ok_or(Stop::Interpret)?)
        }
        (Modulo, Value::Int(a), Value::Int(b)) => {
            Value::Int(a.checked_rem(*b).ok_or(Stop::Interpret)?)
        }
        (Add, Value::Uint(a), Value::Uint(b)) => {
            Value::Uint(a.checked_add(*b).ok_or(Stop::Interpret)?)
        }
        (Subtract, Value::Uint(a), Value::Uint(b)) => {
            Value::Uint(a.checked_sub(*b).ok_or(Stop::Interpret)?)
        }
        (Multiply, Value::Uint(a), Value::Uint(b)) => {
            Value::Uint(a.checked_mul(*b).ok_or(Stop::Interpret)?)
        }
        (Divide, Value::Uint(a), Value::Uint(b)) => {
            Value::Uint(a.checked_div(*b).ok_or(Stop::Interpret)?)
        }
        (Modulo, Value::Uint(a), Value::Uint(b)) => {
            Value::Uint(a.checked_rem(*b).ok_or(Stop::Interpret)?)
        }
        (Add, Value::Double(a), Value::Double(b)) => Value::Double(a + b),
        (Subtract, Value::Double(a), Value::Double(b)) => Value::Double(a - b),
        (Multiply, Value::Double(a), Value::Double(b)) => Value::Double(a * b),
        (Add, _, _) if left.text().is_some() && right.text().is_some() => {
            let (a, b) = (
                left.text().unwrap_or_default(),
                right.text().unwrap_or_default(),
            );
            let mut joined = String::with_capacity(a.len() + b.len());
            joined.push_str(a);
            joined.push_str(b);
            Value::OwnedText(joined.into())
        }
        (Add, _, _) if left.is_list() && right.is_list() => {
            let mut joined: Vec<Value<'r>> = left.list_items().ok_or(Stop::Interpret)?.collect();
            joined.extend(right.list_items().ok_or(Stop::Interpret)?);
            Value::List(Rc::new(joined))
        }
        _ => return Err(Stop::Interpret),
    })
}

fn contains(container: &Value<'_>, element: &Value<'_>) -> Step<bool> {
    match container {
        Value::Json(serde_json::Value::Object(fields)) => {
            let key = element.text().ok_or(Stop::Interpret)?;
            Ok(fields.contains_key(key))
        }
        _ => {
            let items = container.list_items().ok_or(Stop::Interpret)?;
            for item in items {
                if item.equals(element).ok_or(Stop::Interpret)? {
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
    Json(std::slice::Iter<'r, serde_json::Value>),
    Built(Rc<Vec<Value<'r>>>, usize),
}

impl<'r> FoldItems<'r> {
    fn of(range: &Value<'r>) -> Step<Self> {
        Ok(match range {
            Value::Json(serde_json::Value::Object(fields)) => FoldItems::Keys(fields.keys()),
            Value::Json(serde_json::Value::Array(items)) => FoldItems::Json(items.iter()),
            Value::List(items) => FoldItems::Built(Rc::clone(items), 0),
            _ => return Err(Stop::Interpret),
        })
    }
}

impl<'r> Iterator for FoldItems<'r> {
    type Item = Value<'r>;

    fn next(&mut self) -> Option<Value<'r>> {
        match self {
            FoldItems::Keys(keys) => keys.next().map(|key| Value::Text(key)),
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
            FoldItems::Json(items) => items.len(),
            FoldItems::Built(items, next) => items.len().saturating_sub(*next),
        };
        (left, Some(left))
    }
}
