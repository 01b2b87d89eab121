//! Offline evaluation: `portcullis check` and `portcullis test`.
//!
//! Both commands turn files into the [`AdmissionRequest`](crate::admission::AdmissionRequest)s
//! the kube-apiserver would send and decide them with the one
//! [`Engine::evaluate`](crate::engine::Engine::evaluate) the webhook uses, so what they predict
//! is what the webhook decides.
//!
//! - [`input`]: reading manifests (multi-document YAML, JSON, `v1` `List`) and AdmissionReviews.
//! - [`manifest`]: a manifest as the apiserver would admit it: kind → resource, scope,
//!   namespace, the offline user, the request.
//! - [`check`]: the apiserver's order, `/mutate` then `/validate` on the patched object.
//! - [`report`]: the text table of `check`.
//! - [`suite`]: `PolicyTest` suites: format, loading, running, the result table.
//! - [`warnings`]: the warnings as the apiserver's recorder passes them to the client.

pub mod check;
pub mod input;
pub mod manifest;
pub mod report;
pub mod suite;
pub mod warnings;

pub use check::{CheckError, CheckResult, Checker};
pub use input::{
    Input, InputDocument, InputError, Source, inventory_of, namespaces_of, read_inputs,
};
pub use manifest::{Manifest, OFFLINE_USER};
pub use suite::{SuiteOptions, SuiteRun, run_suites, run_suites_with};
