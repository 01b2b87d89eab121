//! From the instrumented syntax tree to [`Node`]s, or `None` when the expression uses anything
//! the compiled evaluator does not cover.

use std::sync::Arc;

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators,
};

use super::{
    Arithmetic, Comparison, CompiledProgram, Fold, InterpretedPart, Node, Pattern, Quantifier,
    TextTest,
};
use crate::expressions::activation::SLOTS;
use crate::expressions::cost::{
    CHARGED_BY_IMPLEMENTATION, COST_FUNCTION, SIZED_FUNCTION, SizeRule,
};

/// Names the interpreter resolves specially: not compiled.
const SPECIAL_NAMES: &[&str] = &["variables", "authorizer"];

/// Compiles `expr` (instrumented), or `None` if some part of it is not covered; library calls
/// are evaluated in `env`.
pub(in crate::expressions) fn compile(
    expr: &IdedExpr,
    env: &Arc<cel::Env>,
) -> Option<CompiledProgram> {
    let mut compiler = Compiler {
        scope: Vec::new(),
        locals: 0,
        env,
    };
    let mut root = compiler.node(expr)?;
    let memos = super::memo::memoize(&mut root, compiler.locals);
    Some(CompiledProgram {
        root,
        locals: compiler.locals,
        memos,
    })
}

struct Compiler<'e> {
    /// Comprehension variables in scope, innermost last.
    scope: Vec<(&'e str, usize)>,
    locals: usize,
    env: &'e Arc<cel::Env>,
}

fn boxed(node: Node) -> Box<Node> {
    Box::new(node)
}

fn int_literal(expr: &IdedExpr) -> Option<i64> {
    match &expr.expr {
        Expr::Literal(LiteralValue::Int(i)) => Some(*i.inner()),
        _ => None,
    }
}

impl<'e> Compiler<'e> {
    fn node(&mut self, expr: &'e IdedExpr) -> Option<Node> {
        Some(match &expr.expr {
            Expr::Literal(literal) => match literal {
                LiteralValue::Null => Node::Null,
                LiteralValue::Boolean(b) => Node::Bool(*b.inner()),
                LiteralValue::Int(i) => Node::Int(*i.inner()),
                LiteralValue::UInt(u) => Node::Uint(*u.inner()),
                LiteralValue::Double(d) => Node::Double(*d.inner()),
                LiteralValue::String(s) => Node::Text(s.inner().to_owned()),
                LiteralValue::Bytes(_) => return None,
            },
            Expr::Ident(name) => self.ident(name)?,
            Expr::Select(select) => {
                if !select.test && self.names(&select.operand, "variables") {
                    return Some(Node::Variable(select.field.as_str().into()));
                }
                if matches!(&select.operand.expr, Expr::Ident(root)
                    if SPECIAL_NAMES.contains(&root.as_str()) && self.local(root).is_none())
                {
                    return None;
                }
                let operand = self.node(&select.operand)?;
                let field: Box<str> = select.field.as_str().into();
                match operand {
                    _ if select.test => Node::Has(boxed(operand), field),
                    Node::Select(base, fields) => {
                        let mut fields = fields.into_vec();
                        fields.push(field);
                        Node::Select(base, fields.into_boxed_slice())
                    }
                    operand => Node::Select(boxed(operand), Box::new([field])),
                }
            }
            Expr::List(list) => {
                if !list.optional_indices.is_empty() {
                    return None;
                }
                Node::List(
                    list.elements
                        .iter()
                        .map(|e| self.node(e))
                        .collect::<Option<_>>()?,
                )
            }
            Expr::Comprehension(comprehension) => self.fold(comprehension)?,
            Expr::Call(call) => {
                let name = call.func_name.as_str();
                let args = call.args.as_slice();
                match (call.target.as_deref(), name, args) {
                    (None, COST_FUNCTION, [units, inner]) => Node::Cost(
                        u64::try_from(int_literal(units)?).ok()?,
                        boxed(self.node(inner)?),
                    ),
                    (None, SIZED_FUNCTION, [site, rule, inner]) => {
                        let rule = SizeRule::from_code(int_literal(rule)?)?;
                        Node::Sized(int_literal(site)?, rule, boxed(self.node(inner)?))
                    }
                    (None, "@budget", [inner]) => Node::Budget(boxed(self.node(inner)?)),
                    (None, operators::NOT_STRICTLY_FALSE, [inner]) => {
                        Node::NotStrictlyFalse(boxed(self.node(inner)?))
                    }
                    (None, operators::LOGICAL_AND, [a, b]) => {
                        Node::And(boxed(self.node(a)?), boxed(self.node(b)?))
                    }
                    (None, operators::LOGICAL_OR, [a, b]) => {
                        Node::Or(boxed(self.node(a)?), boxed(self.node(b)?))
                    }
                    (None, operators::LOGICAL_NOT, [a]) => Node::Not(boxed(self.node(a)?)),
                    (None, operators::NEGATE, [a]) => Node::Negate(boxed(self.node(a)?)),
                    (None, operators::CONDITIONAL, [c, a, b]) => {
                        Node::Conditional(Box::new([self.node(c)?, self.node(a)?, self.node(b)?]))
                    }
                    (None, operators::INDEX, [a, b]) => {
                        Node::Index(boxed(self.node(a)?), boxed(self.node(b)?))
                    }
                    (None, operators::IN, [a, b]) => {
                        Node::In(boxed(self.node(a)?), boxed(self.node(b)?))
                    }
                    (None, _, [a, b]) if comparison(name).is_some() => Node::Compare(
                        comparison(name)?,
                        boxed(self.node(a)?),
                        boxed(self.node(b)?),
                    ),
                    (None, _, [a, b]) if arithmetic(name).is_some() => Node::Arithmetic(
                        arithmetic(name)?,
                        boxed(self.node(a)?),
                        boxed(self.node(b)?),
                    ),
                    (None, "size", [a]) => Node::Size(boxed(self.node(a)?)),
                    (Some(target), "size", []) if !self.is_namespace(target) => {
                        Node::Size(boxed(self.node(target)?))
                    }
                    (Some(target), "startsWith" | "endsWith" | "contains", [argument])
                        if !self.is_namespace(target) =>
                    {
                        let test = match name {
                            "startsWith" => TextTest::StartsWith,
                            "endsWith" => TextTest::EndsWith,
                            _ => TextTest::Contains,
                        };
                        // The interpreter evaluates the argument, then the receiver.
                        let argument = boxed(self.node(argument)?);
                        Node::TextTest(test, boxed(self.node(target)?), argument)
                    }
                    (None, "@matches", [text, pattern]) => {
                        let text = boxed(self.node(text)?);
                        Node::Matches {
                            text,
                            pattern: self.pattern(pattern)?,
                            pattern_first: false,
                        }
                    }
                    (Some(text), "@matches", [pattern]) if !self.is_namespace(text) => {
                        let pattern = self.pattern(pattern)?;
                        Node::Matches {
                            text: boxed(self.node(text)?),
                            pattern,
                            pattern_first: true,
                        }
                    }
                    (None, operators::OPT_INDEX, [a, b]) => {
                        Node::OptionalIndex(boxed(self.node(a)?), boxed(self.node(b)?))
                    }
                    (None, operators::OPT_SELECT, [a, field]) => match &field.expr {
                        Expr::Literal(LiteralValue::String(field)) => {
                            Node::OptionalSelect(boxed(self.node(a)?), field.inner().into())
                        }
                        _ => return None,
                    },
                    (Some(target), "of", [x]) if self.names(target, "optional") => {
                        Node::OptionalOf(boxed(self.node(x)?))
                    }
                    (Some(target), "none", []) if self.names(target, "optional") => {
                        Node::OptionalNone
                    }
                    (Some(target), "orValue", [x]) if !self.is_namespace(target) => {
                        let x = boxed(self.node(x)?);
                        Node::OrValue(boxed(self.node(target)?), x)
                    }
                    (Some(target), "hasValue", []) if !self.is_namespace(target) => {
                        Node::HasValue(boxed(self.node(target)?))
                    }
                    (Some(target), "value", []) if !self.is_namespace(target) => {
                        Node::OptionalValue(boxed(self.node(target)?))
                    }
                    (None, "string", [x]) => Node::ToText(boxed(self.node(x)?)),
                    (None, "int", [x]) => Node::ToInt(boxed(self.node(x)?)),
                    (Some(target), "lowerAscii" | "upperAscii", [])
                        if !self.is_namespace(target) =>
                    {
                        Node::AsciiCase(name == "lowerAscii", boxed(self.node(target)?))
                    }
                    _ => self.library_call(expr.id, call)?,
                }
            }
            Expr::Map(_) | Expr::Struct(_) => self.literal(expr)?,
            Expr::Unspecified => return None,
        })
    }

    /// A library call evaluated by the interpreter on operands compiled here;
    /// `None` for the calls that charge cost from inside their implementations (they charge the
    /// interpreter's budget) and for the evaluator's own plumbing (`@…`).
    fn library_call(&mut self, id: u64, call: &'e CallExpr) -> Option<Node> {
        let name = call.func_name.as_str();
        if name.starts_with('@') || CHARGED_BY_IMPLEMENTATION.contains(&name) {
            return None;
        }
        let mut operands = Vec::with_capacity(call.args.len() + 1);
        // The interpreter evaluates the arguments, then the receiver.
        let args = call
            .args
            .iter()
            .map(|arg| self.operand(&mut operands, arg))
            .collect::<Option<Vec<_>>>()?;
        let target = match call.target.as_deref() {
            None => None,
            Some(target)
                if self.is_namespace(target) || self.is_function_namespace(target, name) =>
            {
                Some(Box::new(target.clone()))
            }
            Some(target) => Some(Box::new(self.operand(&mut operands, target)?)),
        };
        let call = IdedExpr {
            id,
            expr: Expr::Call(CallExpr {
                func_name: call.func_name.clone(),
                target,
                args,
            }),
        };
        Some(self.interpreted(call, operands))
    }

    /// A map or message literal (`{k: v}`, `Object{spec: …}`) built by the interpreter from
    /// its keys and values, evaluated here; `None` with an optional entry (`?k: v`).
    fn literal(&mut self, expr: &'e IdedExpr) -> Option<Node> {
        let mut operands = Vec::new();
        let mut rebuilt = expr.clone();
        match (&expr.expr, &mut rebuilt.expr) {
            (Expr::Map(map), Expr::Map(into)) => {
                for (entry, into) in map.entries.iter().zip(&mut into.entries) {
                    let (EntryExpr::MapEntry(entry), EntryExpr::MapEntry(into)) =
                        (&entry.expr, &mut into.expr)
                    else {
                        return None;
                    };
                    if entry.optional {
                        return None;
                    }
                    into.key = self.operand(&mut operands, &entry.key)?;
                    into.value = self.operand(&mut operands, &entry.value)?;
                }
            }
            (Expr::Struct(message), Expr::Struct(into)) => {
                for (entry, into) in message.entries.iter().zip(&mut into.entries) {
                    let (EntryExpr::StructField(field), EntryExpr::StructField(into)) =
                        (&entry.expr, &mut into.expr)
                    else {
                        return None;
                    };
                    if field.optional {
                        return None;
                    }
                    into.value = self.operand(&mut operands, &field.value)?;
                }
            }
            _ => return None,
        }
        Some(self.interpreted(rebuilt, operands))
    }

    /// An operand of an interpreted call or literal: a constant stays in place; anything else
    /// is compiled into `operands` and replaced by its placeholder.
    fn operand(&mut self, operands: &mut Vec<Node>, part: &'e IdedExpr) -> Option<IdedExpr> {
        if matches!(part.expr, Expr::Literal(_)) {
            return Some(part.clone());
        }
        let node = self.node(part)?;
        let placeholder = Expr::Ident(InterpretedPart::operand_name(operands.len()));
        operands.push(node);
        Some(IdedExpr {
            id: part.id,
            expr: placeholder,
        })
    }

    fn interpreted(&self, call: IdedExpr, operands: Vec<Node>) -> Node {
        Node::Interpreted(Box::new(InterpretedPart {
            call,
            operands,
            env: Arc::clone(self.env),
        }))
    }

    /// A receiver naming the namespace of a Kubernetes library function (`ip.isCanonical`).
    fn is_function_namespace(&self, target: &IdedExpr, function: &str) -> bool {
        self.names(target, "ip") && function == "isCanonical"
    }

    fn local(&self, name: &str) -> Option<usize> {
        self.scope
            .iter()
            .rev()
            .find(|(bound, _)| *bound == name)
            .map(|(_, position)| *position)
    }

    fn ident(&self, name: &str) -> Option<Node> {
        if let Some(position) = self.local(name) {
            return Some(Node::Local(position));
        }
        if let Some(slot) = SLOTS.iter().position(|slot| *slot == name) {
            return Some(Node::Slot(slot));
        }
        if SPECIAL_NAMES.contains(&name)
            || name.starts_with('@')
            || crate::expressions::check::TYPE_NAMES.contains(&name)
        {
            return None;
        }
        Some(Node::Named(name.into()))
    }

    /// Whether `target` is the free name `name` (a namespace such as `optional`).
    fn names(&self, target: &IdedExpr, name: &str) -> bool {
        matches!(&target.expr, Expr::Ident(ident) if ident == name && self.local(name).is_none())
    }

    /// A receiver naming a function namespace (`strings.quote(…)`), not a value.
    fn is_namespace(&self, target: &IdedExpr) -> bool {
        matches!(&target.expr, Expr::Ident(name)
            if self.local(name).is_none()
                && !SLOTS.contains(&name.as_str())
                && matches!(name.as_str(), "jsonpatch" | "strings" | "lists" | "optional" | "sets" | "math" | "base64" | "format"))
    }

    fn pattern(&mut self, pattern: &'e IdedExpr) -> Option<Pattern> {
        if let Expr::Literal(LiteralValue::String(text)) = &pattern.expr {
            // A pattern that does not compile fails at evaluation: the interpreter words it.
            if let Ok(regex) = crate::expressions::library::compile_as_go(text.inner()) {
                let units = (text.inner().chars().count() as u64).div_ceil(4);
                return Some(Pattern::Constant(regex, units));
            }
        }
        Some(Pattern::Computed(boxed(self.node(pattern)?)))
    }

    fn fold(&mut self, c: &'e ComprehensionExpr) -> Option<Node> {
        if c.iter_var2.is_some() || c.iter_var == "#unused" {
            return None;
        }
        // The interpreter evaluates the initial value, then the range, outside the scope.
        let init = self.node(&c.accu_init)?;
        let range = self.node(&c.iter_range)?;
        let item = self.locals;
        let accumulator = self.locals + 1;
        self.locals += 2;
        let depth = self.scope.len();
        self.scope.push((&c.accu_var, accumulator));
        let condition = self.node(&c.loop_cond)?;
        self.scope.push((&c.iter_var, item));
        let step = self.node(&c.loop_step)?;
        let append = self.append_step(c)?;
        self.scope.truncate(depth + 1);
        let result = self.node(&c.result)?;
        self.scope.truncate(depth);
        let fold = Fold {
            range,
            init,
            item,
            accumulator,
            condition,
            step,
            result,
            append,
        };
        Some(if c.accu_var == MACRO_ACCUMULATOR {
            quantifier(fold)
        } else {
            Node::Fold(Box::new(fold))
        })
    }

    /// The interpreter's `AppendStep`: a result that is the accumulator, a constant
    /// condition, and a step `accu + [x]` or `guard ? accu + [x] : accu`. `Some(None)` when
    /// the comprehension is not of that shape; `None` when a part is not covered.
    #[allow(clippy::option_option)]
    fn append_step(&mut self, c: &'e ComprehensionExpr) -> Option<Option<(Option<Node>, Node)>> {
        let accu = c.accu_var.as_str();
        let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(name) if name == accu);
        let items_of = |e: &'e IdedExpr| match &e.expr {
            Expr::Call(call) if call.func_name == operators::ADD && call.target.is_none() => {
                match call.args.as_slice() {
                    [lhs, rhs] if is_accu(lhs) && matches!(rhs.expr, Expr::List(_)) => Some(rhs),
                    _ => None,
                }
            }
            _ => None,
        };
        if !is_accu(&c.result) || !matches!(c.loop_cond.expr, Expr::Literal(_)) {
            return Some(None);
        }
        let (guard, items) = match &c.loop_step.expr {
            Expr::Call(call)
                if call.func_name == operators::CONDITIONAL && call.target.is_none() =>
            {
                match call.args.as_slice() {
                    [guard, step, otherwise] if is_accu(otherwise) => match items_of(step) {
                        Some(items) => (Some(guard), items),
                        None => return Some(None),
                    },
                    _ => return Some(None),
                }
            }
            _ => match items_of(&c.loop_step) {
                Some(items) => (None, items),
                None => return Some(None),
            },
        };
        let guard = match guard {
            Some(guard) => Some(self.node(guard)?),
            None => None,
        };
        Some(Some((guard, self.node(items)?)))
    }
}

/// The accumulator of the comprehensions the parser's macros expand to (a name no
/// expression can spell, so only the macro's own steps read it).
const MACRO_ACCUMULATOR: &str = "@result";

/// `all` and `exists` as a [`Quantifier`], the other comprehensions as they are. The
/// macros expand to an accumulator starting `true` (`all`) or `false`, a condition that
/// stops once it flips (`@not_strictly_false(acc)`, `@not_strictly_false(!acc)`) and a step
/// `acc && p` or `acc || p`; the instrumentation wraps the condition in its cost and charges
/// the step's on the connective's identity before `p` (`acc || (@cost(n, false) || p)`).
fn quantifier(fold: Fold) -> Node {
    let accumulator = fold.accumulator;
    let is_accumulator = |node: &Node| matches!(node, Node::Local(at) if *at == accumulator);
    let peel_cost = |node: Node| match node {
        Node::Cost(units, inner) => (Some(units), *inner),
        node => (None, node),
    };
    let Node::Bool(every) = fold.init else {
        return Node::Fold(Box::new(fold));
    };
    let continues = match &fold.condition {
        Node::Cost(_, inner) => &**inner,
        condition => condition,
    };
    let condition_shape = match continues {
        Node::NotStrictlyFalse(operand) if every => is_accumulator(operand),
        Node::NotStrictlyFalse(operand) => {
            matches!(&**operand, Node::Not(inner) if is_accumulator(inner))
        }
        _ => false,
    };
    let step = match &fold.step {
        Node::Cost(_, inner) => &**inner,
        step => step,
    };
    let step_shape = match step {
        Node::And(left, _) if every => is_accumulator(left),
        Node::Or(left, _) if !every => is_accumulator(left),
        _ => false,
    };
    if !condition_shape || !step_shape || !is_accumulator(&fold.result) || fold.append.is_some() {
        return Node::Fold(Box::new(fold));
    }
    let (condition_units, _) = peel_cost(fold.condition);
    let (step_units, step) = peel_cost(fold.step);
    let (Node::And(_, predicate) | Node::Or(_, predicate)) = step else {
        unreachable!("the step's shape was checked above");
    };
    // The step's charge, on the connective's identity before the predicate.
    let charged_first = |charge: &Node| matches!(charge, Node::Cost(_, identity) if matches!(**identity, Node::Bool(b) if b == every));
    let (step_units, predicate) = match *predicate {
        Node::And(charge, predicate) | Node::Or(charge, predicate)
            if step_units.is_none() && charged_first(&charge) =>
        {
            let Node::Cost(units, _) = *charge else {
                unreachable!("the charge's shape was checked above");
            };
            (Some(units), *predicate)
        }
        predicate => (step_units, predicate),
    };
    Node::Quantifier(Box::new(Quantifier {
        range: fold.range,
        item: fold.item,
        every,
        condition_units,
        step_units,
        predicate,
    }))
}

fn comparison(name: &str) -> Option<Comparison> {
    Some(match name {
        operators::EQUALS => Comparison::Equal,
        operators::NOT_EQUALS => Comparison::NotEqual,
        operators::LESS => Comparison::Less,
        operators::LESS_EQUALS => Comparison::LessOrEqual,
        operators::GREATER => Comparison::Greater,
        operators::GREATER_EQUALS => Comparison::GreaterOrEqual,
        _ => return None,
    })
}

fn arithmetic(name: &str) -> Option<Arithmetic> {
    Some(match name {
        operators::ADD => Arithmetic::Add,
        operators::SUBSTRACT => Arithmetic::Subtract,
        operators::MULTIPLY => Arithmetic::Multiply,
        operators::DIVIDE => Arithmetic::Divide,
        operators::MODULO => Arithmetic::Modulo,
        _ => return None,
    })
}
