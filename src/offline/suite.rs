//! `PolicyTest` suites: resources with the decisions a policy set must make about them.
//!
//! ```yaml
//! apiVersion: portcullis.dev/v1alpha1
//! kind: PolicyTest
//! metadata: {name: pods}
//! policies: []                   # files or folders, relative to this file; [] = built-in set
//! resources: [resources.yaml]    # manifests and AdmissionReviews, relative to this file
//! namespaces: [namespaces.yaml]  # Namespace manifests whose labels rules may look up
//! cases:
//!   - name: privileged pod is denied          # optional
//!     resource: {kind: Pod, namespace: team-a, name: web}   # apiVersion optional
//!     operation: CREATE                       # CREATE (default), UPDATE or DELETE
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

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::check::{CheckResult, Checker};
use super::input::{
    Input, InputDocument, InputError, Source, namespaces_of, read_inputs, yaml_documents,
};
use super::manifest::api_version;
use crate::admission::Operation;
use crate::engine::{Engine, StaticNamespaces, Violation};

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
}

impl CaseStatus {
    fn label(self) -> &'static str {
        match self {
            CaseStatus::Pass => "PASS",
            CaseStatus::Fail => "FAIL",
            CaseStatus::Error => "ERROR",
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
        let _ = writeln!(
            out,
            "{} passed, {} failed, {} errors",
            self.count(CaseStatus::Pass),
            self.count(CaseStatus::Fail),
            self.count(CaseStatus::Error)
        );
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

// ---------------------------------------------------------------------------------------------
// Finding and loading suites

fn is_yaml(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

/// The YAML files under a folder, sorted, skipping names that start with `.`.
fn yaml_files(folder: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    crate::policy::collect_files(folder, &is_yaml, files).map_err(|(_, e)| e)
}

fn is_suite_document(value: &Value) -> bool {
    value.get("kind").and_then(Value::as_str) == Some(KIND)
}

/// A suite file to run, or why a path given yields none.
type SuiteFile = Result<(PathBuf, String), (String, String)>;

/// The suite files among `paths`, in order: a file is taken as given; a folder is searched
/// (with its subfolders) for `.yaml`/`.yml` files holding a `PolicyTest`. Files there that
/// are not YAML at all (templates, say) are passed over.
fn suite_files(paths: &[PathBuf]) -> Vec<SuiteFile> {
    let mut suites = Vec::new();
    for path in paths {
        let shown = path.display().to_string();
        if !path.is_dir() {
            suites.push(match std::fs::read_to_string(path) {
                Ok(text) => Ok((path.clone(), text)),
                Err(e) => Err((shown, format!("cannot read: {e}"))),
            });
            continue;
        }
        let mut files = Vec::new();
        if let Err(e) = yaml_files(path, &mut files) {
            suites.push(Err((shown, format!("cannot read folder: {e}"))));
            continue;
        }
        let before = suites.len();
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let holds_suite = yaml_documents(&file, &text)
                .is_ok_and(|documents| documents.iter().any(|(_, v)| is_suite_document(v)));
            if holds_suite {
                suites.push(Ok((file, text)));
            }
        }
        if suites.len() == before {
            suites.push(Err((shown, format!("no {KIND} found in this folder"))));
        }
    }
    suites
}

struct LoadedCase {
    name: String,
    document: InputDocument,
    operation: Operation,
    expect: Expectation,
    patched_object: Option<Value>,
}

struct LoadedSuite {
    name: String,
    engine: Engine,
    namespaces: StaticNamespaces,
    cases: Vec<LoadedCase>,
}

fn suite_error(source: &Source, field: &str, message: impl fmt::Display) -> String {
    if field.is_empty() {
        format!("{source}: {message}")
    } else {
        format!("{source}: {field}: {message}")
    }
}

fn relative(base: &Path, paths: &[PathBuf]) -> Vec<PathBuf> {
    paths.iter().map(|p| base.join(p)).collect()
}

fn single_document(file: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let mut documents = yaml_documents(file, &text).map_err(|e| e.to_string())?;
    match documents.len() {
        1 => Ok(documents.remove(0).1),
        n => Err(format!(
            "{} must hold exactly one document, it holds {n}",
            file.display()
        )),
    }
}

fn selects(selector: &ResourceSelector, document: &InputDocument) -> bool {
    let (api_version, kind, namespace, name) = match &document.input {
        Input::Manifest(m) => (m.api_version(), &m.kind.kind, &m.namespace, &m.name),
        Input::Review(r) => (
            api_version(&r.request.kind),
            &r.request.kind.kind,
            &r.request.namespace,
            &r.request.name,
        ),
    };
    *kind == selector.kind
        && name.as_deref() == Some(selector.name.as_str())
        && selector
            .namespace
            .as_ref()
            .is_none_or(|n| namespace.as_ref() == Some(n))
        && selector
            .api_version
            .as_ref()
            .is_none_or(|v| *v == api_version)
}

fn load_suite<E: fmt::Display>(
    source: &Source,
    value: Value,
    load_engine: &impl Fn(&[PathBuf]) -> Result<Engine, E>,
) -> Result<LoadedSuite, String> {
    let suite: PolicyTest = serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { String::new() } else { field };
        suite_error(source, &field, e.into_inner())
    })?;
    if suite.api_version != API_VERSION {
        return Err(suite_error(
            source,
            "apiVersion",
            format!("must be {API_VERSION}, got {:?}", suite.api_version),
        ));
    }
    if suite.cases.is_empty() {
        return Err(suite_error(
            source,
            "cases",
            "a suite needs at least one case",
        ));
    }
    let base = source.file.parent().unwrap_or(Path::new("."));
    let engine = load_engine(&relative(base, &suite.policies))
        .map_err(|e| suite_error(source, "policies", format!("{e:#}")))?;
    let resources = read_inputs(&relative(base, &suite.resources))
        .map_err(|e: InputError| suite_error(source, "resources", e))?;
    let namespace_documents = read_inputs(&relative(base, &suite.namespaces))
        .map_err(|e| suite_error(source, "namespaces", e))?;
    if let Some(other) = namespace_documents.iter().find(|d| {
        d.manifest()
            .is_none_or(|m| !m.kind.group.is_empty() || m.kind.kind != "Namespace")
    }) {
        return Err(suite_error(
            source,
            "namespaces",
            format!("{}: only Namespace manifests belong here", other.source),
        ));
    }
    let mut all = namespace_documents;
    all.extend(resources.iter().cloned());
    let namespaces = namespaces_of(&all);

    let mut cases = Vec::new();
    for (index, case) in suite.cases.into_iter().enumerate() {
        let field = |name: &str| format!("cases[{index}].{name}");
        if case.expect.is_empty() {
            return Err(suite_error(
                source,
                &field("expect"),
                "states nothing to check (allowed, violations, warnings, auditAnnotations, mutated, patchedObject)",
            ));
        }
        let matching: Vec<&InputDocument> = resources
            .iter()
            .filter(|d| selects(&case.resource, d))
            .collect();
        let document = match matching.as_slice() {
            [one] => (*one).clone(),
            [] => {
                return Err(suite_error(
                    source,
                    &field("resource"),
                    format!("no resource is {}", case.resource),
                ));
            }
            several => {
                let sources: Vec<String> = several.iter().map(|d| d.source.to_string()).collect();
                return Err(suite_error(
                    source,
                    &field("resource"),
                    format!(
                        "{} resources are {} ({}); add namespace or apiVersion",
                        several.len(),
                        case.resource,
                        sources.join(", ")
                    ),
                ));
            }
        };
        let operation = match (&document.input, case.operation) {
            (Input::Review(review), None) => review.request.operation,
            (Input::Review(_), Some(_)) => {
                return Err(suite_error(
                    source,
                    &field("operation"),
                    "the resource is an AdmissionReview, which carries its own operation",
                ));
            }
            (Input::Manifest(_), None) => Operation::Create,
            (Input::Manifest(_), Some(Operation::Connect)) => {
                return Err(suite_error(
                    source,
                    &field("operation"),
                    "CONNECT has no object to test; use CREATE, UPDATE or DELETE",
                ));
            }
            (Input::Manifest(_), Some(operation)) => operation,
        };
        let patched_object = match &case.expect.patched_object {
            Some(file) => Some(
                single_document(&base.join(file))
                    .map_err(|e| suite_error(source, &field("expect.patchedObject"), e))?,
            ),
            None => None,
        };
        let name = case.name.clone().unwrap_or_else(|| {
            let mut name = format!("{operation} {} ", case.resource.kind);
            if let Some(namespace) = &case.resource.namespace {
                name.push_str(namespace);
                name.push('/');
            }
            name.push_str(&case.resource.name);
            name
        });
        cases.push(LoadedCase {
            name,
            document,
            operation,
            expect: case.expect,
            patched_object,
        });
    }
    Ok(LoadedSuite {
        name: suite.metadata.name,
        engine,
        namespaces,
        cases,
    })
}

// ---------------------------------------------------------------------------------------------
// Comparing

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

fn run_case(suite: &LoadedSuite, case: &LoadedCase) -> CaseOutcome {
    let checker = Checker::new(&suite.engine, &suite.namespaces);
    let request = Checker::request(&case.document, case.operation);
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

/// Finds, loads and runs the suites under `paths`. `load_engine` turns a suite's policy
/// paths into an engine (the built-in set for an empty list).
pub fn run_suites<E: fmt::Display>(
    paths: &[PathBuf],
    load_engine: impl Fn(&[PathBuf]) -> Result<Engine, E>,
) -> SuiteRun {
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
        if !documents.iter().any(|(_, value)| is_suite_document(value)) {
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
                format!("holds no {KIND} (kinds: {})", kinds.join(", ")),
            );
            continue;
        }
        for (source, value) in documents {
            if !is_suite_document(&value) {
                let kind = value.get("kind").and_then(Value::as_str).unwrap_or("none");
                run.error(
                    source.to_string(),
                    format!("kind: expected {KIND}, got {kind} (a suite file holds only suites)"),
                );
                continue;
            }
            let name = value
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map_or_else(|| source.to_string(), str::to_owned);
            match load_suite(&source, value, &load_engine) {
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
        let error = load_suite(&source, value, &|_: &[PathBuf]| {
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
