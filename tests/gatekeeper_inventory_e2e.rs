//! End-to-end: Gatekeeper's `Config` under `serve` against a real kube-apiserver. The Config
//! syncs Ingresses into `data.inventory` and excludes namespace `inventory-skipped` from the
//! webhook; the template (`tests/fixtures/gatekeeper/inventory`) denies an Ingress whose host
//! another Ingress already uses. Portcullis runs as its ServiceAccount with only the RBAC of
//! `manifests/base` and what `webhook-config` prints: `/readyz` waits for the Ingress watch,
//! an Ingress is created, and the duplicate is then denied, except in the excluded namespace;
//! once the first Ingress is deleted, the duplicate is admitted again.
//!
//! Runs when `PORTCULLIS_E2E_BIN` names the control plane's folder; skipped otherwise, except
//! under `CI=true`, where it fails.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::control_plane::{
    ControlPlane, PORTCULLIS, Portcullis, e2e_bin, eventually, stderr, write_serving_certs,
};
use common::fixture;

const CONFIG: &str = "\
apiVersion: config.gatekeeper.sh/v1alpha1
kind: Config
metadata:
  name: config
  namespace: gatekeeper-system
spec:
  match:
    - excludedNamespaces: [\"inventory-skipped\"]
      processes: [\"webhook\"]
  sync:
    syncOnly:
      - group: networking.k8s.io
        version: v1
        kind: Ingress
";

/// An Ingress `namespace/name` serving `host`.
fn ingress(namespace: &str, name: &str, host: &str) -> String {
    serde_json::json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"rules": [{"host": host, "http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": name, "port": {"number": 80}}},
        }]}}]},
    })
    .to_string()
}

/// A dry-run create of `object`: `Ok` when admitted, else kubectl's error.
fn dry_run(cluster: &ControlPlane, object: &str) -> Result<(), String> {
    let output = cluster.kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], object);
    if output.status.success() {
        Ok(())
    } else {
        Err(stderr(&output))
    }
}

/// The template and constraint of the inventory fixture and the Config, in one folder.
fn policy_folder(work: &Path) -> String {
    let folder = work.join("policies");
    std::fs::create_dir(&folder).unwrap();
    for file in [
        "templates/k8suniqueingresshost.yaml",
        "constraints/unique-ingress-host.yaml",
    ] {
        let from = fixture(&format!("gatekeeper/inventory/{file}"));
        std::fs::copy(&from, folder.join(from.file_name().unwrap())).unwrap();
    }
    std::fs::write(folder.join("config.yaml"), CONFIG).unwrap();
    folder.display().to_string()
}

#[test]
fn synced_ingresses_make_a_duplicate_host_denied() {
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    for namespace in ["inventory-shop", "inventory-blog", "inventory-skipped"] {
        cluster.kubectl_ok(&["create", "namespace", namespace]);
    }
    let work = tempfile::tempdir().unwrap();
    let certs = work.path().join("certs");
    write_serving_certs(&certs);
    let folder = policy_folder(work.path());
    let portcullis = Portcullis::start(&[
        "--tls-dir",
        certs.to_str().unwrap(),
        "--kubeconfig",
        &cluster.service_account_kubeconfig(work.path()),
        "--policies",
        &folder,
    ]);

    // With the base RBAC (namespaces) only, the Ingress watch is refused: not ready, saying so.
    cluster.kubectl_ok(&[
        "apply",
        "-f",
        &format!("{}/manifests/base/rbac.yaml", env!("CARGO_MANIFEST_DIR")),
    ]);
    eventually(
        "/readyz to wait for the Ingress watch",
        Duration::from_secs(60),
        || match portcullis.admin_get("/readyz") {
            Err(text)
                if text.contains(
                    "Gatekeeper inventory not listed yet: networking.k8s.io/v1 Ingress",
                ) =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        },
    );
    let ingress_series = "{api_version=\"networking.k8s.io/v1\",kind=\"Ingress\"}";
    let metric = |name: &str| {
        let text = portcullis.admin_get("/metrics").expect("/metrics");
        let prefix = format!("{name}{ingress_series} ");
        text.lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .map(|value| value.trim().parse::<f64>().expect("a number"))
    };
    eventually(
        "the refused watch to be counted",
        Duration::from_secs(60),
        || match metric("portcullis_inventory_watch_errors_total") {
            Some(errors) if errors >= 1.0 => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );

    let output = Command::new(PORTCULLIS)
        .args([
            "webhook-config",
            "--name",
            "portcullis",
            "--namespace",
            "portcullis",
        ])
        .args(["--url", &format!("https://{}", portcullis.webhook)])
        .arg("--ca-bundle")
        .arg(certs.join("ca.crt"))
        .args(["--failure-policy", "Fail", "--policies", &folder])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let generated = String::from_utf8(output.stdout).unwrap();
    assert!(
        generated.contains("name: portcullis-inventory-reader")
            && generated.contains("- ingresses"),
        "no RBAC for the synced kind:\n{generated}"
    );
    cluster.apply(&generated);
    eventually("Portcullis to be ready", Duration::from_secs(90), || {
        portcullis.admin_get("/readyz").map(drop)
    });

    cluster
        .kubectl_stdin(
            &["create", "-f", "-"],
            &ingress("inventory-shop", "store", "www.example.com"),
        )
        .status
        .success()
        .then_some(())
        .expect("the first Ingress is created");

    // The webhook configuration arrives through an informer, the Ingress through the watch.
    let duplicate = ingress("inventory-blog", "www-redirect", "www.example.com");
    let expected = "[unique-ingress-host] ingress host \"www.example.com\" is already used by \
                    ingress inventory-shop/store";
    eventually(
        "the duplicate host to be denied",
        Duration::from_secs(60),
        || match dry_run(&cluster, &duplicate) {
            Err(message) if message.contains(expected) => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    // Another host is admitted; so is the duplicate in the namespace the Config excludes from
    // the webhook.
    dry_run(
        &cluster,
        &ingress("inventory-blog", "docs", "docs.example.com"),
    )
    .expect("a unique host is admitted");
    dry_run(
        &cluster,
        &ingress("inventory-skipped", "www-copy", "www.example.com"),
    )
    .expect("the excluded namespace is not reviewed");
    assert_eq!(metric("portcullis_inventory_objects"), Some(1.0));

    // The Ingress deleted, the watch removes it from the inventory.
    cluster.kubectl_ok(&["delete", "ingress", "-n", "inventory-shop", "store"]);
    eventually(
        "the duplicate to be admitted once the first is gone",
        Duration::from_secs(60),
        || dry_run(&cluster, &duplicate),
    );
    assert_eq!(metric("portcullis_inventory_objects"), Some(0.0));
    let status = portcullis.terminate();
    assert!(status.success(), "{status:?}");
}

/// `Kind namespace/name` of each denied object in `audit`'s JSON output.
fn denied(results: &serde_json::Value) -> Vec<String> {
    let mut denied: Vec<String> = results
        .as_array()
        .expect("a JSON array")
        .iter()
        .filter(|r| r["allowed"] == false)
        .map(|r| {
            format!(
                "{} {}/{}",
                r["kind"].as_str().unwrap_or(""),
                r["namespace"].as_str().unwrap_or(""),
                r["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    denied.sort();
    denied
}

#[test]
fn audit_lists_the_synced_kinds_into_the_inventory_and_skips_excluded_namespaces() {
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    for namespace in ["inventory-shop", "inventory-blog", "inventory-unaudited"] {
        cluster.kubectl_ok(&["create", "namespace", namespace]);
    }
    for (namespace, name, host) in [
        ("inventory-shop", "store", "www.example.com"),
        ("inventory-blog", "www-redirect", "www.example.com"),
        ("inventory-blog", "docs", "docs.example.com"),
        ("inventory-unaudited", "www-copy", "www.example.com"),
    ] {
        let output = cluster.kubectl_stdin(&["create", "-f", "-"], &ingress(namespace, name, host));
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let work = tempfile::tempdir().unwrap();
    let folder = policy_folder(work.path());
    // Audit skips inventory-unaudited; its Ingress is still synced into the inventory.
    std::fs::write(
        Path::new(&folder).join("config.yaml"),
        CONFIG.replace(
            "[\"inventory-skipped\"]\n      processes: [\"webhook\"]",
            "[\"inventory-unaudited\"]\n      processes: [\"audit\"]",
        ),
    )
    .unwrap();
    let output = Command::new(PORTCULLIS)
        .args([
            "audit",
            "--kubeconfig",
            cluster.kubeconfig(),
            "--policies",
            &folder,
        ])
        .args(["--output", "json"])
        .env_remove("PORTCULLIS_NAMESPACE")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let results: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(
        denied(&results),
        [
            "Ingress inventory-blog/www-redirect",
            "Ingress inventory-shop/store",
        ]
    );
    let text = results.to_string();
    assert!(
        text.contains("is already used by ingress inventory-unaudited/www-copy"),
        "the audit-excluded Ingress is in the inventory: {text}"
    );
}
