//! Portcullis: a Kubernetes admission webhook server.
//!
//! The library holds everything; the `portcullis` binary only installs the crypto provider,
//! parses the command line and dispatches to [`commands`].
//!
//! - [`admission`]: AdmissionReview envelopes (v1, v1beta1): parsing and encoding.
//! - [`authorization`]: the CEL `authorizer`: SubjectAccessReviews, or answers given offline.
//! - [`engine`]: the one [`engine::Engine::evaluate`] that both `serve` and offline commands call.
//! - [`defaulting`]: the apiserver's defaulting of built-in kinds, on untyped objects.
//! - [`patch`]: JSON Patch building for defaulting rules.
//! - [`schema`]: the Kubernetes object model: built-in and CRD schemas, typed decode checks and
//!   round-trips.
//! - [`server`]: the webhook router, handlers, extractor, errors, listeners and shutdown.
//! - [`admin`]: health, readiness and metrics endpoints.
//! - [`tls`]: certificate loading, generation and hot reload.
//! - [`audit`]: `portcullis audit`, a scan of existing objects with the same engine.
#![forbid(unsafe_code)]

pub mod admin;
pub mod admission;
pub mod audit;
pub mod authorization;
pub mod cli;
pub mod cluster;
pub mod cluster_params;
pub mod commands;
pub mod defaulting;
pub mod engine;
pub mod expressions;
pub mod go_text;
pub mod metrics;
pub mod names;
pub mod offline;
pub mod params_rbac;
pub mod patch;
pub mod policy;
pub mod schema;
pub mod server;
pub mod telemetry;
pub mod tls;
pub mod vocabulary;
pub mod webhook_config;
