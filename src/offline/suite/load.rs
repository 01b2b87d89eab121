//! Finding `PolicyTest` suites under the paths given, and loading each one: its policies,
//! inputs and cases, every field checked strictly.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::{API_VERSION, Expectation, KIND, PolicyTest, ResourceSelector, TestCase};
use crate::admission::Operation;
use crate::authorization::{AccessReviewer, AnswerTable};
use crate::engine::{Engine, StaticNamespaces};
use crate::offline::input::{
    Input, InputDocument, InputError, Source, namespaces_of, read_inputs, yaml_documents,
};
use crate::offline::manifest::api_version;

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

pub(super) fn is_suite_document(value: &Value) -> bool {
    value.get("kind").and_then(Value::as_str) == Some(KIND)
}

/// A `PolicyTest` or a gator `Suite`.
pub(super) fn is_any_suite(value: &Value) -> bool {
    is_suite_document(value) || super::gator::is_gator_suite(value)
}

/// A suite file to run, or why a path given yields none.
pub(super) type SuiteFile = Result<(PathBuf, String), (String, String)>;

/// The suite files among `paths`, in order: a file is taken as given; a folder is searched
/// (with its subfolders) for `.yaml`/`.yml` files holding a `PolicyTest` or a gator `Suite`.
/// Files there that are not YAML at all (templates, say) are passed over.
pub(super) fn suite_files(paths: &[PathBuf]) -> Vec<SuiteFile> {
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
                .is_ok_and(|documents| documents.iter().any(|(_, v)| is_any_suite(v)));
            if holds_suite {
                suites.push(Ok((file, text)));
            }
        }
        if suites.len() == before {
            suites.push(Err((
                shown,
                format!("no {KIND} found in this folder (nor a gator Suite)"),
            )));
        }
    }
    suites
}

pub(super) struct LoadedCase {
    pub(super) name: String,
    pub(super) document: InputDocument,
    pub(super) operation: Operation,
    pub(super) expect: Expectation,
    pub(super) patched_object: Option<Value>,
    /// Answers to `authorizer` checks: the case's, the suite's or `--authorizer`'s.
    pub(super) authorizer: Option<Arc<dyn AccessReviewer>>,
}

pub(super) struct LoadedSuite {
    pub(super) name: String,
    pub(super) engine: Engine,
    pub(super) namespaces: StaticNamespaces,
    pub(super) cases: Vec<LoadedCase>,
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

/// Loads one `PolicyTest` document: its policies, resources and namespaces, and each case
/// resolved to the one resource it selects.
pub(super) fn load_suite<E: fmt::Display>(
    source: &Source,
    value: Value,
    authorizer: Option<&AnswerTable>,
    load_engine: &impl Fn(&[PathBuf]) -> Result<Engine, E>,
) -> Result<LoadedSuite, String> {
    let mut suite = parse_suite(source, value)?;
    let authorizer = suite.authorizer.take().or_else(|| authorizer.cloned());
    let base = source.file.parent().unwrap_or(Path::new("."));
    let engine = load_engine(&relative(base, &suite.policies))
        .map_err(|e| suite_error(source, "policies", format!("{e:#}")))?;
    let (resources, namespaces) = load_inputs(source, base, &suite)?;
    let cases = suite
        .cases
        .into_iter()
        .enumerate()
        .map(|(index, case)| load_case(source, base, index, case, &resources, authorizer.as_ref()))
        .collect::<Result<_, _>>()?;
    Ok(LoadedSuite {
        name: suite.metadata.name,
        engine,
        namespaces,
        cases,
    })
}

/// The suite document, checked: its apiVersion and at least one case.
fn parse_suite(source: &Source, value: Value) -> Result<PolicyTest, String> {
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
    Ok(suite)
}

/// The suite's resources, and the namespaces known from its Namespace manifests and
/// resources.
fn load_inputs(
    source: &Source,
    base: &Path,
    suite: &PolicyTest,
) -> Result<(Vec<InputDocument>, StaticNamespaces), String> {
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
    Ok((resources, namespaces_of(&all)))
}

/// One case: the resource it selects, its operation and what it expects.
fn load_case(
    source: &Source,
    base: &Path,
    index: usize,
    mut case: TestCase,
    resources: &[InputDocument],
    authorizer: Option<&AnswerTable>,
) -> Result<LoadedCase, String> {
    let authorizer = case
        .authorizer
        .take()
        .or_else(|| authorizer.cloned())
        .map(|table| Arc::new(table) as Arc<dyn AccessReviewer>);
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
    Ok(LoadedCase {
        name,
        document,
        operation,
        expect: case.expect,
        patched_object,
        authorizer,
    })
}
