//! Kubernetes and apimachinery compatibility: what the engine needs to answer as the
//! kube-apiserver does, written after the upstream Go code and knowing nothing of policies.
//!
//! - [`vocabulary`]: words policy documents and the engine share (Action, FailurePolicy,
//!   LabelSelector).
//! - [`names`]: apimachinery's name and label validation rules.
//! - [`go_text`]: Go's quoting (`%q`) and printable-rune table, for messages worded as Go
//!   words them.
//! - [`schema`]: the Kubernetes object model: built-in and CRD schemas, typed decode checks and
//!   round-trips.
//! - [`defaulting`]: the apiserver's defaulting of built-in kinds, on untyped objects.

pub mod defaulting;
pub mod go_text;
pub mod names;
pub mod schema;
pub mod vocabulary;
