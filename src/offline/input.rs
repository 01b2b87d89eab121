//! Reading the files `check` and `test` evaluate: manifests (multi-document YAML, JSON, a `v1`
//! `List` of objects) and AdmissionReviews. Every error names the file and the document.

use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::manifest::Manifest;
use crate::admission::{ParsedReview, parse_review};
use crate::engine::StaticNamespaces;
use crate::engine::gatekeeper::Inventory;

/// The file name that reads standard input.
pub const STDIN: &str = "-";

/// Where an input document came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Source {
    /// The file (`-` for standard input).
    pub file: PathBuf,
    /// The document's index in the file, from 0 (empty documents count).
    pub index: usize,
    /// The index in `items` when the document is a `List`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<usize>,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (document {}", self.file.display(), self.index)?;
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        f.write_str(")")
    }
}

/// A file or document that cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {message}")]
pub struct InputError {
    /// The file, with the document (and `List` item) when the error is about one.
    pub location: String,
    /// What is wrong.
    pub message: String,
}

impl InputError {
    /// An error about one document.
    pub fn at(source: &Source, message: impl Into<String>) -> Self {
        InputError {
            location: source.to_string(),
            message: message.into(),
        }
    }

    /// An error about a whole file.
    pub fn file(file: &Path, message: impl Into<String>) -> Self {
        InputError {
            location: file.display().to_string(),
            message: message.into(),
        }
    }
}

/// What a document is.
#[derive(Debug, Clone)]
pub enum Input {
    /// An object, to be admitted as the apiserver would send it.
    Manifest(Box<Manifest>),
    /// An AdmissionReview, decided exactly as the webhook would decide it.
    Review(Box<ParsedReview>),
}

/// One document to evaluate, with its source.
#[derive(Debug, Clone)]
pub struct InputDocument {
    /// Where it came from.
    pub source: Source,
    /// What it is.
    pub input: Input,
}

impl InputDocument {
    /// The manifest, when the document is one.
    pub fn manifest(&self) -> Option<&Manifest> {
        match &self.input {
            Input::Manifest(manifest) => Some(manifest),
            Input::Review(_) => None,
        }
    }
}

/// Reads every file in order (`-` is standard input).
pub fn read_inputs(files: &[PathBuf]) -> Result<Vec<InputDocument>, InputError> {
    let mut documents = Vec::new();
    for file in files {
        documents.extend(read_input_file(file)?);
    }
    Ok(documents)
}

/// Reads one file (`-` is standard input).
pub fn read_input_file(file: &Path) -> Result<Vec<InputDocument>, InputError> {
    let bytes = if file.as_os_str() == STDIN {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| InputError::file(file, format!("cannot read standard input: {e}")))?;
        bytes
    } else {
        std::fs::read(file).map_err(|e| InputError::file(file, format!("cannot read: {e}")))?
    };
    parse_input(file, &bytes)
}

/// Splits a file's contents into documents and recognises each. A file whose first character
/// is `{` is read as a stream of JSON values, so that an AdmissionReview is parsed from its
/// own bytes, as the webhook parses a request body (a YAML flow mapping that is not JSON is
/// read as YAML); anything else is read as YAML.
pub fn parse_input(file: &Path, bytes: &[u8]) -> Result<Vec<InputDocument>, InputError> {
    let mut documents = Vec::new();
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        match json_values(file, bytes) {
            Ok(values) => {
                for (source, value, raw) in values {
                    recognise(source, value, Some(raw), &mut documents)?;
                }
                return Ok(documents);
            }
            Err(json_error) => {
                let yaml = std::str::from_utf8(bytes)
                    .ok()
                    .and_then(|text| yaml_documents(file, text).ok());
                let Some(values) = yaml else {
                    return Err(json_error);
                };
                for (source, value) in values {
                    recognise(source, value, None, &mut documents)?;
                }
                return Ok(documents);
            }
        }
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| InputError::file(file, format!("not UTF-8 text: {e}")))?;
    for (source, value) in yaml_documents(file, text)? {
        recognise(source, value, None, &mut documents)?;
    }
    Ok(documents)
}

/// A JSON value with its source and its own bytes.
type RawJson<'a> = (Source, Value, &'a [u8]);

/// The values of a JSON stream.
fn json_values<'a>(file: &Path, bytes: &'a [u8]) -> Result<Vec<RawJson<'a>>, InputError> {
    let mut values = Vec::new();
    let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<Value>();
    for index in 0.. {
        let source = Source {
            file: file.to_owned(),
            index,
            item: None,
        };
        let start = stream.byte_offset();
        let Some(value) = stream.next() else { break };
        let value = value.map_err(|e| InputError::at(&source, format!("invalid JSON: {e}")))?;
        values.push((source, value, &bytes[start..stream.byte_offset()]));
    }
    Ok(values)
}

/// Splits a YAML stream (JSON is YAML too) into its documents, skipping empty ones; each
/// keeps its index in the stream.
pub fn yaml_documents(file: &Path, text: &str) -> Result<Vec<(Source, Value)>, InputError> {
    let source = |document: &crate::policy::DocumentSource| Source {
        file: document.file.clone(),
        index: document.index,
        item: None,
    };
    match crate::policy::parse_documents(file, text) {
        Ok(documents) => Ok(documents
            .into_iter()
            .map(|(document, value)| (source(&document), value))
            .collect()),
        Err(error) => Err(match &error.document {
            Some(document) => InputError::at(&source(document), error.message),
            None => InputError::file(file, error.message),
        }),
    }
}

/// The uid given to an AdmissionReview read offline without one.
pub const OFFLINE_UID: &str = "portcullis-offline";

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn recognise(
    source: Source,
    value: Value,
    raw: Option<&[u8]>,
    documents: &mut Vec<InputDocument>,
) -> Result<(), InputError> {
    if !value.is_object() {
        return Err(InputError::at(
            &source,
            format!(
                "a document must be a mapping (a Kubernetes object), got {}",
                type_name(&value)
            ),
        ));
    }
    let api_version = value.get("apiVersion").and_then(Value::as_str);
    match value.get("kind") {
        Some(Value::String(kind)) if kind == "AdmissionReview" => {
            // Offline the uid matters to nobody, and other tools' test reviews often leave it
            // out: give such a request one (`serve` still requires it).
            let missing_uid = value
                .pointer("/request")
                .and_then(Value::as_object)
                .is_some_and(|request| !request.contains_key("uid"));
            let owned;
            let body = match raw {
                Some(raw) if !missing_uid => raw,
                _ => {
                    let mut value = value.clone();
                    if missing_uid && let Some(request) = value["request"].as_object_mut() {
                        request.insert("uid".into(), Value::String(OFFLINE_UID.into()));
                    }
                    owned = serde_json::to_vec(&value).unwrap_or_default();
                    &owned
                }
            };
            let review = parse_review(body).map_err(|e| InputError::at(&source, e.to_string()))?;
            documents.push(InputDocument {
                source,
                input: Input::Review(Box::new(review)),
            });
        }
        Some(Value::String(kind)) if kind == "List" && matches!(api_version, Some("v1") | None) => {
            let items = match value.get("items") {
                Some(Value::Array(items)) => items,
                None | Some(Value::Null) => return Ok(()),
                Some(other) => {
                    return Err(InputError::at(
                        &source,
                        format!("items: must be a list, got {}", type_name(other)),
                    ));
                }
            };
            for (item, object) in items.iter().enumerate() {
                let source = Source {
                    item: Some(item),
                    ..source.clone()
                };
                if !object.is_object() {
                    return Err(InputError::at(
                        &source,
                        format!("a List item must be a mapping, got {}", type_name(object)),
                    ));
                }
                let manifest = Manifest::from_object(&source, object.clone())?;
                documents.push(InputDocument {
                    source,
                    input: Input::Manifest(Box::new(manifest)),
                });
            }
        }
        Some(Value::String(_)) => {
            let manifest = Manifest::from_object(&source, value)?;
            documents.push(InputDocument {
                source,
                input: Input::Manifest(Box::new(manifest)),
            });
        }
        Some(_) => return Err(InputError::at(&source, "kind: must be a string")),
        None => {
            return Err(InputError::at(
                &source,
                "the document has no kind (a manifest needs apiVersion and kind)",
            ));
        }
    }
    Ok(())
}

/// The namespaces that the Namespace manifests among `documents` declare: their labels, for
/// namespace selectors and Pod Security namespace labels, and each object decoded and
/// defaulted as the apiserver stores it (`status.phase: Active` when unset, the
/// `kubernetes.io/metadata.name` label), for CEL's `namespaceObject`.
pub fn namespaces_of(documents: &[InputDocument]) -> StaticNamespaces {
    let mut namespaces = StaticNamespaces::default();
    for manifest in documents.iter().filter_map(InputDocument::manifest) {
        if manifest.kind.group.is_empty() && manifest.kind.kind == "Namespace" {
            namespaces.insert_object(&manifest.defaulted().object);
        }
    }
    namespaces
}

/// Gatekeeper's `data.inventory` for `documents`, as `gator` makes it: every object given.
pub fn inventory_of(documents: &[InputDocument]) -> Inventory {
    Inventory::of(
        documents
            .iter()
            .filter_map(InputDocument::manifest)
            .map(|manifest| &manifest.object),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<InputDocument>, InputError> {
        parse_input(Path::new("in.yaml"), text.as_bytes())
    }

    #[test]
    fn yaml_documents_keep_their_index() {
        let documents =
            parse("---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n").unwrap();
        assert_eq!(documents.len(), 1);
        assert_eq!(documents[0].source.index, 1);
    }

    #[test]
    fn list_items_are_manifests() {
        let documents = parse(
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n",
        )
        .unwrap();
        assert_eq!(documents.len(), 2);
        assert_eq!(documents[1].source.item, Some(1));
        assert_eq!(
            documents[1].source.to_string(),
            "in.yaml (document 0, item 1)"
        );
    }

    #[test]
    fn errors_name_file_and_document() {
        let cases = [
            (
                "apiVersion: v1\nkind: ConfigMap\n---\n- x\n",
                "in.yaml (document 1): a document must be a mapping",
            ),
            (
                "kind: Widget\n---\nmetadata: {}\n",
                "in.yaml (document 0): Widget has no apiVersion",
            ),
            ("{}", "in.yaml (document 0): the document has no kind"),
            ("a: [\n", "in.yaml (document 0): invalid YAML"),
            (
                "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
                "in.yaml (document 0): AdmissionReview has no request",
            ),
        ];
        for (text, expected) in cases {
            let error = parse(text).unwrap_err().to_string();
            assert!(error.starts_with(expected), "{text:?}: {error}");
        }
    }

    #[test]
    fn a_yaml_flow_mapping_is_not_mistaken_for_json() {
        let documents = parse("{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}").unwrap();
        assert_eq!(documents[0].manifest().unwrap().name.as_deref(), Some("a"));
        let error = parse("{\"apiVersion\": \"v1\",, }")
            .unwrap_err()
            .to_string();
        assert!(error.contains("(document 0): invalid JSON"), "{error}");
    }

    #[test]
    fn json_stream_reads_each_value() {
        let documents = parse(
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}
               {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}"#,
        )
        .unwrap();
        assert_eq!(documents.len(), 2);
        assert_eq!(documents[1].source.index, 1);
    }
}
