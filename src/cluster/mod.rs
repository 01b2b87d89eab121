//! The cluster connection of `serve`: where it comes from ([`ClusterSource`]), the watch
//! cache of Namespaces ([`NamespaceCache`]), the watches of admission policy parameters
//! ([`params`]), the watches of the kinds a Gatekeeper Config syncs into `data.inventory`
//! ([`inventory`]) and the reads of single objects they do not hold yet ([`reads`]).

pub mod inventory;
pub mod namespaces;
pub mod params;
pub mod reads;

use std::path::{Path, PathBuf};

use kube::config::{InClusterError, KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Client, Config};

pub use namespaces::NamespaceCache;
pub use reads::{FETCHED_TTL, READ_TIMEOUT};

/// Where the cluster connection comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterSource {
    /// No cluster: namespaces stay unknown.
    None,
    /// A kubeconfig file (its current context).
    Kubeconfig(PathBuf),
    /// The Pod's service account (`KUBERNETES_SERVICE_HOST` and the mounted token).
    InCluster,
}

impl ClusterSource {
    /// The source `serve` uses: `--kubeconfig` when given; otherwise the in-cluster service
    /// account when running in a Pod (`in_pod`), unless `--no-cluster`.
    pub fn choose(kubeconfig: Option<&Path>, no_cluster: bool, in_pod: bool) -> Self {
        match kubeconfig {
            Some(path) => ClusterSource::Kubeconfig(path.to_owned()),
            None if in_pod && !no_cluster => ClusterSource::InCluster,
            None => ClusterSource::None,
        }
    }

    /// Whether this process runs in a Pod: the kubelet sets `KUBERNETES_SERVICE_HOST`.
    pub fn in_pod() -> bool {
        std::env::var_os("KUBERNETES_SERVICE_HOST").is_some_and(|host| !host.is_empty())
    }

    /// A client for the source, or `None` without a cluster. Nothing is sent to the cluster
    /// yet: an unreachable apiserver shows later, as watch errors.
    pub async fn client(&self) -> Result<Option<Client>, ClusterError> {
        let config = match self {
            ClusterSource::None => return Ok(None),
            ClusterSource::Kubeconfig(path) => {
                let kubeconfig = Kubeconfig::read_from(path)?;
                Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
            }
            ClusterSource::InCluster => Config::incluster()?,
        };
        Ok(Some(Client::try_from(config)?))
    }
}

/// Why no cluster client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] KubeconfigError),
    /// The in-cluster configuration is incomplete (no service account token mounted?).
    #[error("in-cluster configuration: {0} (use --no-cluster to run without a cluster)")]
    InCluster(#[from] InClusterError),
    /// The client could not be built.
    #[error("kubernetes client: {0}")]
    Client(#[from] kube::Error),
}
/// A kube API on no network for tests: a GET of one of the paths given answers its object, a
/// path ending in `/slow` never answers, one ending in `/forbidden` is a 403, any other is a
/// 404.
#[cfg(test)]
pub(crate) mod fake_api {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use kube::Client;
    use kube::client::Body;

    /// A client whose API holds `objects` (JSON objects by path, such as
    /// `/api/v1/namespaces/NAME`), and the count of requests it was sent.
    pub(crate) fn client(objects: &[(&str, serde_json::Value)]) -> (Client, Arc<AtomicUsize>) {
        let objects: Arc<HashMap<String, Vec<u8>>> = Arc::new(
            objects
                .iter()
                .map(|(path, object)| ((*path).to_owned(), object.to_string().into_bytes()))
                .collect(),
        );
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        let service = tower::service_fn(move |request: http::Request<Body>| {
            counted.fetch_add(1, Ordering::SeqCst);
            let objects = objects.clone();
            async move {
                let path = request.uri().path().to_owned();
                if path.ends_with("/slow") {
                    std::future::pending::<()>().await;
                }
                let name = path.rsplit('/').next().unwrap_or_default();
                let (status, body) = match objects.get(&path) {
                    Some(object) => (200, object.clone()),
                    None if name == "forbidden" => (
                        403,
                        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "reason": "Forbidden", "code": 403,
                            "message": "\"forbidden\" is forbidden: the fake API refuses it"})
                        .to_string()
                        .into_bytes(),
                    ),
                    None => (
                        404,
                        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "reason": "NotFound", "code": 404,
                            "message": format!("\"{name}\" not found")})
                        .to_string()
                        .into_bytes(),
                    ),
                };
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(Body::from(body))
                        .unwrap(),
                )
            }
        });
        (Client::new(service, "default"), requests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_source_follows_the_flags() {
        let file = Path::new("/etc/kubeconfig");
        assert_eq!(
            ClusterSource::choose(Some(file), false, true),
            ClusterSource::Kubeconfig(file.to_owned())
        );
        assert_eq!(
            ClusterSource::choose(None, false, true),
            ClusterSource::InCluster
        );
        assert_eq!(ClusterSource::choose(None, true, true), ClusterSource::None);
        assert_eq!(
            ClusterSource::choose(None, false, false),
            ClusterSource::None
        );
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_is_an_error() {
        let source = ClusterSource::Kubeconfig(PathBuf::from("/nonexistent/kubeconfig"));
        let error = source.client().await.err().expect("no such file");
        assert!(error.to_string().starts_with("kubeconfig: "), "{error}");
    }
}
