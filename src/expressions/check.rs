//! Static checks at compile time, and the instrumentation that bounds evaluation.

use cel::common::ast::{
    CallExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue, MapEntryExpr, MapExpr,
};

use super::library::{GLOBAL_FUNCTIONS, MEMBER_FUNCTIONS, OPAQUE_TYPES};

/// Type names an expression may reference as values (`type(x) == int`).
pub(super) const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "optional_type",
];

/// Checks that every identifier is declared (or bound by a comprehension) and every function
/// is known and called with a valid number of arguments. Returns the offending node's id and
/// a Kubernetes-style message.
///
/// With `composition`, `variables.<name>` must name one of those variables.
pub(super) fn check(
    expr: &IdedExpr,
    declared: &[String],
    composition: Option<&[&str]>,
) -> Result<(), Vec<(u64, String)>> {
    let mut scope = Vec::new();
    walk(expr, declared, composition, &mut scope)
}

/// Whether a struct literal's type is one admission expressions may build: MAP's
/// `Object{...}` / `Object.spec{...}` apply configurations and `JSONPatch{...}` operations.
fn admission_struct(type_name: &str) -> bool {
    type_name == "Object" || type_name.starts_with("Object.") || type_name == "JSONPatch"
}

fn arity_ok(table: &[(&str, &[usize])], name: &str, count: usize) -> Option<bool> {
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, arities)| arities.is_empty() || arities.contains(&count))
}

fn qualified(expr: &IdedExpr) -> Option<String> {
    match &expr.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(select) if !select.test => {
            qualified(&select.operand).map(|q| format!("{q}.{}", select.field))
        }
        _ => None,
    }
}

/// The id of the identifier a qualified name starts with.
fn root_id(expr: &IdedExpr) -> u64 {
    match &expr.expr {
        Expr::Select(select) => root_id(&select.operand),
        _ => expr.id,
    }
}

fn walk<'e>(
    expr: &'e IdedExpr,
    declared: &[String],
    composition: Option<&[&str]>,
    scope: &mut Vec<&'e str>,
) -> Result<(), Vec<(u64, String)>> {
    match &expr.expr {
        Expr::Ident(name) => {
            if scope.contains(&name.as_str())
                || declared.iter().any(|d| d == name)
                || TYPE_NAMES.contains(&name.as_str())
            {
                Ok(())
            } else {
                Err(vec![(
                    expr.id,
                    format!("undeclared reference to '{name}' (in container '')"),
                )])
            }
        }
        Expr::Select(select) => {
            if let Some(name) = qualified(expr)
                && OPAQUE_TYPES.contains(&name.as_str())
                && !scope.contains(&name.split('.').next().unwrap_or_default())
            {
                return Ok(());
            }
            if let (Some(names), Expr::Ident(root)) = (composition, &select.operand.expr)
                && root == "variables"
                && !scope.contains(&"variables")
                && !names.contains(&select.field.as_str())
            {
                return Err(vec![(
                    expr.id,
                    format!("undefined field '{}'", select.field),
                )]);
            }
            walk(&select.operand, declared, composition, scope)
        }
        Expr::Literal(_) | Expr::Unspecified => Ok(()),
        Expr::List(list) => list
            .elements
            .iter()
            .try_for_each(|e| walk(e, declared, composition, scope)),
        Expr::Map(map) => map.entries.iter().try_for_each(|entry| match &entry.expr {
            EntryExpr::MapEntry(e) => {
                walk(&e.key, declared, composition, scope)?;
                walk(&e.value, declared, composition, scope)
            }
            EntryExpr::StructField(f) => walk(&f.value, declared, composition, scope),
        }),
        Expr::Struct(s) if !admission_struct(&s.type_name) => Err(vec![(
            expr.id,
            format!(
                "undeclared reference to '{}' (in container '')",
                s.type_name
            ),
        )]),
        Expr::Struct(s) => s.entries.iter().try_for_each(|entry| match &entry.expr {
            EntryExpr::MapEntry(e) => walk(&e.value, declared, composition, scope),
            EntryExpr::StructField(f) => walk(&f.value, declared, composition, scope),
        }),
        Expr::Comprehension(c) => {
            walk(&c.iter_range, declared, composition, scope)?;
            walk(&c.accu_init, declared, composition, scope)?;
            let depth = scope.len();
            scope.push(&c.accu_var);
            scope.push(&c.iter_var);
            if let Some(v) = &c.iter_var2 {
                scope.push(v);
            }
            walk(&c.loop_cond, declared, composition, scope)?;
            walk(&c.loop_step, declared, composition, scope)?;
            walk(&c.result, declared, composition, scope)?;
            scope.truncate(depth);
            Ok(())
        }
        Expr::Call(call) => walk_call(expr.id, call, declared, composition, scope),
    }
}

fn walk_call<'e>(
    id: u64,
    call: &'e CallExpr,
    declared: &[String],
    composition: Option<&[&str]>,
    scope: &mut Vec<&'e str>,
) -> Result<(), Vec<(u64, String)>> {
    let name = call.func_name.as_str();
    let operator = name.starts_with('_')
        || name.starts_with("!_")
        || name == "-_"
        || name
            .rsplit('.')
            .next()
            .is_some_and(|last| last.starts_with('@'));
    let count = call.args.len();
    let undeclared = |name: &str| {
        (
            id,
            format!("undeclared reference to '{name}' (in container '')"),
        )
    };
    let no_overload = |name: &str| {
        (
            id,
            format!("found no matching overload for '{name}' with {count} argument(s)"),
        )
    };
    match &call.target {
        // The cel crate expands `math.greatest(…)`/`math.least(…)` as macros; Kubernetes
        // has no math library.
        _ if name.starts_with("math.") => {
            let function = match name {
                "math.@max" => "greatest",
                "math.@min" => "least",
                other => other.trim_start_matches("math."),
            };
            return Err(vec![
                (
                    id,
                    "undeclared reference to 'math' (in container '')".to_owned(),
                ),
                (
                    id,
                    format!("undeclared reference to '{function}' (in container '')"),
                ),
            ]);
        }
        _ if operator => {}
        None => match arity_ok(GLOBAL_FUNCTIONS, name, count) {
            Some(true) => {}
            Some(false) => return Err(vec![no_overload(name)]),
            None => return Err(vec![undeclared(name)]),
        },
        Some(target) => {
            // `sets.contains(a, b)` is a namespaced global function, unless `sets` is a
            // variable in scope.
            if let Some(prefix) = qualified(target) {
                let root = prefix.split('.').next().unwrap_or_default();
                let global = format!("{prefix}.{name}");
                let shadowed = scope.contains(&root) || declared.iter().any(|d| d == root);
                if !shadowed {
                    return match arity_ok(GLOBAL_FUNCTIONS, &global, count) {
                        Some(true) => call
                            .args
                            .iter()
                            .try_for_each(|a| walk(a, declared, composition, scope)),
                        Some(false) => Err(vec![no_overload(&global)]),
                        // As cel-go: no such function, so the target is read as a variable,
                        // which is not declared.
                        // cel-go then reports the function's name, and goes on with the
                        // arguments.
                        None => {
                            let mut issues = vec![
                                (
                                    root_id(target),
                                    format!("undeclared reference to '{root}' (in container '')"),
                                ),
                                (
                                    id,
                                    format!("undeclared reference to '{name}' (in container '')"),
                                ),
                            ];
                            for argument in &call.args {
                                if let Err(more) = walk(argument, declared, composition, scope) {
                                    issues.extend(more);
                                }
                            }
                            Err(issues)
                        }
                    };
                }
            }
            match arity_ok(MEMBER_FUNCTIONS, name, count) {
                Some(true) => {}
                Some(false) => return Err(vec![no_overload(name)]),
                None => return Err(vec![undeclared(name)]),
            }
            walk(target, declared, composition, scope)?;
        }
    }
    call.args
        .iter()
        .try_for_each(|a| walk(a, declared, composition, scope))
}

/// The key under which the map an `Object…{}` literal evaluates to keeps the literal's type
/// name: a field name cannot hold a NUL, and JSON conversion leaves it out.
pub const OBJECT_TYPE_KEY: &str = "\u{0}type";

/// Charges every comprehension's range to the evaluation budget, and routes `matches` to the
/// regex-caching implementation.
pub(super) fn instrument(expr: &mut IdedExpr) {
    match &mut expr.expr {
        Expr::Comprehension(c) => {
            // A binding (`cel.bind`, `sortBy`) iterates nothing: charge the size of the value it
            // binds instead, so doubling a list or string through nested bindings runs out.
            if c.iter_var == "#unused" {
                let init = std::mem::take(&mut c.accu_init);
                c.accu_init = budget_call(init);
            }
            let range = std::mem::take(&mut c.iter_range);
            c.iter_range = budget_call(range);
            for e in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                instrument(e);
            }
        }
        Expr::Call(call) => {
            if call.func_name == "matches" {
                call.func_name = "@matches".to_owned();
            }
            if let Some(target) = &mut call.target {
                instrument(target);
            }
            call.args.iter_mut().for_each(instrument);
        }
        Expr::Select(select)
            if !select.test
                && select.field == "requestResource"
                && matches!(&select.operand.expr, Expr::Ident(n) if n == "authorizer") =>
        {
            // An opaque value has no fields: `authorizer.requestResource` is a call.
            let operand = std::mem::take(&mut *select.operand);
            expr.expr = Expr::Call(CallExpr {
                func_name: "@requestResource".to_owned(),
                target: None,
                args: vec![operand],
            });
        }
        Expr::Select(select) => instrument(&mut select.operand),
        Expr::List(list) => list.elements.iter_mut().for_each(instrument),
        Expr::Map(map) => {
            for entry in &mut map.entries {
                if let EntryExpr::MapEntry(e) = &mut entry.expr {
                    instrument(&mut e.key);
                    instrument(&mut e.value);
                }
            }
        }
        Expr::Struct(s) => {
            // `Object{spec: ...}` and `JSONPatch{op: ...}` evaluate to maps with those keys,
            // which is what apply configurations and patches are once serialized. An
            // `Object…{}` also keeps its type name, under a key no field can have, for the
            // check of type names against field paths (`object_type_mismatches`).
            let type_name = s
                .type_name
                .starts_with("Object")
                .then(|| std::mem::take(&mut s.type_name));
            let mut entries: Vec<IdedEntryExpr> = std::mem::take(&mut s.entries)
                .into_iter()
                .map(|entry| {
                    let expr = match entry.expr {
                        EntryExpr::StructField(mut f) => {
                            instrument(&mut f.value);
                            EntryExpr::MapEntry(MapEntryExpr {
                                key: IdedExpr {
                                    id: entry.id,
                                    expr: Expr::Literal(LiteralValue::String(f.field.into())),
                                },
                                value: f.value,
                                optional: f.optional,
                            })
                        }
                        EntryExpr::MapEntry(mut e) => {
                            instrument(&mut e.value);
                            EntryExpr::MapEntry(e)
                        }
                    };
                    IdedEntryExpr { id: entry.id, expr }
                })
                .collect();
            if let Some(type_name) = type_name {
                let literal = |value: String| IdedExpr {
                    id: expr.id,
                    expr: Expr::Literal(LiteralValue::String(value.into())),
                };
                entries.push(IdedEntryExpr {
                    id: expr.id,
                    expr: EntryExpr::MapEntry(MapEntryExpr {
                        key: literal(OBJECT_TYPE_KEY.to_owned()),
                        value: literal(type_name),
                        optional: false,
                    }),
                });
            }
            expr.expr = Expr::Map(MapExpr { entries });
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// `@budget(expr)`: `expr`, after charging its size to the evaluation budget.
fn budget_call(expr: IdedExpr) -> IdedExpr {
    IdedExpr {
        id: expr.id,
        expr: Expr::Call(CallExpr {
            func_name: "@budget".to_owned(),
            target: None,
            args: vec![expr],
        }),
    }
}
