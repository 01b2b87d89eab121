use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::connections::{self, ListenerHandle};
use super::limits::{ConnectionLimit, ConnectionSettings};
use super::policy_reload::PolicyReloader;
use super::{AppState, RequestSettings, webhook_router};
use crate::authorization::{ReviewSettings, SubjectAccessReviewer};
use crate::cluster::NamespaceCache;
use crate::cluster::inventory::ClusterInventory;
use crate::cluster::params::ClusterParams;
use crate::engine::Engine;
use crate::server::admin::{AdminState, admin_router};
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
    /// How long the webhook listener keeps accepting and serving after shutdown begins,
    /// not ready and with HTTP/1.x keep-alive turned off, before it stops accepting (time
    /// for the endpoint's removal to reach the apiservers, and for HTTP/1.1 clients to
    /// leave their keep-alive connections cleanly).
    pub drain_delay: Duration,
    /// How long in-flight requests may take to finish once the listener stops accepting.
    pub shutdown_grace: Duration,
    /// Per-request limits.
    pub request: RequestSettings,
    /// Connection limits and timeouts.
    pub connections: ConnectionSettings,
    /// The policy engine to serve when [`ServeSources::policy_paths`] is empty (the built-in
    /// set for `serve`); ignored otherwise.
    pub engine: Engine,
}

/// Where a server's policies and namespace labels come from, besides [`ServeConfig`].
pub struct ServeSources {
    /// Policy files and folders, loaded at start and reloaded on change. Empty: serve
    /// [`ServeConfig::engine`], never reloaded.
    pub policy_paths: Vec<PathBuf>,
    /// How often policy files are re-read besides change notifications.
    pub policy_reload_interval: Duration,
    /// A cluster whose Namespaces are watched for their labels (none known without it), the
    /// parameter objects of admission policies (from the policy folders without it), and
    /// that SubjectAccessReviews ask for CEL `authorizer` checks.
    pub cluster: Option<kube::Client>,
    /// The SubjectAccessReview cache and timeout.
    pub authorizer: ReviewSettings,
}

impl Default for ServeSources {
    fn default() -> Self {
        ServeSources {
            policy_paths: Vec::new(),
            policy_reload_interval: Duration::from_secs(30),
            cluster: None,
            authorizer: ReviewSettings::default(),
        }
    }
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
    /// The certificate directories could not be watched, or no file watcher could be made.
    #[error("cannot watch files: {0}")]
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
    handle: ListenerHandle,
    drain_delay: Duration,
    shutdown_grace: Duration,
    webhook_task: JoinHandle<std::io::Result<()>>,
    admin_task: JoinHandle<std::io::Result<()>>,
    admin_stop: oneshot::Sender<()>,
    background: Vec<AbortOnDrop>,
}

/// Stops a background task (a watcher, the namespace reflector) when the server goes away,
/// however it goes.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Accept queue length. The standard library's 128 overflows when more clients connect at
/// once (each dropped SYN costs the client a one-second retry); the kernel caps it at
/// `net.core.somaxconn`.
const LISTEN_BACKLOG: u32 = 4096;

fn bind(address: SocketAddr) -> Result<std::net::TcpListener, ServeError> {
    let error = |source| ServeError::Bind { address, source };
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(error)?;
    socket.set_reuseaddr(true).map_err(error)?;
    socket.bind(address).map_err(error)?;
    let listener = socket.listen(LISTEN_BACKLOG).map_err(error)?;
    listener.into_std().map_err(error)
}

/// Loads the certificate, binds both listeners and starts serving [`ServeConfig::engine`].
/// Returns once both listeners accept connections.
pub async fn start(config: ServeConfig) -> Result<RunningServer, ServeError> {
    start_with(config, ServeSources::default()).await
}

/// Like [`start`], with policies from files and namespace labels from a cluster.
///
/// Policy files that do not load do not stop the start: the server runs not ready, with the
/// reason in `/readyz`, answers admission requests as `--on-error` says, and keeps watching
/// the files until they load. With a cluster, `/readyz` also waits for the first complete
/// list of Namespaces, of each paramKind, and of each kind a Gatekeeper Config syncs into
/// `data.inventory`.
pub async fn start_with(
    config: ServeConfig,
    sources: ServeSources,
) -> Result<RunningServer, ServeError> {
    let mut state = if sources.policy_paths.is_empty() {
        AppState::new(config.engine, config.request)
    } else {
        AppState::without_engine(config.request)
    };
    let mut background = Vec::new();
    let loaded = config.tls.load()?;
    let rustls = RustlsConfig::from_config(loaded.config.clone());
    let reloader = CertificateReloader::new(
        config.tls.clone(),
        rustls.clone(),
        &loaded,
        state.metrics.clone(),
    );
    if config.tls.is_reloadable() {
        background.push(AbortOnDrop(reloader.spawn(config.tls_reload_interval)?));
    }
    state.readiness.set_certificate_loaded();

    let policies_swapped = Arc::new(tokio::sync::Notify::new());
    let inventory_swapped = Arc::new(tokio::sync::Notify::new());
    if sources.policy_paths.is_empty() {
        state.readiness.set_policies_loaded();
    } else {
        let mut policies = PolicyReloader::new(
            sources.policy_paths,
            state.engine.clone(),
            state.readiness.clone(),
            state.metrics.clone(),
        )
        .notify_on_swap(policies_swapped.clone())
        .notify_on_swap(inventory_swapped.clone());
        policies.check();
        background.push(AbortOnDrop(policies.spawn(sources.policy_reload_interval)?));
    }

    if let Some(client) = &sources.cluster {
        state.authorizer = Some(Arc::new(SubjectAccessReviewer::new(
            client.clone(),
            tokio::runtime::Handle::current(),
            sources.authorizer,
            state.metrics.authorizer.clone(),
        )));
    }
    let params = sources.cluster.clone().map(|client| {
        let (params, task) = ClusterParams::spawn(
            client,
            state.engine.clone(),
            policies_swapped,
            state.metrics.param_reads.clone(),
        );
        background.push(AbortOnDrop(task));
        state.params = Some(Arc::new(params.clone()));
        params
    });
    let inventory = sources.cluster.clone().map(|client| {
        let (inventory, task) = ClusterInventory::spawn(
            client,
            state.engine.clone(),
            inventory_swapped,
            state.inventory.clone(),
            state.metrics.inventory.clone(),
        );
        background.push(AbortOnDrop(task));
        inventory
    });
    let namespaces = sources.cluster.map(|client| {
        let (cache, task) = NamespaceCache::spawn(client, state.metrics.namespace_reads.clone());
        background.push(AbortOnDrop(task));
        state.namespaces = Arc::new(cache.clone());
        cache
    });

    let webhook_listener = bind(config.listen)?;
    let webhook_addr = webhook_listener.local_addr()?;
    let admin_listener = tokio::net::TcpListener::from_std(bind(config.admin_listen)?)?;
    let admin_addr = admin_listener.local_addr()?;

    let handle = ListenerHandle::new();
    let limits = &config.connections;
    let acceptor = RustlsAcceptor::new(rustls)
        .handshake_timeout(limits.tls_handshake_timeout)
        .acceptor(ConnectionLimit::new(
            limits.max_connections,
            state.metrics.connections_rejected.clone(),
            limits.idle_timeout,
        ));
    let webhook_task = tokio::spawn(connections::serve(
        tokio::net::TcpListener::from_std(webhook_listener)?,
        acceptor,
        webhook_router(state.clone()),
        limits.clone(),
        handle.clone(),
    ));

    let (admin_stop, admin_stopped) = oneshot::channel::<()>();
    let mut admin = admin_router(AdminState {
        metrics: state.metrics.clone(),
        readiness: state.readiness.clone(),
    });
    if let Some(cache) = namespaces {
        admin = admin.layer(axum::middleware::from_fn_with_state(
            cache,
            readyz_waits_for_namespaces,
        ));
    }
    if let Some(params) = params {
        admin = admin.layer(axum::middleware::from_fn_with_state(
            params,
            readyz_waits_for::<ClusterParams>,
        ));
    }
    if let Some(inventory) = inventory {
        admin = admin.layer(axum::middleware::from_fn_with_state(
            inventory,
            readyz_waits_for::<ClusterInventory>,
        ));
    }
    let admin_task = tokio::spawn(async move {
        axum::serve(admin_listener, admin)
            .with_graceful_shutdown(async {
                let _ = admin_stopped.await;
            })
            .await
    });
    Ok(RunningServer {
        webhook_addr,
        admin_addr,
        state,
        handle,
        drain_delay: config.drain_delay,
        shutdown_grace: config.shutdown_grace,
        webhook_task,
        admin_task,
        admin_stop,
        background,
    })
}

/// `/readyz` is 503 until the first list of Namespaces is complete, after every condition
/// of [`Readiness`](crate::server::admin::Readiness) holds: decisions that depend on namespace labels
/// would otherwise be made without them.
async fn readyz_waits_for_namespaces(
    State(cache): State<NamespaceCache>,
    request: Request,
    next: Next,
) -> Response {
    let readyz = request.uri().path() == "/readyz";
    let response = next.run(request).await;
    if readyz && response.status() == StatusCode::OK && !cache.is_synced() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: namespaces not listed yet\n",
        )
            .into_response();
    }
    response
}

/// A watch `/readyz` waits for: `Err` names what has not been listed once yet.
trait ListedOnce: Clone + Send + Sync + 'static {
    fn readiness(&self) -> Result<(), String>;
}

/// Every param kind of the policies in use listed once (or found not to exist): policies
/// reading params would otherwise decide without them.
impl ListedOnce for ClusterParams {
    fn readiness(&self) -> Result<(), String> {
        ClusterParams::readiness(self)
    }
}

/// Every kind a Gatekeeper Config syncs listed once (or found not to exist): templates
/// reading `data.inventory` would otherwise decide without it.
impl ListedOnce for ClusterInventory {
    fn readiness(&self) -> Result<(), String> {
        ClusterInventory::readiness(self)
    }
}

/// `/readyz` is 503, with the reason, until `watch` has listed what it watches once.
async fn readyz_waits_for<W: ListedOnce>(
    State(watch): State<W>,
    request: Request,
    next: Next,
) -> Response {
    let readyz = request.uri().path() == "/readyz";
    let response = next.run(request).await;
    if readyz
        && response.status() == StatusCode::OK
        && let Err(reason) = watch.readiness()
    {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}\n"),
        )
            .into_response();
    }
    response
}

impl RunningServer {
    /// Begins a graceful shutdown after the configured [`ServeConfig::drain_delay`]; see
    /// [`RunningServer::begin_shutdown_after`].
    pub fn begin_shutdown(&self) {
        self.begin_shutdown_after(self.drain_delay);
    }

    /// Begins a graceful shutdown: readiness turns false and HTTP/1.x answers close their
    /// connections; after `drain_delay` the webhook listener stops accepting, idle
    /// connections close (HTTP/2 ones with GOAWAY), and in-flight requests get
    /// `shutdown_grace` to finish. Must be called within the Tokio runtime.
    pub fn begin_shutdown_after(&self, drain_delay: Duration) {
        self.state.readiness.start_draining();
        let handle = self.handle.clone();
        let grace = self.shutdown_grace;
        if drain_delay.is_zero() {
            handle.graceful_shutdown(grace);
        } else {
            tokio::spawn(async move {
                tokio::time::sleep(drain_delay).await;
                handle.graceful_shutdown(grace);
            });
        }
    }

    /// Number of open webhook connections.
    pub fn connection_count(&self) -> usize {
        self.handle.connection_count()
    }

    /// Waits until the webhook listener has drained, then stops the admin listener.
    pub async fn wait(self) -> Result<(), ServeError> {
        let served = self.webhook_task.await;
        drop(self.background);
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
