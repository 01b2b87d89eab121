//! Policy hot reload through a real server on loopback ports chosen by the OS: changes by a
//! ConfigMap-style `..data` swap while requests flow, broken changes that keep the policies
//! in use, a start with broken or missing policies, and the interval re-check.

mod common;
#[path = "common/reload.rs"]
mod reload_support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{read_fixture, wait_until};
use portcullis::server::{OnError, RunningServer};
use reload_support::{
    ConfigMapMount, admin_get, admission_client, admission_response, loopback_certificates,
    policy_reloads, start_with_policies,
};

const DEADLINE: Duration = Duration::from_secs(20);
const NEVER: Duration = Duration::from_secs(3600);

async fn wait_for_reloads(server: &RunningServer, result: &'static str, count: u64) {
    let metrics = server.state.metrics.clone();
    wait_until(
        DEADLINE,
        &format!("{count} policy reload(s) with result {result}"),
        || {
            let metrics = metrics.clone();
            async move { policy_reloads(&metrics, result) >= count }
        },
    )
    .await;
}

async fn wait_for_requests(served: &Arc<AtomicUsize>, at_least: usize) {
    wait_until(DEADLINE, &format!("{at_least} answered requests"), || {
        let served = served.clone();
        async move { served.load(Ordering::SeqCst) >= at_least }
    })
    .await;
}

/// Empty policies (allow everything) → a broken change → empty again, with requests and
/// readiness probes running the whole time. `watch_file` names the file rather than the folder.
async fn changes_under_load(watch_file: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let mut mount = ConfigMapMount::new(&tmp.path().join("policies"));
    let empty: &[(&str, &[u8])] = if watch_file {
        &[("policy.yaml", b"")]
    } else {
        &[]
    };
    mount.publish(empty);
    let path = if watch_file {
        mount.path().join("policy.yaml")
    } else {
        mount.path().to_owned()
    };
    let certificates = loopback_certificates();
    let server = start_with_policies(&certificates, vec![path], OnError::Deny, NEVER).await;
    assert_eq!(admin_get(server.admin_addr, "/readyz").await.0, 200);
    assert_eq!(server.state.engine.load().as_ref().unwrap().rule_count(), 0);

    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut sender = admission_client(&server, &certificates).await;
    let load = {
        let (stop, served, failures) = (stop.clone(), served.clone(), failures.clone());
        let admin = server.admin_addr;
        let review = read_fixture("reviews/pod-create-privileged.json");
        tokio::spawn(async move {
            for round in 0..20_000 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let path = if round % 2 == 0 {
                    "/validate"
                } else {
                    "/mutate"
                };
                match admission_response(&mut sender, path, &review).await {
                    // Every valid state here is the empty policy set: everything is allowed.
                    Ok(response) if response["allowed"] == true => {}
                    Ok(response) => failures
                        .lock()
                        .unwrap()
                        .push(format!("{path}: not allowed: {response}")),
                    Err(error) => failures.lock().unwrap().push(format!("{path}: {error}")),
                }
                let (status, body) = admin_get(admin, "/readyz").await;
                if status != 200 {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("/readyz: {status} {body}"));
                }
                served.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    wait_for_requests(&served, 5).await;

    mount.publish(&[("policy.yaml", &read_fixture("reload/invalid-yaml.yaml"))]);
    wait_for_reloads(&server, "failure", 1).await;
    let after_broken = served.load(Ordering::SeqCst);
    wait_for_requests(&served, after_broken + 5).await;

    mount.publish(empty);
    wait_for_reloads(&server, "success", 1).await;
    let after_fixed = served.load(Ordering::SeqCst);
    wait_for_requests(&served, after_fixed + 5).await;

    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();
    let failures = std::mem::take(&mut *failures.lock().unwrap());
    assert!(
        failures.is_empty(),
        "{} failed requests of {}, first: {:?}",
        failures.len(),
        served.load(Ordering::SeqCst),
        failures.first()
    );
    assert_eq!(policy_reloads(&server.state.metrics, "failure"), 1);
    assert_eq!(policy_reloads(&server.state.metrics, "success"), 1);
    let (status, metrics) = admin_get(server.admin_addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains(r#"portcullis_reloads_total{component="policies",result="failure"} 1"#),
        "{metrics}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folder_changes_under_load_fail_no_request() {
    changes_under_load(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_changes_under_load_fail_no_request() {
    changes_under_load(true).await;
}

/// A start with broken policies: not ready with the reason, admission answered as
/// `--on-error` says; fixing the folder makes the server ready and the policies apply.
async fn broken_start(on_error: OnError) {
    let tmp = tempfile::tempdir().unwrap();
    let mut mount = ConfigMapMount::new(&tmp.path().join("policies"));
    mount.publish(&[("policy.yaml", &read_fixture("reload/unknown-kind.yaml"))]);
    let certificates = loopback_certificates();
    let server = start_with_policies(
        &certificates,
        vec![mount.path().to_owned()],
        on_error,
        NEVER,
    )
    .await;

    let (status, reason) = admin_get(server.admin_addr, "/readyz").await;
    assert_eq!(status, 503);
    assert!(
        reason.starts_with("not ready: policies failed to load: ")
            && reason.contains(
                "policy.yaml (document 0): kind: unsupported document example.com/v1 Gadget"
            ),
        "{reason}"
    );
    assert!(server.state.engine.load().is_none());
    let review = read_fixture("reviews/pod-create-compliant.json");
    let mut sender = admission_client(&server, &certificates).await;
    for path in ["/validate", "/mutate"] {
        let response = admission_response(&mut sender, path, &review)
            .await
            .unwrap();
        match on_error {
            OnError::Deny => {
                assert_eq!(response["allowed"], false, "{response}");
                assert_eq!(response["status"]["code"], 500, "{response}");
                assert_eq!(
                    response["status"]["message"],
                    "portcullis could not evaluate the request: policies are not loaded"
                );
            }
            OnError::Allow => {
                assert_eq!(response["allowed"], true, "{response}");
                assert_eq!(
                    response["warnings"][0],
                    "portcullis could not evaluate the request (policies are not loaded); \
                     admitted by --on-error=allow"
                );
            }
        }
        assert!(response.get("patch").is_none(), "{response}");
    }

    mount.publish(&[]);
    let admin = server.admin_addr;
    wait_until(DEADLINE, "readiness after the fix", || async move {
        admin_get(admin, "/readyz").await.0 == 200
    })
    .await;
    let response = admission_response(&mut sender, "/validate", &review)
        .await
        .unwrap();
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("warnings").is_none(), "{response}");
    // The load at start is not a reload; the fix is.
    assert_eq!(policy_reloads(&server.state.metrics, "success"), 1);
    assert_eq!(policy_reloads(&server.state.metrics, "failure"), 0);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn broken_start_denies_until_fixed() {
    broken_start(OnError::Deny).await;
}

#[tokio::test]
async fn broken_start_allows_with_a_warning_until_fixed() {
    broken_start(OnError::Allow).await;
}

/// A folder that does not exist at start cannot be watched: the interval re-check finds it.
#[tokio::test]
async fn a_missing_folder_is_found_by_the_interval_recheck() {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("not-yet/policies");
    let certificates = loopback_certificates();
    let server = start_with_policies(
        &certificates,
        vec![folder.clone()],
        OnError::Deny,
        Duration::from_millis(50),
    )
    .await;
    let (status, reason) = admin_get(server.admin_addr, "/readyz").await;
    assert_eq!(status, 503);
    assert!(reason.contains("cannot read"), "{reason}");

    std::fs::create_dir_all(&folder).unwrap();
    wait_for_reloads(&server, "success", 1).await;
    assert_eq!(admin_get(server.admin_addr, "/readyz").await.0, 200);
    server.shutdown().await.unwrap();
}
