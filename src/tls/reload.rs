//! Certificate hot reload: watch the directories holding the material, re-check on a timer as
//! a backstop, and swap the rustls configuration when the files change. Broken new material
//! keeps the configuration in use.

use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use notify::{RecursiveMode, Watcher};
use tokio::task::JoinHandle;

use super::{LoadedTls, TlsError, TlsSettings};
use crate::metrics::Metrics;

/// What one check of the certificate files found.
#[derive(Debug)]
pub enum ReloadOutcome {
    /// The files are as they were.
    Unchanged,
    /// New material was loaded and is now served.
    Reloaded,
    /// The files changed but are not usable; the previous certificate stays.
    Failed(TlsError),
}

/// Re-reads certificate material and swaps it into the running listener.
pub struct CertificateReloader {
    settings: TlsSettings,
    rustls: RustlsConfig,
    fingerprint: u64,
    last_failure: Option<String>,
    metrics: Arc<Metrics>,
}

impl CertificateReloader {
    /// A reloader for a listener serving `loaded`.
    pub fn new(
        settings: TlsSettings,
        rustls: RustlsConfig,
        loaded: &LoadedTls,
        metrics: Arc<Metrics>,
    ) -> Self {
        metrics.certificate_expiry.set(loaded.not_after);
        CertificateReloader {
            settings,
            rustls,
            fingerprint: loaded.fingerprint,
            last_failure: None,
            metrics,
        }
    }

    /// Loads the files; swaps them in if they changed and are valid. A failure is logged and
    /// counted once per distinct error, not on every re-check.
    pub fn check(&mut self) -> ReloadOutcome {
        match self.settings.load() {
            Ok(loaded) if loaded.fingerprint == self.fingerprint => {
                self.last_failure = None;
                ReloadOutcome::Unchanged
            }
            Ok(loaded) => {
                self.rustls.reload_from_config(loaded.config);
                self.fingerprint = loaded.fingerprint;
                self.last_failure = None;
                self.metrics.certificate_expiry.set(loaded.not_after);
                self.metrics.record_reload("tls", true);
                tracing::info!(not_after = loaded.not_after, "serving certificate reloaded");
                ReloadOutcome::Reloaded
            }
            Err(error) => {
                let message = error.to_string();
                if self.last_failure.as_deref() != Some(message.as_str()) {
                    self.metrics.record_reload("tls", false);
                    tracing::warn!(
                        error = %message,
                        "new certificate material is unusable; keeping the current certificate"
                    );
                    self.last_failure = Some(message);
                }
                ReloadOutcome::Failed(error)
            }
        }
    }

    /// Starts watching: a check after every change in the watched directories and every
    /// `interval`. The task runs until aborted.
    pub fn spawn(mut self, interval: Duration) -> Result<JoinHandle<()>, notify::Error> {
        let (changed, mut changes) = tokio::sync::mpsc::channel::<()>(1);
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                // Our own reads of the files are reported as accesses: ignore them, or every
                // check would trigger the next one.
                if event.is_ok_and(|e| !matches!(e.kind, notify::EventKind::Access(_))) {
                    // A full channel already holds a pending check: the change is coalesced.
                    let _ = changed.try_send(());
                }
            })?;
        for directory in self.settings.watched_directories() {
            watcher.watch(&directory, RecursiveMode::NonRecursive)?;
        }
        Ok(tokio::spawn(async move {
            let _watcher = watcher;
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                tokio::select! {
                    Some(()) = changes.recv() => {}
                    _ = ticker.tick() => {}
                }
                self.check();
            }
        }))
    }
}
