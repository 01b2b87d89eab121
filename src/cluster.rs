//! The cluster connection of `serve`: a read-only watch cache of Namespaces, whose labels feed
//! namespace selectors and Pod Security namespace labels, and whose objects are CEL's
//! `namespaceObject`.
//!
//! A reflector lists and watches Namespaces into a [`Store`] (without their `managedFields`,
//! which nothing reads); lookups on the request path read that store only, never the API. Watch errors are logged and retried with backoff; the store
//! keeps the last complete list meanwhile. RBAC: `get`, `list` and `watch` on `namespaces`.

use std::path::{Path, PathBuf};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::Namespace;
use kube::config::{InClusterError, KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Config};
use tokio::task::JoinHandle;

use crate::engine::{
    Labels, NamespaceLabels, NamespaceLookup, namespace_object, partial_namespace_object,
};

/// The label the apiserver sets on every namespace to its name.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

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

/// Namespaces (labels and `namespaceObject`) from a reflector [`Store`]. Cheap to clone;
/// clones share the store.
#[derive(Clone)]
pub struct NamespaceCache {
    store: Store<Namespace>,
    synced: Arc<AtomicBool>,
}

impl NamespaceCache {
    /// A cache reading `store`, which a reflector (or a test) fills through its writer.
    pub fn new(store: Store<Namespace>) -> Self {
        NamespaceCache {
            store,
            synced: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Starts a reflector over the cluster's Namespaces (list, then watch; read-only) and
    /// returns the cache it fills and the task driving it, which runs until aborted.
    /// Errors are logged and retried with exponential backoff; they never end the task.
    pub fn spawn(client: Client) -> (Self, JoinHandle<()>) {
        let (store, writer) = reflector::store::<Namespace>();
        let cache = NamespaceCache::new(store);
        let events = reflector::reflector(
            writer,
            watcher(
                Api::<Namespace>::all(client),
                watcher::Config::default().any_semantic(),
            )
            .modify(|namespace| namespace.metadata.managed_fields = None),
        )
        .default_backoff();
        let synced = cache.clone();
        let task = tokio::spawn(async move {
            tokio::join!(synced.wait_until_synced(), drive(events));
        });
        (cache, task)
    }

    /// Waits until the first complete list of namespaces is in the store.
    pub async fn wait_until_synced(&self) {
        if self.store.wait_until_ready().await.is_ok() {
            self.synced.store(true, Ordering::SeqCst);
            tracing::info!(namespaces = self.store.len(), "namespace cache synced");
        }
    }

    /// Whether the first complete list has arrived. The store stays complete after that:
    /// a re-list after a watch error replaces it whole when the new list is complete.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::SeqCst)
    }
}

impl NamespaceLookup for NamespaceCache {
    fn labels(&self, name: &str) -> Option<Labels> {
        let namespace = self.store.get(&ObjectRef::new(name))?;
        let mut labels: Labels = namespace.metadata.labels.clone().unwrap_or_default();
        // The apiserver sets it on every namespace; objects from older servers may lack it.
        labels.insert(NAME_LABEL.to_owned(), name.to_owned());
        Some(labels)
    }

    fn labels_ref<'a>(&'a self, name: &'a str) -> Option<NamespaceLabels<'a>> {
        let namespace = self.store.get(&ObjectRef::new(name))?;
        Some(NamespaceLabels::Shared(namespace, name))
    }

    /// The stored Namespace as the apiserver gives it to CEL, built from the shared object
    /// (nothing else is copied); a namespace not (yet) in the store has its name and the
    /// name label only.
    fn namespace_object(&self, name: &str) -> serde_json::Value {
        match self.store.get(&ObjectRef::new(name)) {
            Some(namespace) => namespace_object(&namespace),
            None => partial_namespace_object(
                name,
                Labels::from([(NAME_LABEL.to_owned(), name.to_owned())]),
            ),
        }
    }
}

/// Polls the reflector stream forever, logging errors (the backoff spaces them out).
async fn drive<S: WatchStreamExt<Item = Result<watcher::Event<Namespace>, watcher::Error>>>(
    events: S,
) {
    let mut events = pin!(events);
    // `futures` is not a dependency: `WatchStreamExt` extends `Stream`, whose `poll_next`
    // this reaches through the bound.
    while let Some(event) = std::future::poll_fn(|cx| events.as_mut().poll_next(cx)).await {
        if let Err(error) = event {
            tracing::warn!(%error, "namespace watch failed; retrying with backoff");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::NamespaceStatus;
    use kube::api::ObjectMeta;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;

    fn namespace(name: &str, labels: &[(&str, &str)]) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[tokio::test]
    async fn lookups_follow_the_watch_events() {
        let mut writer = Writer::<Namespace>::default();
        let cache = NamespaceCache::new(writer.as_reader());
        assert!(!cache.is_synced());

        let team = namespace(
            "team-a",
            &[
                ("kubernetes.io/metadata.name", "team-a"),
                ("pod-security.kubernetes.io/enforce", "restricted"),
            ],
        );
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(team.clone()));
        // Listed objects are buffered until the list is complete.
        assert_eq!(cache.labels("team-a"), None);
        writer.apply_watcher_event(&Event::InitApply(namespace("bare", &[])));
        writer.apply_watcher_event(&Event::InitDone);
        tokio::time::timeout(Duration::from_secs(10), cache.wait_until_synced())
            .await
            .expect("synced after the first list");
        assert!(cache.is_synced());

        assert_eq!(
            cache.labels("team-a"),
            Some(labels(&[
                ("kubernetes.io/metadata.name", "team-a"),
                ("pod-security.kubernetes.io/enforce", "restricted"),
            ]))
        );
        // The name label is there even when the object lacks it.
        assert_eq!(
            cache.labels("bare"),
            Some(labels(&[("kubernetes.io/metadata.name", "bare")]))
        );
        assert_eq!(cache.labels("missing"), None);
        // Read in place, the labels are the same.
        for name in ["team-a", "bare"] {
            let borrowed = cache.labels_ref(name).unwrap();
            for (key, value) in cache.labels(name).unwrap() {
                assert_eq!(borrowed.get(&key), Some(value.as_str()), "{name} {key}");
            }
            assert_eq!(borrowed.get("other"), None);
        }
        assert!(cache.labels_ref("missing").is_none());

        let relabelled = namespace(
            "team-a",
            &[("pod-security.kubernetes.io/enforce", "baseline")],
        );
        writer.apply_watcher_event(&Event::Apply(relabelled));
        assert_eq!(
            cache.labels("team-a"),
            Some(labels(&[
                ("kubernetes.io/metadata.name", "team-a"),
                ("pod-security.kubernetes.io/enforce", "baseline"),
            ]))
        );
        writer.apply_watcher_event(&Event::Delete(team));
        assert_eq!(cache.labels("team-a"), None);

        // A re-list (after a watch error) keeps serving the old contents until it completes.
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(namespace("new", &[])));
        assert!(cache.labels("bare").is_some());
        writer.apply_watcher_event(&Event::InitDone);
        assert_eq!(cache.labels("bare"), None);
        assert!(cache.labels("new").is_some());
        assert!(cache.is_synced());
    }

    #[tokio::test]
    async fn namespace_objects_follow_the_watch_events() {
        let mut writer = Writer::<Namespace>::default();
        let cache = NamespaceCache::new(writer.as_reader());
        let mut team = namespace("team-a", &[("kubernetes.io/metadata.name", "team-a")]);
        team.metadata.uid = Some("0b7c".into());
        team.metadata.annotations = Some(BTreeMap::from([("owner".into(), "alice".into())]));
        team.status = Some(NamespaceStatus {
            phase: Some("Active".into()),
            conditions: None,
        });
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(team.clone()));
        writer.apply_watcher_event(&Event::InitDone);
        tokio::time::timeout(Duration::from_secs(10), cache.wait_until_synced())
            .await
            .expect("synced after the first list");

        assert_eq!(
            cache.namespace_object("team-a"),
            json!({
                "metadata": {
                    "name": "team-a",
                    "uid": "0b7c",
                    "labels": {"kubernetes.io/metadata.name": "team-a"},
                    "annotations": {"owner": "alice"},
                },
                "spec": {},
                "status": {"phase": "Active"},
            })
        );
        team.metadata.annotations = None;
        team.status = Some(NamespaceStatus {
            phase: Some("Terminating".into()),
            conditions: None,
        });
        writer.apply_watcher_event(&Event::Apply(team));
        let object = cache.namespace_object("team-a");
        assert_eq!(object["status"]["phase"], "Terminating");
        assert!(object["metadata"].get("annotations").is_none(), "{object}");
        // Unknown: the name and its label only.
        assert_eq!(
            cache.namespace_object("missing"),
            json!({
                "metadata": {
                    "name": "missing",
                    "labels": {"kubernetes.io/metadata.name": "missing"},
                },
                "spec": {},
                "status": {},
            })
        );
    }

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
