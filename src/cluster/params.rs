//! Parameter objects of admission policies from the cluster: for each `paramKind` of the loaded
//! policies, a read-only watch cache of that resource, which a binding's `paramRef` reads as the
//! apiserver reads its informers. A paramRef by name that its cache does not hold (an object
//! created a moment ago, whose watch event has not arrived) is read from the API once before
//! the request is decided, as the apiserver falls back to a read on a cache miss; the answer,
//! found or not, is kept for [`crate::cluster::FETCHED_TTL`].
//!
//! Each kind is found by discovery (built-in kinds and custom resources alike) and watched as
//! narrowly as its bindings allow: one namespace when every paramRef names the same one, one
//! object (a field selector on `metadata.name`) when every paramRef names the same one, a label
//! selector when every paramRef has the same selector; everything otherwise. Objects are kept
//! without `managedFields`. The watches follow policy reloads: kinds no longer used are dropped,
//! new ones started, a kind whose bindings changed is watched anew.
//!
//! RBAC: `get`, `list` and `watch` on each param kind's resource (see `webhook-config`).

use std::collections::{BTreeMap, HashMap};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use arc_swap::ArcSwapOption;
use kube::api::{ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::authorization::ResultLabels;
use crate::cluster::reads::{READ_TIMEOUT, ReadAnswer, ReadAnswers};
use crate::engine::admission_policy::{param_namespace, selector_matches};
use crate::engine::{Engine, FetchFuture, ParamLookup, ParamNeed};
use crate::kubernetes::vocabulary::LabelSelector;
use crate::policy::admission_policy::{ParamKind, ParamRef};

/// How long discovery waits before asking again for a kind the cluster does not serve (a
/// CustomResourceDefinition may be installed later), or after discovery failed.
const REDISCOVER_AFTER: Duration = Duration::from_secs(10);

/// What part of a kind's objects a watch lists: as narrow as every binding allows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WatchScope {
    /// Only this namespace (every paramRef names it).
    pub namespace: Option<String>,
    /// Only the object of this name (every paramRef names it).
    pub name: Option<String>,
    /// Only objects with these labels, as a label selector string (every paramRef has this
    /// selector).
    pub labels: Option<String>,
    /// Whether any binding has a paramRef at all; without one no object is needed, only
    /// whether the kind exists.
    pub objects_needed: bool,
}

impl WatchScope {
    /// The narrowest scope that serves every one of `param_refs`.
    pub fn of(param_refs: &[Option<ParamRef>]) -> Self {
        let refs: Vec<&ParamRef> = param_refs.iter().flatten().collect();
        let Some(first) = refs.first() else {
            return WatchScope::default();
        };
        let shared = |value: &dyn Fn(&ParamRef) -> Option<String>| {
            let first = value(first)?;
            refs.iter()
                .all(|r| value(r).as_deref() == Some(first.as_str()))
                .then_some(first)
        };
        let namespace = shared(&|r| r.namespace.clone().filter(|n| !n.is_empty()));
        let name = shared(&|r| r.name.clone().filter(|n| !n.is_empty()));
        let labels = if name.is_none() {
            shared(&|r| r.selector.as_ref().map(selector_string))
                .filter(|selector| !selector.is_empty())
        } else {
            None
        };
        WatchScope {
            namespace,
            name,
            labels,
            objects_needed: true,
        }
    }
}

/// A label selector in the API's string form (`a=b,c in (d,e),!f`).
pub fn selector_string(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> = selector
        .match_labels
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    for requirement in &selector.match_expressions {
        let key = &requirement.key;
        let values = requirement.values.join(",");
        parts.push(match requirement.operator.as_str() {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other} ({values})"),
        });
    }
    parts.join(",")
}

/// What discovery said of a kind.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resolution {
    Unknown = 0,
    Missing = 1,
    Namespaced = 2,
    ClusterScoped = 3,
}

impl Resolution {
    fn from_u8(value: u8) -> Self {
        match value {
            1 => Resolution::Missing,
            2 => Resolution::Namespaced,
            3 => Resolution::ClusterScoped,
            _ => Resolution::Unknown,
        }
    }
}

/// A param kind's `apiVersion` and `kind`.
type KindKey = (String, String);

/// The watch cache of each param kind in use.
type Caches = BTreeMap<KindKey, Arc<KindCache>>;

/// Objects by namespace (`""` for cluster-scoped kinds), then by name.
type Objects = HashMap<String, BTreeMap<String, Arc<Value>>>;

/// The watch cache of one param kind.
struct KindCache {
    kind: ParamKind,
    /// Whether the apiserver holds this kind's objects typed (a built-in kind): its informer's
    /// objects then have no `apiVersion` and `kind`.
    typed: bool,
    scope: WatchScope,
    resolution: AtomicU8,
    synced: AtomicBool,
    objects: RwLock<Objects>,
    /// Where single objects are read from, once discovery found the kind's resource.
    reader: OnceLock<(Client, ApiResource)>,
    /// What reads of objects the watch did not hold gave, by namespace and name.
    read: ReadAnswers<(String, String), Arc<Value>>,
}

impl KindCache {
    /// An empty cache of `kind`'s objects in `scope`, its resource not discovered yet; reads
    /// of objects its watch does not hold are counted in `reads`.
    fn new(
        kind: ParamKind,
        typed: bool,
        scope: WatchScope,
        reads: Family<ResultLabels, Counter>,
    ) -> Self {
        KindCache {
            kind,
            typed,
            scope,
            resolution: AtomicU8::new(Resolution::Unknown as u8),
            synced: AtomicBool::new(false),
            objects: RwLock::new(HashMap::new()),
            reader: OnceLock::new(),
            read: ReadAnswers::new(reads),
        }
    }

    /// The fresh answer of a read of `name` in `namespace`: `Some(Ok(None))` when it found
    /// nothing, `Some(Err(_))` when it failed.
    fn read_object(&self, namespace: &str, name: &str) -> Option<ReadAnswer<Arc<Value>>> {
        self.read.fresh(&(namespace.to_owned(), name.to_owned()))
    }

    /// Whether the watch holds `name` in `namespace`.
    fn holds(&self, namespace: &str, name: &str) -> bool {
        let objects = self.objects.read().unwrap_or_else(|e| e.into_inner());
        objects
            .get(namespace)
            .is_some_and(|in_namespace| in_namespace.contains_key(name))
    }

    /// Reads `name` in `namespace` (`""`: cluster-scoped) for at most `timeout` and keeps the
    /// answer in the form the watch keeps objects.
    async fn read(&self, namespace: &str, name: &str, timeout: Duration) {
        let Some((client, resource)) = self.reader.get() else {
            return;
        };
        let api = if namespace.is_empty() {
            Api::<DynamicObject>::all_with(client.clone(), resource)
        } else {
            Api::<DynamicObject>::namespaced_with(client.clone(), namespace, resource)
        };
        let key = (namespace.to_owned(), name.to_owned());
        let keep = |object| self.param_object(object).map(|(_, _, value)| value);
        let mut path = if resource.group.is_empty() {
            format!("/api/{}", resource.version)
        } else {
            format!("/apis/{}/{}", resource.group, resource.version)
        };
        if !namespace.is_empty() {
            path.push_str(&format!("/namespaces/{namespace}"));
        }
        path.push_str(&format!("/{}/{name}", resource.plural));
        self.read
            .read(
                key,
                &resource.plural,
                name,
                &path,
                timeout,
                api.get_opt(name),
                keep,
            )
            .await;
    }

    fn resolution(&self) -> Resolution {
        Resolution::from_u8(self.resolution.load(Ordering::SeqCst))
    }

    fn set_resolution(&self, resolution: Resolution) {
        self.resolution.store(resolution as u8, Ordering::SeqCst);
    }

    /// Whether lookups can be answered: the kind does not exist, or its first list is in.
    fn is_ready(&self) -> bool {
        match self.resolution() {
            Resolution::Unknown => false,
            Resolution::Missing => true,
            Resolution::Namespaced | Resolution::ClusterScoped => {
                self.synced.load(Ordering::SeqCst)
            }
        }
    }

    /// The object as the apiserver's informer holds it: without `managedFields`, and for a
    /// typed (built-in) kind without `apiVersion` and `kind`, which a ValidatingAdmissionPolicy
    /// then gets from its paramKind and a MutatingAdmissionPolicy does not get at all.
    fn param_object(&self, object: DynamicObject) -> Option<(String, String, Arc<Value>)> {
        let namespace = object.metadata.namespace.clone().unwrap_or_default();
        let name = object.metadata.name.clone()?;
        let mut value = serde_json::to_value(object).ok()?;
        if let Some(map) = value.as_object_mut() {
            if self.typed {
                map.remove("apiVersion");
                map.remove("kind");
            } else {
                map.insert(
                    "apiVersion".into(),
                    Value::String(self.kind.api_version.clone()),
                );
                map.insert("kind".into(), Value::String(self.kind.kind.clone()));
            }
            if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("managedFields");
            }
        }
        Some((namespace, name, Arc::new(value)))
    }

    /// Keeps `object` (added or changed) as [`KindCache::param_object`] makes it.
    fn keep(&self, object: DynamicObject) {
        if let Some((namespace, name, value)) = self.param_object(object) {
            self.write()
                .entry(namespace)
                .or_default()
                .insert(name, value);
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Objects> {
        self.objects.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// The group and version of an `apiVersion`.
fn group_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// The paramKind as the apiserver prints it in "not yet synced" errors (Go's generated
/// `String()` of the type).
fn go_param_kind(kind: &ParamKind) -> String {
    format!(
        "&ParamKind{{APIVersion:{},Kind:{},}}",
        kind.api_version, kind.kind
    )
}

/// One running watch: its cache and the task filling it (aborted when dropped).
struct KindWatch {
    cache: Arc<KindCache>,
    task: JoinHandle<()>,
}

impl Drop for KindWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Parameter objects from the cluster's watch caches, for every paramKind of the loaded
/// policies. Cheap to clone; clones share the caches.
#[derive(Clone)]
pub struct ClusterParams {
    caches: Arc<ArcSwap<Caches>>,
    watches: Arc<std::sync::Mutex<BTreeMap<KindKey, KindWatch>>>,
    /// Set once the watches of the engine in use have been started.
    reconciled: Arc<AtomicBool>,
    /// Reads of objects the watches did not hold, by result.
    reads: Family<ResultLabels, Counter>,
}

impl Default for ClusterParams {
    fn default() -> Self {
        ClusterParams {
            caches: Arc::new(ArcSwap::from_pointee(BTreeMap::new())),
            watches: Arc::new(std::sync::Mutex::new(BTreeMap::new())),
            reconciled: Arc::new(AtomicBool::new(false)),
            reads: Family::default(),
        }
    }
}

impl std::fmt::Debug for ClusterParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterParams")
            .field("kinds", &self.caches.load().len())
            .finish()
    }
}

impl ClusterParams {
    /// Starts following the engine in `engine`: watches for its param kinds now, and again
    /// each time `reloaded` is notified (after a policy reload swapped a new engine in).
    /// Returns the lookups and the task, which runs until aborted (aborting it stops every
    /// watch). Reads of objects the watches do not hold yet are counted in `reads`.
    pub fn spawn(
        client: Client,
        engine: Arc<ArcSwapOption<Engine>>,
        reloaded: Arc<Notify>,
        reads: Family<ResultLabels, Counter>,
    ) -> (Self, JoinHandle<()>) {
        let params = ClusterParams {
            reads,
            ..ClusterParams::default()
        };
        let following = params.clone();
        let task = tokio::spawn(async move {
            // Stops every watch when the task is aborted.
            let _stop = StopWatches(following.clone());
            loop {
                let needs = engine
                    .load()
                    .as_ref()
                    .map(|engine| engine.param_needs())
                    .unwrap_or_default();
                following.reconcile(&client, &needs);
                reloaded.notified().await;
            }
        });
        (params, task)
    }

    /// Makes the running watches those `needs` call for: keeps a watch whose scope is
    /// unchanged, starts missing ones, stops the rest.
    pub fn reconcile(&self, client: &Client, needs: &[ParamNeed]) {
        let mut watches = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = BTreeMap::new();
        for need in needs {
            let key = (need.kind.api_version.clone(), need.kind.kind.clone());
            let scope = WatchScope::of(&need.param_refs);
            match watches.remove(&key) {
                Some(watch) if watch.cache.scope == scope => {
                    next.insert(key, watch);
                }
                _ => {
                    tracing::info!(
                        api_version = %need.kind.api_version,
                        kind = %need.kind.kind,
                        namespace = scope.namespace.as_deref().unwrap_or(""),
                        name = scope.name.as_deref().unwrap_or(""),
                        labels = scope.labels.as_deref().unwrap_or(""),
                        "watching policy parameters"
                    );
                    let reads = self.reads.clone();
                    let watch = start_watch(client.clone(), need.kind.clone(), scope, reads);
                    next.insert(key, watch);
                }
            }
        }
        // Whatever is left is no longer used: dropping it stops its task.
        watches.clear();
        self.caches.store(Arc::new(
            next.iter()
                .map(|(key, watch)| (key.clone(), watch.cache.clone()))
                .collect(),
        ));
        *watches = next;
        self.reconciled.store(true, Ordering::SeqCst);
    }

    /// Whether every param kind of the engine in use can be answered: its watch has listed
    /// once, or discovery found the kind does not exist. `Err` says which kinds wait.
    pub fn readiness(&self) -> Result<(), String> {
        if !self.reconciled.load(Ordering::SeqCst) {
            return Err("policy parameters not watched yet".into());
        }
        let waiting: Vec<String> = self
            .caches
            .load()
            .values()
            .filter(|cache| !cache.is_ready())
            .map(|cache| format!("{} {}", cache.kind.api_version, cache.kind.kind))
            .collect();
        if waiting.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "policy parameters not listed yet: {}",
                waiting.join(", ")
            ))
        }
    }

    fn cache(&self, kind: &ParamKind) -> Option<Arc<KindCache>> {
        self.caches
            .load()
            .get(&(kind.api_version.clone(), kind.kind.clone()))
            .cloned()
    }
}

/// Stops every watch of a [`ClusterParams`] when dropped.
struct StopWatches(ClusterParams);

impl Drop for StopWatches {
    fn drop(&mut self) {
        self.0
            .watches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

impl ParamLookup for ClusterParams {
    fn kind_error(&self, kind: &ParamKind) -> Option<String> {
        let cache = self.cache(kind)?;
        (cache.resolution() == Resolution::Missing).then(|| {
            let (group, version) = group_version(&kind.api_version);
            format!(
                "failed to find resource referenced by paramKind: '{group}/{version}, Kind={}'",
                kind.kind
            )
        })
    }

    fn find(
        &self,
        kind: &ParamKind,
        param_ref: &ParamRef,
        request_namespace: Option<&str>,
    ) -> Result<Vec<Arc<Value>>, String> {
        let not_synced = || {
            format!(
                "paramKind kind `{}` not yet synced to use for admission",
                go_param_kind(kind)
            )
        };
        let Some(cache) = self.cache(kind) else {
            return Err(not_synced());
        };
        let namespaced = match cache.resolution() {
            Resolution::Namespaced => true,
            Resolution::ClusterScoped => false,
            Resolution::Unknown | Resolution::Missing => return Err(not_synced()),
        };
        let namespace = param_namespace(namespaced, param_ref, request_namespace)?;
        if !cache.synced.load(Ordering::SeqCst) {
            return Err(not_synced());
        }
        let objects = cache.objects.read().unwrap_or_else(|e| e.into_inner());
        let namespace = namespace.unwrap_or("");
        if let Some(name) = param_ref.name.as_deref().filter(|n| !n.is_empty()) {
            // As the apiserver: an object that does not exist is for parameterNotFoundAction;
            // a read that failed is the binding's configuration error.
            if let Some(held) = objects.get(namespace).and_then(|objects| objects.get(name)) {
                return Ok(vec![held.clone()]);
            }
            return match cache.read_object(namespace, name) {
                Some(Ok(read)) => Ok(read.into_iter().collect()),
                Some(Err(failure)) => Err(failure.message),
                None => Ok(Vec::new()),
            };
        }
        let Some(in_namespace) = objects.get(namespace) else {
            return Ok(Vec::new());
        };
        Ok(in_namespace
            .values()
            .filter(|object| selector_matches(param_ref, object))
            .cloned()
            .collect())
    }
    fn fetches(
        &self,
        kind: &ParamKind,
        param_ref: &ParamRef,
        request_namespace: Option<&str>,
    ) -> bool {
        self.unheld(kind, param_ref, request_namespace).is_some()
    }

    fn fetch<'a>(
        &'a self,
        kind: &'a ParamKind,
        param_ref: &'a ParamRef,
        request_namespace: Option<&'a str>,
        deadline: Instant,
    ) -> FetchFuture<'a> {
        Box::pin(async move {
            if let Some((cache, namespace, name)) = self.unheld(kind, param_ref, request_namespace)
            {
                let left = deadline.saturating_duration_since(Instant::now());
                cache.read(namespace, name, left.min(READ_TIMEOUT)).await;
            }
        })
    }
}

impl ClusterParams {
    /// The kind's cache and where `param_ref`, by name, looks for a request in
    /// `request_namespace`, when the watch has listed, does not hold the object and no fresh
    /// read answered for it.
    fn unheld<'a>(
        &self,
        kind: &ParamKind,
        param_ref: &'a ParamRef,
        request_namespace: Option<&'a str>,
    ) -> Option<(Arc<KindCache>, &'a str, &'a str)> {
        let name = param_ref.name.as_deref().filter(|n| !n.is_empty())?;
        let cache = self.cache(kind)?;
        let namespaced = match cache.resolution() {
            Resolution::Namespaced => true,
            Resolution::ClusterScoped => false,
            Resolution::Unknown | Resolution::Missing => return None,
        };
        let namespace = param_namespace(namespaced, param_ref, request_namespace)
            .ok()?
            .unwrap_or("");
        (cache.synced.load(Ordering::SeqCst)
            && cache.reader.get().is_some()
            && !cache.holds(namespace, name)
            && cache.read_object(namespace, name).is_none())
        .then_some((cache, namespace, name))
    }
}

#[cfg(test)]
impl ClusterParams {
    /// Params serving one kind (namespaced or not) from `objects`, as its watch would after
    /// its first list, reading what it does not hold through `reader` when given.
    pub(crate) fn listed(
        kind: ParamKind,
        namespaced: bool,
        objects: Vec<DynamicObject>,
        reader: Option<(Client, ApiResource)>,
    ) -> ClusterParams {
        let params = ClusterParams::default();
        let cache = Arc::new(KindCache::new(
            kind.clone(),
            kind.api_version == "v1",
            WatchScope::default(),
            params.reads.clone(),
        ));
        cache.set_resolution(if namespaced {
            Resolution::Namespaced
        } else {
            Resolution::ClusterScoped
        });
        cache.synced.store(true, Ordering::SeqCst);
        if let Some(reader) = reader {
            let _ = cache.reader.set(reader);
        }
        for object in objects {
            cache.keep(object);
        }
        params.caches.store(Arc::new(BTreeMap::from([(
            (kind.api_version, kind.kind),
            cache,
        )])));
        params.reconciled.store(true, Ordering::SeqCst);
        params
    }
}

/// Starts the discovery-then-watch task of one kind.
fn start_watch(
    client: Client,
    kind: ParamKind,
    scope: WatchScope,
    reads: Family<ResultLabels, Counter>,
) -> KindWatch {
    let (group, version) = group_version(&kind.api_version);
    let typed = crate::kubernetes::schema::builtin(&crate::admission::GroupVersionKind {
        group: group.to_owned(),
        version: version.to_owned(),
        kind: kind.kind.clone(),
    })
    .is_some();
    let cache = Arc::new(KindCache::new(kind, typed, scope, reads));
    let task = tokio::spawn(run_watch(client, cache.clone()));
    KindWatch { cache, task }
}

/// Finds the kind's resource by discovery (again every [`REDISCOVER_AFTER`] while the cluster
/// does not serve it or cannot be asked), then lists and watches it forever.
async fn run_watch(client: Client, cache: Arc<KindCache>) {
    let (group, version) = group_version(&cache.kind.api_version);
    let gvk = GroupVersionKind::gvk(group, version, &cache.kind.kind);
    let resource = loop {
        match kube::discovery::pinned_kind(&client, &gvk).await {
            Ok((resource, capabilities)) => {
                let resolution = match capabilities.scope {
                    Scope::Namespaced => Resolution::Namespaced,
                    Scope::Cluster => Resolution::ClusterScoped,
                };
                break (resource, resolution);
            }
            Err(error) => {
                let missing = matches!(&error, kube::Error::Discovery(_))
                    || matches!(&error, kube::Error::Api(status) if status.code == 404);
                if missing {
                    cache.set_resolution(Resolution::Missing);
                    tracing::warn!(
                        api_version = %cache.kind.api_version,
                        kind = %cache.kind.kind,
                        "the cluster serves no resource of this paramKind; policies using it fail to configure"
                    );
                } else {
                    tracing::warn!(
                        api_version = %cache.kind.api_version,
                        kind = %cache.kind.kind,
                        %error,
                        "discovery of a paramKind failed; retrying"
                    );
                }
                tokio::time::sleep(REDISCOVER_AFTER).await;
            }
        }
    };
    let (resource, resolution) = resource;
    let _ = cache.reader.set((client.clone(), resource.clone()));
    if !cache.scope.objects_needed {
        cache.set_resolution(resolution);
        cache.synced.store(true, Ordering::SeqCst);
        return;
    }
    let api = match (resolution, &cache.scope.namespace) {
        (Resolution::Namespaced, Some(namespace)) => {
            Api::<DynamicObject>::namespaced_with(client, namespace, &resource)
        }
        _ => Api::<DynamicObject>::all_with(client, &resource),
    };
    let mut config = watcher::Config::default().any_semantic();
    if let Some(name) = &cache.scope.name {
        config = config.fields(&format!("metadata.name={name}"));
    }
    if let Some(labels) = &cache.scope.labels {
        config = config.labels(labels);
    }
    cache.set_resolution(resolution);
    drive(&resource, api, config, &cache).await;
}

/// Applies the watch events to the cache forever; errors are logged and retried with backoff,
/// the cache keeping the last complete list meanwhile.
async fn drive(
    resource: &ApiResource,
    api: Api<DynamicObject>,
    config: watcher::Config,
    cache: &KindCache,
) {
    let events = watcher(api, config).default_backoff();
    apply_events(resource, events, cache).await;
}

/// Applies the events of `events` to `cache` until the stream ends.
async fn apply_events<S>(resource: &ApiResource, events: S, cache: &KindCache)
where
    S: WatchStreamExt<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>,
{
    let mut events = pin!(events);
    let mut listing: Option<Objects> = None;
    // `futures` is not a dependency: `WatchStreamExt` extends `Stream`, whose `poll_next`
    // this reaches through the bound.
    while let Some(event) = std::future::poll_fn(|cx| events.as_mut().poll_next(cx)).await {
        match event {
            Ok(watcher::Event::Init) => listing = Some(HashMap::new()),
            Ok(watcher::Event::InitApply(object)) => {
                if let (Some(listing), Some((namespace, name, value))) =
                    (listing.as_mut(), cache.param_object(object))
                {
                    listing.entry(namespace).or_default().insert(name, value);
                }
            }
            Ok(watcher::Event::InitDone) => {
                let listed = listing.take().unwrap_or_default();
                let count: usize = listed.values().map(BTreeMap::len).sum();
                *cache.write() = listed;
                if !cache.synced.swap(true, Ordering::SeqCst) {
                    tracing::info!(
                        resource = %resource.plural,
                        objects = count,
                        "policy parameters listed"
                    );
                }
            }
            Ok(watcher::Event::Apply(object)) => {
                cache.keep(object);
            }
            Ok(watcher::Event::Delete(object)) => {
                let namespace = object.metadata.namespace.unwrap_or_default();
                if let Some(name) = object.metadata.name {
                    let mut objects = cache.write();
                    if let Some(in_namespace) = objects.get_mut(&namespace) {
                        in_namespace.remove(&name);
                        if in_namespace.is_empty() {
                            objects.remove(&namespace);
                        }
                    }
                }
            }
            Err(error) => {
                tracing::warn!(
                    resource = %resource.plural,
                    %error,
                    "policy parameter watch failed; retrying with backoff"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kubernetes::vocabulary::LabelSelectorRequirement;
    use crate::policy::admission_policy::ParameterNotFoundAction;

    fn config_map_kind() -> ParamKind {
        ParamKind {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        }
    }

    fn by_name(name: &str, namespace: Option<&str>) -> ParamRef {
        ParamRef {
            name: Some(name.into()),
            namespace: namespace.map(Into::into),
            selector: None,
            parameter_not_found_action: Some(ParameterNotFoundAction::Deny),
        }
    }

    fn by_labels(labels: &[(&str, &str)]) -> ParamRef {
        ParamRef {
            name: None,
            namespace: None,
            selector: Some(LabelSelector {
                match_labels: labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
                match_expressions: Vec::new(),
            }),
            parameter_not_found_action: None,
        }
    }

    fn object(namespace: &str, name: &str, labels: &[(&str, &str)]) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect::<serde_json::Map<_, _>>(),
                "managedFields": [{"manager": "kubectl"}],
            },
            "data": {"max": "3"},
        }))
        .unwrap()
    }

    /// Params serving one kind from `objects`, as a watch would after its first list.
    fn params_with(
        kind: ParamKind,
        resolution: Resolution,
        objects: Vec<DynamicObject>,
    ) -> ClusterParams {
        let params = ClusterParams::listed(kind.clone(), true, objects, None);
        params.cache(&kind).unwrap().set_resolution(resolution);
        params
    }

    fn names(found: &[Arc<Value>]) -> Vec<String> {
        found
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["metadata"]["namespace"].as_str().unwrap_or(""),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn a_param_by_name_the_watch_does_not_hold_is_read_once_and_kept() {
        let kind = config_map_kind();
        let params = params_with(
            kind.clone(),
            Resolution::Namespaced,
            vec![object("default", "held", &[])],
        );
        let (client, requests) = crate::cluster::fake_api::client(&[(
            "/api/v1/namespaces/default/configmaps/fresh",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "fresh", "namespace": "default",
                    "managedFields": [{"manager": "kubectl"}]},
                "data": {"max": "5"}}),
        )]);
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        assert!(
            params
                .cache(&kind)
                .unwrap()
                .reader
                .set((client, resource))
                .is_ok()
        );
        let deadline = || Instant::now() + Duration::from_secs(5);
        let here = Some("default");

        // Held by the watch, or chosen by a selector: nothing to read.
        assert!(!params.fetches(&kind, &by_name("held", None), here));
        assert!(!params.fetches(&kind, &by_labels(&[("a", "b")]), here));
        // Not held yet: found once read, in the form the watch keeps it.
        let fresh = by_name("fresh", None);
        assert!(params.fetches(&kind, &fresh, here));
        assert!(params.find(&kind, &fresh, here).unwrap().is_empty());
        params.fetch(&kind, &fresh, here, deadline()).await;
        let found = params.find(&kind, &fresh, here).unwrap();
        assert_eq!(names(&found), ["default/fresh"]);
        assert!(found[0].get("apiVersion").is_none(), "{}", found[0]);
        assert!(found[0]["metadata"].get("managedFields").is_none());
        assert_eq!(found[0]["data"]["max"], "5");
        assert!(!params.fetches(&kind, &fresh, here), "kept for a while");
        // None in the cluster either, or no answer by the deadline: kept as none.
        let ghost = by_name("ghost", here);
        params.fetch(&kind, &ghost, None, deadline()).await;
        assert!(params.find(&kind, &ghost, None).unwrap().is_empty());
        assert!(!params.fetches(&kind, &ghost, None));
        let slow = by_name("slow", here);
        params
            .fetch(
                &kind,
                &slow,
                None,
                Instant::now() + Duration::from_millis(50),
            )
            .await;
        assert!(!params.fetches(&kind, &slow, None));
        // A read that failed is not "none": it is the binding's error (the apiserver's
        // "failed to configure binding"), in the API's words when it answered.
        assert_eq!(
            params.find(&kind, &slow, None).unwrap_err(),
            "Get \"/api/v1/namespaces/default/configmaps/slow\": context deadline exceeded"
        );
        let forbidden = by_name("forbidden", here);
        params.fetch(&kind, &forbidden, None, deadline()).await;
        assert_eq!(
            params.find(&kind, &forbidden, None).unwrap_err(),
            "\"forbidden\" is forbidden: the fake API refuses it"
        );
        assert!(!params.fetches(&kind, &forbidden, None), "kept for a while");
        assert_eq!(requests.load(Ordering::SeqCst), 4);
        for result in ["found", "not_found", "timeout", "error"] {
            assert_eq!(
                params.reads.get_or_create(&ResultLabels { result }).get(),
                1,
                "{result}"
            );
        }
    }

    #[test]
    fn scopes_are_as_narrow_as_every_binding_allows() {
        let same_name = [
            Some(by_name("limits", Some("ops"))),
            Some(by_name("limits", Some("ops"))),
        ];
        assert_eq!(
            WatchScope::of(&same_name),
            WatchScope {
                namespace: Some("ops".into()),
                name: Some("limits".into()),
                labels: None,
                objects_needed: true,
            }
        );
        // The request's namespace: every namespace.
        let defaulted = [
            Some(by_name("limits", Some("ops"))),
            Some(by_name("limits", None)),
        ];
        assert_eq!(WatchScope::of(&defaulted).namespace, None);
        assert_eq!(WatchScope::of(&defaulted).name.as_deref(), Some("limits"));
        let two_names = [Some(by_name("a", None)), Some(by_name("b", None))];
        assert_eq!(WatchScope::of(&two_names).name, None);
        let selected = [
            Some(by_labels(&[("tier", "gold")])),
            Some(by_labels(&[("tier", "gold")])),
        ];
        assert_eq!(
            WatchScope::of(&selected).labels.as_deref(),
            Some("tier=gold")
        );
        let mixed = [
            Some(by_labels(&[("tier", "gold")])),
            Some(by_name("a", None)),
        ];
        assert_eq!(
            WatchScope::of(&mixed),
            WatchScope {
                objects_needed: true,
                ..WatchScope::default()
            }
        );
        assert!(!WatchScope::of(&[None]).objects_needed);
    }

    #[test]
    fn selectors_print_as_the_api_parses_them() {
        let selector = LabelSelector {
            match_labels: BTreeMap::from([("a".into(), "b".into())]),
            match_expressions: vec![
                LabelSelectorRequirement {
                    key: "c".into(),
                    operator: "In".into(),
                    values: vec!["d".into(), "e".into()],
                },
                LabelSelectorRequirement {
                    key: "f".into(),
                    operator: "NotIn".into(),
                    values: vec!["g".into()],
                },
                LabelSelectorRequirement {
                    key: "h".into(),
                    operator: "Exists".into(),
                    values: vec![],
                },
                LabelSelectorRequirement {
                    key: "i".into(),
                    operator: "DoesNotExist".into(),
                    values: vec![],
                },
            ],
        };
        assert_eq!(
            selector_string(&selector),
            "a=b,c in (d,e),f notin (g),h,!i"
        );
    }

    #[test]
    fn param_refs_find_objects_as_the_apiserver_does() {
        let params = params_with(
            config_map_kind(),
            Resolution::Namespaced,
            vec![
                object("team-a", "limits", &[("tier", "gold")]),
                object("team-a", "other", &[("tier", "silver")]),
                object("team-b", "limits", &[("tier", "gold")]),
            ],
        );
        let kind = config_map_kind();
        // The request's namespace, by name.
        let found = params
            .find(&kind, &by_name("limits", None), Some("team-b"))
            .unwrap();
        assert_eq!(names(&found), ["team-b/limits"]);
        // The paramRef's own namespace wins.
        let found = params
            .find(&kind, &by_name("limits", Some("team-a")), Some("team-b"))
            .unwrap();
        assert_eq!(names(&found), ["team-a/limits"]);
        assert!(
            params
                .find(&kind, &by_name("limits", None), Some("team-c"))
                .unwrap()
                .is_empty()
        );
        // Every object the selector matches, each one evaluated.
        let found = params.find(&kind, &by_labels(&[]), Some("team-a")).unwrap();
        assert_eq!(names(&found), ["team-a/limits", "team-a/other"]);
        let found = params
            .find(&kind, &by_labels(&[("tier", "gold")]), Some("team-a"))
            .unwrap();
        assert_eq!(names(&found), ["team-a/limits"]);
        // A cluster-scoped request with a namespaced kind and no paramRef namespace.
        assert_eq!(
            params
                .find(&kind, &by_name("limits", None), None)
                .unwrap_err(),
            "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
        );
        // As the apiserver's informer holds a typed object: no apiVersion, kind, managedFields.
        let object = &params
            .find(&kind, &by_name("limits", None), Some("team-a"))
            .unwrap()[0];
        assert!(object.get("apiVersion").is_none() && object.get("kind").is_none());
        assert_eq!(object["data"]["max"], "3");
        assert!(
            object["metadata"].get("managedFields").is_none(),
            "{object}"
        );
        assert_eq!(params.kind_error(&kind), None);
    }

    #[test]
    fn cluster_scoped_kinds_refuse_a_namespace() {
        let kind = ParamKind {
            api_version: "rules.example.com/v1".into(),
            kind: "Limits".into(),
        };
        let params = params_with(
            kind.clone(),
            Resolution::ClusterScoped,
            vec![object("", "global", &[])],
        );
        assert_eq!(
            names(
                &params
                    .find(&kind, &by_name("global", None), Some("team-a"))
                    .unwrap()
            ),
            ["/global"]
        );
        assert_eq!(
            params
                .find(&kind, &by_name("global", Some("team-a")), Some("team-a"))
                .unwrap_err(),
            "paramRef.namespace must not be provided for a cluster-scoped `paramKind`"
        );
    }

    #[test]
    fn unknown_and_unsynced_kinds_are_the_apiservers_errors() {
        let kind = ParamKind {
            api_version: "rules.example.com/v1".into(),
            kind: "Limits".into(),
        };
        let params = params_with(kind.clone(), Resolution::Missing, vec![]);
        assert_eq!(
            params.kind_error(&kind).unwrap(),
            "failed to find resource referenced by paramKind: 'rules.example.com/v1, Kind=Limits'"
        );
        assert!(params.readiness().is_ok());
        let params = params_with(kind.clone(), Resolution::Unknown, vec![]);
        assert_eq!(
            params
                .find(&kind, &by_name("x", None), Some("a"))
                .unwrap_err(),
            "paramKind kind `&ParamKind{APIVersion:rules.example.com/v1,Kind:Limits,}` not yet synced to use for admission"
        );
        assert_eq!(
            params.readiness().unwrap_err(),
            "policy parameters not listed yet: rules.example.com/v1 Limits"
        );
        // A kind no watch serves (a reload not followed yet).
        assert!(
            params
                .find(&config_map_kind(), &by_name("x", None), Some("a"))
                .unwrap_err()
                .contains("not yet synced")
        );
    }

    type WatchEvent = Result<watcher::Event<DynamicObject>, watcher::Error>;

    /// A stream of the given watch events, then its end.
    struct EventStream(std::collections::VecDeque<WatchEvent>);

    impl futures_core::Stream for EventStream {
        type Item = WatchEvent;

        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<WatchEvent>> {
            std::task::Poll::Ready(self.0.pop_front())
        }
    }

    fn tokio_stream_of(events: Vec<WatchEvent>) -> EventStream {
        EventStream(events.into())
    }

    #[tokio::test]
    async fn watch_events_replace_the_listed_objects() {
        let cache = KindCache::new(
            config_map_kind(),
            true,
            WatchScope::default(),
            Family::default(),
        );
        cache.set_resolution(Resolution::Namespaced);
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let count = |cache: &KindCache| {
            cache
                .objects
                .read()
                .unwrap()
                .values()
                .map(BTreeMap::len)
                .sum::<usize>()
        };
        let events = vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(object("a", "one", &[]))),
            Ok(watcher::Event::InitApply(object("a", "two", &[]))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(object("b", "three", &[]))),
            Ok(watcher::Event::Delete(object("a", "one", &[]))),
        ];
        apply_events(&resource, tokio_stream_of(events), &cache).await;
        assert!(cache.synced.load(Ordering::SeqCst));
        assert_eq!(count(&cache), 2);
        // A re-list replaces everything at its end.
        let relist = vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(object("c", "four", &[]))),
            Ok(watcher::Event::InitDone),
        ];
        apply_events(&resource, tokio_stream_of(relist), &cache).await;
        assert_eq!(count(&cache), 1);
        assert!(cache.objects.read().unwrap()["c"].contains_key("four"));
    }
}

#[cfg(test)]
mod reconcile_tests {
    use super::*;
    use crate::policy::admission_policy::ParameterNotFoundAction;

    /// A client for an address nothing listens on: watches start and keep failing, which is
    /// all reconciling needs.
    fn unreachable_client() -> Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Client::try_from(config).unwrap()
    }

    fn need(kind: &str, name: Option<&str>) -> ParamNeed {
        ParamNeed {
            kind: ParamKind {
                api_version: "v1".into(),
                kind: kind.into(),
            },
            resource: format!("{}s", kind.to_lowercase()),
            param_refs: vec![Some(ParamRef {
                name: name.map(Into::into),
                namespace: None,
                selector: None,
                parameter_not_found_action: Some(ParameterNotFoundAction::Allow),
            })],
        }
    }

    #[tokio::test]
    async fn watches_follow_the_policies() {
        let client = unreachable_client();
        let params = ClusterParams::default();
        assert!(params.readiness().is_err(), "nothing reconciled yet");
        params.reconcile(
            &client,
            &[need("ConfigMap", Some("a")), need("Secret", None)],
        );
        let first = params.caches.load_full();
        assert_eq!(first.len(), 2);
        assert_eq!(
            params.readiness().unwrap_err(),
            "policy parameters not listed yet: v1 ConfigMap, v1 Secret"
        );

        // Same ConfigMap scope: the same watch; Secret no longer used: stopped; a new kind.
        params.reconcile(
            &client,
            &[need("ConfigMap", Some("a")), need("LimitRange", None)],
        );
        let second = params.caches.load_full();
        let key = |kind: &str| ("v1".to_owned(), kind.to_owned());
        assert!(Arc::ptr_eq(
            &first[&key("ConfigMap")],
            &second[&key("ConfigMap")]
        ));
        assert!(!second.contains_key(&key("Secret")));
        assert!(second.contains_key(&key("LimitRange")));
        assert_eq!(params.watches.lock().unwrap().len(), 2);

        // Another name: the ConfigMap watch starts anew with the new scope.
        params.reconcile(&client, &[need("ConfigMap", Some("b"))]);
        let third = params.caches.load_full();
        assert!(!Arc::ptr_eq(
            &first[&key("ConfigMap")],
            &third[&key("ConfigMap")]
        ));
        assert_eq!(third[&key("ConfigMap")].scope.name.as_deref(), Some("b"));

        // No paramKind left: nothing watched, ready.
        params.reconcile(&client, &[]);
        assert!(params.caches.load().is_empty());
        assert!(params.readiness().is_ok());
    }
}
