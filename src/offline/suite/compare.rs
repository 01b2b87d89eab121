//! Running a loaded case through the same [`Checker`] as `portcullis check` and comparing
//! the result with what the case expects.

use std::fmt::{self, Write as _};

use serde_json::Value;

use super::load::{LoadedCase, LoadedSuite};
use super::{CaseOutcome, CaseStatus, ExpectedWarnings};
use crate::offline::check::{CheckResult, Checker};
use crate::offline::input::Input;

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 80 {
        return text;
    }
    let mut cut: String = text.chars().take(79).collect();
    cut.push('…');
    cut
}

/// The first place where `actual` differs from `expected`, as a JSON Pointer and a reason.
pub fn first_difference(expected: &Value, actual: &Value) -> Option<String> {
    fn walk(expected: &Value, actual: &Value, path: &mut String) -> Option<String> {
        match (expected, actual) {
            (Value::Object(e), Value::Object(a)) => {
                let keys: std::collections::BTreeSet<&String> = e.keys().chain(a.keys()).collect();
                for key in keys {
                    let length = path.len();
                    crate::patch::push_pointer_token(path, key);
                    let found = match (e.get(key), a.get(key)) {
                        (Some(ev), Some(av)) => walk(ev, av, path),
                        (Some(ev), None) => {
                            Some(format!("{path}: missing, expected {}", short(ev)))
                        }
                        (None, Some(av)) => Some(format!("{path}: unexpected {}", short(av))),
                        (None, None) => None,
                    };
                    if found.is_some() {
                        return found;
                    }
                    path.truncate(length);
                }
                None
            }
            (Value::Array(e), Value::Array(a)) => {
                for (index, (ev, av)) in e.iter().zip(a).enumerate() {
                    let length = path.len();
                    let _ = write!(path, "/{index}");
                    if let Some(found) = walk(ev, av, path) {
                        return Some(found);
                    }
                    path.truncate(length);
                }
                (e.len() != a.len())
                    .then(|| format!("{path}: expected {} items, got {}", e.len(), a.len()))
            }
            _ if expected == actual => None,
            _ => Some(format!(
                "{}: expected {}, got {}",
                if path.is_empty() { "/" } else { path },
                short(expected),
                short(actual)
            )),
        }
    }
    walk(expected, actual, &mut String::new())
}

fn listed<T: fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    let texts: Vec<String> = items.iter().map(ToString::to_string).collect();
    texts.join("; ")
}

/// Every way `result` falls short of `case`; empty when it passes.
fn mismatches(case: &LoadedCase, result: &CheckResult, object: Option<&Value>) -> Vec<String> {
    let expect = &case.expect;
    let mut problems = Vec::new();
    if let Some(allowed) = expect.allowed
        && allowed != result.allowed
    {
        problems.push(format!(
            "expected allowed: {allowed}, got {} (violations: {})",
            result.allowed,
            listed(&result.violations)
        ));
    }
    if let Some(expected) = &expect.violations {
        if expected.is_empty() && !result.violations.is_empty() {
            problems.push(format!(
                "expected no violations, got: {}",
                listed(&result.violations)
            ));
        }
        for violation in expected {
            if !result.violations.iter().any(|v| violation.matches(v)) {
                problems.push(format!(
                    "missing violation {violation}; got: {}",
                    listed(&result.violations)
                ));
            }
        }
    }
    match &expect.warnings {
        Some(ExpectedWarnings::Count(count)) if *count != result.warnings.len() => {
            problems.push(format!(
                "expected {count} warnings, got {}: {}",
                result.warnings.len(),
                listed(&result.warnings)
            ));
        }
        Some(ExpectedWarnings::Contain(texts)) => {
            for text in texts {
                if !result.warnings.iter().any(|w| w.contains(text.as_str())) {
                    problems.push(format!(
                        "no warning contains {text:?}; got: {}",
                        listed(&result.warnings)
                    ));
                }
            }
        }
        _ => {}
    }
    for (key, text) in expect.audit_annotations.iter().flatten() {
        match result.audit_annotations.get(key) {
            Some(value) if value.contains(text.as_str()) => {}
            Some(value) => problems.push(format!(
                "audit annotation {key} is {value:?}, which does not contain {text:?}"
            )),
            None => problems.push(format!("no audit annotation {key}")),
        }
    }
    if let Some(mutated) = expect.mutated {
        match (&result.patch, mutated) {
            (None, true) => problems.push("expected a patch, /mutate returned none".into()),
            (Some(patch), false) => {
                let operations: Vec<String> = patch
                    .iter()
                    .map(|op| format!("{} {}", op.op, op.path))
                    .collect();
                problems.push(format!("expected no patch, got: {}", operations.join(", ")));
            }
            _ => {}
        }
    }
    if let Some(expected) = &case.patched_object {
        let actual = object.cloned().unwrap_or(Value::Null);
        if let Some(difference) = first_difference(expected, &actual) {
            problems.push(format!("patched object differs at {difference}"));
        }
    }
    problems
}

pub(super) fn run_case(suite: &LoadedSuite, case: &LoadedCase) -> CaseOutcome {
    let mut checker = Checker::new(&suite.engine, &suite.namespaces);
    if let Some(authorizer) = &case.authorizer {
        checker = checker.with_authorizer(authorizer.clone());
    }
    let request = Checker::admission_request(&case.document, case.operation);
    let registration = matches!(case.document.input, Input::Manifest(_));
    let (status, reason) =
        match checker.check_request(&case.document.source, &request, registration) {
            Err(error) => (CaseStatus::Error, error.to_string()),
            Ok(result) => {
                let problems = mismatches(case, &result, result.admitted_object(&request));
                if problems.is_empty() {
                    (CaseStatus::Pass, String::new())
                } else {
                    (CaseStatus::Fail, problems.join("; "))
                }
            }
        };
    CaseOutcome {
        suite: suite.name.clone(),
        case: case.name.clone(),
        status,
        reason,
    }
}
