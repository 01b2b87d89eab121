//! End-to-end: a real kube-apiserver and etcd on loopback (built from Go modules by
//! `e2e/build-controlplane.sh`, started by `e2e/start-controlplane.sh`) calling the real
//! `portcullis` binary through webhook configurations printed by `portcullis webhook-config`.
//!
//! Runs when `PORTCULLIS_E2E_BIN` names the folder with `etcd`, `kube-apiserver` and
//! `kubectl` (`make test` and `make e2e` set it). Without it the test is skipped with a
//! message, except under `CI=true`, where it fails.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::control_plane::{
    ControlPlane, PORTCULLIS, Portcullis, comparable, e2e_bin, e2e_bin_old, eventually, stderr,
    write_serving_certs,
};
use common::fixture;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn fixture_path(name: &str) -> String {
    fixture(&format!("e2e/{name}")).display().to_string()
}

/// Lays out `dir` as kubelet does for a mounted Secret or ConfigMap: the files are links
/// through `..data`, which points at a timestamped folder and is replaced atomically.
fn publish(dir: &Path, version: &str, files: &[(&str, &Path)]) {
    let payload = dir.join(format!("..{version}"));
    std::fs::create_dir(&payload).unwrap();
    for (name, source) in files {
        std::fs::copy(source, payload.join(name)).unwrap();
    }
    let staged = dir.join("..data_tmp");
    std::os::unix::fs::symlink(format!("..{version}"), &staged).unwrap();
    std::fs::rename(&staged, dir.join("..data")).unwrap();
    for (name, _) in files {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &link).unwrap();
        }
    }
}

fn publish_secret(dir: &Path, version: &str, cert: &Path, key: &Path) {
    publish(dir, version, &[("tls.crt", cert), ("tls.key", key)]);
}

/// `portcullis webhook-config` for Portcullis at `webhook`, its rules drawn from `policies`
/// (files or folders; none: the built-in set).
fn webhook_config(
    webhook: SocketAddr,
    ca_bundle: &Path,
    failure_policy: &str,
    policies: &[&str],
) -> String {
    let output = Command::new(PORTCULLIS)
        .args([
            "webhook-config",
            "--name",
            "e2e",
            "--namespace",
            "portcullis",
        ])
        .args(["--url", &format!("https://{webhook}")])
        .arg("--ca-bundle")
        .arg(ca_bundle)
        .args(["--failure-policy", failure_policy, "--timeout-seconds", "5"])
        .args(policies.iter().flat_map(|policy| ["--policies", policy]))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn end_to_end() {
    let Some(bin) = e2e_bin() else { return };
    end_to_end_on(&bin);
}

/// The same run on the older apiserver (`PORTCULLIS_E2E_BIN_OLD`, v1.30): a privileged Pod
/// refused, warnings in kubectl's stderr, the patch's defaults stored, certificate and policy
/// reloads without a failed admission, the manifests and webhook configurations accepted, and
/// no lockout with Portcullis stopped.
#[test]
fn end_to_end_on_the_older_apiserver() {
    let Some(bin) = e2e_bin_old() else { return };
    end_to_end_on(&bin);
}

fn end_to_end_on(bin: &Path) {
    let started = Instant::now();
    let cluster = ControlPlane::start(bin);
    let version = cluster.server_version();
    eprintln!("e2e: kube-apiserver {version}");
    let work = tempfile::tempdir().unwrap();
    let (first, second) = (work.path().join("first"), work.path().join("second"));
    write_serving_certs(&first);
    write_serving_certs(&second);
    let bundle = work.path().join("ca-bundle.crt");
    let mut pem = std::fs::read_to_string(first.join("ca.crt")).unwrap();
    pem.push_str(&std::fs::read_to_string(second.join("ca.crt")).unwrap());
    std::fs::write(&bundle, pem).unwrap();
    let secret = work.path().join("tls");
    std::fs::create_dir(&secret).unwrap();
    publish_secret(
        &secret,
        "first",
        &first.join("tls.crt"),
        &first.join("tls.key"),
    );

    let portcullis = Portcullis::start(&[
        "--tls-dir",
        secret.to_str().unwrap(),
        "--kubeconfig",
        cluster.kubeconfig(),
    ]);
    cluster.apply(&webhook_config(portcullis.webhook, &bundle, "Fail", &[]));
    for namespace in ["e2e", "portcullis"] {
        cluster.kubectl_ok(&["create", "namespace", namespace]);
    }
    let privileged = fixture_path("pod-privileged.yaml");
    eventually("the webhook to be active", Duration::from_secs(60), || {
        let output = cluster.dry_run_create("e2e", &privileged);
        let message = stderr(&output);
        message
            .contains("denied the request")
            .then_some(())
            .ok_or(message)
    });
    eprintln!(
        "e2e ({version}): control plane and webhook ready after {:?}",
        started.elapsed()
    );

    // A non-compliant Pod is refused, naming the rule.
    let refused = cluster.kubectl(&["create", "-n", "e2e", "-f", &privileged]);
    assert!(!refused.status.success());
    let message = stderr(&refused);
    assert!(
        message.contains(r#"admission webhook "validate.e2e.portcullis.dev" denied the request: [pod-security/enforce] violates PodSecurity "baseline:latest": privileged (container "shell" must not set securityContext.privileged=true)"#),
        "{message}"
    );

    // Pod Security warns about workloads, as the in-tree admission does.
    let deployment = cluster.kubectl(&[
        "apply",
        "-n",
        "e2e",
        "-f",
        &fixture_path("deployment-privileged.yaml"),
    ]);
    assert!(deployment.status.success(), "{}", stderr(&deployment));
    assert!(
        stderr(&deployment)
            .contains(r#"Warning: would violate PodSecurity "restricted:latest": privileged"#),
        "{}",
        stderr(&deployment)
    );

    // Namespace labels from the watch cache override the defaults.
    cluster.kubectl_ok(&["create", "namespace", "locked"]);
    cluster.kubectl_ok(&[
        "label",
        "namespace",
        "locked",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    eventually(
        "the namespace label to reach Portcullis",
        Duration::from_secs(30),
        || {
            let output = cluster.dry_run_create("locked", &compliant_path());
            let message = stderr(&output);
            message
                .contains(r#"[pod-security/enforce] violates PodSecurity "restricted:latest""#)
                .then_some(())
                .ok_or(message)
        },
    );

    // Warnings reach kubectl's stderr; the request succeeds.
    let warned = cluster.kubectl(&[
        "create",
        "-n",
        "e2e",
        "-f",
        &fixture_path("pod-latest.yaml"),
    ]);
    assert!(warned.status.success(), "{}", stderr(&warned));
    assert!(
        stderr(&warned).contains(r#"Warning: [builtin-image-tags/pinned] spec.containers[0].image: container "web" image "nginx:latest" must have a tag other than latest"#),
        "{}",
        stderr(&warned)
    );

    // Dry-run is decided and stores nothing.
    let compliant = compliant_path();
    let dry = cluster.dry_run_create("e2e", &compliant);
    assert!(dry.status.success(), "{}", stderr(&dry));
    let missing = cluster.kubectl(&["get", "pod", "-n", "e2e", "compliant"]);
    assert!(
        stderr(&missing).contains("NotFound"),
        "{}",
        stderr(&missing)
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let pods: Api<Pod> = Api::namespaced(cluster.client().await, "e2e");

        // The apiserver accepts our patch: the stored Pod carries the defaults.
        let mut pod: Pod =
            serde_norway::from_str(&std::fs::read_to_string(&compliant).unwrap()).unwrap();
        pod.metadata.name = Some("defaulted".into());
        let created = pods.create(&PostParams::default(), &pod).await.unwrap();
        let seccomp = created
            .spec
            .as_ref()
            .unwrap()
            .security_context
            .as_ref()
            .unwrap();
        assert_eq!(
            seccomp.seccomp_profile.as_ref().unwrap().type_,
            "RuntimeDefault"
        );

        // Rotation while the apiserver keeps sending: zero failed admissions.
        let mut failures = Vec::new();
        let mut after_reload = 0;
        let mut rotated = false;
        for i in 0..300 {
            let mut pod = pod.clone();
            pod.metadata.name = Some(format!("rotation-{i}"));
            if let Err(error) = pods.create(&PostParams::default(), &pod).await {
                failures.push(error.to_string());
            }
            if i == 50 {
                publish_secret(
                    &secret,
                    "second",
                    &second.join("tls.crt"),
                    &second.join("tls.key"),
                );
                rotated = true;
            }
            if rotated
                && portcullis
                    .metrics()
                    .contains(r#"portcullis_reloads_total{component="tls",result="success"} 1"#)
            {
                after_reload += 1;
                if after_reload >= 50 {
                    break;
                }
            }
        }
        assert!(
            failures.is_empty(),
            "failed admissions during rotation: {failures:?}"
        );
        assert!(
            after_reload >= 50,
            "the certificate was not reloaded in time"
        );
    });

    // Manifests are accepted by this apiserver.
    check_manifests(&cluster, work.path());

    let status = portcullis.terminate();
    assert!(
        status.success(),
        "portcullis exits 0 on SIGTERM: {status:?}"
    );

    // Policy files: a native Deny rule refuses a Deployment at apply, naming the template
    // path; a hot reload that turns it into a warning changes the apiserver's answer, while
    // Pod creates keep succeeding.
    let policies = work.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    let v1 = fixture("e2e/policies-v1/host-ports.yaml");
    let v2 = fixture("e2e/policies-v2/host-ports.yaml");
    publish(&policies, "v1", &[("host-ports.yaml", v1.as_path())]);
    let portcullis = Portcullis::start(&[
        "--tls-dir",
        secret.to_str().unwrap(),
        "--policies",
        policies.to_str().unwrap(),
    ]);
    cluster.apply(&webhook_config(portcullis.webhook, &bundle, "Fail", &[]));
    let hostport = fixture_path("deployment-hostport.yaml");
    eventually(
        "the policy webhook to be active",
        Duration::from_secs(60),
        || {
            let output =
                cluster.kubectl(&["apply", "-n", "e2e", "--dry-run=server", "-f", &hostport]);
            let message = stderr(&output);
            message
                .contains(r#"denied the request: [no-host-ports/host-ports] spec.template.spec.containers[0].ports[0].hostPort: container "proxy" must not use host port 8080"#)
                .then_some(())
                .ok_or(message)
        },
    );
    runtime.block_on(async {
        let pods: Api<Pod> = Api::namespaced(cluster.client().await, "e2e");
        let pod: Pod =
            serde_norway::from_str(&std::fs::read_to_string(&compliant).unwrap()).unwrap();
        let mut failures = Vec::new();
        let mut reloaded_at = None;
        for i in 0..300 {
            let mut pod = pod.clone();
            pod.metadata.name = Some(format!("reload-{i}"));
            if let Err(error) = pods.create(&PostParams::default(), &pod).await {
                failures.push(error.to_string());
            }
            if i == 20 {
                publish(&policies, "v2", &[("host-ports.yaml", v2.as_path())]);
            }
            if reloaded_at.is_none()
                && portcullis.metrics().contains(
                    r#"portcullis_reloads_total{component="policies",result="success"} 1"#,
                )
            {
                reloaded_at = Some(i);
            }
            if reloaded_at.is_some_and(|at| i >= at + 20) {
                break;
            }
        }
        assert!(
            failures.is_empty(),
            "failed admissions during policy reload: {failures:?}"
        );
        assert!(
            reloaded_at.is_some(),
            "the policies were not reloaded in time"
        );
    });
    let warned = cluster.kubectl(&["apply", "-n", "e2e", "-f", &hostport]);
    assert!(warned.status.success(), "{}", stderr(&warned));
    assert!(
        stderr(&warned).contains(
            "Warning: [no-host-ports/host-ports] spec.template.spec.containers[0].ports[0].hostPort"
        ),
        "{}",
        stderr(&warned)
    );

    // Portcullis stopped: Fail refuses, but kube-system and our own namespace stay writable.
    let status = portcullis.terminate();
    assert!(
        status.success(),
        "portcullis exits 0 on SIGTERM: {status:?}"
    );
    let refused = cluster.dry_run_create("e2e", &compliant);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("failed calling webhook"),
        "{}",
        stderr(&refused)
    );
    for namespace in ["kube-system", "portcullis"] {
        let output = cluster.dry_run_create(namespace, &compliant);
        assert!(
            output.status.success(),
            "{namespace} locked out: {}",
            stderr(&output)
        );
    }
    cluster.apply(&webhook_config(
        portcullis_gone_address(),
        &bundle,
        "Ignore",
        &[],
    ));
    eventually(
        "failurePolicy Ignore to apply",
        Duration::from_secs(60),
        || {
            let output = cluster.dry_run_create("e2e", &compliant);
            output
                .status
                .success()
                .then_some(())
                .ok_or_else(|| stderr(&output))
        },
    );
    eprintln!("e2e ({version}): passed in {:?}", started.elapsed());
}

fn compliant_path() -> String {
    fixture_path("pod-compliant.yaml")
}

/// An address nothing listens on, for the webhook once Portcullis is stopped.
fn portcullis_gone_address() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

fn check_manifests(cluster: &ControlPlane, work: &Path) {
    let manifests = work.join("repo/manifests");
    copy_tree(&Path::new(ROOT).join("manifests"), &manifests);
    write_serving_certs(&work.join("repo/certs/out"));
    cluster.kubectl_ok(&["apply", "-f", &fixture_path("cert-manager-crds.yaml")]);
    cluster.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/certificates.cert-manager.io",
        "crd/issuers.cert-manager.io",
    ]);
    for overlay in ["base", "overlays/secret", "overlays/cert-manager"] {
        let dir = manifests.join(overlay);
        let rendered = cluster.kubectl_ok(&[
            "kustomize",
            "--load-restrictor=LoadRestrictionsNone",
            dir.to_str().unwrap(),
        ]);
        let applied = cluster.kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &rendered);
        assert!(applied.status.success(), "{overlay}: {}", stderr(&applied));
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Not an assertion: the latency admission adds to Pod CREATEs through the apiserver, with no
/// admission, in-tree ValidatingAdmissionPolicy, Portcullis with no policies (the cost of the
/// webhook call alone), the same policy through Portcullis, the Go peer of the load benchmark
/// and the Portcullis built-in set, as a table for docs/benchmarks.md.
/// `make e2e-latency` runs it (`PORTCULLIS_E2E_CREATES` sets the count, default 300;
/// `PORTCULLIS_GO_PEER` names the Go peer, built by bench/build-go-peer.sh; without it that row is
/// skipped).
#[test]
#[ignore = "a measurement, run by make e2e-latency"]
fn admission_latency_through_the_apiserver() {
    let Some(bin) = e2e_bin() else { return };
    let creates: usize = std::env::var("PORTCULLIS_E2E_CREATES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let cluster = ControlPlane::start(&bin);
    let work = tempfile::tempdir().unwrap();
    write_serving_certs(work.path());
    let ca = work.path().join("ca.crt");
    cluster.kubectl_ok(&["create", "namespace", "latency"]);
    // One Pod that every row admits, so that every row sends the same body.
    let admitted = fixture_path("pod-latency.yaml");
    let pod: Pod = serde_norway::from_str(&std::fs::read_to_string(&admitted).unwrap()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let measure = |label: &str| {
        runtime.block_on(async {
            let pods: Api<Pod> = Api::namespaced(cluster.client().await, "latency");
            let mut samples = Vec::with_capacity(creates);
            for i in 0..creates + 20 {
                let mut pod = pod.clone();
                pod.metadata.name = Some(format!("{label}-{i}"));
                let started = Instant::now();
                pods.create(&PostParams::default(), &pod).await.unwrap();
                if i >= 20 {
                    samples.push(started.elapsed());
                }
            }
            samples.sort();
            let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
            (at(0.5), at(0.99))
        })
    };
    let privileged = fixture_path("pod-privileged.yaml");
    // Waits until a dry-run create of the privileged Pod is denied with `marker` in the message:
    // the marker tells the webhook just registered from the one it replaces.
    let refuses_privileged = |what: &str, marker: &str| {
        eventually(what, Duration::from_secs(60), || {
            let output = cluster.dry_run_create("latency", &privileged);
            let message = stderr(&output);
            (message.contains("denied") && message.contains(marker))
                .then_some(())
                .ok_or(message)
        })
    };
    let baseline = measure("none");

    // The same 10 CEL validations as in-tree ValidatingAdmissionPolicy …
    let vap = format!("{ROOT}/bench/fixtures/vap/policy.yaml");
    cluster.kubectl_ok(&["apply", "-f", &vap]);
    refuses_privileged("the in-tree policy to be active", "denied");
    let in_tree = measure("in-tree-vap");
    cluster.kubectl_ok(&["delete", "-f", &vap]);
    eventually(
        "the in-tree policy to be gone",
        Duration::from_secs(60),
        || {
            let output = cluster.dry_run_create("latency", &privileged);
            output
                .status
                .success()
                .then_some(())
                .ok_or_else(|| stderr(&output))
        },
    );

    // Every single-webhook row is registered exactly as `webhook-config` registers the policy
    // (rules, match conditions, namespace selector, failurePolicy Fail, timeout 5 s); an empty
    // policy folder acts on no resource, so `webhook-config` would register nothing for it.
    let register_like_vap = |url: &str| {
        let output = Command::new(PORTCULLIS)
            .args(["webhook-config", "--name", "e2e", "--policies", &vap])
            .args(["--url", url])
            .arg("--ca-bundle")
            .arg(&ca)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        cluster.apply(&String::from_utf8(output.stdout).unwrap());
    };
    let cert = work.path().join("tls.crt");
    let key = work.path().join("tls.key");
    let serve = |policies: Option<&Path>| {
        let mut args = vec![
            "--tls-cert-file",
            cert.to_str().unwrap(),
            "--tls-key-file",
            key.to_str().unwrap(),
            "--log-level",
            "warn,portcullis::commands::serve=info",
        ];
        if let Some(policies) = policies {
            args.extend(["--policies", policies.to_str().unwrap()]);
        }
        Portcullis::start(&args)
    };

    // … a webhook call with no rule work: Portcullis with an empty policy folder, which allows
    // everything, so it is active once its request counter moves …
    let empty = work.path().join("no-policies");
    std::fs::create_dir(&empty).unwrap();
    let empty_portcullis = serve(Some(&empty));
    register_like_vap(&format!("https://{}", empty_portcullis.webhook));
    eventually(
        "the empty-policy webhook to be called",
        Duration::from_secs(60),
        || {
            let output = cluster.dry_run_create("latency", &privileged);
            empty_portcullis
                .metrics()
                .contains("portcullis_admission_requests_total{")
                .then_some(())
                .ok_or_else(|| stderr(&output))
        },
    );
    let empty_policies = measure("portcullis-empty");
    drop(empty_portcullis);

    // … the policy through Portcullis (one validating webhook) …
    let vap_portcullis = serve(Some(Path::new(&vap)));
    register_like_vap(&format!("https://{}", vap_portcullis.webhook));
    refuses_privileged(
        "the Portcullis policy webhook to be active",
        "ValidatingAdmissionPolicy 'bench-vap'",
    );
    let through_portcullis = measure("portcullis-vap");
    drop(vap_portcullis);

    // … the Go peer (one validating webhook; its rules are those of the load benchmark's
    // standard set, written in Go: Pod Security restricted, 10 native and the 10 VAP checks) …
    let go_peer = match GoPeer::start(work.path()) {
        Ok(peer) => {
            register_like_vap(&format!("https://{}", peer.webhook));
            refuses_privileged(
                "the Go peer webhook to be active",
                r#"PodSecurity "restricted:latest""#,
            );
            let measured = measure("go-peer");
            drop(peer);
            Ok(measured)
        }
        Err(reason) => Err(reason),
    };

    // The built-in set: validating and mutating webhooks.
    let builtin = serve(None);
    cluster.apply(&webhook_config(builtin.webhook, &ca, "Fail", &[]));
    refuses_privileged(
        "the built-in webhooks to be active",
        r#"PodSecurity "baseline:latest""#,
    );
    let with_builtin = measure("portcullis-builtin");

    println!(
        "| Pod CREATE through kube-apiserver v1.37.2 ({creates} creates, sequential) | p50 | p99 | added p50 | added p99 |"
    );
    println!("|---|---|---|---|---|");
    let go_label = format!(
        "Go peer, controller-runtime {} (one validating webhook; Pod Security restricted, 10 native and the 10 VAP checks in Go)",
        go_module_version("sigs.k8s.io/controller-runtime")
    );
    for (label, measured) in [
        ("no admission", Ok(baseline)),
        (
            "in-tree ValidatingAdmissionPolicy, 10 CEL validations",
            Ok(in_tree),
        ),
        (
            "Portcullis with an empty policy set (one validating webhook, no rule work)",
            Ok(empty_policies),
        ),
        (
            "the same policy through Portcullis (one validating webhook)",
            Ok(through_portcullis),
        ),
        (go_label.as_str(), go_peer),
        (
            "Portcullis built-in set (validating + mutating webhooks)",
            Ok(with_builtin),
        ),
    ] {
        match measured {
            Ok((p50, p99)) => println!(
                "| {label} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms |",
                ms(p50),
                ms(p99),
                ms(p50) - ms(baseline.0),
                ms(p99) - ms(baseline.1)
            ),
            Err(reason) => println!("| {label} | skipped: {reason} | | | |"),
        }
    }
    let added = |(p50, _): (Duration, Duration)| ms(p50) - ms(baseline.0);
    // A ratio over an added time within the noise (zero or below) would mean nothing.
    let ratio = |numerator: f64, denominator: f64| {
        if denominator > 0.0 {
            format!("{:.2}", numerator / denominator)
        } else {
            format!("n/a (denominator {denominator:.2} ms)")
        }
    };
    println!();
    println!(
        "Added p50 ratios: Portcullis VAP / in-tree VAP = {}; Portcullis empty set / Portcullis VAP = {}",
        ratio(added(through_portcullis), added(in_tree)),
        ratio(added(empty_policies), added(through_portcullis))
    );
}

/// The Go peer of the load benchmark (bench/peers/go-webhook) serving `/validate` on loopback;
/// killed on drop.
struct GoPeer {
    child: Child,
    webhook: SocketAddr,
}

impl GoPeer {
    /// Starts the binary named by `PORTCULLIS_GO_PEER` with `tls.crt` and `tls.key` from
    /// `cert_dir`, and waits for its `/readyz`. `Err` says why the peer cannot run.
    fn start(cert_dir: &Path) -> Result<Self, String> {
        let binary = std::env::var_os("PORTCULLIS_GO_PEER")
            .filter(|path| !path.is_empty())
            .ok_or(
                "PORTCULLIS_GO_PEER is not set (`make e2e-latency` sets it from \
                 bench/build-go-peer.sh, which needs Go)",
            )?;
        if !Path::new(&binary).is_file() {
            return Err(format!("PORTCULLIS_GO_PEER={binary:?} is not a file"));
        }
        let (webhook, health) = (portcullis_gone_address(), portcullis_gone_address());
        let child = Command::new(&binary)
            .arg(format!("-listen={webhook}"))
            .arg(format!("-health-addr={health}"))
            .arg("-cert-dir")
            .arg(cert_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|error| format!("cannot start {binary:?}: {error}"))?;
        let mut peer = GoPeer { child, webhook };
        eventually("the Go peer to be ready", Duration::from_secs(30), || {
            if let Some(status) = peer.child.try_wait().unwrap() {
                panic!("the Go peer exited: {status}");
            }
            ready(health)
        });
        Ok(peer)
    }
}

impl Drop for GoPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `Ok` when `GET /readyz` on `address` (plain HTTP) answers 200.
fn ready(address: SocketAddr) -> Result<(), String> {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(address).map_err(|error| error.to_string())?;
    tcp.write_all(b"GET /readyz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .map_err(|error| error.to_string())?;
    let mut text = String::new();
    tcp.read_to_string(&mut text)
        .map_err(|error| error.to_string())?;
    text.starts_with("HTTP/1.1 200").then_some(()).ok_or(text)
}

/// The version of `module` that bench/peers/go-webhook/go.mod requires.
fn go_module_version(module: &str) -> String {
    let go_mod = std::fs::read_to_string(format!("{ROOT}/bench/peers/go-webhook/go.mod")).unwrap();
    go_mod
        .lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some(module)).then(|| words.next().unwrap_or("?").to_owned())
        })
        .unwrap_or_else(|| "?".to_owned())
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Differential test: the same ValidatingAdmissionPolicy (binding with `validationActions:
/// [Warn]`) loaded into the real kube-apiserver and into Portcullis (`portcullis check`) must
/// give the same warnings for every one of a generated set of Deployments.
#[test]
fn validating_admission_policy_agrees_with_the_apiserver() {
    let Some(bin) = e2e_bin() else { return };
    validating_admission_policy_agrees_on(&bin);
}

/// The same comparison with the older apiserver's in-tree ValidatingAdmissionPolicy (GA since
/// v1.30).
#[test]
fn validating_admission_policy_agrees_with_the_older_apiserver() {
    let Some(bin) = e2e_bin_old() else { return };
    validating_admission_policy_agrees_on(&bin);
}

fn validating_admission_policy_agrees_on(bin: &Path) {
    let cluster = ControlPlane::start(bin);
    let version = cluster.server_version();
    let policy = fixture_path("vap/policy.yaml");
    cluster.kubectl_ok(&["apply", "-f", &policy]);
    cluster.kubectl_ok(&["create", "namespace", "vap"]);

    let deployments = generated_deployments(48);
    let probe = serde_json::to_string(&deployments[0]).unwrap();
    eventually(
        "the policy to be active in the apiserver",
        Duration::from_secs(60),
        || {
            let output = cluster.kubectl_stdin(
                &["create", "-n", "vap", "--dry-run=server", "-f", "-"],
                &probe,
            );
            let message = stderr(&output);
            message
                .contains("Warning: Validation failed")
                .then_some(())
                .ok_or(message)
        },
    );

    let results = check_admitted(&policy, &deployments);

    let mut warned = 0;
    for (deployment, result) in deployments.iter().zip(&results) {
        let applied = cluster.kubectl_stdin(
            &["create", "-n", "vap", "--dry-run=server", "-f", "-"],
            &serde_json::to_string(deployment).unwrap(),
        );
        assert!(applied.status.success(), "{}", stderr(&applied));
        let mut from_apiserver: Vec<String> = stderr(&applied)
            .lines()
            .filter_map(|line| line.strip_prefix("Warning: "))
            .map(str::to_owned)
            .collect();
        let mut from_portcullis: Vec<String> = result["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_owned())
            .filter(|w| w.starts_with("Validation failed for ValidatingAdmissionPolicy"))
            .collect();
        from_apiserver.sort();
        from_portcullis.sort();
        assert_eq!(
            from_portcullis, from_apiserver,
            "disagreement on {}",
            deployment["metadata"]["name"]
        );
        warned += usize::from(!from_apiserver.is_empty());
    }
    eprintln!(
        "e2e: kube-apiserver {version} and Portcullis agree on {} Deployments ({warned} with \
         warnings)",
        deployments.len()
    );
    assert!(
        warned > 0 && warned < deployments.len(),
        "the generated set must mix outcomes"
    );
}

/// Differential test for `namespaceObject`: a ValidatingAdmissionPolicy reading the whole
/// Namespace (annotations, phase, finalizers, conditions, which fields are there) runs in-tree
/// and in Portcullis at once (`serve` with a namespace watch on the cluster, as a webhook),
/// under two bindings (`Warn`); every request gets both answers, told apart by binding name,
/// and they must agree: for namespaces with and without annotations, one with
/// `generateName`, one Terminating, one with status conditions, and after an annotation
/// changes. `portcullis check` on the namespaces as `kubectl get` prints them must agree too.
#[test]
fn namespace_object_agrees_with_the_apiserver() {
    let Some(bin) = e2e_bin() else { return };
    namespace_object_agrees_on(&bin);
}

/// The same comparison with the older apiserver (its `namespaceObject` is built the same way).
#[test]
fn namespace_object_agrees_with_the_older_apiserver() {
    let Some(bin) = e2e_bin_old() else { return };
    namespace_object_agrees_on(&bin);
}

/// `policy` with `in_tree_binding` in the apiserver, and with `portcullis_binding` in a
/// Portcullis (certificates in `work`) that watches the cluster's namespaces and is registered
/// as the cluster's webhook for the policy's rules.
fn in_tree_and_through_portcullis(
    cluster: &ControlPlane,
    work: &Path,
    policy: &str,
    in_tree_binding: &str,
    portcullis_binding: &str,
) -> Portcullis {
    cluster.kubectl_ok(&["apply", "-f", policy, "-f", in_tree_binding]);
    let certs = work.join("certs");
    write_serving_certs(&certs);
    let portcullis = Portcullis::start(&[
        "--tls-dir",
        certs.to_str().unwrap(),
        "--kubeconfig",
        cluster.kubeconfig(),
        "--policies",
        policy,
        "--policies",
        portcullis_binding,
    ]);
    cluster.apply(&webhook_config(
        portcullis.webhook,
        &certs.join("ca.crt"),
        "Fail",
        &[policy, portcullis_binding],
    ));
    portcullis
}

/// The messages of the warnings kubectl printed for `policy`'s validations through
/// `binding`, in the order printed.
fn policy_warnings(output: &Output, policy: &str, binding: &str) -> Vec<String> {
    let prefix = format!(
        "Warning: Validation failed for ValidatingAdmissionPolicy '{policy}' with binding \
         '{binding}': "
    );
    stderr(output)
        .lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .map(str::to_owned)
        .collect()
}

/// `portcullis check --output json` of `inputs` under `policies`, which must all be admitted.
fn checked(policies: &[&str], inputs: &[&Path]) -> Vec<serde_json::Value> {
    let output = Command::new(PORTCULLIS)
        .args(["check", "--output", "json"])
        .args(policies.iter().flat_map(|policy| ["--policies", policy]))
        .args(inputs)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The messages of the warnings of one `check` result for `policy`'s validations through
/// `binding`.
fn checked_warnings(result: &serde_json::Value, policy: &str, binding: &str) -> Vec<String> {
    let prefix = format!(
        "Validation failed for ValidatingAdmissionPolicy '{policy}' with binding '{binding}': "
    );
    result["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str()?.strip_prefix(&prefix))
        .map(str::to_owned)
        .collect()
}

/// Status conditions as the namespace controller writes them; the second has no reason and
/// no `lastTransitionTime` (encoded as `null`).
const NAMESPACE_CONDITIONS: &str = r#"{"status": {"conditions": [
    {"type": "NamespaceDeletionDiscoveryFailure", "status": "False",
     "reason": "ResourcesDiscovered", "message": "All resources successfully discovered",
     "lastTransitionTime": "2026-01-01T00:00:00Z"},
    {"type": "NamespaceContentRemaining", "status": "False"}]}}"#;

fn namespace_object_agrees_on(bin: &Path) {
    let cluster = ControlPlane::start(bin);
    let version = cluster.server_version();
    let policy = fixture_path("namespace-object/policy.yaml");
    let in_tree_binding = fixture_path("namespace-object/in-tree-binding.yaml");
    let portcullis_binding = fixture_path("namespace-object/portcullis-binding.yaml");

    // The namespaces, each with a ConfigMap, before any policy.
    let created = cluster.kubectl_ok(&[
        "create",
        "-f",
        &fixture_path("namespace-object/namespaces.yaml"),
        "-o",
        "name",
    ]);
    let namespaces: Vec<String> = created
        .lines()
        .map(|line| line.strip_prefix("namespace/").unwrap().to_owned())
        .collect();
    assert_eq!(namespaces.len(), 6, "{created}");
    for namespace in &namespaces {
        cluster.kubectl_ok(&["create", "configmap", "settings", "-n", namespace]);
    }
    // nso-held stays Terminating: its finalizer is never removed (no controllers run here).
    cluster.kubectl_ok(&["delete", "namespace", "nso-held", "--wait=false"]);
    cluster.kubectl_ok(&[
        "patch",
        "namespace",
        "nso-owned",
        "--subresource=status",
        "--type=merge",
        "-p",
        NAMESPACE_CONDITIONS,
    ]);

    // The policy in-tree, and in Portcullis with the cluster's namespaces.
    let work = tempfile::tempdir().unwrap();
    let _portcullis = in_tree_and_through_portcullis(
        &cluster,
        work.path(),
        &policy,
        &in_tree_binding,
        &portcullis_binding,
    );

    // An UPDATE of the namespace's ConfigMap (a CREATE too where the namespace is not
    // Terminating): the warnings of the in-tree binding and of Portcullis's, each sorted.
    let answers = |namespace: &str| -> Vec<(Vec<String>, Vec<String>)> {
        let mut requests = vec![cluster.kubectl(&[
            "label",
            "configmap",
            "settings",
            "-n",
            namespace,
            "e2e-probe=1",
            "--dry-run=server",
        ])];
        if namespace != "nso-held" {
            requests.push(cluster.kubectl(&[
                "create",
                "configmap",
                "probe",
                "-n",
                namespace,
                "--dry-run=server",
            ]));
        }
        requests
            .iter()
            .map(|output| {
                assert!(output.status.success(), "{}", stderr(output));
                let warnings = |binding: &str| {
                    let mut found = policy_warnings(output, "namespace-object", binding);
                    found.sort();
                    found
                };
                (
                    warnings("namespace-object-in-tree"),
                    warnings("namespace-object-portcullis"),
                )
            })
            .collect()
    };
    let agreeing = |namespace: &str, expect: &str| -> Result<Vec<String>, String> {
        let mut last = Vec::new();
        for (in_tree, from_portcullis) in answers(namespace) {
            if in_tree != from_portcullis || !in_tree.iter().any(|w| w.contains(expect)) {
                return Err(format!(
                    "{namespace}: in-tree {in_tree:#?}, Portcullis {from_portcullis:#?}"
                ));
            }
            last = in_tree;
        }
        Ok(last)
    };
    eventually(
        "the in-tree policy and Portcullis to answer",
        Duration::from_secs(60),
        || agreeing("nso-plain", "shape of nso-plain").map(drop),
    );

    let mut in_tree_answers = std::collections::BTreeMap::new();
    for namespace in &namespaces {
        let answer = agreeing(namespace, "shape of")
            .unwrap_or_else(|disagreement| panic!("disagreement on {disagreement}"));
        eprintln!("e2e ({version}): namespaceObject of {namespace}: {answer:#?}");
        in_tree_answers.insert(namespace.clone(), answer);
    }
    let held = &in_tree_answers["nso-held"];
    assert!(
        held.contains(&"namespace nso-held is Terminating".to_owned()),
        "{held:#?}"
    );
    assert!(in_tree_answers["nso-denied"].contains(&"namespace nso-denied says x=deny".to_owned()));

    // A changed annotation reaches both.
    cluster.kubectl_ok(&[
        "annotate",
        "namespace",
        "nso-plain",
        "x=deny",
        "owner=team-p",
    ]);
    eventually(
        "the new annotation to reach both",
        Duration::from_secs(30),
        || {
            let answer = agreeing("nso-plain", "namespace nso-plain says x=deny")?;
            in_tree_answers.insert("nso-plain".to_owned(), answer);
            Ok(())
        },
    );

    // Offline: `check` with the namespaces as the apiserver prints them.
    let listed = work.path().join("namespaces.json");
    std::fs::write(
        &listed,
        cluster.kubectl_ok(&["get", "namespaces", "-o", "json"]),
    )
    .unwrap();
    let configmaps = work.path().join("configmaps.yaml");
    let documents: String = namespaces
        .iter()
        .map(|namespace| {
            format!(
                "---\n{}\n",
                serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "settings", "namespace": namespace}})
            )
        })
        .collect();
    std::fs::write(&configmaps, documents).unwrap();
    let results = checked(&[&policy, &portcullis_binding], &[&listed, &configmaps]);
    for namespace in &namespaces {
        let result = results
            .iter()
            .find(|r| r["kind"] == "ConfigMap" && r["namespace"] == namespace.as_str())
            .unwrap();
        let mut offline =
            checked_warnings(result, "namespace-object", "namespace-object-portcullis");
        offline.sort();
        assert_eq!(
            offline, in_tree_answers[namespace],
            "check disagrees with the apiserver on {namespace}"
        );
    }
    eprintln!(
        "e2e: kube-apiserver {version} and Portcullis (serve and check) agree on namespaceObject \
         for {} namespaces",
        namespaces.len()
    );
}

/// Differential test: a ValidatingAdmissionPolicy on Namespaces with a `namespaceSelector`
/// (`tests/fixtures/e2e/namespace-selector`), in-tree and through `serve` with the cluster's
/// namespace watch, must warn about the same CREATEs and UPDATEs: the apiserver matches a
/// Namespace's own request on the labels it is given, not on the namespace as stored.
#[test]
fn namespace_selector_on_namespaces_agrees_with_the_apiserver() {
    let Some(bin) = e2e_bin() else { return };
    namespace_selector_on_namespaces_agrees_on(&bin);
}

/// The same comparison with the older apiserver.
#[test]
fn namespace_selector_on_namespaces_agrees_with_the_older_apiserver() {
    let Some(bin) = e2e_bin_old() else { return };
    namespace_selector_on_namespaces_agrees_on(&bin);
}

fn namespace_selector_on_namespaces_agrees_on(bin: &Path) {
    let cluster = ControlPlane::start(bin);
    let version = cluster.server_version();
    let policy = fixture_path("namespace-selector/policy.yaml");
    let in_tree_binding = fixture_path("namespace-selector/in-tree-binding.yaml");
    let portcullis_binding = fixture_path("namespace-selector/portcullis-binding.yaml");
    cluster.kubectl_ok(&[
        "create",
        "-f",
        &fixture_path("namespace-selector/namespaces.yaml"),
    ]);
    let work = tempfile::tempdir().unwrap();
    let _portcullis = in_tree_and_through_portcullis(
        &cluster,
        work.path(),
        &policy,
        &in_tree_binding,
        &portcullis_binding,
    );

    // Each request as a dry run, so that the namespaces as stored never change; the labels
    // the request gives are not the stored ones in the first two.
    let new_gold = work.path().join("nss-new.yaml");
    std::fs::write(
        &new_gold,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: nss-new\n  labels: {e2e-tier: gold}\n",
    )
    .unwrap();
    let requests: [(&str, Vec<&str>, bool); 5] = [
        (
            "UPDATE labelling nss-plain gold",
            vec!["label", "namespace", "nss-plain", "e2e-tier=gold"],
            true,
        ),
        (
            "UPDATE taking nss-gold's label away",
            vec!["label", "namespace", "nss-gold", "e2e-tier-"],
            false,
        ),
        (
            "UPDATE of nss-gold keeping its label",
            vec!["annotate", "namespace", "nss-gold", "touched=1"],
            true,
        ),
        (
            "UPDATE of nss-plain without the label",
            vec!["annotate", "namespace", "nss-plain", "touched=1"],
            false,
        ),
        (
            "CREATE of a gold namespace",
            vec!["create", "-f", new_gold.to_str().unwrap()],
            true,
        ),
    ];
    let answer = |args: &[&str]| -> (Vec<String>, Vec<String>) {
        let mut args = args.to_vec();
        args.push("--dry-run=server");
        let output = cluster.kubectl(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        (
            policy_warnings(&output, "namespace-selector", "namespace-selector-in-tree"),
            policy_warnings(
                &output,
                "namespace-selector",
                "namespace-selector-portcullis",
            ),
        )
    };
    // Portcullis is asked once its webhook configuration is in force and its namespace
    // watch has synced: the first request warns from both.
    eventually(
        "the in-tree policy and Portcullis to warn",
        Duration::from_secs(60),
        || match answer(&requests[2].1) {
            (in_tree, from_portcullis) if !in_tree.is_empty() && in_tree == from_portcullis => {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        },
    );
    let mut created_in_tree = Vec::new();
    for (what, args, warned) in &requests {
        let (in_tree, from_portcullis) = answer(args);
        assert_eq!(
            !in_tree.is_empty(),
            *warned,
            "{what}: the apiserver's in-tree policy warned {in_tree:?}"
        );
        assert_eq!(
            in_tree, from_portcullis,
            "{what}: the in-tree policy and Portcullis disagree"
        );
        if args[0] == "create" {
            created_in_tree = in_tree;
        }
    }
    // `check` of the same Namespace (its CREATE): the same warning, `request.namespace`
    // included (the apiserver names a Namespace's own request by it).
    let results = checked(&[&policy, &portcullis_binding], &[&new_gold]);
    let offline = checked_warnings(
        &results[0],
        "namespace-selector",
        "namespace-selector-portcullis",
    );
    assert_eq!(
        offline, created_in_tree,
        "check disagrees with the apiserver"
    );
    assert!(
        created_in_tree[0].ends_with("request namespace [nss-new]"),
        "{created_in_tree:?}"
    );
    eprintln!(
        "e2e ({version}): the in-tree policy and Portcullis (serve, and check for the CREATE) \
         agree on a namespaceSelector over {} Namespace requests",
        requests.len()
    );
}

/// Differential test: a ValidatingAdmissionPolicy whose matchConstraints and two bindings
/// select namespaces by label (`tests/fixtures/e2e/binding-namespace-selector`), in-tree and
/// through `serve` with the cluster's namespace watch (which decides from those labels
/// whether a request's objects are decoded at all), must warn through the same bindings for a
/// ConfigMap's CREATE, UPDATE and DELETE in each namespace; `check` with the namespaces as
/// the apiserver lists them must give the CREATEs' warnings too.
#[test]
fn binding_namespace_selectors_agree_with_the_apiserver() {
    let Some(bin) = e2e_bin() else { return };
    binding_namespace_selectors_agree_on(&bin);
}

/// The same comparison with the older apiserver.
#[test]
fn binding_namespace_selectors_agree_with_the_older_apiserver() {
    let Some(bin) = e2e_bin_old() else { return };
    binding_namespace_selectors_agree_on(&bin);
}

fn binding_namespace_selectors_agree_on(bin: &Path) {
    const POLICY: &str = "binding-namespace-selector";
    let cluster = ControlPlane::start(bin);
    let version = cluster.server_version();
    let policy = fixture_path("binding-namespace-selector/policy.yaml");
    let in_tree_bindings = fixture_path("binding-namespace-selector/in-tree-bindings.yaml");
    let portcullis_bindings = fixture_path("binding-namespace-selector/portcullis-bindings.yaml");
    cluster.kubectl_ok(&[
        "create",
        "-f",
        &fixture_path("binding-namespace-selector/namespaces.yaml"),
    ]);
    // The namespace, and which binding (prod, not-prod) warns there, if any.
    let namespaces = [
        ("bns-prod", Some(0)),
        ("bns-test", Some(1)),
        ("bns-none", None),
    ];
    for (namespace, _) in namespaces {
        cluster.kubectl_ok(&["create", "configmap", "settings", "-n", namespace]);
    }
    let work = tempfile::tempdir().unwrap();
    let _portcullis = in_tree_and_through_portcullis(
        &cluster,
        work.path(),
        &policy,
        &in_tree_bindings,
        &portcullis_bindings,
    );

    // Each binding's warnings, in-tree and from Portcullis.
    type Warnings = [Vec<String>; 2];
    let answer = |args: &[&str]| -> (Warnings, Warnings) {
        let mut args = args.to_vec();
        args.push("--dry-run=server");
        let output = cluster.kubectl(&args);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let warnings = |who: &str| {
            ["prod", "not-prod"]
                .map(|binding| policy_warnings(&output, POLICY, &format!("{binding}-{who}")))
        };
        (warnings("in-tree"), warnings("portcullis"))
    };
    let create = |namespace| vec!["create", "configmap", "probe", "-n", namespace];
    // The apiserver learns each binding on its own, so both must warn before comparing.
    eventually(
        "both bindings to warn, in-tree and from Portcullis",
        Duration::from_secs(60),
        || {
            for (namespace, binding) in [("bns-prod", 0), ("bns-test", 1)] {
                match answer(&create(namespace)) {
                    (in_tree, from_portcullis)
                        if !in_tree[binding].is_empty() && in_tree == from_portcullis => {}
                    other => return Err(format!("{namespace}: {other:?}")),
                }
            }
            Ok(())
        },
    );
    let mut created_in_tree = std::collections::BTreeMap::new();
    for (namespace, warning_binding) in namespaces {
        for args in [
            create(namespace),
            vec!["label", "configmap", "settings", "-n", namespace, "e2e=1"],
            vec!["delete", "configmap", "settings", "-n", namespace],
        ] {
            let (in_tree, from_portcullis) = answer(&args);
            assert_eq!(
                in_tree, from_portcullis,
                "{args:?}: the in-tree policy and Portcullis disagree"
            );
            for (binding, warnings) in in_tree.iter().enumerate() {
                assert_eq!(
                    warnings.len(),
                    usize::from(warning_binding == Some(binding)),
                    "{args:?}: binding {binding} warned {warnings:?}"
                );
            }
            if args[0] == "create" {
                created_in_tree.insert(namespace, in_tree);
            }
        }
    }

    // Offline: `check` of the CREATEs with the namespaces as the apiserver lists them.
    let listed = work.path().join("namespaces.json");
    std::fs::write(
        &listed,
        cluster.kubectl_ok(&["get", "namespaces", "-o", "json"]),
    )
    .unwrap();
    let probes = work.path().join("probes.yaml");
    let documents: String = namespaces
        .iter()
        .map(|(namespace, _)| {
            format!(
                "---\n{}\n",
                serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "probe", "namespace": namespace}})
            )
        })
        .collect();
    std::fs::write(&probes, documents).unwrap();
    let results = checked(&[&policy, &portcullis_bindings], &[&listed, &probes]);
    for (namespace, _) in namespaces {
        let result = results
            .iter()
            .find(|r| r["kind"] == "ConfigMap" && r["namespace"] == namespace)
            .unwrap();
        let offline = ["prod", "not-prod"]
            .map(|binding| checked_warnings(result, POLICY, &format!("{binding}-portcullis")));
        assert_eq!(
            offline, created_in_tree[namespace],
            "check disagrees with the apiserver in {namespace}"
        );
    }
    eprintln!(
        "e2e ({version}): the in-tree policy and Portcullis (serve, and check for the CREATEs) \
         agree on namespace-selected bindings over {} requests in {} namespaces",
        namespaces.len() * 3,
        namespaces.len()
    );
}

/// Differential test: the same MutatingAdmissionPolicy (`tests/fixtures/e2e/map`: an
/// ApplyConfiguration merging a label and container limits, a JSONPatch capping replicas) in
/// the real kube-apiserver and in Portcullis must give the same object for every one of a
/// generated set of Deployments. Portcullis (`portcullis check`) is given what the policy sees
/// in the apiserver: the Deployment as the apiserver defaulted it, before any policy.
#[test]
fn mutating_admission_policy_agrees_with_the_apiserver() {
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    cluster.kubectl_ok(&["create", "namespace", "map"]);
    let dry_run = |deployment: &serde_json::Value| cluster.dry_run_json("map", deployment);
    let deployments = generated_deployments(24);
    let defaulted: Vec<serde_json::Value> = deployments
        .iter()
        .map(|deployment| dry_run(deployment).unwrap())
        .collect();

    let policy = fixture_path("map/policy.yaml");
    cluster.kubectl_ok(&["apply", "-f", &policy]);
    wait_for_map_label(
        &cluster,
        "the policy to be active in the apiserver",
        &deployments[0],
    );

    let results = check_admitted(&policy, &defaulted);
    let (mut capped, mut limited) = (0, 0);
    for ((deployment, before), result) in deployments.iter().zip(&defaulted).zip(&results) {
        let from_apiserver = comparable(dry_run(deployment).unwrap());
        let patched = match &result["patchedObject"] {
            serde_json::Value::Null => before.clone(),
            object => object.clone(),
        };
        let from_portcullis = comparable(patched);
        assert_eq!(
            from_portcullis, from_apiserver,
            "disagreement on {}",
            deployment["metadata"]["name"]
        );
        capped += usize::from(before["spec"]["replicas"].as_i64() > Some(3));
        limited += usize::from(
            before["spec"]["template"]["spec"]["containers"][0]
                .pointer("/resources/limits")
                .is_none(),
        );
    }
    eprintln!(
        "e2e: the apiserver and Portcullis mutate {} Deployments alike ({capped} with replicas \
         capped, {limited} given a memory limit)",
        deployments.len()
    );
    assert!(
        capped > 0 && capped < deployments.len() && limited > 0 && limited < deployments.len(),
        "the generated set must mix outcomes"
    );
}

/// On the older apiserver, which has no MutatingAdmissionPolicy in-tree, the policy of
/// `mutating_admission_policy_agrees_with_the_apiserver` served by Portcullis as a webhook must
/// give the objects v1.37's in-tree MutatingAdmissionPolicy gives for the same Deployments: the
/// label, the merged memory limit and the capped replicas, with every default the apiserver adds
/// after the webhook. Both control planes run in this test, one after the other.
#[test]
fn mutating_admission_policy_through_portcullis_on_the_older_apiserver_agrees_with_v1_37() {
    let Some(old_bin) = e2e_bin_old() else { return };
    let Some(bin) = e2e_bin() else { return };
    let policy = fixture_path("map/policy.yaml");
    let deployments = generated_deployments(24);

    let expected: Vec<serde_json::Value> = {
        let current = ControlPlane::start(&bin);
        current.kubectl_ok(&["create", "namespace", "map"]);
        current.kubectl_ok(&["apply", "-f", &policy]);
        wait_for_map_label(&current, "the in-tree policy to be active", &deployments[0]);
        deployments
            .iter()
            .map(|deployment| comparable(current.dry_run_json("map", deployment).unwrap()))
            .collect()
    };

    let older = ControlPlane::start(&old_bin);
    let version = older.server_version();
    assert_no_in_tree_map(&older);
    let work = tempfile::tempdir().unwrap();
    let _portcullis = serve_as_webhook(&older, work.path(), &policy);
    older.kubectl_ok(&["create", "namespace", "map"]);
    wait_for_map_label(
        &older,
        "the Portcullis webhook to be active",
        &deployments[0],
    );

    let (mut capped, mut limited) = (0, 0);
    for (deployment, expected) in deployments.iter().zip(&expected) {
        let created = comparable(older.dry_run_json("map", deployment).unwrap());
        let created = without_null_creation_timestamps(created);
        assert_eq!(
            created, *expected,
            "kube-apiserver {version} through Portcullis vs v1.37 in-tree on {}",
            deployment["metadata"]["name"]
        );
        capped += usize::from(deployment["spec"]["replicas"].as_i64() > Some(3));
        limited += usize::from(
            deployment["spec"]["template"]["spec"]["containers"][0]
                .pointer("/resources/limits")
                .is_none(),
        );
    }
    // Stored, not only answered to a dry run: the Deployment read back carries the same.
    let created = older.kubectl_stdin(
        &["create", "-n", "map", "-f", "-"],
        &serde_json::to_string(&deployments[0]).unwrap(),
    );
    assert!(created.status.success(), "{}", stderr(&created));
    let name = deployments[0]["metadata"]["name"].as_str().unwrap();
    let stored: serde_json::Value = serde_json::from_str(&older.kubectl_ok(&[
        "get",
        "deployment",
        "-n",
        "map",
        name,
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(
        without_null_creation_timestamps(comparable(stored)),
        expected[0],
        "stored by kube-apiserver {version}"
    );
    eprintln!(
        "e2e: kube-apiserver {version} through Portcullis mutates {} Deployments as v1.37's \
         in-tree MutatingAdmissionPolicy does ({capped} with replicas capped, {limited} given a \
         memory limit)",
        deployments.len()
    );
    assert!(
        capped > 0 && capped < deployments.len() && limited > 0 && limited < deployments.len(),
        "the generated set must mix outcomes"
    );
}

/// Polls dry-run creates of `deployment` until the `map/policy.yaml` label comes back.
fn wait_for_map_label(cluster: &ControlPlane, what: &str, deployment: &serde_json::Value) {
    eventually(what, Duration::from_secs(60), || {
        let created = cluster.dry_run_json("map", deployment)?;
        let label = &created["metadata"]["labels"]["policy.example.com/mutated"];
        (label == "true").then_some(()).ok_or(created.to_string())
    });
}

/// `object` without the `metadata.creationTimestamp: null` of embedded objects (a Pod template's
/// metadata): kube-apiserver v1.30 writes it for an unset timestamp, with or without a webhook,
/// and v1.37 leaves it out; both decode to the same object.
fn without_null_creation_timestamps(mut object: serde_json::Value) -> serde_json::Value {
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::Object(metadata)) = map.get_mut("metadata")
                    && metadata.get("creationTimestamp") == Some(&serde_json::Value::Null)
                {
                    metadata.remove("creationTimestamp");
                }
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut object);
    object
}

/// The older apiserver must not serve MutatingAdmissionPolicy, or the comparison would not
/// show that Portcullis, and not the apiserver, mutated the objects.
fn assert_no_in_tree_map(cluster: &ControlPlane) {
    let resources = cluster.kubectl_ok(&[
        "api-resources",
        "--api-group=admissionregistration.k8s.io",
        "-o",
        "name",
    ]);
    assert!(
        resources.contains("validatingadmissionpolicies")
            && !resources.contains("mutatingadmissionpolicies"),
        "expected an apiserver with ValidatingAdmissionPolicy and without \
         MutatingAdmissionPolicy: {resources}"
    );
}

/// Portcullis serving `policies` (a file or folder) with a fresh certificate, and the webhook
/// configurations `webhook-config --policies` prints for them applied to `cluster`.
fn serve_as_webhook(cluster: &ControlPlane, work: &Path, policies: &str) -> Portcullis {
    let certs = work.join("certs");
    write_serving_certs(&certs);
    let portcullis =
        Portcullis::start(&["--tls-dir", certs.to_str().unwrap(), "--policies", policies]);
    cluster.apply(&webhook_config(
        portcullis.webhook,
        &certs.join("ca.crt"),
        "Fail",
        &[policies],
    ));
    portcullis
}

/// `portcullis check --output json` of `documents` under `policy`: one result per document,
/// every one admitted (exit 0).
fn check_admitted(policy: &str, documents: &[serde_json::Value]) -> Vec<serde_json::Value> {
    let work = tempfile::tempdir().unwrap();
    let manifests = work.path().join("documents.yaml");
    let stream: String = documents
        .iter()
        .map(|d| format!("---\n{}\n", serde_json::to_string(d).unwrap()))
        .collect();
    std::fs::write(&manifests, stream).unwrap();
    let output = Command::new(PORTCULLIS)
        .args(["check", "--output", "json", "--policies", policy])
        .arg(&manifests)
        .output()
        .unwrap();
    assert!(output.status.code() == Some(0), "{}", stderr(&output));
    let results: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(results.len(), documents.len());
    results
}

/// Deployments that vary replicas, labels, images, limits, hostNetwork and names,
/// deterministically.
fn generated_deployments(count: usize) -> Vec<serde_json::Value> {
    let mut state: u64 = 0x5eed;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    (0..count)
        .map(|i| {
            let replicas = [1, 3, 5, 6, 9][next(5) as usize];
            let image = [
                "registry.example.com/shop/web:1.4.2",
                "nginx",
                "nginx:latest",
                "registry.example.com/shop/web:2",
            ][next(4) as usize];
            let name = if next(6) == 0 {
                format!("web-with-a-name-longer-than-thirty-characters-{i}")
            } else {
                format!("web-{i}")
            };
            let mut container = serde_json::json!({"name": "web", "image": image});
            if next(3) != 0 {
                container["resources"] = serde_json::json!({"limits": {"memory": "128Mi"}});
            }
            let mut spec = serde_json::json!({"containers": [container]});
            match next(3) {
                0 => spec["hostNetwork"] = serde_json::json!(true),
                1 => spec["hostNetwork"] = serde_json::json!(false),
                _ => {}
            }
            let mut metadata = serde_json::json!({"name": name});
            if next(2) == 0 {
                metadata["labels"] = serde_json::json!({"team": "shop"});
            }
            serde_json::json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": metadata,
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec},
                },
            })
        })
        .collect()
}

/// Issue #12's cases through the apiserver and through `portcullis check` side by side
/// (tests/fixtures/e2e/typed-map): a MutatingAdmissionPolicy whose second mutation adds under
/// an empty map the first added (refused: the typed round trip dropped the map), a sidecar and
/// a volume injected by ApplyConfiguration (the added container and volume carry the
/// apiserver's defaults), and a custom resource merged by the list keys of its CRD, the CRD
/// loaded in both.
#[test]
fn typed_objects_between_mutations_agree_with_the_apiserver() {
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    let folder = fixture_path("typed-map");
    prepare_typed(&cluster, &folder);
    cluster.kubectl_ok(&["apply", "-f", &format!("{folder}/policies/policies.yaml")]);
    let objects = typed_objects(&folder);
    wait_for_typed_policies(
        &cluster,
        "the policies to be active in the apiserver",
        &objects,
    );

    let work = tempfile::tempdir().unwrap();
    let manifests = work.path().join("objects.json");
    let stream: String = objects
        .iter()
        .map(|object| {
            let mut object = object.clone();
            object["metadata"]["namespace"] = "typed".into();
            format!("---\n{}\n", serde_json::to_string(&object).unwrap())
        })
        .collect();
    std::fs::write(&manifests, stream).unwrap();
    let output = Command::new(PORTCULLIS)
        .args(["check", "--output", "json", "--policies"])
        .arg(format!("{folder}/policies"))
        .arg(&manifests)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let results: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();

    // The empty map is gone before the second mutation: both refuse, in the same words.
    let refused = cluster.dry_run_json("typed", &objects[0]).unwrap_err();
    assert!(refused.contains(TYPED_MISSING), "apiserver: {refused}");
    assert_eq!(results[0]["allowed"], false);
    let message = results[0]["violations"][0]["message"].as_str().unwrap();
    assert!(message.contains(TYPED_MISSING), "portcullis: {message}");

    // The injected container and volume carry the apiserver's defaults, field for field.
    let created = cluster.dry_run_json("typed", &objects[1]).unwrap();
    let patched = &results[1]["patchedObject"];
    for field in ["containers", "volumes"] {
        assert_eq!(
            patched["spec"][field], created["spec"][field],
            "spec.{field}: portcullis vs apiserver"
        );
    }
    assert_eq!(
        created["spec"]["volumes"][0]["configMap"]["defaultMode"], 420,
        "{created}"
    );

    // The custom resource's lists are merged by the keys its CRD gives.
    let created = cluster.dry_run_json("typed", &objects[2]).unwrap();
    let patched = &results[2]["patchedObject"];
    assert_eq!(patched["spec"], created["spec"]);
    assert_eq!(patched["metadata"]["labels"], created["metadata"]["labels"]);
    eprintln!(
        "e2e: two-step refusal, sidecar defaults and CRD list merge agree with the apiserver"
    );
}

/// The same cases on the older apiserver, the policies served by Portcullis as a webhook,
/// against what v1.37's in-tree MutatingAdmissionPolicy creates: the same refusal, the same
/// injected container and volume with their defaults, the same merged custom resource.
#[test]
fn typed_objects_through_portcullis_on_the_older_apiserver_agree_with_v1_37() {
    let Some(old_bin) = e2e_bin_old() else { return };
    let Some(bin) = e2e_bin() else { return };
    let folder = fixture_path("typed-map");
    let objects = typed_objects(&folder);
    let dry_run_all = |cluster: &ControlPlane| -> Vec<Result<serde_json::Value, String>> {
        objects
            .iter()
            .map(|object| cluster.dry_run_json("typed", object))
            .collect()
    };

    let expected = {
        let current = ControlPlane::start(&bin);
        prepare_typed(&current, &folder);
        current.kubectl_ok(&["apply", "-f", &format!("{folder}/policies/policies.yaml")]);
        wait_for_typed_policies(&current, "the in-tree policies to be active", &objects);
        dry_run_all(&current)
    };

    let older = ControlPlane::start(&old_bin);
    let version = older.server_version();
    assert_no_in_tree_map(&older);
    prepare_typed(&older, &folder);
    let work = tempfile::tempdir().unwrap();
    let _portcullis = serve_as_webhook(&older, work.path(), &format!("{folder}/policies"));
    wait_for_typed_policies(&older, "the Portcullis webhook to be active", &objects);
    let created = dry_run_all(&older);

    let refused = created[0].as_ref().unwrap_err();
    let expected_refusal = expected[0].as_ref().unwrap_err();
    assert!(
        refused.contains(TYPED_MISSING),
        "kube-apiserver {version} through Portcullis: {refused}"
    );
    assert!(
        expected_refusal.contains(TYPED_MISSING),
        "v1.37 in-tree: {expected_refusal}"
    );
    let (sidecar, expected_sidecar) = (created[1].as_ref().unwrap(), expected[1].as_ref().unwrap());
    for field in ["containers", "volumes"] {
        assert_eq!(
            sidecar["spec"][field], expected_sidecar["spec"][field],
            "spec.{field}: kube-apiserver {version} through Portcullis vs v1.37 in-tree"
        );
    }
    let (widget, expected_widget) = (created[2].as_ref().unwrap(), expected[2].as_ref().unwrap());
    assert_eq!(widget["spec"], expected_widget["spec"]);
    assert_eq!(
        widget["metadata"]["labels"],
        expected_widget["metadata"]["labels"]
    );
    eprintln!(
        "e2e: kube-apiserver {version} through Portcullis: two-step refusal, sidecar defaults \
         and CRD list merge as v1.37 in-tree"
    );
}

/// The JSON Patch error both refusals of the two-step case carry.
const TYPED_MISSING: &str = "add operation does not apply: doc is missing path: \"/metadata/annotations/team\": missing value";

/// Namespace `typed` and the Widget CRD, established.
/// ApplyConfigurations the apiserver accepts at create and refuses at admission
/// (tests/fixtures/e2e/apply-errors): `Object…{}` literals named otherwise than their field
/// path from the root (cel-go's type-name check), and values of the wrong type for their field
/// (the typed conversion's messages, which print Go values). `portcullis check` must refuse
/// each Deployment with the apiserver's words; where several literals are misnamed, with the
/// same lines (the apiserver lists them in Go's map order).
#[test]
fn apply_configuration_errors_agree_with_the_apiserver() {
    mutations_agree_with_the_apiserver("apply-errors", "apply-error");
}

/// JSON Patches as the apiserver's library applies them (tests/fixtures/e2e/patch-errors):
/// a path without its leading `/`, negative list indices, list indices that `strconv.Atoi`
/// refuses or reads (`x`, `-`, `+0`, `00`, too large) in each operation, `replace` and `copy`
/// of a missing key, `test`, `move`, escaped keys, and results that do not decode strictly into the
/// Deployment's Go type (the apiserver's internal error). `portcullis check` must give the
/// same object or the same words.
#[test]
fn json_patch_results_agree_with_the_apiserver() {
    mutations_agree_with_the_apiserver("patch-errors", "patch-error");
}

/// Loads `folder`'s policies into the apiserver and `portcullis check`, and compares each of
/// its Deployments (policy `<prefix>-<name>` for each): the same refusal, or the same labels
/// and containers.
fn mutations_agree_with_the_apiserver(folder: &str, prefix: &str) {
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    let folder = fixture_path(folder);
    cluster.kubectl_ok(&["apply", "-f", &format!("{folder}/policies.yaml")]);
    let objects = typed_objects(&folder);
    // In force once each case's policy acts: a refusal naming it, or the object changed.
    for object in &objects {
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        let policy = format!("{prefix}-{name}");
        eventually(
            &format!("the policy for {name} to be active"),
            Duration::from_secs(60),
            || match cluster.dry_run_json("default", object) {
                Err(error) if error.contains(&policy) || error.contains("InternalError") => Ok(()),
                Ok(created) if mutated_parts(&created) != mutated_parts(object) => Ok(()),
                Ok(_) if name.starts_with("test-") || name.ends_with("-missing") => Ok(()),
                other => Err(format!("{other:?}")),
            },
        );
    }
    let output = Command::new(PORTCULLIS)
        .args(["check", "--output", "json", "--policies"])
        .arg(format!("{folder}/policies.yaml"))
        .arg(format!("{folder}/objects.yaml"))
        .output()
        .unwrap();
    let results: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("check output: {e}: {}", stderr(&output)));
    assert_eq!(results.len(), objects.len());
    // The misnamed literals, one line each, whatever their order; the rest of the message.
    let split = |text: &str| {
        let mut mismatches = std::collections::BTreeSet::new();
        let mut rest = String::new();
        for line in text.trim_end().lines() {
            match line.split_once("type mismatch: ") {
                Some((head, mismatch)) => {
                    rest.push_str(head);
                    mismatches.insert(mismatch.to_owned());
                }
                None if line.starts_with("unexpected type name") => {
                    mismatches.insert(line.to_owned());
                }
                None => rest.push_str(line),
            }
        }
        (rest, mismatches)
    };
    let mut differences = Vec::new();
    for (object, result) in objects.iter().zip(&results) {
        let name = object["metadata"]["name"].as_str().unwrap();
        let agrees = match (
            cluster.dry_run_json("default", object),
            result["allowed"] == true,
        ) {
            (Ok(created), true) => {
                let patched = result.get("patchedObject").filter(|p| !p.is_null());
                mutated_parts(&created) == mutated_parts(patched.unwrap_or(object))
            }
            (Err(apiserver), false) => {
                let message = result["violations"][0]["message"].as_str().unwrap_or("-");
                let ((ours, our_mismatches), (theirs, their_mismatches)) =
                    (split(message), split(&apiserver));
                theirs.contains(&ours) && our_mismatches == their_mismatches
            }
            _ => false,
        };
        if !agrees {
            differences.push(format!(
                "{name}:\n  apiserver: {:?}\n  portcullis: {result}",
                cluster.dry_run_json("default", object)
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    eprintln!(
        "e2e: {} cases of {folder} agree with the apiserver",
        objects.len()
    );
}

/// What the mutation cases change: the labels, the annotations and the containers' names
/// and images.
fn mutated_parts(object: &serde_json::Value) -> (serde_json::Value, Vec<String>) {
    let containers = object["spec"]["template"]["spec"]["containers"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|c| {
                    let field = |name: &str| c[name].as_str().unwrap_or("-").to_owned();
                    format!("{} {}", field("name"), field("image"))
                })
                .collect()
        })
        .unwrap_or_default();
    let metadata = &object["metadata"];
    (
        serde_json::json!([
            metadata["labels"],
            metadata["annotations"],
            object["spec"]["replicas"]
        ]),
        containers,
    )
}

fn prepare_typed(cluster: &ControlPlane, folder: &str) {
    cluster.kubectl_ok(&["create", "namespace", "typed"]);
    cluster.kubectl_ok(&["apply", "-f", &format!("{folder}/policies/crd.yaml")]);
    cluster.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/widgets.example.com",
    ]);
}

fn typed_objects(folder: &str) -> Vec<serde_json::Value> {
    serde_norway::Deserializer::from_str(
        &std::fs::read_to_string(format!("{folder}/objects.yaml")).unwrap(),
    )
    .map(|document| serde::Deserialize::deserialize(document).unwrap())
    .collect()
}

/// Polls until the sidecar is injected and the Widget labelled.
fn wait_for_typed_policies(cluster: &ControlPlane, what: &str, objects: &[serde_json::Value]) {
    eventually(what, Duration::from_secs(60), || {
        let sidecar = cluster.dry_run_json("typed", &objects[1])?;
        let widget = cluster.dry_run_json("typed", &objects[2])?;
        let ready = sidecar["spec"]["containers"].as_array().map(Vec::len) == Some(2)
            && widget["metadata"]["labels"]["mutated"] == "true";
        ready.then_some(()).ok_or(format!("{sidecar}\n{widget}"))
    });
}
