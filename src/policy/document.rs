use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::admission_policy::{self, AdmissionPolicyDocument};
use super::gatekeeper::{self, GatekeeperDocument};
use super::gatekeeper_config;
use super::gatekeeper_expansion;
use super::native::Policy;
use super::pod_security::PodSecurityConfiguration;

/// Where a document came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentSource {
    /// The file.
    pub file: PathBuf,
    /// The document's index in the file, from 0.
    pub index: usize,
}

impl fmt::Display for DocumentSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (document {})", self.file.display(), self.index)
    }
}

/// A policy document that failed to load or compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{message}", document.as_ref().map(|s| format!("{s}: ")).unwrap_or_default(), field.as_ref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct PolicyError {
    /// The document, when the error is about one.
    pub document: Option<DocumentSource>,
    /// The field path inside the document, when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl PolicyError {
    /// An error about a document, at a field.
    pub fn at(
        source: &DocumentSource,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let field = field.into();
        PolicyError {
            document: Some(source.clone()),
            field: (!field.is_empty()).then_some(field),
            message: message.into(),
        }
    }

    fn io(path: &Path, error: std::io::Error) -> Self {
        PolicyError {
            document: None,
            field: None,
            message: format!("cannot read {}: {error}", path.display()),
        }
    }
}

/// A recognised policy document.
#[derive(Debug, Clone)]
pub enum PolicyDocument {
    /// `pod-security.admission.config.k8s.io/v1` `PodSecurityConfiguration`.
    PodSecurity(Box<PodSecurityConfiguration>),
    /// `portcullis.dev/v1alpha1` `Policy`.
    Policy(Box<Policy>),
    /// `admissionregistration.k8s.io` ValidatingAdmissionPolicy, MutatingAdmissionPolicy or
    /// one of their bindings.
    AdmissionPolicy(Box<AdmissionPolicyDocument>),
    /// `apiextensions.k8s.io/v1` `CustomResourceDefinition`: the schema of a custom resource,
    /// for the mutations of admission policies (list types, map keys, atomic fields). Its
    /// schemas are checked when the engine compiles it.
    CustomResourceDefinition(Box<Value>),
    /// OPA Gatekeeper's `templates.gatekeeper.sh` ConstraintTemplate or a
    /// `constraints.gatekeeper.sh` Constraint.
    Gatekeeper(Box<GatekeeperDocument>),
    /// A document of any other group (a ConfigMap, a custom resource …): a parameter object
    /// for admission policy bindings. Compiling refuses one that no policy's `paramKind`
    /// names, so that a stray or misspelt document is still an error.
    Parameter(Box<Value>),
}

/// A document with its source.
#[derive(Debug, Clone)]
pub struct SourcedDocument {
    /// Where it came from.
    pub source: DocumentSource,
    /// What it is.
    pub document: PolicyDocument,
}

/// The kinds Portcullis reads, as `apiVersion` and `kind`.
pub const SUPPORTED_KINDS: [(&str, &str); 11] = [
    (
        "pod-security.admission.config.k8s.io/v1",
        "PodSecurityConfiguration",
    ),
    ("portcullis.dev/v1alpha1", "Policy"),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingAdmissionPolicyBinding",
    ),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("templates.gatekeeper.sh/v1", "ConstraintTemplate"),
    (
        "constraints.gatekeeper.sh/v1beta1",
        "<a ConstraintTemplate's kind>",
    ),
    (gatekeeper_config::CONFIG_API_VERSION, "Config"),
    ("expansion.gatekeeper.sh/v1beta1", "ExpansionTemplate"),
];

/// API groups whose documents must be ones Portcullis reads: anything else in them is a
/// mistake, never a parameter object.
const RESERVED_GROUPS: [&str; 8] = [
    "portcullis.dev",
    "pod-security.admission.config.k8s.io",
    admission_policy::GROUP,
    "apiextensions.k8s.io",
    gatekeeper::TEMPLATES_GROUP,
    gatekeeper::CONSTRAINTS_GROUP,
    gatekeeper_config::CONFIG_GROUP,
    gatekeeper_expansion::EXPANSION_GROUP,
];

/// The error for a document Portcullis does not read.
pub fn unsupported_document(source: &DocumentSource, api_version: &str, kind: &str) -> PolicyError {
    let supported: Vec<String> = SUPPORTED_KINDS
        .iter()
        .map(|(v, k)| format!("{v} {k}"))
        .collect();
    PolicyError::at(
        source,
        "kind",
        format!(
            "unsupported document {api_version} {kind}; supported: {}, or the paramKind of an \
             admission policy",
            supported.join(", ")
        ),
    )
}

fn is_policy_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

/// Appends `path` when it is a file, or, for a folder, every file under it (recursively, sorted
/// by path) that `accept` takes. Names starting with `.` are skipped: a ConfigMap mount's
/// `..data` and timestamped folders hold the same files again. Symlinks are followed. An error
/// names the path that could not be read.
pub fn collect_files(
    path: &Path,
    accept: &dyn Fn(&Path) -> bool,
    files: &mut Vec<PathBuf>,
) -> Result<(), (PathBuf, std::io::Error)> {
    let failed = |e| (path.to_owned(), e);
    if !std::fs::metadata(path).map_err(failed)?.is_dir() {
        files.push(path.to_owned());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(failed)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(failed)?;
    entries.retain(|p| {
        !p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'))
    });
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            collect_files(&entry, accept, files)?;
        } else if accept(&entry) {
            files.push(entry);
        }
    }
    Ok(())
}

/// The policy files under `paths`, in the order they are read: each file named, and every
/// `.yaml`, `.yml` and `.json` file in the folders named (see [`collect_files`]).
pub fn policy_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, (PathBuf, std::io::Error)> {
    let mut files = Vec::new();
    for path in paths {
        collect_files(path, &is_policy_file, &mut files)?;
    }
    Ok(files)
}

/// Splits a YAML (or JSON) stream into documents, skipping empty ones.
pub fn parse_documents(
    file: &Path,
    text: &str,
) -> Result<Vec<(DocumentSource, Value)>, PolicyError> {
    let mut documents = Vec::new();
    for (index, deserializer) in serde_norway::Deserializer::from_str(text).enumerate() {
        let source = DocumentSource {
            file: file.to_owned(),
            index,
        };
        let value = Value::deserialize(deserializer)
            .map_err(|e| PolicyError::at(&source, "", format!("invalid YAML: {e}")))?;
        if !value.is_null() {
            documents.push((source, value));
        }
    }
    Ok(documents)
}

/// Deserializes a typed document, naming the failing field.
pub fn from_document<T: serde::de::DeserializeOwned>(
    source: &DocumentSource,
    value: Value,
) -> Result<T, PolicyError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { String::new() } else { field };
        let (field, message) = apiserver_wording(field, e.into_inner().to_string());
        PolicyError::at(source, field, message)
    })
}

/// A decoding error as the apiserver's validation words it: an unknown enum value is
/// `Unsupported value: "X": supported values: "A", "B"` (sorted), a missing field is
/// `<field>: Required value`; other errors stay as decoded.
fn apiserver_wording(field: String, message: String) -> (String, String) {
    let quoted = |text: &str| -> Vec<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(ToOwned::to_owned)
            .collect()
    };
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let names = quoted(rest);
        if let Some((value, supported)) = names.split_first() {
            let mut supported = supported.to_vec();
            supported.sort();
            let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
            return (
                field,
                format!(
                    "Unsupported value: {value:?}: supported values: {}",
                    supported.join(", ")
                ),
            );
        }
    }
    if let Some(rest) = message.strip_prefix("missing field ")
        && let [name] = quoted(rest).as_slice()
    {
        let field = if field.is_empty() {
            name.clone()
        } else {
            format!("{field}.{name}")
        };
        return (field, "Required value".to_owned());
    }
    (field, message)
}

fn recognise(source: DocumentSource, value: Value) -> Result<SourcedDocument, PolicyError> {
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    let document = match (api_version, kind) {
        ("pod-security.admission.config.k8s.io/v1", "PodSecurityConfiguration") => {
            let config: PodSecurityConfiguration = from_document(&source, value)?;
            PolicyDocument::PodSecurity(Box::new(config))
        }
        ("portcullis.dev/v1alpha1", "Policy") => {
            let policy: Policy = from_document(&source, value)?;
            policy.validate(&source)?;
            PolicyDocument::Policy(Box::new(policy))
        }
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            PolicyDocument::CustomResourceDefinition(Box::new(value))
        }
        ("", _) | (_, "") => {
            return Err(PolicyError::at(
                &source,
                "",
                "a policy document needs apiVersion and kind",
            ));
        }
        _ => {
            let group = api_version.split_once('/').map_or("", |(group, _)| group);
            if group == admission_policy::GROUP {
                let document = admission_policy::recognise(&source, value)?;
                PolicyDocument::AdmissionPolicy(Box::new(document))
            } else if group == gatekeeper::TEMPLATES_GROUP || group == gatekeeper::CONSTRAINTS_GROUP
            {
                let group = group.to_owned();
                let document = gatekeeper::recognise(&source, &group, value)?;
                PolicyDocument::Gatekeeper(Box::new(document))
            } else if group == gatekeeper_config::CONFIG_GROUP {
                let config = gatekeeper_config::recognise(&source, value)?;
                PolicyDocument::Gatekeeper(Box::new(GatekeeperDocument::Config(Box::new(config))))
            } else if group == gatekeeper_expansion::EXPANSION_GROUP {
                let template = gatekeeper_expansion::recognise(&source, value)?;
                PolicyDocument::Gatekeeper(Box::new(GatekeeperDocument::Expansion(Box::new(
                    template,
                ))))
            } else if RESERVED_GROUPS.contains(&group) {
                return Err(unsupported_document(&source, api_version, kind));
            } else {
                PolicyDocument::Parameter(Box::new(value))
            }
        }
    };
    Ok(SourcedDocument { source, document })
}

/// Recognises every document of a YAML stream held in memory; `file` names it in errors.
pub fn documents_from_str(file: &Path, text: &str) -> Result<Vec<SourcedDocument>, PolicyError> {
    parse_documents(file, text)?
        .into_iter()
        .map(|(source, value)| recognise(source, value))
        .collect()
}

/// Reads and recognises every document under `paths` (files or folders), in order.
pub fn read_documents(paths: &[PathBuf]) -> Result<Vec<SourcedDocument>, PolicyError> {
    let files = policy_files(paths).map_err(|(path, e)| PolicyError::io(&path, e))?;
    let mut documents = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| PolicyError::io(&file, e))?;
        for (source, value) in parse_documents(&file, &text)? {
            documents.push(recognise(source, value)?);
        }
    }
    Ok(documents)
}
