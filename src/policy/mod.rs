//! Policy documents: reading YAML/JSON files and folders, recognising each document's kind,
//! and compiling them into an [`Engine`](crate::engine::Engine).
//!
//! Every error names the file, the document's index in it (from 0) and the field.

mod document;
mod native;
mod reload;

pub use document::{
    DocumentSource, PolicyDocument, PolicyError, SourcedDocument, collect_files,
    documents_from_str, from_document, parse_documents, policy_files, read_documents,
    unsupported_document,
};
pub use native::{
    CelDefault, CelValidation, DefaultingSpec, HostRules, ImageRules, LabelSelector,
    LabelSelectorRequirement, MatchSpec, NamespaceFilter, Policy, PolicySpec, ProbeRules,
    ResourceMatch, ResourceRules, SubjectExclusions, ValidationSpec,
};
pub use reload::{PolicyReloadOutcome, PolicyReloader};

use std::path::PathBuf;

use crate::engine::Engine;

/// Reads every policy document under `paths` and compiles them into one engine.
/// An empty set of documents is valid: the engine allows everything unchanged.
pub fn load_engine(paths: &[PathBuf]) -> Result<Engine, PolicyError> {
    let documents = read_documents(paths)?;
    Engine::compile(&documents)
}
