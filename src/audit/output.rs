//! The three outputs of `portcullis audit`, written as results arrive (a scan never holds
//! the whole cluster): a table, `check`'s JSON array, and OpenReports documents.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::SystemTime;

use super::openreports;
use crate::offline::CheckResult;
use crate::offline::report::{verdict, write_findings};

/// Counts of a finished scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanSummary {
    /// Resources (group and resource) listed.
    pub resources: usize,
    /// Objects listed.
    pub listed: u64,
    /// Objects judged (listed and not excluded).
    pub scanned: u64,
    /// Objects admission would not send to Portcullis (namespaceSelector, matchConditions).
    pub excluded: u64,
    /// Judged objects that would be denied.
    pub denied: u64,
    /// Judged objects allowed with warnings.
    pub warned: u64,
    /// Judged objects `/mutate` would patch.
    pub patched: u64,
    /// Objects that could not be evaluated.
    pub errors: u64,
    /// Requests sent to the apiserver (discovery, lists, report writes).
    pub requests: u64,
    /// Reports written with `--apply`.
    pub reports_applied: u64,
    /// Stale reports deleted with `--apply`.
    pub reports_deleted: u64,
}

impl ScanSummary {
    /// Counts one judged object.
    pub fn count(&mut self, result: &CheckResult) {
        self.scanned += 1;
        if !result.allowed {
            self.denied += 1;
        } else if !result.warnings.is_empty() {
            self.warned += 1;
        }
        if result.patch.is_some() {
            self.patched += 1;
        }
    }

    /// The closing line.
    pub fn line(&self) -> String {
        let mut line = format!(
            "{} object{} scanned in {} resource{}: {} allowed ({} with warnings), {} denied, {} \
             patched; {} excluded as admission excludes them",
            self.scanned,
            if self.scanned == 1 { "" } else { "s" },
            self.resources,
            if self.resources == 1 { "" } else { "s" },
            self.scanned - self.denied,
            self.warned,
            self.denied,
            self.patched,
            self.excluded,
        );
        if self.errors > 0 {
            let _ = write!(line, "; {} could not be evaluated", self.errors);
        }
        let _ = write!(line, "; {} apiserver requests", self.requests);
        if self.reports_applied > 0 || self.reports_deleted > 0 {
            let _ = write!(
                line,
                "; {} reports applied, {} stale reports deleted",
                self.reports_applied, self.reports_deleted
            );
        }
        line
    }
}

/// Where results go.
pub trait ResultWriter {
    /// Writes one judged object.
    fn result(&mut self, result: &CheckResult) -> io::Result<()>;
    /// Ends the output.
    fn finish(&mut self, summary: &ScanSummary) -> io::Result<()>;
}

/// `check`'s text lines, one object at a time, and the summary line.
pub struct TableWriter<W: Write> {
    out: W,
}

impl<W: Write> TableWriter<W> {
    /// A table written to `out`.
    pub fn new(out: W) -> Self {
        TableWriter { out }
    }
}

/// The lines of one result, as `check` prints them (the subject without the source).
pub fn table_lines(result: &CheckResult) -> String {
    let name = result.name.as_deref().unwrap_or("(no name)");
    let subject = match &result.namespace {
        Some(namespace) => format!("{} {namespace}/{name}", result.kind),
        None => format!("{} {name}", result.kind),
    };
    let mut out = format!("{:<7}  {subject}\n", verdict(result));
    write_findings(&mut out, result);
    out
}

impl<W: Write> ResultWriter for TableWriter<W> {
    fn result(&mut self, result: &CheckResult) -> io::Result<()> {
        self.out.write_all(table_lines(result).as_bytes())
    }

    fn finish(&mut self, summary: &ScanSummary) -> io::Result<()> {
        writeln!(self.out, "{}", summary.line())?;
        self.out.flush()
    }
}

/// `check --output json`: a pretty JSON array, one object per result, written one element at
/// a time, byte for byte what `serde_json::to_string_pretty` of the whole array gives.
pub struct JsonWriter<W: Write> {
    out: W,
    first: bool,
}

impl<W: Write> JsonWriter<W> {
    /// An array written to `out`.
    pub fn new(out: W) -> Self {
        JsonWriter { out, first: true }
    }
}

impl<W: Write> ResultWriter for JsonWriter<W> {
    fn result(&mut self, result: &CheckResult) -> io::Result<()> {
        let text = serde_json::to_string_pretty(result)?;
        let separator = if std::mem::replace(&mut self.first, false) {
            "[\n"
        } else {
            ",\n"
        };
        let mut element = String::with_capacity(text.len() + text.len() / 8);
        element.push_str(separator);
        // Strings are escaped in JSON, so every line break is the printer's.
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                element.push('\n');
            }
            element.push_str("  ");
            element.push_str(line);
        }
        self.out.write_all(element.as_bytes())
    }

    fn finish(&mut self, _: &ScanSummary) -> io::Result<()> {
        self.out
            .write_all(if self.first { b"[]\n" } else { b"\n]\n" })?;
        self.out.flush()
    }
}

/// OpenReports documents as a multi-document YAML stream (what `kubectl apply -f -` reads),
/// one document per object with findings.
pub struct OpenReportsWriter<W: Write> {
    out: W,
    now: SystemTime,
}

impl<W: Write> OpenReportsWriter<W> {
    /// Reports timestamped `now`, written to `out`.
    pub fn new(out: W, now: SystemTime) -> Self {
        OpenReportsWriter { out, now }
    }
}

impl<W: Write> ResultWriter for OpenReportsWriter<W> {
    fn result(&mut self, result: &CheckResult) -> io::Result<()> {
        let Some(report) = openreports::report(result, self.now) else {
            return Ok(());
        };
        let text = serde_norway::to_string(&report).map_err(io::Error::other)?;
        self.out.write_all(b"---\n")?;
        self.out.write_all(text.as_bytes())
    }

    fn finish(&mut self, _: &ScanSummary) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::admission::Operation;
    use crate::engine::Violation;
    use crate::engine::ViolationForm;
    use crate::offline::Source;

    fn result(name: &str, allowed: bool) -> CheckResult {
        CheckResult {
            source: Source {
                file: format!("api/v1/namespaces/team/pods/{name}").into(),
                index: 0,
                item: None,
            },
            uid: format!("uid-{name}"),
            operation: Operation::Create,
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some("team".into()),
            name: Some(name.into()),
            webhooks: vec!["mutate", "validate"],
            allowed,
            violations: if allowed {
                Vec::new()
            } else {
                vec![Violation {
                    policy: "p".into(),
                    rule: "r".into(),
                    path: "spec".into(),
                    message: "line one\nline two".into(),
                    form: ViolationForm::Rule,
                }]
            },
            warnings: vec!["w".into()],
            audit_annotations: BTreeMap::new(),
            patch: None,
            patched_object: None,
        }
    }

    #[test]
    fn streamed_json_is_checks_array() {
        for results in [
            vec![],
            vec![result("a", true)],
            vec![result("a", true), result("b", false), result("c", true)],
        ] {
            let mut out = Vec::new();
            let mut writer = JsonWriter::new(&mut out);
            for r in &results {
                writer.result(r).unwrap();
            }
            writer.finish(&ScanSummary::default()).unwrap();
            let expected = serde_json::to_string_pretty(&results).unwrap() + "\n";
            assert_eq!(String::from_utf8(out).unwrap(), expected);
        }
    }

    #[test]
    fn the_table_has_checks_lines_and_a_summary() {
        let mut out = Vec::new();
        let mut writer = TableWriter::new(&mut out);
        let mut summary = ScanSummary {
            resources: 1,
            requests: 3,
            ..ScanSummary::default()
        };
        for r in [result("a", true), result("b", false)] {
            summary.count(&r);
            writer.result(&r).unwrap();
        }
        writer.finish(&summary).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "WARN     Pod team/a\n    warning    w\nDENIED   Pod team/b\n    violation  \
             [p/r] spec: line one\nline two\n    warning    w\n2 objects scanned in 1 \
             resource: 1 allowed (1 with warnings), 1 denied, 0 patched; 0 excluded as \
             admission excludes them; 3 apiserver requests\n"
        );
    }

    #[test]
    fn openreports_are_yaml_documents_for_objects_with_findings() {
        let mut out = Vec::new();
        let mut writer = OpenReportsWriter::new(&mut out, SystemTime::UNIX_EPOCH);
        let mut clean = result("clean", true);
        clean.warnings.clear();
        writer.result(&clean).unwrap();
        writer.result(&result("b", false)).unwrap();
        writer.finish(&ScanSummary::default()).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("---\n").count(), 1, "{text}");
        let report: serde_json::Value =
            serde_norway::from_str(text.trim_start_matches("---\n")).unwrap();
        assert_eq!(report["metadata"]["name"], "uid-b");
        assert_eq!(report["summary"]["fail"], 1);
    }
}
