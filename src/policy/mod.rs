//! Policy documents: reading YAML/JSON files and folders, recognising each document's kind and
//! checking its shape. This layer knows nothing of compiled rules: the engine compiles these
//! documents ([`Engine::compile`](crate::engine::Engine::compile)).
//!
//! Every error names the file, the document's index in it (from 0) and the field.

pub mod admission_policy;
mod document;
pub mod gatekeeper;
pub mod gatekeeper_config;
pub mod gatekeeper_expansion;
mod native;
pub mod pod_security;

pub use admission_policy::AdmissionPolicyDocument;
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
pub use pod_security::PodSecurityConfiguration;
