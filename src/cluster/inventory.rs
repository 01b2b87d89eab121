//! Gatekeeper's `data.inventory` under `serve`, as Gatekeeper's sync keeps it: each kind of
//! the Config's `spec.sync.syncOnly` is found by discovery and watched, cluster-wide, and its
//! objects (those whose namespace the Config does not exclude from `sync`) are kept in one
//! [`Inventory`] that every admission request reads. Without a Config (or with no syncOnly
//! kind) nothing is watched and no inventory is given, as before.
//!
//! The watches follow policy reloads: when the synced kinds or the `sync` exclusions change,
//! the watches start anew, and the inventory in use stays the previous one until every new
//! kind has listed once. `/readyz` waits for that first list (a kind the cluster does not
//! serve counts as listed, with a warning, and is looked for again every few seconds).
//!
//! RBAC: `list` and `watch` on each synced kind's resource, cluster-wide (see
//! `webhook-config`).

use std::collections::{BTreeSet, HashSet};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use kube::api::DynamicObject;
use kube::core::GroupVersionKind;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::engine::Engine;
use crate::engine::gatekeeper::Inventory;
use crate::engine::gatekeeper::config::SyncSettings;
use crate::policy::gatekeeper_config::SyncOnlyEntry;

/// Labels of the Gatekeeper inventory metrics: a kind the Config syncs (from the policy
/// document, never from an object).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SyncedKindLabels {
    /// The kind's `apiVersion` (`v1`, `networking.k8s.io/v1`).
    pub api_version: String,
    /// The kind.
    pub kind: String,
}

/// Metrics of the watches that keep Gatekeeper's `data.inventory` under `serve`.
#[derive(Clone, Debug, Default)]
pub struct InventoryMetrics {
    /// Objects of each synced kind the watches hold.
    pub objects: Family<SyncedKindLabels, Gauge>,
    /// Errors of each synced kind's watch (each is retried with backoff).
    pub watch_errors: Family<SyncedKindLabels, Counter>,
}

/// How long discovery waits before asking again for a kind the cluster does not serve (a
/// CustomResourceDefinition may be installed later), or after discovery failed.
const REDISCOVER_AFTER: Duration = Duration::from_secs(10);

/// What the watch of one synced kind has done so far.
#[derive(Debug, Default)]
struct KindState {
    /// Listed once, or found not to be served.
    ready: bool,
    /// The namespace (`""` for cluster-scoped objects) and name of each object of the kind
    /// in the inventory.
    held: HashSet<(String, String)>,
}

/// The inventory being kept by one set of watches, and what each watch has done.
struct Building {
    inventory: Inventory,
    kinds: Vec<KindState>,
}

/// One set of watches, for one [`SyncSettings`].
struct Generation {
    settings: SyncSettings,
    building: Mutex<Building>,
    /// Where the inventory in use is published.
    published: Arc<ArcSwapOption<Inventory>>,
    /// False once another generation replaced this one: its watches then publish nothing.
    live: AtomicBool,
    metrics: InventoryMetrics,
}

impl Generation {
    fn lock(&self) -> std::sync::MutexGuard<'_, Building> {
        self.building.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes the inventory, once every kind is ready, while this generation is live.
    fn publish(&self, building: &Building) {
        if self.live.load(Ordering::SeqCst) && building.kinds.iter().all(|kind| kind.ready) {
            self.published
                .store(Some(Arc::new(building.inventory.clone())));
        }
    }

    /// The metrics labels of kind `index`.
    fn labels(&self, index: usize) -> SyncedKindLabels {
        let entry = &self.settings.kinds[index];
        SyncedKindLabels {
            api_version: entry.api_version(),
            kind: entry.kind.clone(),
        }
    }

    /// Sets the count of kind `index`'s objects, while this generation is live.
    fn count(&self, index: usize, building: &Building) {
        if self.live.load(Ordering::SeqCst) {
            let held = i64::try_from(building.kinds[index].held.len()).unwrap_or(i64::MAX);
            self.metrics
                .objects
                .get_or_create(&self.labels(index))
                .set(held);
        }
    }

    /// The object as the inventory keeps it: with the kind's `apiVersion` and `kind` (the
    /// items of a built-in kind's list come without them), or none when it has no name or
    /// its namespace is excluded from `sync`.
    fn inventory_object(&self, index: usize, object: DynamicObject) -> Option<(Key, Value)> {
        let entry = &self.settings.kinds[index];
        let namespace = object.metadata.namespace.clone().unwrap_or_default();
        let name = object.metadata.name.clone()?;
        let mut value = serde_json::to_value(object).ok()?;
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".into(), Value::String(entry.api_version()));
            map.insert("kind".into(), Value::String(entry.kind.clone()));
        }
        if self.settings.excludes(&value) {
            return None;
        }
        Some(((namespace, name), value))
    }

    /// Adds or replaces one object of kind `index`.
    fn apply(&self, index: usize, object: DynamicObject) {
        let Some((key, value)) = self.inventory_object(index, object) else {
            return;
        };
        let mut building = self.lock();
        building.inventory.insert(&value);
        building.kinds[index].held.insert(key);
        self.count(index, &building);
        self.publish(&building);
    }

    /// Removes one object of kind `index`.
    fn delete(&self, index: usize, object: &DynamicObject) {
        let namespace = object.metadata.namespace.clone().unwrap_or_default();
        let Some(name) = object.metadata.name.clone() else {
            return;
        };
        let key = (namespace, name);
        let mut building = self.lock();
        if building.kinds[index].held.remove(&key) {
            let stub = stub(&self.settings.kinds[index], &key);
            building.inventory.remove(&stub);
            self.count(index, &building);
            self.publish(&building);
        }
    }

    /// Makes the objects of kind `index` those of a complete list.
    fn replace(&self, index: usize, listed: Vec<(Key, Value)>) {
        let mut building = self.lock();
        let kept: HashSet<Key> = listed.iter().map(|(key, _)| key.clone()).collect();
        let gone: Vec<Key> = building.kinds[index]
            .held
            .iter()
            .filter(|key| !kept.contains(*key))
            .cloned()
            .collect();
        for key in &gone {
            let stub = stub(&self.settings.kinds[index], key);
            building.inventory.remove(&stub);
        }
        for (_, value) in &listed {
            building.inventory.insert(value);
        }
        let state = &mut building.kinds[index];
        state.held = kept;
        let first = !std::mem::replace(&mut state.ready, true);
        if first {
            let entry = &self.settings.kinds[index];
            tracing::info!(
                api_version = %entry.api_version(),
                kind = %entry.kind,
                objects = listed.len(),
                "Gatekeeper inventory: kind listed"
            );
        }
        self.count(index, &building);
        self.publish(&building);
    }

    /// Counts kind `index` as ready: the cluster does not serve it.
    fn missing(&self, index: usize) {
        let mut building = self.lock();
        building.kinds[index].ready = true;
        self.publish(&building);
    }

    /// The kinds not listed yet, as `apiVersion kind`.
    fn waiting(&self) -> Vec<String> {
        let building = self.lock();
        building
            .kinds
            .iter()
            .zip(&self.settings.kinds)
            .filter(|(state, _)| !state.ready)
            .map(|(_, entry)| format!("{} {}", entry.api_version(), entry.kind))
            .collect()
    }
}

/// An object's namespace (`""` when cluster-scoped) and name.
type Key = (String, String);

/// The fields [`Inventory::remove`] reads of the object at `key` of kind `entry`.
fn stub(entry: &SyncOnlyEntry, (namespace, name): &Key) -> Value {
    serde_json::json!({
        "apiVersion": entry.api_version(),
        "kind": entry.kind,
        "metadata": {"namespace": namespace, "name": name},
    })
}

/// A generation and the tasks of its watches (aborted when dropped).
struct Running {
    generation: Arc<Generation>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.generation.live.store(false, Ordering::SeqCst);
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// `data.inventory` from the cluster, for the Config of the loaded policies. Cheap to clone;
/// clones share the watches.
#[derive(Clone)]
pub struct ClusterInventory {
    /// The inventory in use; none without synced kinds.
    published: Arc<ArcSwapOption<Inventory>>,
    running: Arc<Mutex<Option<Running>>>,
    /// Set once the watches of the engine in use have been started.
    reconciled: Arc<AtomicBool>,
    metrics: InventoryMetrics,
}

impl std::fmt::Debug for ClusterInventory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterInventory")
            .field("published", &self.published.load().is_some())
            .finish()
    }
}

impl ClusterInventory {
    /// Starts following the engine in `engine`: watches for the kinds its Config syncs now,
    /// and again each time `reloaded` is notified. The inventory in use is published in
    /// `published` (none without synced kinds), which requests read; the watches' objects and
    /// errors are counted in `metrics`. Returns the handle and the task, which runs until
    /// aborted (aborting it stops every watch).
    pub fn spawn(
        client: Client,
        engine: Arc<ArcSwapOption<Engine>>,
        reloaded: Arc<Notify>,
        published: Arc<ArcSwapOption<Inventory>>,
        metrics: InventoryMetrics,
    ) -> (Self, JoinHandle<()>) {
        let inventory = ClusterInventory::new(published, metrics);
        let following = inventory.clone();
        let task = tokio::spawn(async move {
            // Stops every watch when the task is aborted.
            let _stop = StopWatches(following.clone());
            loop {
                let settings = engine
                    .load()
                    .as_ref()
                    .map(|engine| engine.gatekeeper_sync())
                    .unwrap_or_default();
                following.reconcile(&client, settings);
                reloaded.notified().await;
            }
        });
        (inventory, task)
    }

    /// A handle that watches nothing yet.
    fn new(published: Arc<ArcSwapOption<Inventory>>, metrics: InventoryMetrics) -> Self {
        ClusterInventory {
            published,
            running: Arc::new(Mutex::new(None)),
            reconciled: Arc::new(AtomicBool::new(false)),
            metrics,
        }
    }

    /// Makes the watches those `settings` call for: unchanged settings keep the running
    /// watches; others start new ones (the inventory in use stays until they have listed).
    pub fn reconcile(&self, client: &Client, settings: SyncSettings) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let unchanged = running.as_ref().map_or(settings.kinds.is_empty(), |r| {
            r.generation.settings == settings
        });
        if !unchanged {
            // Dropping the old generation stops its watches.
            *running = None;
            self.metrics.objects.clear();
            if settings.kinds.is_empty() {
                self.published.store(None);
            } else {
                let kinds: BTreeSet<String> = settings
                    .kinds
                    .iter()
                    .map(|k| format!("{} {}", k.api_version(), k.kind))
                    .collect();
                tracing::info!(kinds = ?kinds, "Gatekeeper inventory: watching synced kinds");
                let generation = Arc::new(Generation {
                    building: Mutex::new(Building {
                        inventory: Inventory::empty(),
                        kinds: settings
                            .kinds
                            .iter()
                            .map(|_| KindState::default())
                            .collect(),
                    }),
                    settings,
                    published: self.published.clone(),
                    live: AtomicBool::new(true),
                    metrics: self.metrics.clone(),
                });
                let tasks = (0..generation.settings.kinds.len())
                    .map(|index| tokio::spawn(run_watch(client.clone(), generation.clone(), index)))
                    .collect();
                *running = Some(Running { generation, tasks });
            }
        }
        self.reconciled.store(true, Ordering::SeqCst);
    }

    /// Whether every synced kind has listed once (or is not served). `Err` says which wait.
    pub fn readiness(&self) -> Result<(), String> {
        if !self.reconciled.load(Ordering::SeqCst) {
            return Err("Gatekeeper inventory not watched yet".into());
        }
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let Some(running) = running.as_ref() else {
            return Ok(());
        };
        let waiting = running.generation.waiting();
        if waiting.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "Gatekeeper inventory not listed yet: {}",
                waiting.join(", ")
            ))
        }
    }
}

/// Stops every watch of a [`ClusterInventory`] when dropped.
struct StopWatches(ClusterInventory);

impl Drop for StopWatches {
    fn drop(&mut self) {
        *self.0.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Finds kind `index`'s resource by discovery (again every [`REDISCOVER_AFTER`] while the
/// cluster does not serve it or cannot be asked), then lists and watches it forever.
async fn run_watch(client: Client, generation: Arc<Generation>, index: usize) {
    let entry = generation.settings.kinds[index].clone();
    let gvk = GroupVersionKind::gvk(&entry.group, &entry.version, &entry.kind);
    let resource = loop {
        match kube::discovery::pinned_kind(&client, &gvk).await {
            Ok((resource, _)) => break resource,
            Err(error) => {
                let missing = matches!(&error, kube::Error::Discovery(_))
                    || matches!(&error, kube::Error::Api(status) if status.code == 404);
                if missing {
                    generation.missing(index);
                    tracing::warn!(
                        api_version = %entry.api_version(),
                        kind = %entry.kind,
                        "the cluster serves no resource of this synced kind; data.inventory has none"
                    );
                } else {
                    tracing::warn!(
                        api_version = %entry.api_version(),
                        kind = %entry.kind,
                        %error,
                        "discovery of a synced kind failed; retrying"
                    );
                }
                tokio::time::sleep(REDISCOVER_AFTER).await;
            }
        }
    };
    let api = Api::<DynamicObject>::all_with(client, &resource);
    let events = watcher(api, watcher::Config::default().any_semantic()).default_backoff();
    apply_events(&generation, index, &resource.plural, events).await;
}

/// Applies the events of `events` to kind `index` of `generation` until the stream ends.
async fn apply_events<S>(generation: &Generation, index: usize, plural: &str, events: S)
where
    S: WatchStreamExt<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>,
{
    let mut events = pin!(events);
    let mut listing: Option<Vec<(Key, Value)>> = None;
    // `futures` is not a dependency: `WatchStreamExt` extends `Stream`, whose `poll_next`
    // this reaches through the bound.
    while let Some(event) = std::future::poll_fn(|cx| events.as_mut().poll_next(cx)).await {
        match event {
            Ok(watcher::Event::Init) => listing = Some(Vec::new()),
            Ok(watcher::Event::InitApply(object)) => {
                if let (Some(listing), Some(kept)) =
                    (listing.as_mut(), generation.inventory_object(index, object))
                {
                    listing.push(kept);
                }
            }
            Ok(watcher::Event::InitDone) => {
                generation.replace(index, listing.take().unwrap_or_default());
            }
            Ok(watcher::Event::Apply(object)) => generation.apply(index, object),
            Ok(watcher::Event::Delete(object)) => generation.delete(index, &object),
            Err(error) => {
                generation
                    .metrics
                    .watch_errors
                    .get_or_create(&generation.labels(index))
                    .inc();
                tracing::warn!(
                    resource = %plural,
                    %error,
                    "Gatekeeper inventory watch failed; retrying with backoff"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn settings(yaml: &str) -> SyncSettings {
        let documents =
            crate::policy::documents_from_str(std::path::Path::new("config.yaml"), yaml)
                .expect("documents");
        Engine::compile(&documents)
            .expect("compiles")
            .gatekeeper_sync()
    }

    const CONFIG: &str = r#"
apiVersion: config.gatekeeper.sh/v1alpha1
kind: Config
metadata: {name: config}
spec:
  match: [{excludedNamespaces: ["kube-*"], processes: ["sync"]}]
  sync:
    syncOnly:
      - {group: "", version: v1, kind: ConfigMap}
      - {group: "", version: v1, kind: Namespace}
"#;

    fn generation(settings: SyncSettings) -> Generation {
        Generation {
            building: Mutex::new(Building {
                inventory: Inventory::empty(),
                kinds: settings
                    .kinds
                    .iter()
                    .map(|_| KindState::default())
                    .collect(),
            }),
            settings,
            published: Arc::new(ArcSwapOption::empty()),
            live: AtomicBool::new(true),
            metrics: InventoryMetrics::default(),
        }
    }

    fn object(namespace: Option<&str>, name: &str) -> DynamicObject {
        // As a built-in kind's list gives its items: without apiVersion and kind.
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace},
            "data": {"host": "a.example.com"},
        }))
        .expect("an object")
    }

    fn published(generation: &Generation) -> Option<Value> {
        generation
            .published
            .load_full()
            .map(|inventory| inventory.to_json())
    }

    #[test]
    fn the_inventory_is_published_once_every_kind_has_listed() {
        let generation = generation(settings(CONFIG));
        // Kinds sort: ConfigMap (0), Namespace (1).
        let listed = ["a", "b"]
            .into_iter()
            .filter_map(|name| generation.inventory_object(0, object(Some("shop"), name)))
            .collect();
        generation.replace(0, listed);
        assert_eq!(published(&generation), None, "Namespaces not listed yet");
        assert_eq!(generation.waiting(), ["v1 Namespace"]);
        let namespaces = ["shop", "kube-system"]
            .into_iter()
            .filter_map(|name| generation.inventory_object(1, object(None, name)))
            .collect();
        generation.replace(1, namespaces);
        assert!(generation.waiting().is_empty());
        let inventory = published(&generation).expect("published");
        assert_eq!(
            inventory["namespace"]["shop"]["v1"]["ConfigMap"]["a"]["kind"],
            "ConfigMap"
        );
        assert_eq!(
            inventory["cluster"]["v1"]["Namespace"]["shop"]["apiVersion"],
            "v1"
        );
        // Excluded from sync by the Config.
        assert!(
            inventory["cluster"]["v1"]["Namespace"]
                .get("kube-system")
                .is_none()
        );
    }

    #[test]
    fn events_change_the_published_inventory() {
        let generation = generation(settings(CONFIG));
        generation.missing(1);
        generation.replace(0, Vec::new());
        generation.apply(0, object(Some("shop"), "a"));
        generation.apply(0, object(Some("kube-system"), "hidden"));
        let inventory = published(&generation).expect("published");
        assert!(inventory["namespace"]["shop"]["v1"]["ConfigMap"]["a"].is_object());
        assert!(inventory["namespace"].get("kube-system").is_none());
        let config_maps = |generation: &Generation| {
            generation
                .metrics
                .objects
                .get_or_create(&generation.labels(0))
                .get()
        };
        assert_eq!(
            config_maps(&generation),
            1,
            "the excluded one is not counted"
        );
        generation.delete(0, &object(Some("shop"), "a"));
        assert_eq!(
            published(&generation).expect("published"),
            json!({"cluster": {}, "namespace": {}})
        );
        assert_eq!(config_maps(&generation), 0);
        // A relist drops what it no longer has.
        generation.apply(0, object(Some("shop"), "b"));
        let relisted = generation.inventory_object(0, object(Some("shop"), "c"));
        generation.replace(0, relisted.into_iter().collect());
        let inventory = published(&generation).expect("published");
        let names: Vec<&String> = inventory["namespace"]["shop"]["v1"]["ConfigMap"]
            .as_object()
            .expect("ConfigMaps")
            .keys()
            .collect();
        assert_eq!(names, ["c"]);
        assert_eq!(config_maps(&generation), 1);
    }

    #[test]
    fn a_replaced_generation_publishes_nothing() {
        let generation = generation(settings(CONFIG));
        generation.live.store(false, Ordering::SeqCst);
        generation.missing(1);
        generation.replace(0, Vec::new());
        assert_eq!(published(&generation), None);
    }

    #[tokio::test]
    async fn without_synced_kinds_nothing_is_watched_or_published() {
        let (client, requests) = crate::cluster::fake_api::client(&[]);
        let published = Arc::new(ArcSwapOption::empty());
        let inventory = ClusterInventory::new(published.clone(), InventoryMetrics::default());
        assert!(inventory.readiness().is_err());
        inventory.reconcile(&client, SyncSettings::default());
        assert_eq!(inventory.readiness(), Ok(()));
        assert!(published.load().is_none());
        assert_eq!(requests.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn watches_follow_the_settings_and_an_unserved_kind_counts_as_listed() {
        // The fake API serves nothing: discovery finds no Ingress resource.
        let (client, _) = crate::cluster::fake_api::client(&[]);
        let published = Arc::new(ArcSwapOption::empty());
        let inventory = ClusterInventory::new(published.clone(), InventoryMetrics::default());
        let ingresses = settings(
            "apiVersion: config.gatekeeper.sh/v1alpha1\nkind: Config\nmetadata: {name: config}\n\
             spec: {sync: {syncOnly: [{group: networking.k8s.io, version: v1, kind: Ingress}]}}\n",
        );
        inventory.reconcile(&client, ingresses.clone());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while inventory.readiness().is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "{:?}",
                inventory.readiness()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let empty = published.load_full().expect("published once ready");
        assert!(empty.is_empty());
        // The same settings again keep the running watches (and what they published).
        inventory.reconcile(&client, ingresses);
        assert!(Arc::ptr_eq(&empty, &published.load_full().expect("kept")));
        // No synced kinds: nothing published any more.
        inventory.reconcile(&client, SyncSettings::default());
        assert!(published.load().is_none());
        assert_eq!(inventory.readiness(), Ok(()));
    }
}
