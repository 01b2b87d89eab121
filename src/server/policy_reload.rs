//! Policy hot reload: watch the policy folders, re-check on a timer as a backstop, and swap a
//! newly compiled engine in when the files change. A broken change keeps the engine in use.
//!
//! Reload is read → validate → compile → swap: [`Engine::load`] does the first three, the swap
//! is one atomic store into the [`ArcSwapOption`] the request handlers read lock-free.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::engine::Engine;
use crate::metrics::Metrics;

/// Hands the memory a policy load freed (its YAML, syntax trees and other scratch) back to the
/// operating system: set by the binary, which chose the global allocator; nothing when unset.
static RELEASE_FREED_MEMORY: OnceLock<fn()> = OnceLock::new();

/// Sets what runs after each policy load to return the memory it freed to the operating
/// system (the binary: mimalloc's `mi_collect`). Only the first call counts.
pub fn set_release_freed_memory(release: fn()) {
    let _ = RELEASE_FREED_MEMORY.set(release);
}
use crate::policy::PolicyError;
use crate::server::admin::Readiness;

/// How long the files must be quiet after a change before they are read: an editor or
/// `kubectl cp` writes a file in several steps, and kubelet's `..data` swap is a burst of events
/// (microseconds apart). Short, because it adds to every reload; a check that catches a file
/// half written fails, keeps the engine in use, and the next event checks again.
const SETTLE: Duration = Duration::from_millis(20);
/// The longest a burst of changes may postpone a check.
const SETTLE_AT_MOST: Duration = Duration::from_secs(2);

/// What one check of the policy files found.
#[derive(Debug)]
pub enum PolicyReloadOutcome {
    /// The files are as they were at the last check: nothing was compiled.
    Unchanged,
    /// A new engine was compiled and swapped in.
    Reloaded {
        /// Rules in the new engine.
        rules: usize,
    },
    /// The files changed but do not compile; the engine in use (if any) stays.
    Failed(PolicyError),
}

/// Loads policy files into the engine slot the webhook reads, and reloads them on change.
///
/// Readiness follows the slot: policies are loaded once a compile succeeded; until then
/// readiness carries the last [`PolicyError`]. A failure after a good load keeps the good
/// engine and readiness.
pub struct PolicyReloader {
    paths: Vec<PathBuf>,
    engine: Arc<ArcSwapOption<Engine>>,
    readiness: Arc<Readiness>,
    metrics: Arc<Metrics>,
    /// Fingerprint of the files at the last compile attempt, good or bad.
    fingerprint: Option<u64>,
    last_failure: Option<String>,
    /// Whether the first check (at start) has run; it is not counted as a reload.
    started: bool,
    /// Notified after each swap (the cluster's parameter and inventory watches follow the
    /// policies).
    swapped: Vec<Arc<tokio::sync::Notify>>,
}

impl PolicyReloader {
    /// A reloader for `paths` (files or folders) that stores engines into `engine`.
    pub fn new(
        paths: Vec<PathBuf>,
        engine: Arc<ArcSwapOption<Engine>>,
        readiness: Arc<Readiness>,
        metrics: Arc<Metrics>,
    ) -> Self {
        PolicyReloader {
            paths,
            engine,
            readiness,
            metrics,
            fingerprint: None,
            last_failure: None,
            started: false,
            swapped: Vec::new(),
        }
    }

    /// Notifies `swapped` after each engine swap (besides any notified already).
    #[must_use]
    pub fn notify_on_swap(mut self, swapped: Arc<tokio::sync::Notify>) -> Self {
        self.swapped.push(swapped);
        self
    }

    /// Reads the files; compiles and swaps them in if they changed since the last check.
    /// A failure is logged and counted once per distinct error, not on every re-check.
    pub fn check(&mut self) -> PolicyReloadOutcome {
        let initial = !std::mem::replace(&mut self.started, true);
        // Unreadable files give no fingerprint: the load below then reports why.
        let fingerprint = fingerprint(&self.paths).ok();
        if fingerprint.is_some() && fingerprint == self.fingerprint {
            return PolicyReloadOutcome::Unchanged;
        }
        let loaded = Engine::load(&self.paths);
        if let Some(release) = RELEASE_FREED_MEMORY.get() {
            release();
        }
        self.fingerprint = fingerprint;
        match loaded {
            Ok(engine) => {
                let rules = engine.rule_count();
                let type_checking = engine.type_checking();
                self.metrics.record_type_checking(&type_checking);
                for (policy, warnings) in &type_checking {
                    for warning in warnings {
                        tracing::warn!(
                            policy = %policy,
                            field = %warning.field_ref,
                            warning = %warning.warning,
                            "ValidatingAdmissionPolicy expression does not type-check"
                        );
                    }
                }
                self.engine.store(Some(Arc::new(engine)));
                for swapped in &self.swapped {
                    swapped.notify_one();
                }
                self.last_failure = None;
                self.readiness.set_policies_loaded();
                if initial {
                    tracing::info!(rules, paths = ?self.paths, "policies loaded");
                } else {
                    self.metrics.record_reload("policies", true);
                    tracing::info!(rules, paths = ?self.paths, "policies reloaded");
                }
                PolicyReloadOutcome::Reloaded { rules }
            }
            Err(error) => {
                let message = error.to_string();
                if self.last_failure.as_deref() != Some(message.as_str()) {
                    if !initial {
                        self.metrics.record_reload("policies", false);
                    }
                    if self.engine.load().is_some() {
                        tracing::warn!(
                            error = %message,
                            "changed policies do not load; keeping the policies in use"
                        );
                    } else {
                        self.readiness.set_policies_failed(message.clone());
                        tracing::warn!(
                            error = %message,
                            "policies do not load; not ready, and admission requests get the \
                             --on-error answer until they do"
                        );
                    }
                    self.last_failure = Some(message);
                }
                PolicyReloadOutcome::Failed(error)
            }
        }
    }

    /// Where to watch for changes: each folder (with its subfolders), and the folder holding
    /// each file. Kubernetes updates a ConfigMap mount by swapping the `..data` symlink in the
    /// folder, which a watch on the file itself would miss.
    fn watch_targets(&self) -> Vec<(PathBuf, RecursiveMode)> {
        let mut targets: Vec<(PathBuf, RecursiveMode)> = self
            .paths
            .iter()
            .map(|path| {
                if path.is_dir() {
                    (path.clone(), RecursiveMode::Recursive)
                } else {
                    let parent = match path.parent() {
                        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
                        _ => PathBuf::from("."),
                    };
                    (parent, RecursiveMode::NonRecursive)
                }
            })
            .collect();
        targets.sort_by(|a, b| a.0.cmp(&b.0));
        targets.dedup_by(|a, b| a.0 == b.0);
        targets
    }

    /// Starts watching: a check after every change in the watched folders (once they have
    /// been quiet for a moment) and every `interval`. The task runs until aborted.
    ///
    /// A folder that cannot be watched (it does not exist yet, say) is logged and left to the
    /// interval re-check.
    pub fn spawn(mut self, interval: Duration) -> Result<JoinHandle<()>, notify::Error> {
        let (changed, mut changes) = mpsc::channel::<()>(1);
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                // Our own reads open the files: opening or reading is not a change.
                if event.is_ok_and(|e| !matches!(e.kind, EventKind::Access(_))) {
                    // A full channel already holds a pending check: the change is coalesced.
                    let _ = changed.try_send(());
                }
            })?;
        for (target, mode) in self.watch_targets() {
            if let Err(error) = watcher.watch(&target, mode) {
                tracing::warn!(
                    path = %target.display(),
                    %error,
                    ?interval,
                    "cannot watch policy folder; relying on the interval re-check"
                );
            }
        }
        Ok(tokio::spawn(async move {
            let _watcher = watcher;
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // The first tick is immediate: a change made between the caller's first check and
            // the watch being set up is not missed (unchanged files cost a fingerprint only).
            loop {
                tokio::select! {
                    Some(()) = changes.recv() => settle(&mut changes).await,
                    _ = ticker.tick() => {}
                }
                // Reading and compiling is blocking work: keep it off the async workers.
                self = match tokio::task::spawn_blocking(move || {
                    self.check();
                    self
                })
                .await
                {
                    Ok(reloader) => reloader,
                    Err(error) => {
                        tracing::error!(%error, "policy check panicked; policies are no longer watched");
                        return;
                    }
                };
            }
        }))
    }
}

/// Waits until no change has arrived for [`SETTLE`], or [`SETTLE_AT_MOST`] has passed.
async fn settle(changes: &mut mpsc::Receiver<()>) {
    let deadline = Instant::now() + SETTLE_AT_MOST;
    while Instant::now() < deadline {
        match tokio::time::timeout(SETTLE, changes.recv()).await {
            Ok(Some(())) => continue,
            Ok(None) | Err(_) => return,
        }
    }
}

/// A hash of the names and contents of the policy files under `paths`, chosen as
/// [`read_documents`](super::read_documents) chooses them: `.yaml`, `.yml` and `.json` files,
/// folders recursively, names starting with `.` skipped (a ConfigMap mount's `..data` and
/// timestamped folders hold the same files again), symlinks followed.
fn fingerprint(paths: &[PathBuf]) -> std::io::Result<u64> {
    let mut hasher = DefaultHasher::new();
    for file in crate::policy::policy_files(paths).map_err(|(_, e)| e)? {
        file.hash(&mut hasher);
        std::fs::read(&file)?.hash(&mut hasher);
    }
    Ok(hasher.finish())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const UNKNOWN_KIND: &str = "apiVersion: example.com/v1\nkind: Gadget\n";

    fn reloader(dir: &Path) -> (PolicyReloader, Arc<ArcSwapOption<Engine>>, Arc<Readiness>) {
        let engine = Arc::new(ArcSwapOption::empty());
        let readiness = Arc::new(Readiness::default());
        readiness.set_certificate_loaded();
        let reloader = PolicyReloader::new(
            vec![dir.to_owned()],
            engine.clone(),
            readiness.clone(),
            Arc::new(Metrics::new()),
        );
        (reloader, engine, readiness)
    }

    fn reloads(metrics: &Metrics, result: &'static str) -> u64 {
        metrics
            .reloads
            .get_or_create(&crate::metrics::ReloadLabels {
                component: "policies",
                result,
            })
            .get()
    }

    static RELEASES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn count_release() {
        RELEASES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    #[test]
    fn each_load_releases_the_memory_it_freed() {
        set_release_freed_memory(count_release);
        let dir = tempfile::tempdir().unwrap();
        let (mut reloader, _, _) = reloader(dir.path());
        let before = RELEASES.load(std::sync::atomic::Ordering::SeqCst);
        reloader.check();
        assert!(RELEASES.load(std::sync::atomic::Ordering::SeqCst) > before);
    }

    #[test]
    fn empty_folder_loads_an_empty_engine_and_is_ready() {
        let dir = tempfile::tempdir().unwrap();
        let (mut reloader, engine, readiness) = reloader(dir.path());
        assert!(matches!(
            reloader.check(),
            PolicyReloadOutcome::Reloaded { rules: 0 }
        ));
        assert_eq!(engine.load().as_ref().unwrap().rule_count(), 0);
        assert_eq!(readiness.check(), Ok(()));
        assert!(matches!(reloader.check(), PolicyReloadOutcome::Unchanged));
        // The first load is not a reload.
        assert_eq!(reloads(&reloader.metrics, "success"), 0);
    }

    #[test]
    fn a_broken_change_keeps_the_engine_and_counts_once() {
        let dir = tempfile::tempdir().unwrap();
        let (mut reloader, engine, readiness) = reloader(dir.path());
        reloader.check();
        let first = engine.load_full().unwrap();

        std::fs::write(dir.path().join("policy.yaml"), UNKNOWN_KIND).unwrap();
        let PolicyReloadOutcome::Failed(error) = reloader.check() else {
            panic!("an unknown kind must fail");
        };
        assert_eq!(error.field.as_deref(), Some("kind"));
        assert!(Arc::ptr_eq(&engine.load_full().unwrap(), &first));
        assert_eq!(readiness.check(), Ok(()));
        assert!(matches!(reloader.check(), PolicyReloadOutcome::Unchanged));
        assert_eq!(reloads(&reloader.metrics, "failure"), 1);

        // Another broken version is another error: counted again.
        std::fs::write(dir.path().join("policy.yaml"), "kind: [unclosed").unwrap();
        assert!(matches!(reloader.check(), PolicyReloadOutcome::Failed(_)));
        assert_eq!(reloads(&reloader.metrics, "failure"), 2);

        std::fs::remove_file(dir.path().join("policy.yaml")).unwrap();
        assert!(matches!(
            reloader.check(),
            PolicyReloadOutcome::Reloaded { rules: 0 }
        ));
        assert!(!Arc::ptr_eq(&engine.load_full().unwrap(), &first));
        assert_eq!(reloads(&reloader.metrics, "success"), 1);
    }

    #[test]
    fn a_broken_start_is_not_ready_until_a_load_succeeds() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("policy.yaml"), UNKNOWN_KIND).unwrap();
        let (mut reloader, engine, readiness) = reloader(dir.path());
        assert!(matches!(reloader.check(), PolicyReloadOutcome::Failed(_)));
        assert!(engine.load().is_none());
        let reason = readiness.check().unwrap_err();
        assert!(reason.contains("policy.yaml (document 0): kind: unsupported document"));

        std::fs::write(dir.path().join("policy.yaml"), "").unwrap();
        assert!(matches!(
            reloader.check(),
            PolicyReloadOutcome::Reloaded { rules: 0 }
        ));
        assert_eq!(readiness.check(), Ok(()));
    }

    #[test]
    fn fingerprint_sees_policy_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let paths = [dir.path().to_owned()];
        let empty = fingerprint(&paths).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        std::fs::create_dir(dir.path().join("..2026_01_01")).unwrap();
        std::fs::write(dir.path().join("..2026_01_01/p.yaml"), "x").unwrap();
        assert_eq!(fingerprint(&paths).unwrap(), empty);
        std::fs::create_dir(dir.path().join("team")).unwrap();
        std::fs::write(dir.path().join("team/p.yml"), "").unwrap();
        let with_file = fingerprint(&paths).unwrap();
        assert_ne!(with_file, empty);
        std::fs::write(dir.path().join("team/p.yml"), "# changed").unwrap();
        assert_ne!(fingerprint(&paths).unwrap(), with_file);
    }
}
