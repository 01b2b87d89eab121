//! The children of a CEL syntax tree's node, for the passes that look at every node.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

/// Calls `visit` on each direct child of `expr` (target before arguments, keys before values,
/// a comprehension's parts in order).
pub(super) fn visit_children<'e>(expr: &'e IdedExpr, visit: &mut dyn FnMut(&'e IdedExpr)) {
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

/// [`visit_children`], mutably.
pub(super) fn visit_children_mut(expr: &mut IdedExpr, visit: fn(&mut IdedExpr)) {
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
