//! Gatekeeper's `Config` under `serve`, without a cluster: the webhook router decides with the
//! `data.inventory` in `AppState::inventory` (what the cluster's watches of the Config's
//! `syncOnly` kinds publish), and admits a request in a namespace the Config excludes from the
//! `webhook` process without evaluating any constraint. `check` ignores the Config, as `gator`
//! does.

mod common;

use std::sync::Arc;

use common::{body_bytes, fixture, post_json};
use portcullis::commands::load_engine;
use portcullis::engine::gatekeeper::Inventory;
use portcullis::server::{AppState, RequestSettings, webhook_router};
use serde_json::{Value, json};
use tower::ServiceExt;

const CONFIG: &str = "\
apiVersion: config.gatekeeper.sh/v1alpha1
kind: Config
metadata: {name: config, namespace: gatekeeper-system}
spec:
  match:
    - excludedNamespaces: [\"skip-*\"]
      processes: [\"webhook\"]
  sync:
    syncOnly:
      - {group: networking.k8s.io, version: v1, kind: Ingress}
";

fn ingress(namespace: &str, name: &str, host: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"rules": [{"host": host}]},
    })
}

fn review(object: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3f1e2d4c-0000-4000-8000-000000000001",
            "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
            "resource": {"group": "networking.k8s.io", "version": "v1", "resource": "ingresses"},
            "namespace": object["metadata"]["namespace"],
            "name": object["metadata"]["name"],
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": object,
        },
    })
}

/// The template and constraint of the inventory fixture and the Config, in one folder.
fn policies() -> tempfile::TempDir {
    let folder = tempfile::tempdir().unwrap();
    for file in [
        "templates/k8suniqueingresshost.yaml",
        "constraints/unique-ingress-host.yaml",
    ] {
        let from = fixture(&format!("gatekeeper/inventory/{file}"));
        std::fs::copy(&from, folder.path().join(from.file_name().unwrap())).unwrap();
    }
    std::fs::write(folder.path().join("config.yaml"), CONFIG).unwrap();
    folder
}

async fn answer(state: AppState, object: &Value) -> Value {
    let router = webhook_router(state);
    let body = serde_json::to_vec(&review(object)).unwrap();
    let response = router.oneshot(post_json("/validate", body)).await.unwrap();
    let review: Value = serde_json::from_slice(&body_bytes(response).await).unwrap();
    review["response"].clone()
}

#[tokio::test]
async fn the_published_inventory_decides_and_excluded_namespaces_are_not_reviewed() {
    let folder = policies();
    let engine = load_engine(&[folder.path().to_owned()]).unwrap();
    let sync = engine.gatekeeper_sync();
    assert_eq!(sync.kinds.len(), 1);
    let state = AppState::new(engine, RequestSettings::default());
    let existing = ingress("shop", "store", "www.example.com");
    let duplicate = ingress("blog", "www-redirect", "www.example.com");

    // Nothing published (no cluster): no inventory, nothing to compare against.
    let response = answer(state.clone(), &duplicate).await;
    assert_eq!(response["allowed"], true, "{response}");

    state
        .inventory
        .store(Some(Arc::new(Inventory::of([&existing]))));
    let response = answer(state.clone(), &duplicate).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        response["status"]["message"],
        "[unique-ingress-host] ingress host \"www.example.com\" is already used by ingress \
         shop/store"
    );
    // The Config excludes skip-* from the webhook: admitted, no constraint evaluated.
    let response = answer(
        state.clone(),
        &ingress("skip-me", "copy", "www.example.com"),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("warnings").is_none(), "{response}");
}

#[test]
fn check_ignores_the_config_as_gator_does() {
    let folder = policies();
    let manifests = tempfile::tempdir().unwrap();
    let file = manifests.path().join("ingresses.yaml");
    let documents: Vec<String> = [
        ingress("shop", "store", "www.example.com"),
        ingress("skip-me", "copy", "www.example.com"),
    ]
    .iter()
    .map(|o| serde_json::to_string(o).unwrap())
    .collect();
    std::fs::write(&file, documents.join("\n---\n")).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("check")
        .arg("--policies")
        .arg(folder.path())
        .args(["--output", "json"])
        .arg(&file)
        .output()
        .unwrap();
    let results: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let denied: Vec<&str> = results
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["allowed"] == false)
        .map(|r| r["namespace"].as_str().unwrap_or(""))
        .collect();
    // Each Ingress sees the other in the inventory of the objects given; skip-me is reviewed.
    assert_eq!(denied, ["shop", "skip-me"], "{results}");
}
