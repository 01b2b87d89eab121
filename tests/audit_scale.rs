//! `portcullis audit` at scale (`make audit-scale`; ignored otherwise): 50,000 objects
//! (Pods, Deployments, ConfigMaps in 500 namespaces) loaded into the e2e etcd through a real
//! kube-apiserver, then one scan timed with `/usr/bin/time -v`: wall time, peak RSS, and the
//! apiserver requests it made (its own count, and the apiserver's `apiserver_request_total`
//! before and after). Targets (issue #16): under 60 s and under 128 MiB on 2 cores.
//!
//! `PORTCULLIS_AUDIT_BIN` names the binary to time (the Makefile passes the release build;
//! the test profile's binary otherwise). `AUDIT_SCALE_NAMESPACES` (500) scales the load.

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::control_plane::{ControlPlane, PORTCULLIS, e2e_bin};
use common::fixture;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const BUILTIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/engine/builtin.yaml");
const PODS: usize = 40;
const DEPLOYMENTS: usize = 20;
const CONFIGMAPS: usize = 40;
/// Creates in flight at once while loading.
const LOAD_CONCURRENCY: usize = 48;

fn pod(i: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("pod-{i}"), "labels": {"app": "scale", "shard": format!("{}", i % 7)}},
        "spec": {"containers": [{
            "name": "app",
            "image": "registry.k8s.io/pause:3.10",
            "ports": [{"containerPort": 8080}],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            // One Pod in ten is privileged: baseline refuses it.
            "securityContext": {"privileged": i.is_multiple_of(10)},
        }]},
    }))
    .unwrap()
}

fn deployment(i: usize) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": format!("deploy-{i}")},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": format!("deploy-{i}")}},
            "template": {
                "metadata": {"labels": {"app": format!("deploy-{i}")}},
                "spec": {
                    "hostNetwork": i.is_multiple_of(10),
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }))
    .unwrap()
}

fn config_map(i: usize) -> ConfigMap {
    let mut data = json!({"mode": "fast", "level": format!("{i}"), "blob": "x".repeat(256)});
    if i.is_multiple_of(20) {
        data["password"] = json!("hunter2");
    }
    serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}, "data": data})).unwrap()
}

/// Creates the namespaces and their objects, `LOAD_CONCURRENCY` creates at a time.
async fn load(client: kube::Client, namespaces: usize) -> usize {
    let namespace_api: Api<Namespace> = Api::all(client.clone());
    for n in 0..namespaces {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": format!("scale-{n}")}})).unwrap();
        namespace_api
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
    }
    let slots = Arc::new(tokio::sync::Semaphore::new(LOAD_CONCURRENCY));
    let mut creates = tokio::task::JoinSet::new();
    let mut created = 0;
    for n in 0..namespaces {
        let namespace = format!("scale-{n}");
        for kind in 0..3 {
            let count = [PODS, DEPLOYMENTS, CONFIGMAPS][kind];
            for i in 0..count {
                let permit = Arc::clone(&slots).acquire_owned().await.unwrap();
                let client = client.clone();
                let namespace = namespace.clone();
                creates.spawn(async move {
                    let params = PostParams::default();
                    match kind {
                        0 => drop(
                            Api::<Pod>::namespaced(client, &namespace)
                                .create(&params, &pod(i))
                                .await
                                .unwrap(),
                        ),
                        1 => drop(
                            Api::<Deployment>::namespaced(client, &namespace)
                                .create(&params, &deployment(i))
                                .await
                                .unwrap(),
                        ),
                        _ => drop(
                            Api::<ConfigMap>::namespaced(client, &namespace)
                                .create(&params, &config_map(i))
                                .await
                                .unwrap(),
                        ),
                    }
                    drop(permit);
                });
                created += 1;
                while let Some(done) = creates.try_join_next() {
                    done.unwrap();
                }
            }
        }
    }
    while let Some(done) = creates.join_next().await {
        done.unwrap();
    }
    created
}

/// The sum of `apiserver_request_total` over all its series.
fn apiserver_requests(plane: &ControlPlane) -> f64 {
    plane
        .kubectl_ok(&["get", "--raw", "/metrics"])
        .lines()
        .filter(|line| line.starts_with("apiserver_request_total{"))
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

fn time_field<'a>(report: &'a str, name: &str) -> &'a str {
    report
        .lines()
        .find_map(|line| line.trim().strip_prefix(name))
        .map(str::trim)
        .unwrap_or("?")
}

#[test]
#[ignore = "loads 50,000 objects into the e2e apiserver: make audit-scale"]
fn audit_scale() {
    let Some(bin) = e2e_bin() else { return };
    let namespaces: usize = std::env::var("AUDIT_SCALE_NAMESPACES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(500);
    let portcullis =
        std::env::var("PORTCULLIS_AUDIT_BIN").unwrap_or_else(|_| PORTCULLIS.to_owned());
    let plane = ControlPlane::start(&bin);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let loading = Instant::now();
    let client = runtime.block_on(plane.client());
    let created = runtime.block_on(load(client, namespaces));
    eprintln!(
        "audit-scale: loaded {created} objects in {namespaces} namespaces in {:.1} s",
        loading.elapsed().as_secs_f64()
    );

    let before = apiserver_requests(&plane);
    let started = Instant::now();
    let output = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(&portcullis)
        .args([
            "audit",
            "--kubeconfig",
            plane.kubeconfig(),
            "--output",
            "json",
        ])
        .args(["--policies", BUILTIN, "--policies"])
        .arg(fixture("audit/configmap-policy.yaml"))
        .args(["--log-level", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run /usr/bin/time portcullis audit");
    let wall = started.elapsed();
    let after = apiserver_requests(&plane);
    let report = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{report}");
    let summary = report
        .lines()
        .find(|line| line.contains(" objects scanned in "))
        .unwrap_or_else(|| panic!("no summary in {report}"));
    let scanned: u64 = summary.split(' ').next().unwrap().parse().unwrap();
    assert!(scanned >= created as u64, "{summary}");
    let rss_kib: u64 = time_field(&report, "Maximum resident set size (kbytes):")
        .parse()
        .unwrap_or(0);
    eprintln!("audit-scale: {summary}");
    eprintln!(
        "audit-scale: wall {:.2} s (time -v: {}), user {} s, system {} s, peak RSS {:.1} MiB, \
         apiserver_request_total +{} (includes one /metrics scrape)",
        wall.as_secs_f64(),
        time_field(&report, "Elapsed (wall clock) time (h:mm:ss or m:ss):"),
        time_field(&report, "User time (seconds):"),
        time_field(&report, "System time (seconds):"),
        rss_kib as f64 / 1024.0,
        after - before,
    );
    assert!(wall < Duration::from_secs(60), "over the 60 s target");
    assert!(rss_kib < 128 * 1024, "over the 128 MiB target");
}
