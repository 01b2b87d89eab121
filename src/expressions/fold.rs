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

use super::ast_walk::{visit_children, visit_children_mut};
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
