//! Portcullis: a Kubernetes admission webhook server.
//!
//! The library holds everything; the `portcullis` binary only installs the crypto provider,
//! parses the command line and dispatches to [`commands`].
//!
//! - [`admission`]: AdmissionReview envelopes (v1, v1beta1): parsing and encoding.
//! - [`authorization`]: the CEL `authorizer`: SubjectAccessReviews, or answers given offline.
//! - [`engine`]: the one [`engine::Engine::evaluate`] that both `serve` and offline commands call.
//! - [`patch`]: JSON Patch building for defaulting rules.
//! - [`kubernetes`]: apimachinery compatibility: the object model (schemas, decode checks),
//!   defaulting of built-in kinds, name rules, Go's text formats and the shared vocabulary.
//! - [`cluster`]: the cluster connection of `serve`: watches and reads of namespaces and
//!   admission policy parameters.
//! - [`server`]: the webhook router, handlers, extractor, errors, listeners and shutdown, and
//!   the admin router (health, readiness and metrics endpoints).
//! - [`webhook_config`]: `portcullis webhook-config`: webhook configurations and the RBAC of
//!   the parameter watches.
//! - [`tls`]: certificate loading, generation and hot reload.
//! - [`audit`]: `portcullis audit`, a scan of existing objects with the same engine.
#![forbid(unsafe_code)]

pub mod admission;
pub mod audit;
pub mod authorization;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod engine;
pub mod expressions;
pub mod kubernetes;
pub mod metrics;
pub mod offline;
pub mod patch;
pub mod policy;
pub mod server;
pub mod telemetry;
pub mod tls;
pub mod webhook_config;
