//! `serve` with a cluster it cannot read: the namespace of a request is read before deciding it
//! (the watch never lists), the read fails, and each admission path answers as the
//! kube-apiserver v1.37 answers when its own read fails, instead of taking the namespace for
//! one without labels. The cluster here is a loopback port nothing listens on (connection
//! refused), as for `serve --kubeconfig` pointing at an apiserver that is down; and, with the
//! e2e control plane (PORTCULLIS_E2E_BIN), a real kube-apiserver whose RBAC forbids
//! Portcullis's ServiceAccount to get namespaces, or (listing them allowed) parameter objects.

mod common;

use std::net::TcpListener;
use std::sync::Arc;

use common::control_plane::{ControlPlane, e2e_bin};
use common::{body_bytes, fixture, post_json, read_fixture};
use portcullis::cluster::NamespaceCache;
use portcullis::cluster::params::ClusterParams;
use portcullis::commands::load_engine;
use portcullis::engine::NamespaceLookup;
use portcullis::engine::pod_security::ERROR_ANNOTATION;
use portcullis::server::{AppState, OnError, RequestSettings, webhook_router};
use serde_json::Value;
use tower::ServiceExt;

/// A client of an apiserver at a loopback port that refuses connections.
fn unreachable_cluster() -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Bound then closed: nothing listens there afterwards.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("https://127.0.0.1:{port}").parse().unwrap();
    kube::Client::try_from(kube::Config::new(url)).unwrap()
}

/// The answer of `/validate` to `review` with `policies`, served with a cluster that cannot be
/// read, and `on_error`.
async fn answer(policies: &[&str], review: &str, on_error: OnError) -> Value {
    answer_with(unreachable_cluster(), policies, review, on_error).await
}

/// [`answer`] with the cluster of `client`.
async fn answer_with(
    client: kube::Client,
    policies: &[&str],
    review: &str,
    on_error: OnError,
) -> Value {
    let paths: Vec<_> = policies
        .iter()
        .map(|name| fixture(&format!("cluster-read-failures/{name}")))
        .collect();
    let engine = load_engine(&paths).unwrap();
    let settings = RequestSettings {
        on_error,
        ..RequestSettings::default()
    };
    let mut state = AppState::new(engine, settings);
    let (namespaces, watch) = NamespaceCache::spawn(client, state.metrics.namespace_reads.clone());
    state.namespaces = Arc::new(namespaces.clone());
    let body = read_fixture(&format!("cluster-read-failures/{review}"));
    let response = webhook_router(state)
        .oneshot(post_json("/validate", body))
        .await
        .unwrap();
    let review: Value = serde_json::from_slice(&body_bytes(response).await).unwrap();
    assert!(!namespaces.is_synced(), "the watch never lists");
    assert!(
        namespaces.read_failure("shop").is_some(),
        "the request's namespace was read, and the read failed"
    );
    watch.abort();
    review["response"].clone()
}

/// The start of what kube-rs says of a refused connection to `/api/v1/namespaces/shop`.
const REFUSED: &str = "Get \"/api/v1/namespaces/shop\": ";

#[tokio::test]
async fn a_binding_selecting_namespaces_by_label_fails_closed_under_fail() {
    let response = answer(&["selector-fail.yaml"], "pod-create.json", OnError::Deny).await;
    assert_eq!(response["allowed"], false, "{response}");
    // A configuration error of a binding is answered as the apiserver answers a validation
    // without a reason.
    assert_eq!(response["status"]["code"], 422, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    let expected = format!(
        "ValidatingAdmissionPolicy 'team-pods' with binding 'team-pods' denied request: \
         failed to configure binding: Internal error occurred: {REFUSED}"
    );
    assert!(message.starts_with(&expected), "{message}");
}

#[tokio::test]
async fn the_same_binding_under_ignore_is_ignored() {
    let response = answer(&["selector-ignore.yaml"], "pod-create.json", OnError::Deny).await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn a_matching_binding_fails_the_request_with_the_read_whatever_the_failure_policy() {
    let response = answer(
        &["no-selector-ignore.yaml"],
        "pod-create.json",
        OnError::Allow,
    )
    .await;
    assert_eq!(response["allowed"], false, "{response}");
    // Not a Status from the API: the apiserver answers 500 with reason Unknown (empty).
    assert_eq!(response["status"]["code"], 500, "{response}");
    assert_eq!(response["status"]["reason"].as_str().unwrap_or(""), "");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.starts_with(REFUSED), "{message}");
}

#[tokio::test]
async fn pod_security_refuses_a_pod_and_annotates_the_error() {
    let response = answer(&["pod-security.yaml"], "pod-create.json", OnError::Allow).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 500, "{response}");
    assert_eq!(response["status"]["reason"], "InternalError", "{response}");
    assert_eq!(
        response["status"]["message"],
        "[pod-security/enforce] Internal error occurred: failed to lookup namespace \"shop\"",
    );
    let error = response["auditAnnotations"][ERROR_ANNOTATION]
        .as_str()
        .unwrap_or_default();
    assert!(
        error.starts_with(&format!(
            "Internal error occurred: failed to lookup namespace \"shop\": {REFUSED}"
        )),
        "{response}"
    );
}

#[tokio::test]
async fn pod_security_admits_a_workload_and_annotates_the_error() {
    let response = answer(
        &["pod-security.yaml"],
        "deployment-update.json",
        OnError::Deny,
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    let error = response["auditAnnotations"][ERROR_ANNOTATION]
        .as_str()
        .unwrap_or_default();
    assert!(
        error.starts_with(&format!("failed to lookup namespace \"shop\": {REFUSED}")),
        "{response}"
    );
}

#[tokio::test]
async fn a_native_policy_selecting_namespaces_gets_the_on_error_answer() {
    let denied = answer(&["native-selector.yaml"], "pod-create.json", OnError::Deny).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    assert_eq!(denied["status"]["code"], 500, "{denied}");
    let message = denied["status"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("namespace \"shop\" could not be read: {REFUSED}")),
        "{message}"
    );
    let allowed = answer(&["native-selector.yaml"], "pod-create.json", OnError::Allow).await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    assert!(
        !allowed["warnings"].as_array().unwrap().is_empty(),
        "{allowed}"
    );
}

/// A client of `cluster` that impersonates ServiceAccount portcullis/portcullis, which no RBAC
/// allows anything.
async fn service_account_client(cluster: &ControlPlane) -> kube::Client {
    let mut kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig()).unwrap();
    for user in &mut kubeconfig.auth_infos {
        if let Some(auth) = user.auth_info.as_mut() {
            auth.impersonate = Some("system:serviceaccount:portcullis:portcullis".into());
        }
    }
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_the_apiservers_rbac_forbids_is_answered_in_its_words() {
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    cluster.kubectl_ok(&["create", "namespace", "shop"]);
    let forbidden = "namespaces \"shop\" is forbidden: User \
        \"system:serviceaccount:portcullis:portcullis\" cannot get resource \"namespaces\" in \
        API group \"\" in the namespace \"shop\"";

    let client = service_account_client(&cluster).await;
    let response = answer_with(
        client,
        &["selector-fail.yaml"],
        "pod-create.json",
        OnError::Deny,
    )
    .await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        response["status"]["message"],
        format!(
            "ValidatingAdmissionPolicy 'team-pods' with binding 'team-pods' denied request: \
             failed to configure binding: Internal error occurred: {forbidden}"
        )
    );

    // The API's Status as it is, whatever the failurePolicy.
    let client = service_account_client(&cluster).await;
    let response = answer_with(
        client,
        &["no-selector-ignore.yaml"],
        "pod-create.json",
        OnError::Allow,
    )
    .await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 403, "{response}");
    assert_eq!(response["status"]["reason"], "Forbidden", "{response}");
    assert_eq!(response["status"]["message"], forbidden);

    let client = service_account_client(&cluster).await;
    let response = answer_with(
        client,
        &["pod-security.yaml"],
        "pod-create.json",
        OnError::Allow,
    )
    .await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        response["auditAnnotations"][ERROR_ANNOTATION],
        format!("Internal error occurred: failed to lookup namespace \"shop\": {forbidden}")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_param_read_the_apiservers_rbac_forbids_is_the_bindings_error() {
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    cluster.kubectl_ok(&["create", "namespace", "shop"]);
    // Namespaces as manifests/base grants them; ConfigMaps in shop listed and watched, never got.
    let rbac = format!("{}/manifests/base/rbac.yaml", env!("CARGO_MANIFEST_DIR"));
    cluster.kubectl_ok(&["apply", "-f", &rbac]);
    cluster.kubectl_ok(&[
        "create",
        "role",
        "list-config-maps",
        "-n",
        "shop",
        "--verb=list,watch",
        "--resource=configmaps",
    ]);
    cluster.kubectl_ok(&[
        "create",
        "rolebinding",
        "list-config-maps",
        "-n",
        "shop",
        "--role=list-config-maps",
        "--serviceaccount=portcullis:portcullis",
    ]);
    let client = service_account_client(&cluster).await;
    let engine = load_engine(&[fixture("cluster-read-failures/params-fail.yaml")]).unwrap();
    let mut state = AppState::new(engine, RequestSettings::default());
    let (params, params_task) = ClusterParams::spawn(
        client.clone(),
        state.engine.clone(),
        Arc::new(tokio::sync::Notify::new()),
        state.metrics.param_reads.clone(),
    );
    let (namespaces, namespaces_task) =
        NamespaceCache::spawn(client, state.metrics.namespace_reads.clone());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while params.readiness().is_err() || !namespaces.is_synced() {
        assert!(
            std::time::Instant::now() < deadline,
            "not listed: {:?}",
            params.readiness()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    state.namespaces = Arc::new(namespaces);
    state.params = Some(Arc::new(params));

    let body = read_fixture("cluster-read-failures/pod-create.json");
    let response = webhook_router(state)
        .oneshot(post_json("/validate", body))
        .await
        .unwrap();
    let review: Value = serde_json::from_slice(&body_bytes(response).await).unwrap();
    params_task.abort();
    namespaces_task.abort();
    assert_eq!(review["response"]["allowed"], false, "{review}");
    assert_eq!(
        review["response"]["status"]["message"],
        "ValidatingAdmissionPolicy 'limits' with binding 'limits' denied request: failed to \
         configure binding: configmaps \"limits\" is forbidden: User \
         \"system:serviceaccount:portcullis:portcullis\" cannot get resource \"configmaps\" in \
         API group \"\" in the namespace \"shop\""
    );
}
