//! End-to-end: admission policy parameters from the cluster. One ValidatingAdmissionPolicy with
//! `paramKind: ConfigMap` runs in-tree on a real kube-apiserver (bindings for namespace
//! `params-in-tree`) and in Portcullis (`serve --kubeconfig`, registered as a webhook; bindings
//! for namespace `params-portcullis`). The parameter ConfigMaps are created, edited and
//! deleted with kubectl in both namespaces; every probe (a dry-run ServiceAccount create) is
//! asked of both sides and the answers (allowed, status code, message) must agree: the
//! apiserver is the judge.
//!
//! Runs when `PORTCULLIS_E2E_BIN` names the control plane's folder; skipped otherwise, except
//! under `CI=true`, where it fails.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::control_plane::{
    ControlPlane, PORTCULLIS, Portcullis, e2e_bin, eventually, stderr, write_serving_certs,
};
use common::fixture;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::api::{Api, ObjectMeta, PostParams};

const IN_TREE: &str = "params-in-tree";
const PORTCULLIS_NAMESPACE: &str = "params-portcullis";

fn fixture_path(name: &str) -> String {
    fixture(&format!("e2e/params/{name}")).display().to_string()
}

/// One side's answer to a probe: allowed, or the status code and the policy's message (the
/// webhook's prefix removed, Portcullis's binding and namespace names read as the in-tree
/// ones).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Allowed,
    Denied { code: u16, message: String },
}

fn normalized(message: &str) -> String {
    let from_policy = message
        .find("ValidatingAdmissionPolicy '")
        .map_or(message, |at| &message[at..]);
    from_policy.replace("-portcullis", "-in-tree")
}

/// A dry-run create of ServiceAccount `name` in `namespace`.
async fn probe(client: &kube::Client, namespace: &str, name: &str) -> Answer {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match accounts.create(&params, &account).await {
        Ok(_) => Answer::Allowed,
        Err(kube::Error::Api(status)) => Answer::Denied {
            code: status.code,
            message: normalized(&status.message),
        },
        Err(other) => panic!("probe {namespace}/{name}: {other}"),
    }
}

/// Both sides' answers to `name`; they must agree.
async fn agreed(client: &kube::Client, name: &str) -> Result<Answer, String> {
    let in_tree = probe(client, IN_TREE, name).await;
    let portcullis = probe(client, PORTCULLIS_NAMESPACE, name).await;
    if in_tree == portcullis {
        Ok(in_tree)
    } else {
        Err(format!(
            "{name}: in-tree {in_tree:?}, Portcullis {portcullis:?}"
        ))
    }
}

fn denied(binding: &str, message: &str) -> Answer {
    // The apiserver answers a ValidatingAdmissionPolicy denial without a reason as Invalid.
    Answer::Denied {
        code: 422,
        message: format!(
            "ValidatingAdmissionPolicy 'params-prefix' with binding '{binding}' denied request: \
             {message}"
        ),
    }
}

fn by_name_denial(name: &str, prefix: &str) -> Answer {
    denied(
        "params-by-name-in-tree",
        &format!("name {name} starts with {prefix} (forbidden by ConfigMap naming)"),
    )
}

/// `portcullis webhook-config` for Portcullis at `portcullis`, its rules and RBAC drawn from
/// `policies`.
fn webhook_config(portcullis: &Portcullis, ca_bundle: &Path, policies: &[&str]) -> String {
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
        .arg(ca_bundle)
        .args(["--failure-policy", "Fail"])
        .args(policies.iter().flat_map(|p| ["--policies", p]))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    String::from_utf8(output.stdout).unwrap()
}

/// A policy folder with the policy and Portcullis's bindings, for `serve` to load and reload.
fn policy_folder(work: &Path) -> String {
    let folder = work.join("policies");
    std::fs::create_dir(&folder).unwrap();
    for file in [
        "policy.yaml",
        "portcullis-bindings.yaml",
        "missing-kind-portcullis.yaml",
    ] {
        std::fs::copy(fixture_path(file), folder.join(file)).unwrap();
    }
    folder.display().to_string()
}

/// Starts `serve` with the policies of `folder` against the cluster of `kubeconfig`.
fn start(kubeconfig: &str, certs: &Path, folder: &str) -> Portcullis {
    Portcullis::start(&[
        "--tls-dir",
        certs.to_str().unwrap(),
        "--kubeconfig",
        kubeconfig,
        "--policies",
        folder,
    ])
}

fn wait_until_ready(portcullis: &Portcullis) {
    eventually("Portcullis to be ready", Duration::from_secs(30), || {
        portcullis.admin_get("/readyz").map(drop)
    });
}

/// Starts `serve` as the cluster admin and waits until it is ready.
fn serve(cluster: &ControlPlane, certs: &Path, folder: &str) -> Portcullis {
    let portcullis = start(cluster.kubeconfig(), certs, folder);
    wait_until_ready(&portcullis);
    portcullis
}

/// Probes `name` on both sides until both give `expected`, within `deadline` of `since`.
/// Every answer before that must be `before` (the answer under the old parameters): no probe
/// may fail otherwise. Returns how long the change took to show on both sides.
async fn changes_within(
    client: &kube::Client,
    name: &str,
    before: &Answer,
    expected: &Answer,
    since: Instant,
    deadline: Duration,
) -> Duration {
    let mut seen = [false, false];
    loop {
        for (index, namespace) in [IN_TREE, PORTCULLIS_NAMESPACE].into_iter().enumerate() {
            let answer = probe(client, namespace, name).await;
            if answer == *expected {
                seen[index] = true;
            } else {
                assert!(
                    !seen[index] && answer == *before,
                    "{namespace}/{name}: unexpected answer {answer:?} (expected {before:?} then \
                     {expected:?})"
                );
            }
        }
        if seen == [true, true] {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < deadline,
            "{name}: not changed to {expected:?} within {deadline:?} (in-tree {}, Portcullis {})",
            seen[0],
            seen[1]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn params_from_config_maps_agree_with_the_apiserver() {
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    let client = cluster.client().await;
    for namespace in [IN_TREE, PORTCULLIS_NAMESPACE] {
        cluster.kubectl_ok(&["create", "namespace", namespace]);
        cluster.kubectl_ok(&[
            "create",
            "-n",
            namespace,
            "-f",
            &fixture_path("params.yaml"),
        ]);
    }
    cluster.kubectl_ok(&[
        "apply",
        "-f",
        &fixture_path("policy.yaml"),
        "-f",
        &fixture_path("in-tree-bindings.yaml"),
        "-f",
        &fixture_path("missing-kind-in-tree.yaml"),
    ]);
    let work = tempfile::tempdir().unwrap();
    let certs = work.path().join("certs");
    write_serving_certs(&certs);
    // Portcullis as its ServiceAccount, with the RBAC of manifests/base (namespaces) and what
    // `webhook-config` prints for the policies (the param watch's), nothing else.
    let folder = policy_folder(work.path());
    let portcullis = start(
        &cluster.service_account_kubeconfig(work.path()),
        &certs,
        &folder,
    );
    let generated = webhook_config(&portcullis, &certs.join("ca.crt"), &[&folder]);
    assert!(
        generated.contains("kind: ClusterRole\n")
            && generated.contains("- configmaps")
            && generated.contains("- watch"),
        "no RBAC for the param kind:\n{generated}"
    );
    cluster.kubectl_ok(&[
        "apply",
        "-f",
        &format!("{}/manifests/base/rbac.yaml", env!("CARGO_MANIFEST_DIR")),
    ]);
    cluster.apply(&generated);
    wait_until_ready(&portcullis);
    // The in-tree policy and the webhook configuration arrive through informers.
    let bad = by_name_denial("bad-1", "bad-");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let last = match agreed(&client, "bad-1").await {
            Ok(answer) if answer == bad => break,
            Ok(answer) => format!("{answer:?}"),
            Err(disagreement) => disagreement,
        };
        assert!(
            Instant::now() < deadline,
            "timed out waiting for both sides to answer; last: {last}"
        );
        // Poll cadence only: the loop ends on the answer, not on time.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // By name, by selector (each matching ConfigMap evaluated), and allowed.
    let rule = |name: &str, prefix: &str, config_map: &str| {
        denied(
            "params-by-selector-in-tree",
            &format!("name {name} starts with {prefix} (forbidden by ConfigMap {config_map})"),
        )
    };
    for (name, expected) in [
        ("bad-1", bad.clone()),
        ("aa-1", rule("aa-1", "aa-", "rule-a")),
        ("bb-1", rule("bb-1", "bb-", "rule-b")),
        ("ok-1", Answer::Allowed),
    ] {
        let answer = agreed(&client, name).await.unwrap();
        assert_eq!(answer, expected, "{name}");
    }

    // A paramKind the cluster does not serve: the policy fails to configure.
    assert_eq!(
        agreed(&client, "missing-kind-probe").await.unwrap(),
        Answer::Denied {
            code: 422,
            message: "ValidatingAdmissionPolicy 'params-missing-kind-in-tree' denied request: \
                      failed to configure policy: failed to find resource referenced by \
                      paramKind: 'rules.example.com/v1, Kind=Nothing'"
                .into(),
        }
    );

    // An edit with kubectl changes both answers within a second, no probe failing meanwhile.
    for namespace in [IN_TREE, PORTCULLIS_NAMESPACE] {
        cluster.kubectl_ok(&[
            "patch",
            "configmap",
            "naming",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            r#"{"data":{"forbiddenPrefix":"ok-"}}"#,
        ]);
    }
    let edited = Instant::now();
    let took = changes_within(
        &client,
        "ok-1",
        &Answer::Allowed,
        &by_name_denial("ok-1", "ok-"),
        edited,
        Duration::from_secs(1),
    )
    .await;
    eprintln!("e2e: the edited ConfigMap changed both answers after {took:?}");
    assert_eq!(agreed(&client, "bad-1").await.unwrap(), Answer::Allowed);

    // Deleted: parameterNotFoundAction Deny (by name), Allow (by selector).
    for namespace in [IN_TREE, PORTCULLIS_NAMESPACE] {
        cluster.kubectl_ok(&["delete", "configmap", "naming", "-n", namespace]);
    }
    let not_found = denied(
        "params-by-name-in-tree",
        "failed to configure binding: no params found for policy binding with `Deny` \
         parameterNotFoundAction",
    );
    let took = changes_within(
        &client,
        "ok-2",
        &by_name_denial("ok-2", "ok-"),
        &not_found,
        Instant::now(),
        Duration::from_secs(1),
    )
    .await;
    eprintln!("e2e: the deleted ConfigMap changed both answers after {took:?}");
    for namespace in [IN_TREE, PORTCULLIS_NAMESPACE] {
        cluster.kubectl_ok(&["apply", "-n", namespace, "-f", &fixture_path("params.yaml")]);
        cluster.kubectl_ok(&["delete", "configmap", "rule-a", "rule-b", "-n", namespace]);
    }
    // No ConfigMap matches the selector any more: Allow; `naming` is back.
    let took = changes_within(
        &client,
        "aa-2",
        &rule("aa-2", "aa-", "rule-a"),
        &Answer::Allowed,
        Instant::now(),
        Duration::from_secs(1),
    )
    .await;
    eprintln!("e2e: the deleted selected ConfigMaps changed both answers after {took:?}");
    assert_eq!(
        agreed(&client, "bad-2").await.unwrap(),
        by_name_denial("bad-2", "bad-")
    );

    // A policy reload adds a policy whose paramKind is Secret: Portcullis starts its watch
    // (with the RBAC webhook-config now prints) and decides as the in-tree policy does.
    for namespace in [IN_TREE, PORTCULLIS_NAMESPACE] {
        cluster.kubectl_ok(&[
            "create",
            "secret",
            "generic",
            "reload-secret",
            "-n",
            namespace,
        ]);
        cluster.kubectl_ok(&[
            "label",
            "secret",
            "reload-secret",
            "-n",
            namespace,
            "forbidden-prefix=zz",
        ]);
    }
    let reload_policy = fixture_path("reload/policy.yaml");
    let reload_binding = fixture_path("reload/portcullis-binding.yaml");
    let generated = webhook_config(
        &portcullis,
        &certs.join("ca.crt"),
        &[&folder, &reload_policy, &reload_binding],
    );
    assert!(generated.contains("- secrets"), "{generated}");
    cluster.apply(&generated);
    cluster.kubectl_ok(&[
        "apply",
        "-f",
        &reload_policy,
        "-f",
        &fixture_path("reload/in-tree-binding.yaml"),
    ]);
    let folder = Path::new(&folder);
    std::fs::copy(&reload_policy, folder.join("reload-policy.yaml")).unwrap();
    std::fs::copy(&reload_binding, folder.join("reload-binding.yaml")).unwrap();
    let reloaded = Answer::Denied {
        code: 422,
        message: "ValidatingAdmissionPolicy 'params-reload' with binding 'params-reload-in-tree' \
                  denied request: name zz-1 starts with zz (forbidden by Secret reload-secret)"
            .into(),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let last = match agreed(&client, "zz-1").await {
            Ok(answer) if answer == reloaded => break,
            Ok(answer) => format!("{answer:?}"),
            Err(disagreement) => disagreement,
        };
        assert!(
            Instant::now() < deadline,
            "timed out waiting for the reloaded policy on both sides; last: {last}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(portcullis);
}

/// Resident memory of Portcullis watching every ConfigMap of the cluster, with none and with
/// 10,000 more (each with 5 short keys), each measured after a fresh start is ready (the first
/// list complete). One run; the numbers are in docs/benchmarks.md. Run with
/// `cargo test --release --test params_e2e -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: creates 10,000 ConfigMaps"]
async fn param_watch_memory_with_10000_config_maps() {
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    let client = cluster.client().await;
    let work = tempfile::tempdir().unwrap();
    let certs = work.path().join("certs");
    write_serving_certs(&certs);

    let folder = policy_folder(work.path());
    let before = serve(&cluster, &certs, &folder);
    let rss_before = resident_kib(&before);
    drop(before);

    let namespaces = 10;
    let per_namespace = 1_000;
    for index in 0..namespaces {
        cluster.kubectl_ok(&["create", "namespace", &format!("bulk-{index}")]);
    }
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..16 {
        let client = client.clone();
        tasks.spawn(async move {
            let mut item = worker;
            while item < namespaces * per_namespace {
                let namespace = format!("bulk-{}", item / per_namespace);
                let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
                let config_map = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(format!("settings-{item}")),
                        labels: Some([("app".to_owned(), "bulk".to_owned())].into()),
                        ..ObjectMeta::default()
                    },
                    data: Some(
                        (0..5)
                            .map(|key| (format!("key-{key}"), format!("value-{item}-{key}")))
                            .collect(),
                    ),
                    ..ConfigMap::default()
                };
                config_maps
                    .create(&PostParams::default(), &config_map)
                    .await
                    .unwrap();
                item += 16;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    eprintln!(
        "bench: created {} ConfigMaps in {:?}",
        namespaces * per_namespace,
        started.elapsed()
    );

    let started = Instant::now();
    let after = serve(&cluster, &certs, &folder);
    let ready_after = started.elapsed();
    let rss_after = resident_kib(&after);
    eprintln!(
        "bench: Portcullis RSS watching all ConfigMaps: {rss_before} KiB with none, \
         {rss_after} KiB with 10,000 (ready {ready_after:?} after start); \
         {} bytes per ConfigMap",
        (rss_after.saturating_sub(rss_before)) * 1024 / 10_000
    );
}

fn resident_kib(portcullis: &Portcullis) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", portcullis.child.id())).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A MutatingAdmissionPolicy reads its ConfigMap parameter as the in-tree one does: the
/// annotations it writes from `params` agree, for the same ConfigMap in each side's namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_policy_params_agree_with_the_apiserver() {
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    let client = cluster.client().await;
    let sides = ["params-map-in-tree", "params-map-portcullis"];
    for namespace in sides {
        cluster.kubectl_ok(&["create", "namespace", namespace]);
        cluster.kubectl_ok(&[
            "create",
            "configmap",
            "map-params",
            "-n",
            namespace,
            "--from-literal=value=first",
        ]);
    }
    let policy = fixture_path("map/policy.yaml");
    cluster.kubectl_ok(&[
        "apply",
        "-f",
        &policy,
        "-f",
        &fixture_path("map/in-tree-binding.yaml"),
    ]);
    let work = tempfile::tempdir().unwrap();
    let certs = work.path().join("certs");
    write_serving_certs(&certs);
    let folder = work.path().join("policies");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(&policy, folder.join("policy.yaml")).unwrap();
    std::fs::copy(
        fixture_path("map/portcullis-binding.yaml"),
        folder.join("binding.yaml"),
    )
    .unwrap();
    let folder = folder.display().to_string();
    let portcullis = serve(&cluster, &certs, &folder);
    cluster.apply(&webhook_config(
        &portcullis,
        &certs.join("ca.crt"),
        &[&folder],
    ));

    let annotations = |namespace: &'static str| {
        let client = client.clone();
        async move {
            let accounts: Api<ServiceAccount> = Api::namespaced(client, namespace);
            let account = ServiceAccount {
                metadata: ObjectMeta {
                    name: Some("probe".into()),
                    ..ObjectMeta::default()
                },
                ..ServiceAccount::default()
            };
            let params = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            accounts
                .create(&params, &account)
                .await
                .map(|created| created.metadata.annotations.unwrap_or_default())
                .map_err(|error| error.to_string())
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let agreed = loop {
        let in_tree = annotations(sides[0]).await;
        let from_portcullis = annotations(sides[1]).await;
        match (&in_tree, &from_portcullis) {
            (Ok(a), Ok(b)) if !a.is_empty() && a == b => break a.clone(),
            _ => assert!(
                Instant::now() < deadline,
                "in-tree {in_tree:?}, Portcullis {from_portcullis:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!("e2e: MutatingAdmissionPolicy params as both sides read them: {agreed:?}");
    assert_eq!(agreed["params-value"], "first");
    assert_eq!(agreed["params-name"], "map-params");
}
