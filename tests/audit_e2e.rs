//! `portcullis audit` against a real kube-apiserver (`PORTCULLIS_E2E_BIN`): objects created in
//! the cluster (some violating, some not, some in namespaces the generated webhooks exclude)
//! are scanned, and the scan must report exactly the objects that `portcullis check` denies
//! when given the same objects (as `kubectl get -o json` prints them), less the excluded
//! ones. Its OpenReports output must pass `kubectl apply --dry-run=server` with the OpenReports
//! CRDs installed (tests/fixtures/openreports, from scripts/fetch-openreports-crd.sh), and
//! `--apply` must write the reports and delete the ones a later scan no longer finds.

mod common;

use std::collections::BTreeSet;
use std::process::{Command, Output};
use std::time::Duration;

use common::control_plane::{ControlPlane, PORTCULLIS, e2e_bin, eventually, stderr};
use common::fixture;
use serde_json::Value;

const BUILTIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/engine/builtin.yaml");

fn audit(plane: &ControlPlane, args: &[&str]) -> Output {
    let policy = fixture("audit/configmap-policy.yaml");
    Command::new(PORTCULLIS)
        .args([
            "audit",
            "--kubeconfig",
            plane.kubeconfig(),
            "--policies",
            BUILTIN,
        ])
        .arg("--policies")
        .arg(&policy)
        .args(["--page-size", "2"])
        .args(args)
        .env_remove("PORTCULLIS_NAMESPACE")
        .output()
        .expect("run portcullis audit")
}

/// `Kind namespace/name` of each object in a `check`/`audit` JSON array that is denied.
fn denied(results: &Value) -> BTreeSet<String> {
    results
        .as_array()
        .expect("a JSON array")
        .iter()
        .filter(|r| r["allowed"] == false)
        .map(subject)
        .collect()
}

fn subject(result: &Value) -> String {
    format!(
        "{} {}/{}",
        result["kind"].as_str().unwrap_or(""),
        result["namespace"].as_str().unwrap_or(""),
        result["name"].as_str().unwrap_or("")
    )
}

#[test]
fn audit_reports_what_check_denies_and_honours_the_webhook_exclusions() {
    let Some(bin) = e2e_bin() else { return };
    let plane = ControlPlane::start(&bin);
    plane.kubectl_ok(&[
        "apply",
        "-f",
        fixture("audit/objects.yaml").to_str().unwrap(),
    ]);

    // The scan, as check's JSON.
    let output = audit(&plane, &["--output", "json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let scanned: Value = serde_json::from_slice(&output.stdout).expect("JSON output");
    let audit_denied = denied(&scanned);
    let expected: BTreeSet<String> = [
        "Pod audit-a/privileged",
        "Pod audit-restricted/plain",
        "ConfigMap audit-a/with-password",
        "Namespace /audit-bad-label",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(audit_denied, expected);
    // Every object in the scanned namespaces is reported once; nothing from the excluded
    // ones (kube-system, portcullis).
    let subjects: Vec<String> = scanned.as_array().unwrap().iter().map(subject).collect();
    for excluded in ["kube-system/", "portcullis/"] {
        assert!(
            !subjects.iter().any(|s| s.contains(excluded)),
            "{excluded} scanned: {subjects:?}"
        );
    }
    for present in [
        "Pod audit-a/plain",
        "Pod audit-a/latest",
        "Deployment audit-a/fine",
        "ConfigMap audit-a/settings",
        "Namespace /audit-a",
    ] {
        assert_eq!(
            subjects.iter().filter(|s| *s == present).count(),
            1,
            "{present} in {subjects:?}"
        );
    }
    // Pod Security enforces on Pods; workloads get its warnings only (as in-tree).
    let host_network = scanned
        .as_array()
        .unwrap()
        .iter()
        .find(|r| subject(r) == "Deployment audit-a/host-network")
        .unwrap();
    assert!(
        host_network["warnings"][0]
            .as_str()
            .unwrap()
            .contains("host namespaces (hostNetwork=true)"),
        "{host_network}"
    );
    let latest = scanned
        .as_array()
        .unwrap()
        .iter()
        .find(|r| subject(r) == "Pod audit-a/latest")
        .unwrap();
    assert!(
        latest["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .starts_with("[builtin-image-tags/pinned]")),
        "{latest}"
    );
    let summary = stderr(&output);
    assert!(
        summary.contains("excluded as admission excludes them"),
        "{summary}"
    );

    // check on the same objects, as the cluster holds them.
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let listed = dir.join("objects.json");
    let objects = plane.kubectl_ok(&[
        "get",
        "namespaces,pods,deployments,configmaps",
        "-A",
        "-o",
        "json",
    ]);
    std::fs::write(&listed, objects).unwrap();
    let check = Command::new(PORTCULLIS)
        .args(["check", "--output", "json", "--policies", BUILTIN])
        .arg("--policies")
        .arg(fixture("audit/configmap-policy.yaml"))
        .arg(&listed)
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(1), "{}", stderr(&check));
    let checked: Value = serde_json::from_slice(&check.stdout).unwrap();
    let check_denied: BTreeSet<String> = denied(&checked)
        .into_iter()
        .filter(|s| !s.contains(" kube-system/") && !s.contains(" portcullis/"))
        .collect();
    assert_eq!(audit_denied, check_denied);
    // check does deny the excluded objects: the exclusion is the scan's, not the policies'.
    assert!(denied(&checked).contains("Pod portcullis/privileged"));

    // The table: one verdict per object and the summary.
    let output = audit(&plane, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        table.contains("DENIED   Pod audit-a/privileged\n"),
        "{table}"
    );
    assert!(table.contains(" 4 denied, "), "{table}");

    // One namespace only: cluster-scoped resources and other namespaces are left out.
    let output = audit(
        &plane,
        &["--output", "json", "--namespace", "audit-restricted"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let scoped: Value = serde_json::from_slice(&output.stdout).unwrap();
    let subjects: Vec<String> = scoped.as_array().unwrap().iter().map(subject).collect();
    assert_eq!(subjects, ["Pod audit-restricted/plain"]);

    // More excluded namespaces (the chart's webhooks.excludedNamespaces), and the exit code
    // a CronJob uses.
    let output = audit(
        &plane,
        &[
            "-o",
            "json",
            "--exclude-namespace",
            "audit-a",
            "--denied-exit-code",
            "0",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let fewer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        denied(&fewer),
        BTreeSet::from([
            "Namespace /audit-bad-label".to_owned(),
            "Pod audit-restricted/plain".to_owned()
        ])
    );
    assert!(
        !fewer
            .as_array()
            .unwrap()
            .iter()
            .any(|r| subject(r).contains("audit-a"))
    );

    // The installed webhooks' objectSelector (the chart's webhooks.objectSelector): an
    // opted-out object is not judged, as admission would not send it.
    plane.kubectl_ok(&[
        "label",
        "pod",
        "-n",
        "audit-a",
        "privileged",
        "audit-skip=yes",
    ]);
    let output = audit(
        &plane,
        &[
            "-o",
            "json",
            "--object-selector",
            r#"{"matchExpressions":[{"key":"audit-skip","operator":"DoesNotExist"}]}"#,
        ],
    );
    plane.kubectl_ok(&["label", "pod", "-n", "audit-a", "privileged", "audit-skip-"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let selected: Value = serde_json::from_slice(&output.stdout).unwrap();
    let subjects: Vec<String> = selected.as_array().unwrap().iter().map(subject).collect();
    assert!(
        !subjects.contains(&"Pod audit-a/privileged".to_owned()),
        "{subjects:?}"
    );
    assert!(
        subjects.contains(&"Pod audit-a/plain".to_owned()),
        "{subjects:?}"
    );
    let mut expected_denied = expected.clone();
    expected_denied.remove("Pod audit-a/privileged");
    assert_eq!(denied(&selected), expected_denied);

    // OpenReports: valid against the CRDs, one report per object with findings.
    for crd in [
        "openreports.io_reports.yaml",
        "openreports.io_clusterreports.yaml",
    ] {
        let path = fixture(&format!("openreports/{crd}"));
        plane.kubectl_ok(&["apply", "-f", path.to_str().unwrap()]);
    }
    eventually(
        "OpenReports CRDs established",
        Duration::from_secs(30),
        || {
            let output = plane.kubectl(&[
                "wait",
                "--for=condition=Established",
                "--timeout=5s",
                "crd/reports.openreports.io",
                "crd/clusterreports.openreports.io",
            ]);
            output
                .status
                .success()
                .then_some(())
                .ok_or_else(|| stderr(&output))
        },
    );
    let output = audit(&plane, &["--output", "openreports"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let reports_file = dir.join("reports.yaml");
    std::fs::write(&reports_file, &output.stdout).unwrap();
    let with_findings = scanned
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            !r["violations"].as_array().unwrap().is_empty()
                || !r["warnings"].as_array().unwrap().is_empty()
                || !r["auditAnnotations"].as_object().unwrap().is_empty()
        })
        .count();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(text.matches("\n---\n").count() + 1, with_findings, "{text}");
    let dry_run = plane.kubectl(&[
        "apply",
        "--dry-run=server",
        "--validate=strict",
        "-f",
        reports_file.to_str().unwrap(),
    ]);
    assert!(dry_run.status.success(), "{}", stderr(&dry_run));
    assert_eq!(
        String::from_utf8_lossy(&dry_run.stdout).lines().count(),
        with_findings
    );

    // --apply writes them; a later scan that no longer finds a violation deletes its report.
    let output = audit(&plane, &["--apply"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let reports: Value =
        serde_json::from_str(&plane.kubectl_ok(&["get", "reports", "-A", "-o", "json"])).unwrap();
    let scopes: BTreeSet<String> = reports["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {}/{}",
                r["scope"]["kind"].as_str().unwrap(),
                r["scope"]["namespace"].as_str().unwrap(),
                r["scope"]["name"].as_str().unwrap()
            )
        })
        .collect();
    for denied in expected.iter().filter(|s| !s.starts_with("Namespace ")) {
        assert!(scopes.contains(denied), "{denied} not in {scopes:?}");
    }
    let cluster_reports: Value =
        serde_json::from_str(&plane.kubectl_ok(&["get", "clusterreports", "-o", "json"])).unwrap();
    let namespace_report = &cluster_reports["items"][0];
    assert_eq!(namespace_report["scope"]["name"], "audit-bad-label");
    assert_eq!(namespace_report["results"][0]["policy"], "pod-security");
    assert_eq!(namespace_report["results"][0]["result"], "fail");
    let password = reports["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["scope"]["name"] == "with-password")
        .unwrap();
    assert_eq!(password["summary"]["fail"], 1);
    assert_eq!(password["results"][0]["policy"], "no-plaintext-passwords");
    assert_eq!(
        password["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "portcullis"
    );

    plane.kubectl_ok(&[
        "patch",
        "configmap",
        "with-password",
        "-n",
        "audit-a",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/data/password"}]"#,
    ]);
    let output = audit(&plane, &["--apply"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains(" 1 stale reports deleted"), "{table}");
    let remaining = plane.kubectl_ok(&["get", "reports", "-n", "audit-a", "-o", "name"]);
    let uid = password["metadata"]["name"].as_str().unwrap();
    assert!(!remaining.contains(uid), "{remaining}");
}

#[test]
fn a_cluster_that_cannot_be_reached_is_exit_code_2() {
    let temp = tempfile::tempdir().unwrap();
    let kubeconfig = temp.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n\
         contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n",
    )
    .unwrap();
    let output = Command::new(PORTCULLIS)
        .args(["audit", "--kubeconfig", kubeconfig.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("error: audit failed: discovery (/apis)"),
        "{}",
        stderr(&output)
    );
    // A selector that is not a LabelSelector is refused before the cluster is asked.
    let bad_selector = Command::new(PORTCULLIS)
        .args(["audit", "--kubeconfig", "/nonexistent/kubeconfig"])
        .args([
            "--object-selector",
            r#"{"matchExpressions":[{"key":"a","operator":"Is"}]}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(bad_selector.status.code(), Some(2));
    assert!(
        stderr(&bad_selector)
            .contains("--object-selector: matchExpressions[0].operator: unknown operator \"Is\""),
        "{}",
        stderr(&bad_selector)
    );
    let missing = Command::new(PORTCULLIS)
        .args(["audit", "--kubeconfig", "/nonexistent/kubeconfig"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("cannot read the kubeconfig"),
        "{}",
        stderr(&missing)
    );
}

#[test]
fn a_wildcard_policy_scans_every_listable_resource_and_skips_a_broken_aggregated_api() {
    let Some(bin) = e2e_bin() else { return };
    let plane = ControlPlane::start(&bin);
    // An aggregated API whose Service does not exist: its discovery answers 503.
    plane.apply(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: \
         v1.broken.example.com\nspec:\n  group: broken.example.com\n  version: v1\n  \
         groupPriorityMinimum: 1000\n  versionPriority: 15\n  insecureSkipTLSVerify: true\n  \
         service: {namespace: default, name: nowhere, port: 443}\n",
    );
    eventually(
        "the APIService in discovery",
        Duration::from_secs(30),
        || {
            let groups = plane.kubectl_ok(&["get", "--raw", "/apis"]);
            groups
                .contains("broken.example.com")
                .then_some(())
                .ok_or_else(|| "not yet".to_owned())
        },
    );
    let output = Command::new(PORTCULLIS)
        .args([
            "audit",
            "--kubeconfig",
            plane.kubeconfig(),
            "-o",
            "json",
            "--policies",
        ])
        .arg(fixture("audit/wildcard-policy.yaml"))
        .env_remove("PORTCULLIS_NAMESPACE")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let errors = stderr(&output);
    assert!(
        errors.contains("discovery failed; this group is not scanned")
            && errors.contains("broken.example.com"),
        "{errors}"
    );
    let scanned: Value = serde_json::from_slice(&output.stdout).unwrap();
    let kinds: BTreeSet<&str> = scanned
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    // Objects of several groups, found by discovery alone.
    for kind in [
        "Namespace",
        "APIService",
        "ClusterRole",
        "FlowSchema",
        "Service",
    ] {
        assert!(kinds.contains(kind), "{kind} not in {kinds:?}");
    }
    // The generated match conditions leave leases and events out.
    assert!(
        !kinds.contains("Lease") && !kinds.contains("Event"),
        "{kinds:?}"
    );
}
