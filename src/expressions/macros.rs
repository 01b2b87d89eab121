//! Macros the `cel` crate lacks: `cel.bind`, the two-variable comprehensions
//! (`all`, `exists`, `existsOne`, `transformList`, `transformMap`, `transformMapEntry`) over
//! `(index, value)` of a list or `(key, value)` of a map.
//!
//! The interpreter of `cel` 0.15 iterates one variable only (a map yields its keys), so a
//! two-variable comprehension iterates `@pairs(range)`, a list of `[i, v]` / `[k, v]` pairs,
//! and binds both names from each pair.

use cel::Env;
use cel::common::ast::{
    CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue, operators,
};
use cel::parser::{Macro, MacroExprHelper, ParseError};

const RESULT: &str = "@result";
/// The iteration variable of a two-variable comprehension's expansion: a `[first, second]`
/// pair of `@pairs(range)`.
pub(super) const PAIR: &str = "@it";
/// The function that lists a range's pairs.
pub(super) const PAIRS: &str = "@pairs";

pub(super) fn register(env: &mut Env) {
    let macros = [
        Macro::receiver("all", 3, |h, t, a| two_var(h, t, a, Fold::All)),
        Macro::receiver("exists", 3, |h, t, a| two_var(h, t, a, Fold::Exists)),
        Macro::receiver("existsOne", 3, |h, t, a| two_var(h, t, a, Fold::ExistsOne)),
        Macro::receiver("exists_one", 3, |h, t, a| two_var(h, t, a, Fold::ExistsOne)),
        Macro::receiver("transformList", 3, |h, t, a| {
            two_var(h, t, a, Fold::TransformList)
        }),
        Macro::receiver("transformList", 4, |h, t, a| {
            two_var(h, t, a, Fold::TransformList)
        }),
        Macro::receiver("transformMap", 3, |h, t, a| {
            two_var(h, t, a, Fold::TransformMap)
        }),
        Macro::receiver("transformMap", 4, |h, t, a| {
            two_var(h, t, a, Fold::TransformMap)
        }),
        Macro::receiver("transformMapEntry", 3, |h, t, a| {
            two_var(h, t, a, Fold::TransformMapEntry)
        }),
        Macro::receiver("transformMapEntry", 4, |h, t, a| {
            two_var(h, t, a, Fold::TransformMapEntry)
        }),
    ];
    for m in macros {
        env.add_macro(m)
            .expect("Kubernetes macros do not clash with the standard ones");
    }
}

type Expansion = Result<Option<IdedExpr>, ParseError>;

fn call(h: &mut MacroExprHelper<'_>, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::Call(CallExpr {
        func_name: name.to_owned(),
        target: None,
        args,
    }))
}

fn ident(h: &mut MacroExprHelper<'_>, name: &str) -> IdedExpr {
    h.next_expr(Expr::Ident(name.to_owned()))
}

fn int(h: &mut MacroExprHelper<'_>, i: i64) -> IdedExpr {
    h.next_expr(Expr::Literal(LiteralValue::Int(i.into())))
}

fn boolean(h: &mut MacroExprHelper<'_>, b: bool) -> IdedExpr {
    h.next_expr(Expr::Literal(LiteralValue::Boolean(b.into())))
}

fn simple_name(h: &MacroExprHelper<'_>, e: &IdedExpr, what: &str) -> Result<String, ParseError> {
    match &e.expr {
        Expr::Ident(name) => Ok(name.clone()),
        _ => Err(h.new_error(e.id, format!("{what} must be a simple name"))),
    }
}

/// `cel.bind(name, init, body)`: `body` with `name` bound to `init`, evaluated once.
fn bind(h: &mut MacroExprHelper<'_>, name: &str, init: IdedExpr, body: IdedExpr) -> IdedExpr {
    let range = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let cond = boolean(h, false);
    let step = ident(h, name);
    h.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: range,
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: name.to_owned(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result: body,
    })))
}

#[derive(Clone, Copy)]
enum Fold {
    All,
    Exists,
    ExistsOne,
    TransformList,
    TransformMap,
    TransformMapEntry,
}

fn two_var(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
    fold: Fold,
) -> Expansion {
    let first = simple_name(h, &args[0], "iteration variable")?;
    let second = simple_name(h, &args[1], "iteration variable")?;
    if first == second {
        return Err(h.new_error(args[1].id, format!("duplicate variable name: {second}")));
    }
    let range = target.take().expect("a receiver macro has a target");
    let mut rest: Vec<IdedExpr> = args.drain(..).skip(2).collect();
    let body = rest.pop().expect("a body");
    let filter = rest.pop();
    let pairs = call(h, PAIRS, vec![range]);

    // Binds the two names from `@it` around `e`.
    let bound = |h: &mut MacroExprHelper<'_>, e: IdedExpr| {
        let it = ident(h, PAIR);
        let zero = int(h, 0);
        let key = call(h, operators::INDEX, vec![it, zero]);
        let it = ident(h, PAIR);
        let one = int(h, 1);
        let value = call(h, operators::INDEX, vec![it, one]);
        let inner = bind(h, &second, value, e);
        bind(h, &first, key, inner)
    };

    let result_ident = |h: &mut MacroExprHelper<'_>| ident(h, RESULT);
    let (init, cond, step, result) = match fold {
        Fold::All | Fold::Exists => {
            let all = matches!(fold, Fold::All);
            let init = boolean(h, all);
            let accu = result_ident(h);
            let accu = if all {
                accu
            } else {
                call(h, operators::LOGICAL_NOT, vec![accu])
            };
            let cond = call(h, operators::NOT_STRICTLY_FALSE, vec![accu]);
            let accu = result_ident(h);
            let body = bound(h, body);
            let op = if all {
                operators::LOGICAL_AND
            } else {
                operators::LOGICAL_OR
            };
            let step = call(h, op, vec![accu, body]);
            (init, cond, step, result_ident(h))
        }
        Fold::ExistsOne => {
            let init = int(h, 0);
            let cond = boolean(h, true);
            let accu = result_ident(h);
            let one = int(h, 1);
            let plus = call(h, operators::ADD, vec![accu, one]);
            let accu = result_ident(h);
            let body = bound(h, body);
            let step = call(h, operators::CONDITIONAL, vec![body, plus, accu]);
            let accu = result_ident(h);
            let one = int(h, 1);
            let result = call(h, operators::EQUALS, vec![accu, one]);
            (init, cond, step, result)
        }
        Fold::TransformList | Fold::TransformMap | Fold::TransformMapEntry => {
            let init = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
            let cond = boolean(h, true);
            let element = if matches!(fold, Fold::TransformMap) {
                // A call, not a list literal: the literal's items would have to be alike.
                let key = ident(h, &first);
                call(h, "@entry", vec![key, body])
            } else {
                body
            };
            let element = h.next_expr(Expr::List(ListExpr::new(vec![element])));
            let accu = result_ident(h);
            let append = call(h, operators::ADD, vec![accu, element]);
            let step = match filter {
                Some(filter) => {
                    let accu = result_ident(h);
                    call(h, operators::CONDITIONAL, vec![filter, append, accu])
                }
                None => append,
            };
            let step = bound(h, step);
            let result = result_ident(h);
            let result = match fold {
                Fold::TransformMap => call(h, "@mapFromPairs", vec![result]),
                // Each step yields a map; their entries are merged, a key seen twice is an error.
                Fold::TransformMapEntry => call(h, "@mapFromMaps", vec![result]),
                _ => result,
            };
            (init, cond, step, result)
        }
    };
    Ok(Some(h.next_expr(Expr::Comprehension(Box::new(
        ComprehensionExpr {
            iter_range: pairs,
            iter_var: PAIR.to_owned(),
            iter_var2: None,
            accu_var: RESULT.to_owned(),
            accu_init: init,
            loop_cond: cond,
            loop_step: step,
            result,
        },
    )))))
}
