//! The constant folding cel-go's planner does under the option Kubernetes compiles with
//! (`cel.OptOptimize`), where it changes an answer:
//!
//! - `x in []` (membership in a constant empty list) is planned as `false`: `x` is never
//!   evaluated, so an error in it (`no such key`) does not surface;
//! - a type conversion (`int`, `string`, `dyn`, `timestamp`, …) of a constant is evaluated when
//!   the program is made, and one that fails refuses the expression at create (`program
//!   instantiation failed: type conversion error from 'string' to 'int'`). A constant is a
//!   literal, a list or map literal of constants, or a conversion of a constant, as cel-go's
//!   decorators fold them bottom-up;
//! - a literal pattern given to `find` or `findAll` is compiled when the program is made
//!   (Kubernetes' regex optimizations), and one Go's `regexp` refuses refuses the expression
//!   (`program instantiation failed: error parsing regexp: missing closing ): `(``).
//!
//! Costs already follow the folding (a folded constant costs nothing, `cost.rs`).

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};

use super::cost::CONVERSIONS;

/// Replaces every `x in <constant empty list>` of `expr` with `false`.
pub(super) fn fold_empty_membership(expr: &mut IdedExpr) {
    visit_children_mut(expr, fold_empty_membership);
    if let Expr::Call(call) = &expr.expr
        && call.func_name == operators::IN
        && call.target.is_none()
        && call.args.len() == 2
        && is_empty_constant_list(&call.args[1])
    {
        expr.expr = Expr::Literal(LiteralValue::Boolean(false.into()));
    }
}

fn is_empty_constant_list(expr: &IdedExpr) -> bool {
    match &expr.expr {
        Expr::List(list) => list.elements.is_empty(),
        Expr::Call(call) if call.func_name == "dyn" && call.target.is_none() => {
            matches!(call.args.as_slice(), [argument] if is_empty_constant_list(argument))
        }
        _ => false,
    }
}

/// The first part of `expr` that cel-go fails to plan (in its planning order: children first,
/// left to right): a conversion of a constant whose evaluation with `evaluate` fails, or a
/// `find`/`findAll` whose literal pattern does not compile; with its error.
pub(super) fn first_instantiation_error(
    expr: &IdedExpr,
    evaluate: &dyn Fn(&IdedExpr) -> Result<(), String>,
) -> Option<String> {
    let mut failure = None;
    constant(expr, evaluate, &mut failure);
    failure
}

/// Whether `expr` is a constant after folding, recording the first failing conversion.
fn constant(
    expr: &IdedExpr,
    evaluate: &dyn Fn(&IdedExpr) -> Result<(), String>,
    failure: &mut Option<String>,
) -> bool {
    let mut children_constant = true;
    visit_children(expr, &mut |child| {
        let is_constant = constant(child, evaluate, failure);
        children_constant &= is_constant;
    });
    if failure.is_some() {
        return false;
    }
    match &expr.expr {
        Expr::Literal(_) => true,
        Expr::List(list) => children_constant && list.optional_indices.is_empty(),
        Expr::Map(map) => {
            children_constant
                && map
                    .entries
                    .iter()
                    .all(|entry| matches!(&entry.expr, EntryExpr::MapEntry(e) if !e.optional))
        }
        Expr::Call(call)
            if call.target.is_some() && matches!(call.func_name.as_str(), "find" | "findAll") =>
        {
            if let Some(Expr::Literal(LiteralValue::String(pattern))) =
                call.args.first().map(|a| &a.expr)
                && let Err(error) = super::library::compile_as_go(pattern)
            {
                *failure = Some(error);
            }
            false
        }
        Expr::Call(call)
            if call.target.is_none()
                && call.args.len() == 1
                && children_constant
                && CONVERSIONS.contains(&call.func_name.as_str()) =>
        {
            match evaluate(expr) {
                Ok(()) => true,
                Err(error) => {
                    *failure = Some(error);
                    false
                }
            }
        }
        _ => false,
    }
}

fn visit_children<'e>(expr: &'e IdedExpr, visit: &mut dyn FnMut(&'e IdedExpr)) {
    match &expr.expr {
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                visit(target);
            }
            call.args.iter().for_each(visit);
        }
        Expr::Select(select) => visit(&select.operand),
        Expr::List(list) => list.elements.iter().for_each(visit),
        Expr::Map(map) => {
            for entry in &map.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(e) => {
                        visit(&e.key);
                        visit(&e.value);
                    }
                    EntryExpr::StructField(f) => visit(&f.value),
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(e) => {
                        visit(&e.key);
                        visit(&e.value);
                    }
                    EntryExpr::StructField(f) => visit(&f.value),
                }
            }
        }
        Expr::Comprehension(c) => {
            for e in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                visit(e);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn visit_children_mut(expr: &mut IdedExpr, visit: fn(&mut IdedExpr)) {
    match &mut expr.expr {
        Expr::Call(call) => {
            if let Some(target) = call.target.as_deref_mut() {
                visit(target);
            }
            call.args.iter_mut().for_each(visit);
        }
        Expr::Select(select) => visit(&mut select.operand),
        Expr::List(list) => list.elements.iter_mut().for_each(visit),
        Expr::Map(map) => {
            for entry in &mut map.entries {
                match &mut entry.expr {
                    EntryExpr::MapEntry(e) => {
                        visit(&mut e.key);
                        visit(&mut e.value);
                    }
                    EntryExpr::StructField(f) => visit(&mut f.value),
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &mut s.entries {
                match &mut entry.expr {
                    EntryExpr::MapEntry(e) => {
                        visit(&mut e.key);
                        visit(&mut e.value);
                    }
                    EntryExpr::StructField(f) => visit(&mut f.value),
                }
            }
        }
        Expr::Comprehension(c) => {
            for e in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                visit(e);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}
