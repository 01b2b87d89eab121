//! A template's Rego, compiled once by regorus and evaluated per constraint as Gatekeeper's
//! hook module does (`frameworks/constraint` `pkg/client/drivers/rego/rego.go`): the template
//! sees `input.review` and `input.parameters`, its `violation` rule yields objects with a
//! `msg` (and optional `details`), libraries are `data.lib.*`, the inventory `data.inventory`.

use std::num::NonZeroU32;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use regorus::Value as RegoValue;
use regorus::utils::limits::{ExecutionTimerConfig, LimitError};

/// Builtins Gatekeeper refuses in templates: they reach outside the admission request (side
/// effects, network).
const DISALLOWED_BUILTINS: [&str; 3] = ["http.send", "external_data", "net.lookup_ip_addr"];

/// How many of regorus's work units (statements, loop iterations) pass between two reads of
/// the clock while a deadline or timeout is set.
const CLOCK_CHECK_INTERVAL: NonZeroU32 = NonZeroU32::new(256).expect("not zero");

/// `--rego-timeout`: how long one evaluation may take offline (`check`, `test`, `audit`).
static REGO_TIMEOUT: OnceLock<Duration> = OnceLock::new();

/// Sets how long one Rego evaluation may take (`--rego-timeout`), for the whole process;
/// unset (as under `serve`, which stops Rego at each request's deadline), evaluations have no
/// limit but their deadline. Only the first call takes effect.
pub fn set_rego_timeout(timeout: Duration) {
    let _ = REGO_TIMEOUT.set(timeout);
}

/// The limit [`set_rego_timeout`] set, if any.
pub(crate) fn rego_timeout() -> Option<Duration> {
    REGO_TIMEOUT.get().copied()
}

/// Why a template's evaluation gave no violations to report.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RegoFailure {
    /// The evaluation failed (a conflict, a builtin's error), on one line as OPA places it.
    Error(String),
    /// The deadline passed before the evaluation finished; it was stopped.
    DeadlineExceeded,
}

/// One violation a template's rule produced.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RegoViolation {
    /// `msg`.
    pub(crate) msg: String,
}

/// A template's modules, compiled.
pub(crate) struct RegoTemplate {
    /// The compiled engine, prepared for evaluation (its modules analysed once); each
    /// evaluation without an inventory runs on a clone.
    prototype: regorus::Engine,
    /// The prototype with the last inventory given added as `data.inventory`, prepared again:
    /// evaluations with that same inventory (the same value, not an equal one) run on a clone
    /// of it, so the inventory is added and the modules analysed once per inventory, not per
    /// evaluation.
    with_inventory: Mutex<Option<(RegoValue, regorus::Engine)>>,
    /// `data.<package>.violation`.
    rule: String,
    /// Each module's file name as regorus knows it (`rego.rego`, `libs[0].rego`) and its text,
    /// to place errors as OPA places them.
    modules: Vec<(String, String)>,
}

impl std::fmt::Debug for RegoTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegoTemplate")
            .field("rule", &self.rule)
            .finish()
    }
}

/// Where a compile error is: the module (`rego` or `libs[i]`) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RegoError {
    /// `rego` for the template's module, `libs[i]` for a library.
    pub(crate) module: String,
    /// What is wrong, with the line where known.
    pub(crate) message: String,
}

/// The line (from 1) and text of the first occurrence of a disallowed builtin call in `rego`.
fn disallowed_builtin(rego: &str) -> Option<(usize, &'static str)> {
    for (number, line) in rego.lines().enumerate() {
        let code = line.split('#').next().unwrap_or("");
        for builtin in DISALLOWED_BUILTINS {
            if let Some(at) = code.find(builtin) {
                let before = code[..at].chars().next_back();
                let after = code[at + builtin.len()..].trim_start().chars().next();
                if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
                    && after == Some('(')
                {
                    return Some((number + 1, builtin));
                }
            }
        }
    }
    None
}

/// The package a module declares (`package a.b` → `a.b`).
fn package_of(rego: &str) -> Option<String> {
    rego.lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .find_map(|line| line.strip_prefix("package "))
        .map(|package| package.trim().to_owned())
}

impl RegoTemplate {
    /// Compiles the template's module and its libraries (Rego v0 unless `version` is `v1`).
    /// Errors name the module and line: a syntax error, a disallowed builtin, no `violation`
    /// rule, a library outside `lib`.
    pub(crate) fn compile(
        rego: &str,
        libs: &[String],
        version: Option<&str>,
    ) -> Result<Self, RegoError> {
        let mut engine = regorus::Engine::new();
        engine.set_rego_v0(version != Some("v1"));
        engine.set_strict_builtin_errors(false);
        let modules = std::iter::once(("rego".to_owned(), rego)).chain(
            libs.iter()
                .enumerate()
                .map(|(i, lib)| (format!("libs[{i}]"), lib.as_str())),
        );
        let mut sources = Vec::new();
        for (module, text) in modules {
            sources.push((format!("{module}.rego"), text.to_owned()));
            if let Some((line, builtin)) = disallowed_builtin(text) {
                return Err(RegoError {
                    module,
                    message: format!(
                        "line {line}: {builtin} is not allowed in ConstraintTemplates (Gatekeeper disables it)"
                    ),
                });
            }
            if module != "rego" {
                let package = package_of(text).unwrap_or_default();
                if package != "lib" && !package.starts_with("lib.") {
                    return Err(RegoError {
                        module,
                        message: format!(
                            "library package {package:?} must be under \"lib\" (referenced as data.lib.…)"
                        ),
                    });
                }
            }
            engine
                .add_policy(format!("{module}.rego"), text.to_owned())
                .map_err(|error| RegoError {
                    module: module.clone(),
                    message: error.to_string(),
                })?;
        }
        let package = package_of(rego).ok_or_else(|| RegoError {
            module: "rego".into(),
            message: "the module declares no package".into(),
        })?;
        let rule = format!("data.{package}.violation");
        let declares_violation = engine
            .has_declared_rule_rooted_at("rego.rego", "violation")
            .unwrap_or(false)
            || rego.lines().any(|line| {
                let line = line.trim_start();
                line.starts_with("violation[") || line.starts_with("violation contains")
            });
        if !declares_violation {
            return Err(RegoError {
                module: "rego".into(),
                message: "invalid rego: missing required rule \"violation\"".into(),
            });
        }
        prepare(&mut engine, &rule);
        Ok(RegoTemplate {
            prototype: engine,
            with_inventory: Mutex::new(None),
            rule,
            modules: sources,
        })
    }

    /// Evaluates `violation` with `input` (`{"review": …, "parameters": …}`) and `inventory` as
    /// `data.inventory`. The violations, in the rule's set order, or why there are none: the
    /// evaluation's error, or `deadline` passing first. regorus stops an evaluation at its
    /// next check of the clock past the deadline or past `timeout` from its start (the latter
    /// is an error, as a Rego runtime error is), so a template that loops long does not hold
    /// its thread.
    pub(crate) fn evaluate(
        &self,
        input: RegoValue,
        inventory: Option<&RegoValue>,
        deadline: Option<Instant>,
        timeout: Option<Duration>,
    ) -> Result<Vec<RegoViolation>, RegoFailure> {
        let mut engine = match inventory {
            None => self.prototype.clone(),
            Some(inventory) => self.with_inventory(inventory).map_err(RegoFailure::Error)?,
        };
        let to_deadline = match deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(RegoFailure::DeadlineExceeded);
                }
                Some(left)
            }
            None => None,
        };
        let limit = match (to_deadline, timeout) {
            (Some(left), Some(timeout)) => Some(left.min(timeout)),
            (left, timeout) => left.or(timeout),
        };
        if let Some(limit) = limit {
            engine.set_execution_timer_config(ExecutionTimerConfig {
                limit,
                check_interval: CLOCK_CHECK_INTERVAL,
            });
        }
        engine.set_input(input);
        let results = engine.eval_rule(self.rule.clone()).map_err(|error| {
            let timed_out = error.chain().any(|cause| {
                matches!(
                    cause.downcast_ref::<LimitError>(),
                    Some(LimitError::TimeLimitExceeded { .. })
                )
            });
            let past_deadline = deadline.is_some_and(|deadline| Instant::now() >= deadline);
            match timeout {
                _ if past_deadline => RegoFailure::DeadlineExceeded,
                Some(timeout) if timed_out => RegoFailure::Error(format!(
                    "template evaluation stopped after {} (--rego-timeout)",
                    humantime::format_duration(timeout)
                )),
                None if timed_out => RegoFailure::DeadlineExceeded,
                _ => RegoFailure::Error(one_line_error(&error.to_string(), &self.modules)),
            }
        })?;
        let mut violations = Vec::new();
        let Ok(set) = results.as_set() else {
            return Ok(violations);
        };
        for result in set.iter() {
            // As the hook module: a result without `msg` yields nothing.
            let Ok(object) = result.as_object() else {
                continue;
            };
            let Some(msg) = object.get(&RegoValue::from("msg")) else {
                continue;
            };
            let msg = match msg.as_string() {
                Ok(text) => text.to_string(),
                Err(_) => msg.to_json_str().unwrap_or_default(),
            };
            violations.push(RegoViolation { msg });
        }
        Ok(violations)
    }

    /// A clone of the prototype with `inventory` as `data.inventory`: of the one kept for the
    /// last inventory when `inventory` is that same value, else of one made (and kept) now.
    fn with_inventory(&self, inventory: &RegoValue) -> Result<regorus::Engine, String> {
        let mut kept = self
            .with_inventory
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some((kept_inventory, engine)) = kept.as_ref()
            && same_value(kept_inventory, inventory)
        {
            return Ok(engine.clone());
        }
        let mut engine = self.prototype.clone();
        let mut data = RegoValue::new_object();
        if let Ok(map) = data.as_object_mut() {
            map.insert(RegoValue::from("inventory"), inventory.clone());
        }
        engine.add_data(data).map_err(|error| error.to_string())?;
        prepare(&mut engine, &self.rule);
        *kept = Some((inventory.clone(), engine.clone()));
        Ok(engine)
    }
}

/// A regorus error on one line, where OPA's are (`template:3: …`): regorus writes the
/// location (`--> rego.rego:3:1`), the source line and a caret on lines of their own, then
/// `error: <message>`. The template's module is named `template`, as Gatekeeper names it;
/// text in another shape is returned trimmed. Conflicts are worded as OPA words them, a
/// function's placed at its second definition in `modules` where OPA places it (regorus
/// places it at the call).
fn one_line_error(error: &str, modules: &[(String, String)]) -> String {
    let location = error
        .lines()
        .find_map(|line| line.trim_start().strip_prefix("--> "));
    let message = error
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("error: "));
    let (Some(location), Some(message)) = (location, message) else {
        return error.trim().to_owned();
    };
    let mut parts = location.rsplitn(3, ':');
    let (Some(column), Some(line), Some(file)) = (parts.next(), parts.next(), parts.next()) else {
        return message.replace("rego.rego:", "template:");
    };
    let (mut file, mut line) = (file.to_owned(), line.to_owned());
    let message = match conflict_in_opa_words(message) {
        Some(Conflict::Function(words)) => {
            let column = column.parse().unwrap_or(0);
            if let Some((at_file, at_line)) = second_definition(modules, &file, &line, column) {
                (file, line) = (at_file, at_line.to_string());
            }
            words.to_owned()
        }
        Some(Conflict::Rule(words)) => words.to_owned(),
        None => message.replace("rego.rego:", "template:"),
    };
    format!("{}:{line}: {message}", module_name(&file))
}

/// A module's name in messages: `template` for the template's own, as Gatekeeper names it.
fn module_name(file: &str) -> &str {
    match file {
        "rego.rego" => "template",
        library => library.trim_end_matches(".rego"),
    }
}

/// A conflict regorus reports, in OPA's words.
enum Conflict {
    /// Of a rule (complete, or a partial object's key).
    Rule(&'static str),
    /// Of a function: two outputs for one input.
    Function(&'static str),
}

fn conflict_in_opa_words(message: &str) -> Option<Conflict> {
    const COMPLETE: &str = "eval_conflict_error: complete rules must not produce multiple outputs";
    if message.starts_with("rule conflicts with rule at")
        || message.starts_with("complete rules should not produce multiple outputs")
        || message.starts_with("rules should not produce multiple outputs")
    {
        Some(Conflict::Rule(COMPLETE))
    } else if message == "rules must not produce multiple outputs" {
        Some(Conflict::Rule(
            "eval_conflict_error: object keys must be unique",
        ))
    } else if message == "functions must not produce multiple outputs for same inputs"
        || message.starts_with("function produced multiple outputs")
    {
        Some(Conflict::Function(
            "eval_conflict_error: functions must not produce multiple outputs for same inputs",
        ))
    } else {
        None
    }
}

/// The module and line of the second definition of the function called at `file:line:column`
/// (the column of the call's `(`): its name is read before the column, its definitions are the
/// unindented lines starting `name(`, in the calling module first, then in the others.
fn second_definition(
    modules: &[(String, String)],
    file: &str,
    line: &str,
    column: usize,
) -> Option<(String, usize)> {
    let (_, text) = modules.iter().find(|(name, _)| name == file)?;
    let call_line = text
        .lines()
        .nth(line.parse::<usize>().ok()?.checked_sub(1)?)?;
    let before = call_line.get(..column.checked_sub(1)?)?;
    let path = before
        .rsplit(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .next()?;
    let name = path.rsplit('.').next().filter(|name| !name.is_empty())?;
    let calling = modules.iter().filter(|(module, _)| module == file);
    let others = modules.iter().filter(|(module, _)| module != file);
    calling.chain(others).find_map(|(module, text)| {
        let (index, _) = text
            .lines()
            .enumerate()
            .filter(|(_, line)| {
                line.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('('))
            })
            .nth(1)?;
        Some((module.clone(), index + 1))
    })
}

/// Prepares `engine` for evaluation now rather than at its (every clone's) first evaluation:
/// regorus analyses the modules (schedule, rules, functions, imports, loop hoisting) when an
/// engine whose policies or data changed is first evaluated, and a clone of an unprepared
/// engine starts unprepared. `compile_with_entrypoint` prepares the engine without evaluating
/// anything; its result is not needed. An error here (a module regorus cannot analyse) is left
/// to the evaluation, which meets it again and reports it as before.
fn prepare(engine: &mut regorus::Engine, rule: &str) {
    let _ = engine.compile_with_entrypoint(&rule.into());
}

/// Whether `a` and `b` are the same value: the same object (or array, set, string) in memory,
/// not merely equal ones, so that a kept engine is reused only for the very inventory it holds.
fn same_value(a: &RegoValue, b: &RegoValue) -> bool {
    use std::sync::Arc;
    match (a, b) {
        (RegoValue::Object(a), RegoValue::Object(b)) => Arc::ptr_eq(a, b),
        (RegoValue::Array(a), RegoValue::Array(b)) => Arc::ptr_eq(a, b),
        (RegoValue::Set(a), RegoValue::Set(b)) => Arc::ptr_eq(a, b),
        (RegoValue::String(a), RegoValue::String(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUIRED_LABELS: &str = r#"
package k8srequiredlabels

violation[{"msg": msg, "details": {"missing": missing}}] {
  provided := {label | input.review.object.metadata.labels[label]}
  required := {label | label := input.parameters.labels[_]}
  missing := required - provided
  count(missing) > 0
  msg := sprintf("you must provide labels: %v", [missing])
}
"#;

    fn input(labels: serde_json::Value, required: &[&str]) -> RegoValue {
        RegoValue::from(serde_json::json!({
            "review": {"object": {"metadata": {"labels": labels}}},
            "parameters": {"labels": required},
        }))
    }

    #[test]
    fn a_template_yields_its_violations() {
        let template = RegoTemplate::compile(REQUIRED_LABELS, &[], None).unwrap();
        let found = template
            .evaluate(
                input(serde_json::json!({"app": "a"}), &["app", "owner"]),
                None,
                None,
                None,
            )
            .unwrap();
        assert_eq!(
            found,
            [RegoViolation {
                msg: "you must provide labels: {\"owner\"}".into()
            }]
        );
        let none = template
            .evaluate(
                input(
                    serde_json::json!({"app": "a", "owner": "o"}),
                    &["app", "owner"],
                ),
                None,
                None,
                None,
            )
            .unwrap();
        assert!(none.is_empty());
    }

    #[test]
    fn runtime_errors_are_one_line_naming_the_template_line() {
        let conflict =
            "package p\nx = 1 { true }\nx = 2 { true }\nviolation[{\"msg\": \"m\"}] { x }\n";
        let template = RegoTemplate::compile(conflict, &[], None).unwrap();
        let error = template
            .evaluate(input(serde_json::json!({}), &[]), None, None, None)
            .unwrap_err();
        assert_eq!(
            error,
            RegoFailure::Error(
                "template:3: eval_conflict_error: complete rules must not produce multiple outputs"
                    .into()
            )
        );
        assert_eq!(one_line_error("  no location  ", &[]), "no location");

        let function = "package p\ntwice(v) = 1 { v }\ntwice(v) = 2 { v }\n\
            violation[{\"msg\": m}] {\n  m := sprintf(\"%v\", [twice(true)])\n}\n";
        let template = RegoTemplate::compile(function, &[], None).unwrap();
        let error = template
            .evaluate(input(serde_json::json!({}), &[]), None, None, None)
            .unwrap_err();
        assert_eq!(
            error,
            RegoFailure::Error(
                "template:3: eval_conflict_error: functions must not produce multiple outputs \
                 for same inputs"
                    .into()
            )
        );
        let library = "package lib.twice\nf(v) = 1 { v }\nf(v) = 2 { v }\n";
        let uses = "package p\nimport data.lib.twice\n\
            violation[{\"msg\": m}] {\n  m := sprintf(\"%v\", [twice.f(true)])\n}\n";
        let template = RegoTemplate::compile(uses, &[library.to_owned()], None).unwrap();
        let error = template
            .evaluate(input(serde_json::json!({}), &[]), None, None, None)
            .unwrap_err();
        assert_eq!(
            error,
            RegoFailure::Error(
                "libs[0]:3: eval_conflict_error: functions must not produce multiple outputs \
                 for same inputs"
                    .into()
            )
        );
    }

    #[test]
    fn libraries_are_data_lib() {
        let rego = r#"
package uses_lib
import data.lib.helpers
violation[{"msg": msg}] {
  helpers.is_latest(input.review.object.spec.image)
  msg := "latest"
}
"#;
        let lib = r#"
package lib.helpers
is_latest(image) { endswith(image, ":latest") }
"#;
        let template = RegoTemplate::compile(rego, &[lib.to_owned()], None).unwrap();
        let found = template
            .evaluate(
                RegoValue::from(
                    serde_json::json!({"review": {"object": {"spec": {"image": "a:latest"}}}}),
                ),
                None,
                None,
                None,
            )
            .unwrap();
        assert_eq!(found.len(), 1);
    }

    #[test]
    fn the_inventory_is_data_inventory_each_evaluation_its_own() {
        let rego = r#"
package unique
violation[{"msg": msg}] {
  data.inventory.cluster.v1.Thing[name]
  name != input.review.object.metadata.name
  msg := sprintf("also %v", [name])
}
"#;
        let template = RegoTemplate::compile(rego, &[], None).unwrap();
        let inventory = |names: &[&str]| {
            let things: serde_json::Map<_, _> = names
                .iter()
                .map(|name| (name.to_string(), serde_json::json!({})))
                .collect();
            RegoValue::from(serde_json::json!({"cluster": {"v1": {"Thing": things}}}))
        };
        let x = || {
            RegoValue::from(serde_json::json!({"review": {"object": {"metadata": {"name": "x"}}}}))
        };
        let messages = |inventory: Option<&RegoValue>| -> Vec<String> {
            let found = template.evaluate(x(), inventory, None, None).unwrap();
            found.into_iter().map(|v| v.msg).collect()
        };
        let xy = inventory(&["x", "y"]);
        let xz = inventory(&["x", "z"]);
        assert_eq!(messages(Some(&xy)), ["also y"]);
        assert_eq!(messages(Some(&xy)), ["also y"]);
        assert_eq!(messages(Some(&xz)), ["also z"]);
        // An equal inventory that is another value, none, and the first one again.
        assert_eq!(messages(Some(&inventory(&["x", "z"]))), ["also z"]);
        assert!(messages(None).is_empty());
        assert_eq!(messages(Some(&xy)), ["also y"]);
        assert_eq!(
            messages(Some(&inventory(&["x", "y", "w"]))),
            ["also w", "also y"]
        );
    }

    /// A template whose rule loops for seconds at least: 9 million pairs of numbers.
    const LOOPS_LONG: &str = r#"
package slow
violation[{"msg": "pairs"}] {
  n := numbers.range(1, 3000)
  count({x | x := n[_]; y := n[_]; x > y + 6000}) == 0
}
"#;

    #[test]
    fn a_deadline_stops_a_long_evaluation() {
        let template = RegoTemplate::compile(LOOPS_LONG, &[], None).unwrap();
        let deadline = Instant::now() + std::time::Duration::from_millis(50);
        let empty = || input(serde_json::json!({}), &[]);
        assert_eq!(
            template.evaluate(empty(), None, Some(deadline), None),
            Err(RegoFailure::DeadlineExceeded)
        );
        // A deadline already past evaluates nothing; one far off does not change the answer.
        assert_eq!(
            template.evaluate(empty(), None, Some(Instant::now()), None),
            Err(RegoFailure::DeadlineExceeded)
        );
        let labels = RegoTemplate::compile(REQUIRED_LABELS, &[], None).unwrap();
        let far = Instant::now() + std::time::Duration::from_secs(3600);
        let found = labels
            .evaluate(
                input(serde_json::json!({"app": "a"}), &["app", "owner"]),
                None,
                Some(far),
                Some(Duration::from_secs(3600)),
            )
            .unwrap();
        assert_eq!(found.len(), 1);
    }

    #[test]
    fn a_timeout_stops_a_long_evaluation_as_an_error() {
        let template = RegoTemplate::compile(LOOPS_LONG, &[], None).unwrap();
        let found = template.evaluate(
            input(serde_json::json!({}), &[]),
            None,
            None,
            Some(Duration::from_millis(50)),
        );
        assert_eq!(
            found,
            Err(RegoFailure::Error(
                "template evaluation stopped after 50ms (--rego-timeout)".into()
            ))
        );
        // A deadline coming first is the deadline's.
        let found = template.evaluate(
            input(serde_json::json!({}), &[]),
            None,
            Some(Instant::now() + Duration::from_millis(50)),
            Some(Duration::from_secs(3600)),
        );
        assert_eq!(found, Err(RegoFailure::DeadlineExceeded));
    }

    #[test]
    fn bad_templates_are_refused_with_module_and_line() {
        let error = RegoTemplate::compile(
            "package x\nviolation[{\"msg\": m}] {\n  m := \n}",
            &[],
            None,
        )
        .unwrap_err();
        assert_eq!(error.module, "rego");
        let error = RegoTemplate::compile(
            "package x\nviolation[{\"msg\": m}] {\n  r := http.send({\"method\": \"get\"})\n  m := \"x\"\n}",
            &[],
            None,
        )
        .unwrap_err();
        assert_eq!(
            error.message,
            "line 3: http.send is not allowed in ConstraintTemplates (Gatekeeper disables it)"
        );
        let error = RegoTemplate::compile("package x\ndeny[m] { m := 1 }", &[], None).unwrap_err();
        assert_eq!(
            error.message,
            "invalid rego: missing required rule \"violation\""
        );
        let error =
            RegoTemplate::compile(REQUIRED_LABELS, &["package helpers\nx := 1".into()], None)
                .unwrap_err();
        assert_eq!(error.module, "libs[0]");
    }
}
