//! The text output of `portcullis check`: one line per document, then its violations,
//! warnings, audit annotations and patch operations, indented; a summary line last.

use std::fmt::Write as _;

use super::check::CheckResult;

/// The indented lines under a result's subject: its violations, warnings, audit annotations
/// and patch operations.
pub fn write_findings(out: &mut String, result: &CheckResult) {
    for violation in &result.violations {
        let _ = writeln!(out, "    violation  {violation}");
    }
    for warning in &result.warnings {
        let _ = writeln!(out, "    warning    {warning}");
    }
    for (key, value) in &result.audit_annotations {
        let _ = writeln!(out, "    audit      {key}: {value}");
    }
    for operation in result.patch.iter().flatten() {
        let _ = writeln!(
            out,
            "    patch      {} {} {}",
            operation.op, operation.path, operation.value
        );
    }
}

/// How a document fared, as the first column says it.
pub fn verdict(result: &CheckResult) -> &'static str {
    if !result.allowed {
        "DENIED"
    } else if !result.warnings.is_empty() {
        "WARN"
    } else {
        "ALLOWED"
    }
}

fn object_name(result: &CheckResult) -> String {
    let name = result.name.as_deref().unwrap_or("(no name)");
    match &result.namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

/// The text report of `check`.
pub fn text(results: &[CheckResult]) -> String {
    let subjects: Vec<String> = results
        .iter()
        .map(|r| format!("{} {} {}", r.operation, r.kind, object_name(r)))
        .collect();
    let width = subjects
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (result, subject) in results.iter().zip(&subjects) {
        let _ = write!(
            out,
            "{:<7}  {subject:<width$}  {}",
            verdict(result),
            result.source
        );
        if result.webhooks.is_empty() {
            out.push_str("  (no webhook rule matches: not sent)");
        }
        out.push('\n');
        write_findings(&mut out, result);
    }
    let denied = results.iter().filter(|r| !r.allowed).count();
    let warned = results
        .iter()
        .filter(|r| r.allowed && !r.warnings.is_empty())
        .count();
    let patched = results.iter().filter(|r| r.patch.is_some()).count();
    let _ = writeln!(
        out,
        "{} document{}: {} allowed ({warned} with warnings), {denied} denied, {patched} patched",
        results.len(),
        if results.len() == 1 { "" } else { "s" },
        results.len() - denied,
    );
    out
}
