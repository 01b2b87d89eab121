//! OPA Gatekeeper's gator `Suite` files (`test.gatekeeper.sh/v1alpha1`), run unchanged with
//! the meaning `gator verify` (Gatekeeper v3.23.1, `pkg/gator/verify`) gives them:
//!
//! ```yaml
//! apiVersion: test.gatekeeper.sh/v1alpha1
//! kind: Suite
//! tests:
//!   - name: required-labels
//!     template: templates/k8srequiredlabels.yaml      # relative to the suite file
//!     constraint: constraints/owner-required.yaml
//!     cases:
//!       - name: unlabelled
//!         object: objects/ns-unowned.yaml             # one object, or an AdmissionReview
//!         inventory: [objects/ns-other.yaml]          # data.inventory (and Namespaces to match)
//!         assertions:
//!           - violations: 1                           # yes (the default), no, or a count
//!             message: ^every namespace               # a regular expression; optional
//! ```
//!
//! Each test compiles its template and constraint (the first document of each file) into an
//! [`Engine`]; each case is the validating call of that engine at gator's enforcement point,
//! with `data.inventory` and the namespaces for matching made from the case's inventory
//! files only. An object is reviewed as written (not defaulted, and whatever the webhook
//! registration would send), as gator reviews it; an AdmissionReview as its request, with its
//! operation, user and old object. Every result of the constraint counts, whatever its
//! enforcement action (gator's `Responses.Results`); an assertion counts the results whose
//! message its `message` matches, and the assertions of a case all must hold.
//!
//! A test marked `invalid: true` passes when the template loads and the constraint's
//! `spec.parameters` are refused by the template's `openAPIV3Schema` (gator's
//! `constraints.ErrSchema`); any other outcome fails it. A test's `expansion` file holds
//! ExpansionTemplates (every document must be one): each case's object (not an AdmissionReview)
//! is expanded as gator expands it, and the results about the objects it generates count too,
//! worded `[Implied by <template>] <msg>`. A suite, test or case marked `skip: true` is `SKIP`,
//! as gator skips it.

use std::panic::AssertUnwindSafe;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::{CaseOutcome, CaseStatus, SuiteRun};
use crate::admission::Operation;
use crate::engine::gatekeeper::{EnforcementPoint, Inventory, TemplateEngine};
use crate::engine::{Endpoint, Engine, EvalContext, Labels, StaticNamespaces};
use crate::offline::check::Checker;
use crate::offline::input::{Input, Source, parse_input, yaml_documents};
use crate::policy::gatekeeper::{CONSTRAINTS_GROUP, TEMPLATES_GROUP};
use crate::policy::gatekeeper_expansion::EXPANSION_GROUP;
use crate::policy::{SourcedDocument, documents_from_str, parse_documents};

/// The API group of gator suites (any version, as gator reads them).
pub(super) const GROUP: &str = "test.gatekeeper.sh";
/// `kind` of a gator suite.
pub(super) const KIND: &str = "Suite";
/// Gatekeeper's name for gator's enforcement point, in `scopedEnforcementActions`.
const GATOR_POINT: &str = "gator.gatekeeper.sh";

/// Whether a document is a gator suite: group `test.gatekeeper.sh`, kind `Suite`.
pub(super) fn is_gator_suite(value: &Value) -> bool {
    value.get("kind").and_then(Value::as_str) == Some(KIND) && group_of(value) == Some(GROUP)
}

fn group_of(value: &Value) -> Option<&str> {
    let api_version = value.get("apiVersion")?.as_str()?;
    api_version.split_once('/').map(|(group, _)| group)
}

// ---------------------------------------------------------------------------------------------
// The format, read as gator reads it: unknown fields are ignored, absent and null ones are
// empty, wrong types are errors.

#[derive(Debug, Default, Deserialize)]
struct Suite {
    tests: Option<Vec<Test>>,
    skip: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct Test {
    name: Option<String>,
    template: Option<String>,
    constraint: Option<String>,
    expansion: Option<String>,
    cases: Option<Vec<Case>>,
    invalid: Option<bool>,
    skip: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct Case {
    name: Option<String>,
    object: Option<String>,
    inventory: Option<Vec<String>>,
    assertions: Option<Vec<Assertion>>,
    skip: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct Assertion {
    /// A count, `"yes"` or `"no"` (Kubernetes' IntOrString); `"yes"` when absent.
    violations: Option<Value>,
    /// A regular expression the counted violations' messages match.
    message: Option<String>,
}

/// `violations` of an assertion.
#[derive(Debug, Clone, PartialEq)]
enum Want {
    Count(i64),
    Text(String),
}

impl Want {
    /// As gator's IntOrString reads it: a string, or an integer that fits in 32 bits.
    fn parse(value: Option<&Value>) -> Result<Self, String> {
        match value {
            None | Some(Value::Null) => Ok(Want::Text("yes".into())),
            Some(Value::String(text)) => Ok(Want::Text(text.clone())),
            Some(Value::Number(number)) => number
                .as_i64()
                .filter(|n| i32::try_from(*n).is_ok())
                .map(Want::Count)
                .ok_or_else(|| format!("{number} is not a 32-bit integer")),
            Some(other) => Err(format!(
                "must be an integer, \"yes\" or \"no\", got {other}"
            )),
        }
    }
}

fn flag(value: Option<bool>) -> bool {
    value.unwrap_or(false)
}

fn text(value: Option<&String>) -> &str {
    value.map_or("", String::as_str)
}

/// A path of the suite, relative to its folder, cleaned as gator's `path.Join` cleans it: a
/// leading `/` does not make it absolute, and `dir/..` is removed.
fn at(base: &Path, path: &str) -> PathBuf {
    let mut joined = PathBuf::new();
    for component in base.join(path.trim_start_matches('/')).components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match joined.components().next_back() {
                Some(Component::Normal(_)) => {
                    joined.pop();
                }
                // `/..` is `/`.
                Some(Component::RootDir) => {}
                _ => joined.push(".."),
            },
            other => joined.push(other),
        }
    }
    if joined.as_os_str().is_empty() {
        joined.push(".");
    }
    joined
}

// ---------------------------------------------------------------------------------------------
// Running

struct Rows<'r> {
    run: &'r mut SuiteRun,
    suite: String,
    /// Whether cases run through both engines of templates that carry both.
    compare_engines: bool,
}

impl Rows<'_> {
    fn push(&mut self, case: impl Into<String>, status: CaseStatus, reason: impl Into<String>) {
        self.run.rows.push(CaseOutcome {
            suite: self.suite.clone(),
            case: case.into(),
            status,
            reason: reason.into(),
        });
    }
}

/// Runs one gator suite document (`source` names it) and adds its rows to `run`: one per
/// case, one per test that does not reach its cases, one for a suite that is skipped or has
/// no tests.
pub(super) fn run_suite(source: &Source, value: Value, run: &mut SuiteRun, compare_engines: bool) {
    let suite_name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .map_or_else(|| source.file.display().to_string(), str::to_owned);
    let mut rows = Rows {
        run,
        suite: suite_name,
        compare_engines,
    };
    let suite: Suite = match serde_path_to_error::deserialize(value) {
        Ok(suite) => suite,
        Err(error) => {
            let field = error.path().to_string();
            let at = if field == "." {
                String::new()
            } else {
                format!("{field}: ")
            };
            rows.push(
                "-",
                CaseStatus::Error,
                format!("{source}: {at}{}", error.into_inner()),
            );
            return;
        }
    };
    // Checked as gator checks them when it reads the suite: an error in any makes the file
    // unreadable.
    for (t, test) in suite.tests.iter().flatten().enumerate() {
        for (c, case) in test.cases.iter().flatten().enumerate() {
            for (a, assertion) in case.assertions.iter().flatten().enumerate() {
                if let Err(error) = Want::parse(assertion.violations.as_ref()) {
                    rows.push(
                        "-",
                        CaseStatus::Error,
                        format!(
                            "{source}: tests[{t}].cases[{c}].assertions[{a}].violations: {error}"
                        ),
                    );
                    return;
                }
            }
        }
    }
    if flag(suite.skip) {
        rows.push("-", CaseStatus::Skip, "skip: true");
        return;
    }
    let tests = suite.tests.unwrap_or_default();
    if tests.is_empty() {
        rows.push("-", CaseStatus::Skip, "the suite has no tests");
        return;
    }
    let base = source.file.parent().unwrap_or(Path::new("."));
    for (index, test) in tests.into_iter().enumerate() {
        run_test(&mut rows, base, index, test);
    }
}

/// A test's engine (its template, and its constraint unless only the template was asked
/// for) and the constraint's name.
struct Compiled {
    engine: Engine,
    constraint_name: String,
}

fn run_test(rows: &mut Rows<'_>, base: &Path, index: usize, test: Test) {
    let name = test
        .name
        .clone()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| format!("tests[{index}]"));
    if flag(test.skip) {
        rows.push(name, CaseStatus::Skip, "skip: true");
        return;
    }
    if flag(test.invalid) {
        let (status, reason) = invalid_test(base, &test);
        rows.push(name, status, reason);
        return;
    }
    let compiled = match compile(base, &test, true) {
        Ok(compiled) => compiled,
        Err(reason) => {
            rows.push(name, CaseStatus::Error, reason);
            return;
        }
    };
    let cases = test.cases.unwrap_or_default();
    if cases.is_empty() {
        rows.push(
            name,
            CaseStatus::Pass,
            "no cases: the template and constraint load",
        );
        return;
    }
    for (index, case) in cases.into_iter().enumerate() {
        let case_name = format!(
            "{name}/{}",
            case.name
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| format!("cases[{index}]"))
        );
        let (status, reason) = run_case(base, &compiled, &case, rows.compare_engines);
        rows.push(case_name, status, reason);
    }
}

/// The start of the engine's words when a constraint's `spec.parameters` do not meet the
/// template's `openAPIV3Schema` (gator's `constraints.ErrSchema`).
const SCHEMA_ERROR: &str = "invalid constraint: spec.parameters";

/// A test whose constraint the template's schema must refuse (`invalid: true`): it passes
/// when the template and constraint are read and the constraint's parameters are refused by
/// the schema; it fails when the constraint loads or is refused for another reason, as in
/// gator (`constraint should have failed schema validation`). A template or constraint that
/// cannot be read is an error.
fn invalid_test(base: &Path, test: &Test) -> (CaseStatus, String) {
    let read = compile(base, test, false).and_then(|_| {
        let template = template_document(base, test)?;
        let (constraint, _) = constraint_document(base, test)?;
        Ok([template, constraint])
    });
    let documents = match read {
        Ok(documents) => documents,
        Err(reason) => return (CaseStatus::Error, reason),
    };
    match Engine::compile(&documents) {
        Err(error) if error.message.starts_with(SCHEMA_ERROR) => (
            CaseStatus::Pass,
            format!("refused by the template's schema, as wanted: {error}"),
        ),
        Err(error) => (
            CaseStatus::Fail,
            format!(
                "constraint should have failed schema validation: got error {error} but want a \
                 schema error"
            ),
        ),
        Ok(_) => (
            CaseStatus::Fail,
            "constraint should have failed schema validation: it loads".to_owned(),
        ),
    }
}

/// The first document of a file (gator reads templates and constraints with one YAML
/// decode, which takes the first document).
fn first_document(path: &Path) -> Result<(crate::policy::DocumentSource, Value), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_documents(path, &text)
        .map_err(|e| e.to_string())?
        .into_iter()
        .next()
        .ok_or_else(|| format!("{}: holds no document", path.display()))
}

/// Recognises one document as a policy document, keeping its place in its file.
fn recognise(
    source: &crate::policy::DocumentSource,
    value: &Value,
) -> Result<SourcedDocument, String> {
    let json = serde_json::to_string(value).map_err(|e| format!("{source}: {e}"))?;
    let mut documents = documents_from_str(&source.file, &json).map_err(|mut error| {
        if let Some(document) = &mut error.document {
            document.index = source.index;
        }
        error.to_string()
    })?;
    let mut document = documents
        .pop()
        .ok_or_else(|| format!("{source}: holds no document"))?;
    document.source.index = source.index;
    Ok(document)
}

fn kind_of(value: &Value) -> String {
    format!(
        "{} {}",
        value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("(no apiVersion)"),
        value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("(no kind)")
    )
}

/// The test's template, checked to be a ConstraintTemplate.
fn template_document(base: &Path, test: &Test) -> Result<SourcedDocument, String> {
    let path = text(test.template.as_ref());
    if path.is_empty() {
        return Err("invalid Suite: missing template".into());
    }
    let (source, value) = first_document(&at(base, path))?;
    let is_template = group_of(&value) == Some(TEMPLATES_GROUP)
        && value.get("kind").and_then(Value::as_str) == Some("ConstraintTemplate");
    if !is_template {
        return Err(format!(
            "{source}: not a ConstraintTemplate ({TEMPLATES_GROUP}): {}",
            kind_of(&value)
        ));
    }
    recognise(&source, &value)
}

/// The test's constraint, checked to be a Constraint, with its name, and with every action
/// it takes at gator's enforcement point made `deny`.
fn constraint_document(base: &Path, test: &Test) -> Result<(SourcedDocument, String), String> {
    let path = text(test.constraint.as_ref());
    if path.is_empty() {
        return Err("invalid Suite: missing constraint".into());
    }
    let (source, mut value) = first_document(&at(base, path))?;
    if group_of(&value) != Some(CONSTRAINTS_GROUP) {
        return Err(format!(
            "{source}: not a Constraint ({CONSTRAINTS_GROUP}): {}",
            kind_of(&value)
        ));
    }
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    deny_at_gator(&mut value);
    Ok((recognise(&source, &value)?, name))
}

/// gator counts every result of a constraint, whatever its enforcement action; the engine
/// answers only `deny` results as violations (`warn` as warnings, `dryrun` nowhere). So the
/// constraint is compiled with `deny` wherever it acts at gator's enforcement point: `deny`,
/// `warn` and `dryrun` become `deny`, and so does `scoped` when an entry names
/// `gator.gatekeeper.sh` or `*` (one result per violation, however many entries). A
/// `scoped` constraint with no entry for gator, or an action the engine does not know, is
/// left as written: it yields nothing at gator's point, or is refused at load.
fn deny_at_gator(constraint: &mut Value) {
    const ACTIONS: [&str; 3] = ["deny", "warn", "dryrun"];
    let Some(spec) = constraint.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let deny = match spec.get("enforcementAction").and_then(Value::as_str) {
        Some(action) if ACTIONS.contains(&action) => true,
        Some("scoped") => {
            let entries = spec
                .get("scopedEnforcementActions")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let known = entries.iter().all(|entry| {
                entry
                    .get("action")
                    .and_then(Value::as_str)
                    .is_some_and(|action| ACTIONS.contains(&action))
            });
            let here = entries.iter().any(|entry| {
                entry
                    .get("enforcementPoints")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|point| point.get("name").and_then(Value::as_str))
                    .any(|name| name == "*" || name == GATOR_POINT)
            });
            known && here
        }
        _ => false,
    };
    if deny {
        spec.insert("enforcementAction".into(), Value::String("deny".into()));
        spec.remove("scopedEnforcementActions");
    }
}

/// The engine of a test: its template alone, or (`with_constraint`) its template, constraint
/// and ExpansionTemplates.
fn compile(base: &Path, test: &Test, with_constraint: bool) -> Result<Compiled, String> {
    let mut documents = vec![template_document(base, test)?];
    let mut constraint_name = String::new();
    if with_constraint {
        let (constraint, name) = constraint_document(base, test)?;
        documents.push(constraint);
        constraint_name = name;
        let expansion = text(test.expansion.as_ref());
        if !expansion.is_empty() {
            documents.extend(expansion_documents(&at(base, expansion))?);
        }
    }
    let engine = Engine::compile(&documents).map_err(|e| e.to_string())?;
    Ok(Compiled {
        engine,
        constraint_name,
    })
}

/// The ExpansionTemplates of a test's `expansion` file (gator's `ReadExpansions`: at least one
/// document, every one an ExpansionTemplate), each without its `enforcementAction`: gator
/// counts every result, whatever the action it is given.
fn expansion_documents(path: &Path) -> Result<Vec<SourcedDocument>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("reading ExpansionTemplate from {:?}: {e}", path.display()))?;
    let values = parse_documents(path, &text).map_err(|e| e.to_string())?;
    let not_one = || {
        format!(
            "not an Expansion Template: {:?}",
            path.display().to_string()
        )
    };
    if values.is_empty() {
        return Err(not_one());
    }
    let mut documents = Vec::new();
    for (source, mut value) in values {
        let is_expansion = group_of(&value) == Some(EXPANSION_GROUP)
            && value.get("kind").and_then(Value::as_str) == Some("ExpansionTemplate");
        if !is_expansion {
            return Err(not_one());
        }
        if let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("enforcementAction");
        }
        documents.push(recognise(&source, &value)?);
    }
    Ok(documents)
}

/// The objects of an inventory file (every document, as written).
fn inventory_objects(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let objects: Vec<Value> = yaml_documents(path, &text)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|(_, value)| value)
        .collect();
    if objects.is_empty() {
        return Err(format!(
            "missing objects: {} defines no YAML objects",
            path.display()
        ));
    }
    Ok(objects)
}

/// The namespaces gator matches `namespaceSelector`s against: the `v1` Namespaces of the
/// inventory, with their labels as written.
fn namespaces_of(objects: &[Value]) -> StaticNamespaces {
    let mut namespaces = StaticNamespaces::default();
    for object in objects {
        let is_namespace = object.get("apiVersion").and_then(Value::as_str) == Some("v1")
            && object.get("kind").and_then(Value::as_str) == Some("Namespace");
        let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str) else {
            continue;
        };
        if !is_namespace {
            continue;
        }
        let labels: Labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
            .collect();
        namespaces.insert(name, labels);
    }
    namespaces
}

/// The messages of the constraint's results for a case's object.
fn review(
    base: &Path,
    compiled: &Compiled,
    case: &Case,
    engine: TemplateEngine,
) -> Result<Vec<String>, String> {
    let path = at(base, text(case.object.as_ref()));
    let bytes =
        std::fs::read(&path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let documents = parse_input(&path, &bytes).map_err(|e| e.to_string())?;
    let [document] = documents.as_slice() else {
        return Err(format!(
            "object file must contain exactly one object: {} defines {} objects",
            path.display(),
            documents.len()
        ));
    };
    let mut objects = Vec::new();
    for inventory in case.inventory.iter().flatten() {
        objects.extend(inventory_objects(&at(base, inventory))?);
    }
    let inventory = Inventory::of(&objects);
    let namespaces = namespaces_of(&objects);
    let (request, written) = match &document.input {
        Input::Review(review) => {
            if review.request.object.is_none() && review.request.old_object.is_none() {
                return Err(format!(
                    "{}: no object or oldObject found to review",
                    document.source
                ));
            }
            (review.request.clone(), None)
        }
        // gator reviews the object as written, and knows no scopes: its namespace is what
        // `metadata.namespace` says. So the request `check` makes of the manifest gets the
        // object and namespace as written, not as `check` normalises them (`default` for a
        // namespaced object without one, none for a cluster-scoped object).
        Input::Manifest(manifest) => {
            let written = std::str::from_utf8(&bytes)
                .ok()
                .and_then(|text| yaml_documents(&path, text).ok())
                .and_then(|mut values| (values.len() == 1).then(|| values.remove(0).1))
                .unwrap_or_else(|| manifest.object.clone());
            let mut request = Checker::request(document, Operation::Create);
            request.namespace = written
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|namespace| !namespace.is_empty())
                .map(str::to_owned);
            request.object = Some(written.clone().into());
            (request, Some(written))
        }
    };
    let context = EvalContext::new(Endpoint::Validate)
        .with_namespaces(&namespaces)
        .at_enforcement_point(EnforcementPoint::Gator)
        .with_inventory(Some(&inventory))
        .made_from_object(written.as_ref())
        .with_template_engine(engine);
    let decision = match std::panic::catch_unwind(AssertUnwindSafe(|| {
        compiled.engine.evaluate(&request, &context)
    })) {
        Ok(Ok(decision)) => decision,
        Ok(Err(error)) => return Err(format!("{}: {error}", document.source)),
        Err(_) => return Err(format!("{}: a policy rule panicked", document.source)),
    };
    // A review failed as a whole (an object the ExpansionTemplates cannot expand) is gator's
    // error for the case.
    if decision
        .denial_status
        .is_some_and(|status| status.code == 500)
    {
        let message = decision.denial_message();
        return Err(message);
    }
    let prefix = format!("[{}] ", compiled.constraint_name);
    Ok(decision
        .violations
        .into_iter()
        .map(|violation| match violation.message.strip_prefix(&prefix) {
            Some(message) => message.to_owned(),
            None => violation.message,
        })
        .collect())
}

/// Why an assertion does not hold.
enum Problem {
    /// The count is not what it wants.
    Fail(String),
    /// The assertion cannot be checked (a bad regular expression or count).
    Invalid(String),
}

/// gator's `Assertion.Run`: counts the messages `message` matches (all without one) and
/// compares with `violations`. As in gator, the expression is compiled at the first message.
fn check(assertion: &Assertion, messages: &[String]) -> Result<(), Problem> {
    let pattern = match (&assertion.message, messages.is_empty()) {
        (Some(pattern), false) => Some(regex::Regex::new(pattern).map_err(|e| {
            // The last line of the parser's words, without the pattern drawn above it.
            let text = e.to_string();
            let why = text.lines().last().unwrap_or_default();
            let why = why.strip_prefix("error: ").unwrap_or(why);
            Problem::Invalid(format!(
                "message contains invalid regular expression {pattern:?}: {why}"
            ))
        })?),
        _ => None,
    };
    let matching = messages
        .iter()
        .filter(|m| pattern.as_ref().is_none_or(|p| p.is_match(m)))
        .count();
    let want = Want::parse(assertion.violations.as_ref()).map_err(Problem::Invalid)?;
    let invalid = || {
        Problem::Invalid("violations must be a nonnegative integer, \"yes\" or \"no\"".to_owned())
    };
    let (holds, wanted) = match &want {
        Want::Count(count) if *count < 0 => return Err(invalid()),
        Want::Count(count) => (
            i64::try_from(matching).is_ok_and(|m| m == *count),
            format!("exactly {count}"),
        ),
        Want::Text(text) if text == "yes" => (matching > 0, "at least 1".to_owned()),
        Want::Text(text) if text == "no" => (matching == 0, "none".to_owned()),
        Want::Text(_) => return Err(invalid()),
    };
    if holds {
        return Ok(());
    }
    let containing = assertion
        .message
        .as_ref()
        .map(|m| format!(" containing {m:?}"))
        .unwrap_or_default();
    Err(Problem::Fail(format!(
        "got {matching} violations{containing} but want {wanted}; messages: {messages:?}"
    )))
}

/// One case: `SKIP`, `ERROR` (it cannot be run or its assertions checked), `FAIL` (some
/// assertion does not hold, each named) or `PASS`.
fn run_case(
    base: &Path,
    compiled: &Compiled,
    case: &Case,
    compare_engines: bool,
) -> (CaseStatus, String) {
    if flag(case.skip) {
        return (CaseStatus::Skip, "skip: true".into());
    }
    if text(case.object.as_ref()).is_empty() {
        return (CaseStatus::Error, "invalid Case: must define object".into());
    }
    let assertions = case.assertions.as_deref().unwrap_or_default();
    if assertions.is_empty() {
        return (
            CaseStatus::Error,
            "invalid Case: assertions must be non-empty".into(),
        );
    }
    let messages = match review(base, compiled, case, TemplateEngine::Preferred) {
        Ok(messages) => messages,
        Err(reason) => return (CaseStatus::Error, reason),
    };
    if compare_engines {
        let rego = match review(base, compiled, case, TemplateEngine::Rego) {
            Ok(messages) => messages,
            Err(reason) => return (CaseStatus::Error, reason),
        };
        if rego.len() != messages.len() {
            return (
                CaseStatus::Fail,
                format!(
                    "the engines disagree: K8sNativeValidation gave {} violations {messages:?}, \
                     Rego {} {rego:?}",
                    messages.len(),
                    rego.len()
                ),
            );
        }
    }
    let mut failures = Vec::new();
    for (index, assertion) in assertions.iter().enumerate() {
        match check(assertion, &messages) {
            Ok(()) => {}
            Err(Problem::Fail(reason)) => failures.push(format!("assertions[{index}]: {reason}")),
            Err(Problem::Invalid(reason)) => {
                return (CaseStatus::Error, format!("assertions[{index}]: {reason}"));
            }
        }
    }
    if failures.is_empty() {
        (CaseStatus::Pass, String::new())
    } else {
        (CaseStatus::Fail, failures.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn assertion(violations: Value, message: Option<&str>) -> Assertion {
        Assertion {
            violations: Some(violations),
            message: message.map(str::to_owned),
        }
    }

    fn holds(assertion: &Assertion, messages: &[&str]) -> Result<(), String> {
        let messages: Vec<String> = messages.iter().map(|m| (*m).to_owned()).collect();
        check(assertion, &messages).map_err(|problem| match problem {
            Problem::Fail(reason) => format!("fail: {reason}"),
            Problem::Invalid(reason) => format!("invalid: {reason}"),
        })
    }

    #[test]
    fn paths_are_joined_as_gator_joins_them() {
        let base = Path::new("suites/semantics");
        assert_eq!(at(base, "../t.yaml"), PathBuf::from("suites/t.yaml"));
        assert_eq!(
            at(base, "/t.yaml"),
            PathBuf::from("suites/semantics/t.yaml")
        );
        assert_eq!(at(Path::new(""), "./a/../t.yaml"), PathBuf::from("t.yaml"));
        assert_eq!(
            at(Path::new(""), "../../t.yaml"),
            PathBuf::from("../../t.yaml")
        );
        assert_eq!(
            at(Path::new("/x"), "../../t.yaml"),
            PathBuf::from("/t.yaml")
        );
    }

    #[test]
    fn suites_are_recognised_by_group_and_kind() {
        assert!(is_gator_suite(
            &json!({"apiVersion": "test.gatekeeper.sh/v1alpha1", "kind": "Suite"})
        ));
        assert!(is_gator_suite(
            &json!({"apiVersion": "test.gatekeeper.sh/v1", "kind": "Suite"})
        ));
        assert!(!is_gator_suite(
            &json!({"apiVersion": "test.gatekeeper.sh", "kind": "Suite"})
        ));
        assert!(!is_gator_suite(
            &json!({"apiVersion": "portcullis.dev/v1alpha1", "kind": "Suite"})
        ));
    }

    #[test]
    fn assertions_count_as_gator_counts() {
        let messages = ["a missing", "b missing", "other"];
        assert!(holds(&assertion(json!("yes"), None), &messages).is_ok());
        assert!(holds(&Assertion::default(), &messages).is_ok());
        assert!(
            holds(&Assertion::default(), &[])
                .unwrap_err()
                .starts_with("fail: got 0")
        );
        assert!(holds(&assertion(json!(2), Some("missing$")), &messages).is_ok());
        assert!(holds(&assertion(json!("no"), Some("^x")), &messages).is_ok());
        assert_eq!(
            holds(&assertion(json!(1), Some("missing")), &messages).unwrap_err(),
            "fail: got 2 violations containing \"missing\" but want exactly 1; messages: \
             [\"a missing\", \"b missing\", \"other\"]"
        );
        assert!(holds(&assertion(json!(0), None), &[]).is_ok());
        // As gator: the expression is compiled at the first message only.
        assert!(holds(&assertion(json!("no"), Some("(")), &[]).is_ok());
        assert!(
            holds(&assertion(json!("no"), Some("(")), &["x"])
                .unwrap_err()
                .starts_with("invalid: message contains invalid regular expression")
        );
        assert!(
            holds(&assertion(json!(-1), None), &[])
                .unwrap_err()
                .starts_with("invalid")
        );
        assert!(
            holds(&assertion(json!("1"), None), &["x"])
                .unwrap_err()
                .starts_with("invalid")
        );
        assert!(Want::parse(Some(&json!(1.5))).is_err());
        assert!(Want::parse(Some(&json!(true))).is_err());
        assert!(Want::parse(Some(&json!(4_294_967_296_i64))).is_err());
    }

    #[test]
    fn every_action_at_gator_becomes_deny() {
        for action in ["deny", "warn", "dryrun"] {
            let mut constraint = json!({"spec": {"enforcementAction": action}});
            deny_at_gator(&mut constraint);
            assert_eq!(constraint["spec"]["enforcementAction"], "deny");
        }
        let mut unset = json!({"spec": {}});
        deny_at_gator(&mut unset);
        assert_eq!(unset, json!({"spec": {}}));
        let mut scoped = json!({"spec": {"enforcementAction": "scoped", "scopedEnforcementActions": [
            {"action": "warn", "enforcementPoints": [{"name": "gator.gatekeeper.sh"}]},
            {"action": "deny", "enforcementPoints": [{"name": "*"}]}]}});
        deny_at_gator(&mut scoped);
        assert_eq!(scoped, json!({"spec": {"enforcementAction": "deny"}}));
        let webhook_only = json!({"spec": {"enforcementAction": "scoped", "scopedEnforcementActions": [
            {"action": "deny", "enforcementPoints": [{"name": "validation.gatekeeper.sh"}]}]}});
        let mut unchanged = webhook_only.clone();
        deny_at_gator(&mut unchanged);
        assert_eq!(unchanged, webhook_only);
        let unknown = json!({"spec": {"enforcementAction": "block"}});
        let mut unchanged = unknown.clone();
        deny_at_gator(&mut unchanged);
        assert_eq!(unchanged, unknown);
    }

    #[test]
    fn inventory_namespaces_keep_their_labels_as_written() {
        let namespaces = namespaces_of(&[
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": {"team": "x"}}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}),
        ]);
        use crate::engine::NamespaceLookup as _;
        assert_eq!(
            namespaces.labels("a"),
            Some(Labels::from([("team".to_owned(), "x".to_owned())]))
        );
        assert_eq!(namespaces.labels("b"), None);
    }
}
