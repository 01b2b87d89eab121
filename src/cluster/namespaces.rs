//! The cluster connection of `serve`: a read-only watch cache of Namespaces, whose labels feed
//! namespace selectors and Pod Security namespace labels, and whose objects are CEL's
//! `namespaceObject`.
//!
//! A reflector lists and watches Namespaces into a [`Store`] (without their `managedFields`,
//! which nothing reads); lookups on the request path read that store. A namespace it does not
//! hold (one created a moment ago, whose watch event has not arrived) is got from the API once
//! before the request is decided, as the apiserver's own namespace lister falls back to a
//! read ([`NamespaceLookup::fetch`]); the answer, found or not, is kept for
//! [`FETCHED_TTL`]. Watch errors are logged and retried with backoff; the store keeps the last
//! complete list meanwhile. RBAC: `get`, `list` and `watch` on `namespaces`.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::task::JoinHandle;

use crate::authorization::ResultLabels;
use crate::cluster::reads::{READ_TIMEOUT, ReadAnswers};
use crate::engine::{
    FetchFuture, Labels, NamespaceLabels, NamespaceLookup, ReadFailure, namespace_object,
    partial_namespace_object,
};

/// The label the apiserver sets on every namespace to its name.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// Namespaces (labels and `namespaceObject`) from a reflector [`Store`], and from reads of
/// the API for those it does not hold yet. Cheap to clone; clones share the store.
#[derive(Clone)]
pub struct NamespaceCache {
    store: Store<Namespace>,
    synced: Arc<AtomicBool>,
    fetcher: Option<Arc<Fetcher>>,
}

/// Reads of single namespaces the store does not hold, and their answers.
struct Fetcher {
    api: Api<Namespace>,
    answers: ReadAnswers<String, Arc<Namespace>>,
}

impl NamespaceCache {
    /// A cache reading `store`, which a reflector (or a test) fills through its writer.
    pub fn new(store: Store<Namespace>) -> Self {
        NamespaceCache {
            store,
            synced: Arc::new(AtomicBool::new(false)),
            fetcher: None,
        }
    }

    /// The same cache, reading a namespace the store does not hold through `client` (get
    /// on `namespaces`), counting the reads in `results`.
    #[must_use]
    pub fn with_reads(mut self, client: Client, results: Family<ResultLabels, Counter>) -> Self {
        self.fetcher = Some(Arc::new(Fetcher {
            api: Api::all(client),
            answers: ReadAnswers::new(results),
        }));
        self
    }

    /// Starts a reflector over the cluster's Namespaces (list, then watch; read-only) and
    /// returns the cache it fills (reading through `client` what it does not hold yet,
    /// counted in `reads`) and the task driving it, which runs until aborted.
    /// Errors are logged and retried with exponential backoff; they never end the task.
    pub fn spawn(client: Client, reads: Family<ResultLabels, Counter>) -> (Self, JoinHandle<()>) {
        let (store, writer) = reflector::store::<Namespace>();
        let cache = NamespaceCache::new(store).with_reads(client.clone(), reads);
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

    /// Namespace `name` from the store, or else from a read of the API that is still fresh.
    fn get(&self, name: &str) -> Option<Arc<Namespace>> {
        self.store.get(&ObjectRef::new(name)).or_else(|| {
            self.fetcher
                .as_ref()?
                .answers
                .fresh(&name.to_owned())?
                .ok()?
        })
    }
}

impl NamespaceLookup for NamespaceCache {
    fn labels(&self, name: &str) -> Option<Labels> {
        let namespace = self.get(name)?;
        let mut labels: Labels = namespace.metadata.labels.clone().unwrap_or_default();
        // The apiserver sets it on every namespace; objects from older servers may lack it.
        labels.insert(NAME_LABEL.to_owned(), name.to_owned());
        Some(labels)
    }

    fn labels_ref<'a>(&'a self, name: &'a str) -> Option<NamespaceLabels<'a>> {
        let namespace = self.get(name)?;
        Some(NamespaceLabels::Shared(namespace, name))
    }

    /// The stored Namespace as the apiserver gives it to CEL, built from the shared object
    /// (nothing else is copied); a namespace neither in the store nor read has its name and
    /// the name label only.
    fn namespace_object(&self, name: &str) -> serde_json::Value {
        match self.get(name) {
            Some(namespace) => namespace_object(&namespace),
            None => partial_namespace_object(
                name,
                Labels::from([(NAME_LABEL.to_owned(), name.to_owned())]),
            ),
        }
    }

    /// The failure of the last read of `name`, while it is fresh and the store does not hold
    /// the namespace.
    fn read_failure(&self, name: &str) -> Option<ReadFailure> {
        let fetcher = self.fetcher.as_ref()?;
        if self.store.get(&ObjectRef::new(name)).is_some() {
            return None;
        }
        fetcher.answers.fresh(&name.to_owned())?.err()
    }

    /// Whether `name` is neither in the store nor freshly read, with a client to read it.
    fn fetches(&self, name: &str) -> bool {
        self.fetcher.as_ref().is_some_and(|fetcher| {
            !name.is_empty()
                && self.store.get(&ObjectRef::new(name)).is_none()
                && fetcher.answers.fresh(&name.to_owned()).is_none()
        })
    }

    fn fetch<'a>(&'a self, name: &'a str, deadline: Instant) -> FetchFuture<'a> {
        Box::pin(async move {
            if let Some(fetcher) = &self.fetcher {
                let left = deadline.saturating_duration_since(Instant::now());
                let keep = |mut namespace: Namespace| {
                    namespace.metadata.managed_fields = None;
                    Some(Arc::new(namespace))
                };
                let read = fetcher.api.get_opt(name);
                let timeout = left.min(READ_TIMEOUT);
                fetcher
                    .answers
                    .read(
                        name.to_owned(),
                        "namespace",
                        name,
                        &format!("/api/v1/namespaces/{name}"),
                        timeout,
                        read,
                        keep,
                    )
                    .await;
            }
        })
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
    use crate::cluster::fake_api;

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

    fn read_results(family: &Family<ResultLabels, Counter>, result: &'static str) -> u64 {
        family.get_or_create(&ResultLabels { result }).get()
    }

    #[tokio::test]
    async fn a_namespace_the_watch_does_not_hold_is_read_once_and_kept() {
        let mut writer = Writer::<Namespace>::default();
        let fresh = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "fresh", "uid": "f1",
                "labels": {"pod-security.kubernetes.io/enforce": "privileged"},
                "managedFields": [{"manager": "kubectl"}]},
            "status": {"phase": "Active"}});
        let (client, requests) = fake_api::client(&[("/api/v1/namespaces/fresh", fresh)]);
        let results = Family::<ResultLabels, Counter>::default();
        let cache = NamespaceCache::new(writer.as_reader()).with_reads(client, results.clone());
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(namespace("listed", &[])));
        writer.apply_watcher_event(&Event::InitDone);
        let deadline = || Instant::now() + Duration::from_secs(5);

        // Held by the watch: nothing to read.
        assert!(!cache.fetches("listed"));
        assert!(!cache.fetches(""));
        // Not held yet: unknown until read, then its labels and object, without managedFields.
        assert!(cache.fetches("fresh"));
        assert_eq!(cache.labels("fresh"), None);
        cache.fetch("fresh", deadline()).await;
        assert_eq!(
            cache.labels("fresh"),
            Some(labels(&[
                ("kubernetes.io/metadata.name", "fresh"),
                ("pod-security.kubernetes.io/enforce", "privileged"),
            ]))
        );
        let object = cache.namespace_object("fresh");
        assert_eq!(object["metadata"]["uid"], "f1", "{object}");
        assert_eq!(object["status"]["phase"], "Active", "{object}");
        assert!(!cache.fetches("fresh"), "kept for a while");
        // The watch's object, once it arrives, comes first.
        writer.apply_watcher_event(&Event::Apply(namespace(
            "fresh",
            &[("pod-security.kubernetes.io/enforce", "baseline")],
        )));
        assert_eq!(
            cache
                .labels_ref("fresh")
                .unwrap()
                .get("pod-security.kubernetes.io/enforce"),
            Some("baseline")
        );

        // A namespace the API does not have either is not asked for again for a while.
        assert!(cache.fetches("ghost"));
        cache.fetch("ghost", deadline()).await;
        assert_eq!(cache.labels("ghost"), None);
        assert!(!cache.fetches("ghost"));
        assert_eq!(cache.read_failure("ghost"), None, "not found is no failure");
        // A read that does not answer ends at the deadline, and is kept as a failure.
        cache
            .fetch("slow", Instant::now() + Duration::from_millis(50))
            .await;
        assert_eq!(cache.labels("slow"), None);
        assert!(!cache.fetches("slow"));
        assert_eq!(
            cache.read_failure("slow"),
            Some(ReadFailure {
                status: None,
                message: "Get \"/api/v1/namespaces/slow\": context deadline exceeded".into(),
            })
        );
        // A read the API refuses is a failure in its words, with its status.
        cache.fetch("forbidden", deadline()).await;
        assert_eq!(cache.labels("forbidden"), None);
        assert_eq!(
            cache.read_failure("forbidden"),
            Some(ReadFailure {
                status: Some((403, "Forbidden".into())),
                message: "\"forbidden\" is forbidden: the fake API refuses it".into(),
            })
        );
        assert!(!cache.fetches("forbidden"), "kept for a while");
        // Once the watch holds it, the failure no longer counts.
        writer.apply_watcher_event(&Event::Apply(namespace("forbidden", &[])));
        assert_eq!(cache.read_failure("forbidden"), None);

        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 4);
        assert_eq!(read_results(&results, "found"), 1);
        assert_eq!(read_results(&results, "not_found"), 1);
        assert_eq!(read_results(&results, "timeout"), 1);
        assert_eq!(read_results(&results, "error"), 1);
        // Without a client, nothing is read.
        assert!(!NamespaceCache::new(writer.as_reader()).fetches("other"));
    }

    #[tokio::test]
    async fn requests_for_the_same_namespace_share_one_read() {
        let writer = Writer::<Namespace>::default();
        let (client, requests) = fake_api::client(&[]);
        let results = Family::<ResultLabels, Counter>::default();
        let cache = NamespaceCache::new(writer.as_reader()).with_reads(client, results.clone());
        // A read that does not answer: the three requests wait for it, and end at their
        // deadlines with it.
        let deadline = Instant::now() + Duration::from_millis(100);
        tokio::join!(
            cache.fetch("slow", deadline),
            cache.fetch("slow", deadline),
            cache.fetch("slow", deadline),
        );
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(read_results(&results, "timeout"), 1);
        assert!(!cache.fetches("slow"), "the answer is kept");
        // A read whose request went away (dropped while waiting for the API) leaves no read
        // in flight behind it: the next request reads again.
        let (client, requests) = fake_api::client(&[]);
        let cache = NamespaceCache::new(writer.as_reader()).with_reads(client, results.clone());
        let far = Instant::now() + Duration::from_secs(60);
        let abandoned = tokio::time::timeout(Duration::from_millis(20), cache.fetch("slow", far));
        assert!(abandoned.await.is_err());
        cache
            .fetch("slow", Instant::now() + Duration::from_millis(50))
            .await;
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert_eq!(read_results(&results, "timeout"), 2);
    }
}
