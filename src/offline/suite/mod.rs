//! `PolicyTest` suites: resources with the decisions a policy set must make about them.
//!
//! ```yaml
//! apiVersion: portcullis.dev/v1alpha1
//! kind: PolicyTest
//! metadata: {name: pods}
//! policies: []                   # files or folders, relative to this file; [] = built-in set
//! resources: [resources.yaml]    # manifests and AdmissionReviews, relative to this file
//! namespaces: [namespaces.yaml]  # Namespace manifests whose labels rules may look up
//! authorizer: deny               # answers to CEL authorizer checks: allow, deny, or
//!                                # {default, rules} (docs/cel.md); else --authorizer's
//! cases:
//!   - name: privileged pod is denied          # optional
//!     resource: {kind: Pod, namespace: team-a, name: web}   # apiVersion optional
//!     operation: CREATE                       # CREATE (default), UPDATE or DELETE
//!     authorizer: allow                       # this case's authorizer answers, optional
//!     expect:
//!       allowed: false
//!       violations: [{policy: pod-security, rule: enforce}]  # each must be found
//!       warnings: 1                           # a count, or substrings that must each match
//!       auditAnnotations: {team-policy: "no-latest"}          # key: substring
//!       mutated: true                         # whether /mutate returns a patch
//!       patchedObject: expected/web.yaml      # the object after /mutate, compared as JSON
//! ```
//!
//! Cases are decided by the same [`Checker`] as `portcullis check`. Every field is checked
//! strictly: an unknown field, a case that selects no resource or several, or an `expect`
//! that states nothing makes the suite an error, not a silent pass.
//!
//! OPA Gatekeeper's gator `Suite` documents (`test.gatekeeper.sh`) found among the suites run
//! as `gator verify` runs them (module `gator`), in the same result table.

mod compare;
mod gator;
mod load;

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use super::input::yaml_documents;
use crate::admission::Operation;
use crate::authorization::AnswerTable;
use crate::engine::{Engine, Violation};
pub use compare::first_difference;
use compare::run_case;
use load::{is_any_suite, is_suite_document, load_suite, suite_files};

/// `apiVersion` of a suite.
pub const API_VERSION: &str = "portcullis.dev/v1alpha1";
/// `kind` of a suite.
pub const KIND: &str = "PolicyTest";

/// A test suite document.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyTest {
    /// `portcullis.dev/v1alpha1`.
    pub api_version: String,
    /// `PolicyTest`.
    pub kind: String,
    /// The suite's name.
    pub metadata: SuiteMetadata,
    /// Policy files or folders, relative to the suite file; empty for the built-in set.
    #[serde(default)]
    pub policies: Vec<PathBuf>,
    /// Files of manifests or AdmissionReviews the cases select from.
    pub resources: Vec<PathBuf>,
    /// Files of Namespace manifests, for namespace selectors and Pod Security labels.
    /// Namespaces among `resources` count too.
    #[serde(default)]
    pub namespaces: Vec<PathBuf>,
    /// Answers to CEL `authorizer` checks for every case that states none; when unset,
    /// those of `portcullis test --authorizer`.
    #[serde(default)]
    pub authorizer: Option<AnswerTable>,
    /// The cases.
    pub cases: Vec<TestCase>,
}

/// `metadata` of a suite.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteMetadata {
    /// The name the result table shows.
    pub name: String,
}

/// One case: a resource, an operation, and what must come of it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestCase {
    /// Shown in the result table; `OPERATION Kind namespace/name` when unset.
    #[serde(default)]
    pub name: Option<String>,
    /// Which resource document the case is about.
    pub resource: ResourceSelector,
    /// The operation (CREATE when unset); not allowed for an AdmissionReview.
    #[serde(default)]
    pub operation: Option<Operation>,
    /// Answers to CEL `authorizer` checks for this case, instead of the suite's.
    #[serde(default)]
    pub authorizer: Option<AnswerTable>,
    /// What the decision must be.
    pub expect: Expectation,
}

/// Selects exactly one resource document.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceSelector {
    /// `apiVersion`, when the kind alone is ambiguous.
    #[serde(default)]
    pub api_version: Option<String>,
    /// Kind.
    pub kind: String,
    /// Namespace (namespaced objects without one are in `default`); any when unset.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl fmt::Display for ResourceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(api_version) = &self.api_version {
            write!(f, "{api_version} ")?;
        }
        write!(f, "{} ", self.kind)?;
        if let Some(namespace) = &self.namespace {
            write!(f, "{namespace}/")?;
        }
        f.write_str(&self.name)
    }
}

/// What a case's decision must be. Every field is optional; at least one must be set.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expectation {
    /// Whether the request is admitted.
    #[serde(default)]
    pub allowed: Option<bool>,
    /// Violations that must each be among the decision's; `[]` means there must be none.
    #[serde(default)]
    pub violations: Option<Vec<ExpectedViolation>>,
    /// Warnings: how many, or substrings that must each be in some warning.
    #[serde(default)]
    pub warnings: Option<ExpectedWarnings>,
    /// Audit annotations: each key must be present and its value contain the text.
    #[serde(default)]
    pub audit_annotations: Option<BTreeMap<String, String>>,
    /// Whether `/mutate` returns a patch.
    #[serde(default)]
    pub mutated: Option<bool>,
    /// A file (relative to the suite) holding the object after `/mutate` (the object itself
    /// when nothing is patched), compared as JSON.
    #[serde(default)]
    pub patched_object: Option<PathBuf>,
}

impl Expectation {
    fn is_empty(&self) -> bool {
        self.allowed.is_none()
            && self.violations.is_none()
            && self.warnings.is_none()
            && self.audit_annotations.is_none()
            && self.mutated.is_none()
            && self.patched_object.is_none()
    }
}

/// An expected violation: the fields given must match (`message` as a substring).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedViolation {
    /// The policy's name.
    #[serde(default)]
    pub policy: Option<String>,
    /// The rule's name.
    #[serde(default)]
    pub rule: Option<String>,
    /// The field path, exactly.
    #[serde(default)]
    pub path: Option<String>,
    /// Text the message contains.
    #[serde(default)]
    pub message: Option<String>,
}

impl ExpectedViolation {
    fn matches(&self, violation: &Violation) -> bool {
        let equal = |expected: &Option<String>, actual: &str| {
            expected.as_deref().is_none_or(|e| e == actual)
        };
        equal(&self.policy, &violation.policy)
            && equal(&self.rule, &violation.rule)
            && equal(&self.path, &violation.path)
            && self
                .message
                .as_deref()
                .is_none_or(|m| violation.message.contains(m))
    }
}

impl fmt::Display for ExpectedViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fields: Vec<String> = [
            ("policy", &self.policy),
            ("rule", &self.rule),
            ("path", &self.path),
            ("message", &self.message),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some(format!("{name}: {}", value.as_deref()?)))
        .collect();
        write!(f, "{{{}}}", fields.join(", "))
    }
}

/// Expected warnings.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ExpectedWarnings {
    /// Exactly this many.
    Count(usize),
    /// Each text must be contained in some warning.
    Contain(Vec<String>),
}

// ---------------------------------------------------------------------------------------------
// Results

/// How a case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseStatus {
    /// Every expectation held.
    Pass,
    /// Some expectation did not hold.
    Fail,
    /// The suite could not be loaded, or the case not evaluated.
    Error,
    /// Not run: skipped by the suite, or (gator suites) not supported, with the reason.
    Skip,
}

impl CaseStatus {
    fn label(self) -> &'static str {
        match self {
            CaseStatus::Pass => "PASS",
            CaseStatus::Fail => "FAIL",
            CaseStatus::Error => "ERROR",
            CaseStatus::Skip => "SKIP",
        }
    }
}

/// One row of the result table.
#[derive(Debug, Clone)]
pub struct CaseOutcome {
    /// The suite's name (or its file, when it could not be read).
    pub suite: String,
    /// The case's name (`-` for a suite error).
    pub case: String,
    /// How it ended.
    pub status: CaseStatus,
    /// Why it failed; empty for a pass.
    pub reason: String,
}

/// The outcome of running suites.
#[derive(Debug, Clone, Default)]
pub struct SuiteRun {
    /// One row per case, and one per suite that could not be loaded.
    pub rows: Vec<CaseOutcome>,
}

impl SuiteRun {
    fn count(&self, status: CaseStatus) -> usize {
        self.rows.iter().filter(|r| r.status == status).count()
    }

    /// 0 when every case passed, 1 when some failed, 2 when a suite could not be loaded or a
    /// case not evaluated.
    pub fn exit_code(&self) -> u8 {
        if self.count(CaseStatus::Error) > 0 {
            2
        } else if self.count(CaseStatus::Fail) > 0 {
            1
        } else {
            0
        }
    }

    /// The result table: suite, case, result, reason; then a summary line.
    pub fn table(&self) -> String {
        let width = |header: &str, column: fn(&CaseOutcome) -> &str| {
            self.rows
                .iter()
                .map(|r| column(r).chars().count())
                .chain([header.len()])
                .max()
                .unwrap_or(0)
        };
        let suite_width = width("SUITE", |r| &r.suite);
        let case_width = width("CASE", |r| &r.case);
        let mut out = String::new();
        let mut line = |suite: &str, case: &str, result: &str, reason: &str| {
            let row = format!("{suite:<suite_width$}  {case:<case_width$}  {result:<6}  {reason}");
            let _ = writeln!(out, "{}", row.trim_end());
        };
        line("SUITE", "CASE", "RESULT", "REASON");
        for row in &self.rows {
            line(&row.suite, &row.case, row.status.label(), &row.reason);
        }
        let _ = write!(
            out,
            "{} passed, {} failed, {} errors",
            self.count(CaseStatus::Pass),
            self.count(CaseStatus::Fail),
            self.count(CaseStatus::Error)
        );
        let skipped = self.count(CaseStatus::Skip);
        if skipped > 0 {
            let _ = write!(out, ", {skipped} skipped");
        }
        out.push('\n');
        out
    }

    fn error(&mut self, suite: impl Into<String>, reason: impl fmt::Display) {
        self.rows.push(CaseOutcome {
            suite: suite.into(),
            case: "-".into(),
            status: CaseStatus::Error,
            reason: reason.to_string(),
        });
    }
}

/// Finds, loads and runs the suites under `paths`. `load_engine` turns a suite's policy
/// paths into an engine (the built-in set for an empty list).
pub fn run_suites<E: fmt::Display>(
    paths: &[PathBuf],
    load_engine: impl Fn(&[PathBuf]) -> Result<Engine, E>,
) -> SuiteRun {
    run_suites_with(paths, SuiteOptions::default(), load_engine)
}

/// How [`run_suites_with`] runs suites.
#[derive(Clone, Copy, Default)]
pub struct SuiteOptions<'a> {
    /// Answers CEL `authorizer` checks in suites and cases that state none of their own.
    pub authorizer: Option<&'a AnswerTable>,
    /// gator suites: run each case of a template that carries both `K8sNativeValidation` and
    /// `Rego` code through both engines; a case whose engines give different numbers of
    /// violations fails.
    pub compare_engines: bool,
}

/// [`run_suites`], with `options`.
pub fn run_suites_with<E: fmt::Display>(
    paths: &[PathBuf],
    options: SuiteOptions<'_>,
    load_engine: impl Fn(&[PathBuf]) -> Result<Engine, E>,
) -> SuiteRun {
    let authorizer = options.authorizer;
    let mut run = SuiteRun::default();
    for suite_file in suite_files(paths) {
        let (file, text) = match suite_file {
            Ok(found) => found,
            Err((path, reason)) => {
                run.error(path, reason);
                continue;
            }
        };
        let shown = file.display().to_string();
        let documents = match yaml_documents(&file, &text) {
            Ok(documents) => documents,
            Err(e) => {
                run.error(shown, e);
                continue;
            }
        };
        if !documents.iter().any(|(_, value)| is_any_suite(value)) {
            let mut kinds: Vec<&str> = Vec::new();
            for (_, value) in &documents {
                let kind = value
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("no kind");
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
            run.error(
                shown,
                format!(
                    "holds no {KIND} (kinds: {}) and no gator {}",
                    kinds.join(", "),
                    gator::KIND
                ),
            );
            continue;
        }
        for (source, value) in documents {
            if gator::is_gator_suite(&value) {
                gator::run_suite(&source, value, &mut run, options.compare_engines);
                continue;
            }
            if !is_suite_document(&value) {
                let kind = value.get("kind").and_then(Value::as_str).unwrap_or("none");
                run.error(
                    source.to_string(),
                    format!(
                        "kind: expected {KIND} or gator {}, got {kind} (a suite file holds only suites)",
                        gator::KIND
                    ),
                );
                continue;
            }
            let name = value
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map_or_else(|| source.to_string(), str::to_owned);
            match load_suite(&source, value, authorizer, &load_engine) {
                Ok(suite) => {
                    for case in &suite.cases {
                        run.rows.push(run_case(&suite, case));
                    }
                }
                Err(reason) => run.error(name, reason),
            }
        }
    }
    run
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::offline::input::Source;

    #[test]
    fn differences_name_the_pointer() {
        let expected = json!({"spec": {"containers": [{"name": "a", "x/y": 1}], "b": true}});
        assert_eq!(first_difference(&expected, &expected), None);
        let actual = json!({"spec": {"containers": [{"name": "a", "x/y": 2}], "b": true}});
        assert_eq!(
            first_difference(&expected, &actual).unwrap(),
            "/spec/containers/0/x~1y: expected 1, got 2"
        );
        let actual = json!({"spec": {"containers": [], "b": true, "c": 1}});
        assert_eq!(
            first_difference(&expected, &actual).unwrap(),
            "/spec/c: unexpected 1"
        );
        let actual = json!({"spec": {"containers": [], "b": true}});
        assert_eq!(
            first_difference(&expected, &actual).unwrap(),
            "/spec/containers: expected 1 items, got 0"
        );
        assert!(
            first_difference(&json!({"a": 1}), &json!({}))
                .unwrap()
                .contains("/a: missing")
        );
    }

    #[test]
    fn expectations_must_say_something() {
        assert!(Expectation::default().is_empty());
    }

    #[test]
    fn unknown_fields_are_errors() {
        let value = json!({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "s"},
            "resources": [], "cases": [{"resource": {"kind": "Pod", "name": "p"},
            "expect": {"alowed": true}}]});
        let source = Source {
            file: "s.yaml".into(),
            index: 0,
            item: None,
        };
        let error = load_suite(&source, value, None, &|_: &[PathBuf]| {
            Ok::<_, String>(Engine::builtin())
        })
        .err()
        .unwrap();
        assert!(
            error
                .starts_with("s.yaml (document 0): cases[0].expect.alowed: unknown field `alowed`"),
            "{error}"
        );
    }
}
