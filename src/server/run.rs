use std::net::SocketAddr;
use std::time::Duration;

use axum_server::Handle;
use axum_server::tls_rustls::RustlsConfig;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{AppState, RequestSettings, webhook_router};
use crate::admin::{AdminState, admin_router};
use crate::engine::Engine;
use crate::tls::{CertificateReloader, TlsError, TlsSettings};

/// Everything `serve` needs to start.
pub struct ServeConfig {
    /// Address of the HTTPS webhook listener (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Address of the plain-HTTP admin listener.
    pub admin_listen: SocketAddr,
    /// Serving certificate and client authentication.
    pub tls: TlsSettings,
    /// How often certificate files are re-checked besides change notifications.
    pub tls_reload_interval: Duration,
    /// How long in-flight requests may take to finish after shutdown begins.
    pub shutdown_grace: Duration,
    /// Per-request limits.
    pub request: RequestSettings,
    /// The policy engine to start with.
    pub engine: Engine,
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A listener could not bind.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// The certificate could not be loaded.
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
    /// The certificate directories could not be watched.
    #[error("cannot watch certificate files: {0}")]
    Watch(#[from] notify::Error),
    /// A listener failed while serving.
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
}

/// A running server: its bound addresses, its state, and the means to stop it.
pub struct RunningServer {
    /// Where the webhook listens.
    pub webhook_addr: SocketAddr,
    /// Where the admin endpoints listen.
    pub admin_addr: SocketAddr,
    /// The shared state (engine, metrics, readiness).
    pub state: AppState,
    handle: Handle<SocketAddr>,
    shutdown_grace: Duration,
    webhook_task: JoinHandle<std::io::Result<()>>,
    admin_task: JoinHandle<std::io::Result<()>>,
    admin_stop: oneshot::Sender<()>,
    reload_task: Option<AbortOnDrop>,
}

/// Stops the certificate watcher when the server goes away, however it goes.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn bind(address: SocketAddr) -> Result<std::net::TcpListener, ServeError> {
    let listener = std::net::TcpListener::bind(address)
        .map_err(|source| ServeError::Bind { address, source })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| ServeError::Bind { address, source })?;
    Ok(listener)
}

/// Loads the certificate, binds both listeners and starts serving. Returns once both
/// listeners accept connections.
pub async fn start(config: ServeConfig) -> Result<RunningServer, ServeError> {
    let state = AppState::new(config.engine, config.request);
    let loaded = config.tls.load()?;
    let rustls = RustlsConfig::from_config(loaded.config.clone());
    let reloader = CertificateReloader::new(
        config.tls.clone(),
        rustls.clone(),
        &loaded,
        state.metrics.clone(),
    );
    let reload_task = if config.tls.is_reloadable() {
        Some(AbortOnDrop(reloader.spawn(config.tls_reload_interval)?))
    } else {
        None
    };
    state.readiness.set_certificate_loaded();
    state.readiness.set_policies_loaded();

    let webhook_listener = bind(config.listen)?;
    let webhook_addr = webhook_listener.local_addr()?;
    let admin_listener = tokio::net::TcpListener::from_std(bind(config.admin_listen)?)?;
    let admin_addr = admin_listener.local_addr()?;

    let handle = Handle::new();
    let server = axum_server::from_tcp_rustls(webhook_listener, rustls)?.handle(handle.clone());
    let router = webhook_router(state.clone());
    let webhook_task = tokio::spawn(server.serve(router.into_make_service()));

    let (admin_stop, admin_stopped) = oneshot::channel::<()>();
    let admin = admin_router(AdminState {
        metrics: state.metrics.clone(),
        readiness: state.readiness.clone(),
    });
    let admin_task = tokio::spawn(async move {
        axum::serve(admin_listener, admin)
            .with_graceful_shutdown(async {
                let _ = admin_stopped.await;
            })
            .await
    });
    handle.listening().await;
    Ok(RunningServer {
        webhook_addr,
        admin_addr,
        state,
        handle,
        shutdown_grace: config.shutdown_grace,
        webhook_task,
        admin_task,
        admin_stop,
        reload_task,
    })
}

impl RunningServer {
    /// Begins a graceful shutdown: readiness turns false, the webhook listener stops
    /// accepting, and in-flight requests get `shutdown_grace` to finish.
    pub fn begin_shutdown(&self) {
        self.state.readiness.start_draining();
        self.handle.graceful_shutdown(Some(self.shutdown_grace));
    }

    /// Number of open webhook connections.
    pub fn connection_count(&self) -> usize {
        self.handle.connection_count()
    }

    /// Waits until the webhook listener has drained, then stops the admin listener.
    pub async fn wait(self) -> Result<(), ServeError> {
        let served = self.webhook_task.await;
        drop(self.reload_task);
        let _ = self.admin_stop.send(());
        let admin = self.admin_task.await;
        served.map_err(|e| std::io::Error::other(e.to_string()))??;
        admin.map_err(|e| std::io::Error::other(e.to_string()))??;
        Ok(())
    }

    /// Begins a graceful shutdown and waits for it to finish.
    pub async fn shutdown(self) -> Result<(), ServeError> {
        self.begin_shutdown();
        self.wait().await
    }
}
