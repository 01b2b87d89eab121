//! The scan: discovery, paginated lists, judging each object with the webhook's
//! [`Engine::evaluate`] (through [`Checker`], as `check` does), and report writes.
//!
//! One list request is in flight at a time, a page ahead of the page being judged (so the
//! apiserver sees at most one scanner request at once, and memory holds at most three pages:
//! the one arriving, the one waiting, the one judged). A page is judged on up to
//! `concurrency` threads; results are written in list order, then dropped.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::Client;
use kube::api::{ListParams, Patch, PatchParams};
use serde::Deserialize;
use serde_json::Value;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

use super::exclusions::{ExclusionError, WebhookExclusions};
use super::openreports;
use super::output::{ResultWriter, ScanSummary};
use super::targets::{
    Discovery, ScanTarget, ServedGroup, ServedResource, WantedResource, resolve, versions_to_fetch,
};
use crate::admission::{AdmissionRequest, GroupVersionKind, GroupVersionResource, Operation};
use crate::engine::gatekeeper::config::SyncSettings;
use crate::engine::gatekeeper::{EnforcementPoint, Inventory};
use crate::engine::{Engine, StaticNamespaces};
use crate::kubernetes::vocabulary::LabelSelector;
use crate::offline::manifest::offline_uid;
use crate::offline::{CheckResult, Checker, Manifest, Source};

/// The field manager of report writes.
pub const FIELD_MANAGER: &str = "portcullis-audit";

/// How a scan runs.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Objects per list request (`limit`).
    pub page_size: u32,
    /// Threads judging a page, and report writes in flight with `apply`.
    pub concurrency: usize,
    /// Namespaces to scan; empty for all (and then cluster-scoped resources too).
    pub namespaces: Vec<String>,
    /// Portcullis's own namespace, excluded as `webhook-config` excludes it.
    pub own_namespace: String,
    /// More namespaces excluded (the chart's `webhooks.excludedNamespaces`).
    pub excluded_namespaces: Vec<String>,
    /// The installed webhooks' `objectSelector` (the chart's `webhooks.objectSelector`).
    pub object_selector: Option<LabelSelector>,
    /// Write the OpenReports reports to the cluster and delete stale ones.
    pub apply: bool,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            page_size: 500,
            concurrency: 2,
            namespaces: Vec::new(),
            own_namespace: "portcullis".to_owned(),
            excluded_namespaces: Vec::new(),
            object_selector: None,
            apply: false,
        }
    }
}

/// Why a scan stopped.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// Discovery failed.
    #[error("discovery ({what}): {source}")]
    Discovery {
        /// What was asked.
        what: String,
        /// The client's error.
        source: kube::Error,
    },
    /// A list request failed.
    #[error("cannot list {target}: {source}")]
    List {
        /// The resource.
        target: String,
        /// The client's error.
        source: kube::Error,
    },
    /// A request could not be built (a name the apiserver would refuse).
    #[error("cannot build a request for {what}: {message}")]
    Request {
        /// What for.
        what: String,
        /// Why.
        message: String,
    },
    /// A report write or delete failed.
    #[error(
        "cannot write {report}: {source} (are the OpenReports CRDs installed? \
         scripts/fetch-openreports-crd.sh fetches them)"
    )]
    Report {
        /// The report, `Kind namespace/name`.
        report: String,
        /// The client's error.
        source: kube::Error,
    },
    /// The webhook exclusions could not be read.
    #[error(transparent)]
    Exclusions(#[from] ExclusionError),
    /// Writing the output failed.
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
    /// A task of the scan ended abnormally (a defect).
    #[error("{what} ended abnormally: {message}")]
    Task {
        /// Which task.
        what: &'static str,
        /// The join error.
        message: String,
    },
}

/// A list response: its continue token and its items, kept as JSON.
#[derive(Deserialize)]
struct RawList {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default)]
    items: Vec<Value>,
}

/// A client that counts the requests it sends.
#[derive(Clone)]
struct CountingClient {
    client: Client,
    requests: Arc<AtomicU64>,
}

/// Attempts after the first for an answer the apiserver asks to retry (429, 503, 504).
const RETRIES: u32 = 3;
/// The wait before the first retry; doubled for each further one.
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(250);

impl CountingClient {
    /// Sends `request`, retrying `RETRIES` times with a doubling delay when the apiserver
    /// answers 429 (API Priority and Fairness), 503 or 504. The client's own retry layer is
    /// off (its default waits up to 1000 s between 15 attempts: a scan would hang on an
    /// aggregated API that is down).
    async fn request<T: serde::de::DeserializeOwned>(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> Result<T, kube::Error> {
        let (parts, body) = request.into_parts();
        let mut delay = FIRST_RETRY_DELAY;
        let mut attempt = 0;
        loop {
            let mut request = http::Request::new(body.clone());
            *request.method_mut() = parts.method.clone();
            *request.uri_mut() = parts.uri.clone();
            *request.headers_mut() = parts.headers.clone();
            self.requests.fetch_add(1, Ordering::Relaxed);
            match self.client.request(request).await {
                Err(kube::Error::Api(status))
                    if matches!(status.code, 429 | 503 | 504) && attempt < RETRIES =>
                {
                    attempt += 1;
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                answer => return answer,
            }
        }
    }

    async fn list_page(&self, path: &str, params: &ListParams) -> Result<RawList, kube::Error> {
        let request = kube::core::Request::new(path)
            .list(params)
            .map_err(kube::Error::BuildRequest)?;
        self.request(request).await
    }
}

fn get(path: &str) -> http::Request<Vec<u8>> {
    let mut request = http::Request::new(Vec::new());
    *request.uri_mut() = path.parse().unwrap_or_default();
    request
}

/// Reads the served groups, versions and resources the scan of `wanted` needs: `/api/v1`,
/// `/apis`, then the resource list of each group version a wanted resource may be in.
async fn discover(
    client: &CountingClient,
    wanted: &[WantedResource],
) -> Result<Discovery, ScanError> {
    let failed = |what: &str| {
        let what = what.to_owned();
        move |source| ScanError::Discovery { what, source }
    };
    let mut discovery = Discovery::new();
    discovery.insert(
        String::new(),
        ServedGroup {
            versions: vec!["v1".to_owned()],
            resources: Default::default(),
        },
    );
    let groups: k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList = client
        .request(get("/apis"))
        .await
        .map_err(failed("/apis"))?;
    for group in groups.groups {
        let mut versions: Vec<String> = Vec::new();
        if let Some(preferred) = &group.preferred_version {
            versions.push(preferred.version.clone());
        }
        for version in &group.versions {
            if !versions.contains(&version.version) {
                versions.push(version.version.clone());
            }
        }
        discovery.insert(
            group.name,
            ServedGroup {
                versions,
                resources: Default::default(),
            },
        );
    }
    for (group, version) in versions_to_fetch(wanted, &discovery) {
        let path = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let list: k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList =
            match client.request(get(&path)).await {
                Ok(list) => list,
                // A group only a wildcard reaches (an aggregated API that is down, say) is
                // skipped, as kubectl skips it; a group a policy names is required.
                Err(error) if !wanted.iter().any(|w| w.group == group) => {
                    tracing::warn!(%path, %error, "discovery failed; this group is not scanned");
                    continue;
                }
                Err(error) => return Err(failed(&path)(error)),
            };
        let resources = list
            .resources
            .into_iter()
            .map(|resource| ServedResource {
                listable: resource.verbs.iter().any(|verb| verb == "list"),
                name: resource.name,
                kind: resource.kind,
                namespaced: resource.namespaced,
            })
            .collect();
        if let Some(served) = discovery.get_mut(&group) {
            served.resources.insert(version, resources);
        }
    }
    Ok(discovery)
}

/// Every page of one collection, `limit` objects at a time, following `continue`.
async fn list_pages(
    client: &CountingClient,
    path: &str,
    field_selector: Option<&str>,
    page_size: u32,
    mut page: impl FnMut(Vec<Value>) -> bool,
) -> Result<(), kube::Error> {
    let mut params = ListParams::default().limit(page_size);
    if let Some(selector) = field_selector {
        params = params.fields(selector);
    }
    loop {
        let list = client.list_page(path, &params).await?;
        if !page(list.items) {
            return Ok(());
        }
        match list.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}

/// Every Namespace, for namespace labels (selectors, Pod Security) and `namespaceObject`.
/// Memory grows with the number of namespaces, not of objects.
async fn list_namespaces(
    client: &CountingClient,
    page_size: u32,
) -> Result<StaticNamespaces, ScanError> {
    let mut namespaces = StaticNamespaces::default();
    list_pages(client, "/api/v1/namespaces", None, page_size, |items| {
        for mut item in items {
            item["apiVersion"] = Value::from("v1");
            item["kind"] = Value::from("Namespace");
            namespaces.insert_object(&item);
        }
        true
    })
    .await
    .map_err(|source| ScanError::List {
        target: "v1/namespaces".to_owned(),
        source,
    })?;
    Ok(namespaces)
}

/// Gatekeeper's `data.inventory` for the audit, as Gatekeeper's audit reads the objects its
/// sync keeps: every object of each kind the Config syncs (`settings.kinds`), cluster-wide,
/// but those whose namespace the Config excludes from `sync`. None without synced kinds; a
/// kind the cluster does not serve adds nothing (with a warning).
async fn list_inventory(
    client: &CountingClient,
    settings: &SyncSettings,
    page_size: u32,
) -> Result<Option<Inventory>, ScanError> {
    if settings.kinds.is_empty() {
        return Ok(None);
    }
    let mut inventory = Inventory::empty();
    for entry in &settings.kinds {
        let api_version = entry.api_version();
        let base = if entry.group.is_empty() {
            format!("/api/{}", entry.version)
        } else {
            format!("/apis/{}/{}", entry.group, entry.version)
        };
        let resources: Result<
            k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList,
            kube::Error,
        > = client.request(get(&base)).await;
        let plural = match resources {
            Ok(list) => list
                .resources
                .into_iter()
                .find(|resource| resource.kind == entry.kind && !resource.name.contains('/'))
                .map(|resource| resource.name),
            Err(kube::Error::Api(status)) if status.code == 404 => None,
            Err(source) => {
                return Err(ScanError::Discovery { what: base, source });
            }
        };
        let Some(plural) = plural else {
            tracing::warn!(
                api_version = %api_version,
                kind = %entry.kind,
                "the cluster serves no resource of this synced kind; data.inventory has none"
            );
            continue;
        };
        let path = format!("{base}/{plural}");
        let mut count = 0usize;
        list_pages(client, &path, None, page_size, |items| {
            for mut item in items {
                item["apiVersion"] = Value::from(api_version.as_str());
                item["kind"] = Value::from(entry.kind.as_str());
                if !settings.excludes(&item) {
                    inventory.insert(&item);
                    count += 1;
                }
            }
            true
        })
        .await
        .map_err(|source| ScanError::List {
            target: format!("{api_version}/{plural}"),
            source,
        })?;
        tracing::info!(api_version = %api_version, kind = %entry.kind, objects = count, "audit: Gatekeeper inventory listed");
    }
    Ok(Some(inventory))
}

/// One page of a resource's objects.
struct Page {
    target: Arc<ScanTarget>,
    items: Vec<Value>,
}

/// Lists every target page by page into `pages` (which holds one page), stopping when the
/// receiver is gone.
async fn list_targets(
    client: CountingClient,
    targets: Vec<ScanTarget>,
    options: ScanOptions,
    field_selector: Option<String>,
    pages: mpsc::Sender<Result<Page, ScanError>>,
) {
    for target in targets {
        let target = Arc::new(target);
        let collections: Vec<(String, Option<&str>)> = if !target.namespaced {
            vec![(target.collection_path(None), None)]
        } else if options.namespaces.is_empty() {
            vec![(target.collection_path(None), field_selector.as_deref())]
        } else {
            options
                .namespaces
                .iter()
                .map(|namespace| (target.collection_path(Some(namespace)), None))
                .collect()
        };
        for (path, selector) in collections {
            let mut params = ListParams::default().limit(options.page_size);
            if let Some(selector) = selector {
                params = params.fields(selector);
            }
            loop {
                let list = match client.list_page(&path, &params).await {
                    Ok(list) => list,
                    // Some resources refuse `metadata.namespace` field selectors (400 field
                    // label not supported): list them whole; the exclusions still apply.
                    Err(kube::Error::Api(status))
                        if status.code == 400
                            && params.field_selector.is_some()
                            && params.continue_token.is_none() =>
                    {
                        tracing::debug!(%path, "field selector refused; listing without it");
                        params.field_selector = None;
                        continue;
                    }
                    Err(source) => {
                        let _ = pages
                            .send(Err(ScanError::List {
                                target: target.display(),
                                source,
                            }))
                            .await;
                        return;
                    }
                };
                let page = Page {
                    target: Arc::clone(&target),
                    items: list.items,
                };
                if pages.send(Ok(page)).await.is_err() {
                    return;
                }
                match list.metadata.continue_.filter(|token| !token.is_empty()) {
                    Some(token) => params = params.continue_token(&token),
                    None => break,
                }
            }
        }
    }
}

/// What became of one listed object.
enum Judgement {
    Judged(Box<CheckResult>),
    Excluded,
    Failed(String),
}

/// The CREATE request for an object as the apiserver lists it (items of built-in lists come
/// without `apiVersion` and `kind`: they are set from the list's resource).
pub fn scan_request(target: &ScanTarget, mut object: Value) -> (Source, AdmissionRequest) {
    object["apiVersion"] = Value::from(target.api_version());
    object["kind"] = Value::from(target.kind.clone());
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let name = text("/metadata/name");
    let namespace = if target.namespaced {
        text("/metadata/namespace")
    } else {
        None
    };
    let path = match (&namespace, &name) {
        (Some(namespace), Some(name)) => {
            format!("{}/{name}", target.collection_path(Some(namespace)))
        }
        (None, Some(name)) => format!("{}/{name}", target.collection_path(None)),
        (_, None) => target.collection_path(namespace.as_deref()),
    };
    let uid = text("/metadata/uid").unwrap_or_else(|| offline_uid(&path));
    let manifest = Manifest {
        kind: GroupVersionKind {
            group: target.group.clone(),
            version: target.version.clone(),
            kind: target.kind.clone(),
        },
        resource: GroupVersionResource {
            group: target.group.clone(),
            version: target.version.clone(),
            resource: target.resource.clone(),
        },
        namespaced: Some(target.namespaced),
        namespace,
        name,
        object,
    };
    let request = manifest.request(Operation::Create, uid);
    let source = Source {
        file: path.trim_start_matches('/').into(),
        index: 0,
        item: None,
    };
    (source, request)
}

fn judge(
    checker: &Checker<'_>,
    exclusions: Option<&WebhookExclusions>,
    namespaces: &StaticNamespaces,
    target: &ScanTarget,
    object: Value,
) -> Judgement {
    let (source, request) = scan_request(target, object);
    if let Some(exclusions) = exclusions {
        match exclusions.exclusion(&request, namespaces) {
            Ok(Some(_)) => return Judgement::Excluded,
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%source, %error, "a webhook match condition failed to evaluate; judging the object");
            }
        }
    }
    match checker.check_request(&source, &request, true) {
        Ok(result) => Judgement::Judged(Box::new(result)),
        Err(error) => Judgement::Failed(error.to_string()),
    }
}

/// Judges a page on up to `threads` threads; the judgements come back in list order.
fn judge_page(
    engine: &Engine,
    exclusions: Option<&WebhookExclusions>,
    namespaces: &StaticNamespaces,
    inventory: Option<&Inventory>,
    page: Page,
    threads: usize,
) -> Vec<Judgement> {
    let Page { target, items } = page;
    let threads = threads.clamp(1, items.len().max(1));
    let chunk = items.len().div_ceil(threads).max(1);
    let mut chunks: Vec<Vec<Value>> = Vec::with_capacity(threads);
    let mut items = items.into_iter();
    loop {
        let part: Vec<Value> = items.by_ref().take(chunk).collect();
        if part.is_empty() {
            break;
        }
        chunks.push(part);
    }
    let run = |part: Vec<Value>| -> Vec<Judgement> {
        let mut checker =
            Checker::new(engine, namespaces).at_enforcement_point(EnforcementPoint::Audit);
        if let Some(inventory) = inventory {
            checker = checker.with_inventory(inventory);
        }
        part.into_iter()
            .map(|object| judge(&checker, exclusions, namespaces, &target, object))
            .collect()
    };
    if chunks.len() <= 1 {
        return chunks.into_iter().flat_map(run).collect();
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|part| scope.spawn(|| run(part)))
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| match handle.join() {
                Ok(judgements) => judgements,
                // `check_request` catches rule panics; anything else is a defect.
                Err(_) => vec![Judgement::Failed(
                    "the evaluating thread panicked".to_owned(),
                )],
            })
            .collect()
    })
}

/// The scanner: a cluster client, the engine, and the options.
pub struct Scanner {
    client: CountingClient,
    engine: Arc<Engine>,
    options: ScanOptions,
}

impl Scanner {
    /// A scanner over `client` judging with `engine`.
    pub fn new(client: Client, engine: Arc<Engine>, options: ScanOptions) -> Self {
        Scanner {
            client: CountingClient {
                client,
                requests: Arc::new(AtomicU64::new(0)),
            },
            engine,
            options,
        }
    }

    /// Runs the scan on `runtime`, writing each judged object to `writer` and each error to
    /// standard error; returns the counts. Must not be called from inside the runtime.
    pub fn run(
        &self,
        runtime: &Runtime,
        writer: &mut dyn ResultWriter,
    ) -> Result<ScanSummary, ScanError> {
        let mut summary = ScanSummary::default();
        let wanted = super::targets::wanted_resources(&self.engine);
        let exclusions = WebhookExclusions::generated(&self.engine, &self.options.own_namespace)?
            .map(|exclusions| {
                let exclusions = exclusions.excluding(&self.options.excluded_namespaces);
                match &self.options.object_selector {
                    Some(selector) => exclusions.selecting_objects(selector.clone()),
                    None => exclusions,
                }
            });
        let (targets, namespaces) = runtime.block_on(async {
            let discovery = discover(&self.client, &wanted).await?;
            let mut targets = resolve(&wanted, &discovery);
            if !self.options.namespaces.is_empty() {
                targets.retain(|target| target.namespaced);
            }
            let namespaces = list_namespaces(&self.client, self.options.page_size).await?;
            Ok::<_, ScanError>((targets, namespaces))
        })?;
        let inventory = runtime.block_on(list_inventory(
            &self.client,
            &self.engine.gatekeeper_sync(),
            self.options.page_size,
        ))?;
        summary.resources = targets.len();
        tracing::info!(
            resources = targets.len(),
            namespaces = self.options.namespaces.len(),
            "audit: scanning"
        );
        let field_selector = exclusions
            .as_ref()
            .and_then(WebhookExclusions::field_selector);
        let (sender, mut pages) = mpsc::channel(1);
        let lister = runtime.spawn(list_targets(
            self.client.clone(),
            targets,
            self.options.clone(),
            field_selector,
            sender,
        ));
        let now = SystemTime::now();
        let mut applied: HashSet<String> = HashSet::new();
        while let Some(page) = pages.blocking_recv() {
            let page = page?;
            summary.listed += page.items.len() as u64;
            let judgements = judge_page(
                &self.engine,
                exclusions.as_ref(),
                &namespaces,
                inventory.as_ref(),
                page,
                self.options.concurrency,
            );
            let mut reports = Vec::new();
            for judgement in judgements {
                match judgement {
                    Judgement::Excluded => summary.excluded += 1,
                    Judgement::Failed(message) => {
                        summary.errors += 1;
                        eprintln!("error: {message}");
                    }
                    Judgement::Judged(result) => {
                        summary.count(&result);
                        writer.result(&result)?;
                        if self.options.apply
                            && let Some(report) = openreports::report(&result, now)
                        {
                            reports.push(report);
                        }
                    }
                }
            }
            if !reports.is_empty() {
                for report in &reports {
                    if let Some(name) = report.pointer("/metadata/name").and_then(Value::as_str) {
                        applied.insert(name.to_owned());
                    }
                }
                summary.reports_applied += reports.len() as u64;
                runtime.block_on(self.apply_reports(reports))?;
            }
        }
        // The lister ends when the channel does; a panic there is a defect worth reporting.
        if let Err(error) = runtime.block_on(lister) {
            return Err(ScanError::Task {
                what: "listing",
                message: error.to_string(),
            });
        }
        if self.options.apply {
            summary.reports_deleted = runtime.block_on(self.delete_stale_reports(&applied))?;
        }
        summary.requests = self.client.requests.load(Ordering::Relaxed);
        Ok(summary)
    }

    /// Server-side applies `reports`, `concurrency` at a time.
    async fn apply_reports(&self, reports: Vec<Value>) -> Result<(), ScanError> {
        let mut writes = tokio::task::JoinSet::new();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        for report in reports {
            while writes.len() >= self.options.concurrency.max(1) {
                if let Some(done) = writes.join_next().await {
                    flatten(done)?;
                }
            }
            let client = self.client.clone();
            let params = params.clone();
            writes.spawn(async move {
                let (collection, name, label) = report_location(&report);
                let request = kube::core::Request::new(&collection)
                    .patch(&name, &params, &Patch::Apply(&report))
                    .map_err(|e| ScanError::Request {
                        what: label.clone(),
                        message: e.to_string(),
                    })?;
                client
                    .request::<Value>(request)
                    .await
                    .map(drop)
                    .map_err(|source| ScanError::Report {
                        report: label,
                        source,
                    })
            });
        }
        while let Some(done) = writes.join_next().await {
            flatten(done)?;
        }
        Ok(())
    }

    /// Deletes the reports Portcullis wrote before (by label) that this scan did not write:
    /// their objects are gone, clean now, or no longer scanned. Only the scanned namespaces
    /// (and, when all are scanned, cluster reports) are looked at.
    async fn delete_stale_reports(&self, applied: &HashSet<String>) -> Result<u64, ScanError> {
        let selector = format!(
            "{}={}",
            openreports::MANAGED_BY.0,
            openreports::MANAGED_BY.1
        );
        let root = format!("/apis/{}", openreports::API_VERSION);
        let mut collections: Vec<String> = Vec::new();
        if self.options.namespaces.is_empty() {
            collections.push(format!("{root}/reports"));
            collections.push(format!("{root}/clusterreports"));
        } else {
            for namespace in &self.options.namespaces {
                collections.push(format!("{root}/namespaces/{namespace}/reports"));
            }
        }
        let mut stale: Vec<(String, String)> = Vec::new();
        for collection in collections {
            let params = ListParams::default()
                .labels(&selector)
                .limit(self.options.page_size);
            let mut params = params;
            loop {
                let list = self
                    .client
                    .list_page(&collection, &params)
                    .await
                    .map_err(|source| ScanError::Report {
                        report: collection.clone(),
                        source,
                    })?;
                for item in &list.items {
                    let name = item.pointer("/metadata/name").and_then(Value::as_str);
                    let Some(name) = name.filter(|name| !applied.contains(*name)) else {
                        continue;
                    };
                    let item_collection =
                        match item.pointer("/metadata/namespace").and_then(Value::as_str) {
                            Some(namespace) => format!("{root}/namespaces/{namespace}/reports"),
                            None => format!("{root}/clusterreports"),
                        };
                    stale.push((item_collection, name.to_owned()));
                }
                match list.metadata.continue_.filter(|token| !token.is_empty()) {
                    Some(token) => params = params.continue_token(&token),
                    None => break,
                }
            }
        }
        let deleted = stale.len() as u64;
        for (collection, name) in stale {
            let request = kube::core::Request::new(&collection)
                .delete(&name, &Default::default())
                .map_err(|e| ScanError::Request {
                    what: format!("{collection}/{name}"),
                    message: e.to_string(),
                })?;
            match self.client.request::<Value>(request).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(source) => {
                    return Err(ScanError::Report {
                        report: format!("{collection}/{name}"),
                        source,
                    });
                }
            }
        }
        Ok(deleted)
    }
}

fn flatten(done: Result<Result<(), ScanError>, tokio::task::JoinError>) -> Result<(), ScanError> {
    done.map_err(|error| ScanError::Task {
        what: "a report write",
        message: error.to_string(),
    })?
}

/// The collection path, name and a label (`Kind namespace/name`) of a report.
fn report_location(report: &Value) -> (String, String, String) {
    let name = report
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let root = format!("/apis/{}", openreports::API_VERSION);
    match report
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
    {
        Some(namespace) => (
            format!("{root}/namespaces/{namespace}/reports"),
            name.clone(),
            format!("Report {namespace}/{name}"),
        ),
        None => (
            format!("{root}/clusterreports"),
            name.clone(),
            format!("ClusterReport {name}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod_target() -> ScanTarget {
        ScanTarget {
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
            kind: "Pod".into(),
            namespaced: true,
        }
    }

    fn pod(name: &str, namespace: &str, privileged: bool) -> Value {
        json!({
            "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}")},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27",
                                     "imagePullPolicy": "IfNotPresent",
                                     "securityContext": {"privileged": privileged}}]},
        })
    }

    #[test]
    fn a_listed_object_is_a_create_of_itself() {
        let (source, request) = scan_request(&pod_target(), pod("web", "team", false));
        assert_eq!(
            source.file.to_str(),
            Some("api/v1/namespaces/team/pods/web")
        );
        assert_eq!(request.operation, Operation::Create);
        assert_eq!(request.uid, "uid-web");
        assert_eq!(request.namespace.as_deref(), Some("team"));
        assert!(request.old_object.is_none());
        let object = request.object.unwrap();
        assert_eq!(object["apiVersion"], "v1");
        assert_eq!(object["kind"], "Pod");
    }

    #[test]
    fn pages_are_judged_in_order_with_exclusions() {
        let engine = Engine::builtin();
        let exclusions = WebhookExclusions::generated(&engine, "portcullis").unwrap();
        let namespaces = StaticNamespaces::default();
        let items = vec![
            pod("a", "team", true),
            pod("b", "team", false),
            pod("c", "kube-system", true),
            pod("d", "team", true),
            pod("e", "portcullis", true),
        ];
        for threads in [1, 2, 8] {
            let page = Page {
                target: Arc::new(pod_target()),
                items: items.clone(),
            };
            let judgements = judge_page(
                &engine,
                exclusions.as_ref(),
                &namespaces,
                None,
                page,
                threads,
            );
            let verdicts: Vec<String> = judgements
                .iter()
                .map(|judgement| match judgement {
                    Judgement::Judged(result) => format!(
                        "{}:{}",
                        result.name.as_deref().unwrap_or(""),
                        result.allowed
                    ),
                    Judgement::Excluded => "excluded".into(),
                    Judgement::Failed(message) => message.clone(),
                })
                .collect();
            assert_eq!(
                verdicts,
                ["a:false", "b:true", "excluded", "d:false", "excluded"],
                "{threads} threads"
            );
        }
    }

    #[test]
    fn an_undecodable_object_is_an_error_not_a_panic() {
        let engine = Engine::builtin();
        let namespaces = StaticNamespaces::default();
        let checker = Checker::new(&engine, &namespaces);
        let object = json!({"metadata": {"name": "x", "namespace": "team"},
                            "spec": {"containers": "not a list"}});
        let judgement = judge(&checker, None, &namespaces, &pod_target(), object);
        assert!(matches!(judgement, Judgement::Failed(_)));
    }

    #[test]
    fn report_locations() {
        let namespaced = json!({"metadata": {"name": "u1", "namespace": "team"}});
        assert_eq!(
            report_location(&namespaced),
            (
                "/apis/openreports.io/v1alpha1/namespaces/team/reports".to_owned(),
                "u1".to_owned(),
                "Report team/u1".to_owned()
            )
        );
        let cluster = json!({"metadata": {"name": "u2"}});
        assert_eq!(
            report_location(&cluster).0,
            "/apis/openreports.io/v1alpha1/clusterreports"
        );
    }
}
