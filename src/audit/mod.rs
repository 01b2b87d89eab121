//! `portcullis audit`: a read-only scan of the objects already in a cluster, judged by the
//! same [`Engine::evaluate`](crate::engine::Engine::evaluate) as `serve` and `check`.
//!
//! Each existing object is presented as a **CREATE** whose `object` is the object as the
//! apiserver lists it (no `oldObject`), as peers do for background scans: an UPDATE with
//! `oldObject == object` would let rules that look only at changes pass everything (Pod
//! Security skips Pod updates that leave the pod spec unchanged), while a CREATE asks "would
//! this object be admitted if it arrived now?", which is what a scan of existing objects is
//! for. The request is `/mutate` then `/validate` on the patched object, as `check` does.
//!
//! - [`targets`]: which resources to list, from the policies' webhook rules and discovery.
//! - [`exclusions`]: the generated webhooks' `namespaceSelector` and `matchConditions`.
//! - [`scan`]: paginated lists, judging pages, report writes.
//! - [`output`]: table, JSON, OpenReports outputs.
//! - [`openreports`]: `openreports.io/v1alpha1` Report and ClusterReport documents.

pub mod exclusions;
pub mod openreports;
pub mod output;
pub mod scan;
pub mod targets;

pub use exclusions::{Exclusion, ExclusionError, WebhookExclusions};
pub use output::{JsonWriter, OpenReportsWriter, ResultWriter, ScanSummary, TableWriter};
pub use scan::{ScanError, ScanOptions, Scanner};
pub use targets::{ScanTarget, WantedResource};
