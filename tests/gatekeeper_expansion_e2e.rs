//! End-to-end: Gatekeeper ExpansionTemplates under `serve` against a real kube-apiserver. The
//! policies are the `expansion` scenario's (`tests/fixtures/gatekeeper/expansion`): a Pod must
//! not use the `latest` tag (deny), a generated Pod must set `runAsNonRoot` (warn), and
//! Deployments are expanded into their Pod. Registered with what `webhook-config` prints, the
//! webhook denies a Deployment whose Pod template uses `latest`, with the Pod's message and the
//! request's operation (CREATE, then DELETE of one created before the webhook), warns about its
//! Pod's missing `runAsNonRoot`, and admits a compliant Deployment without a word. `audit`
//! expands the Deployments it lists as Gatekeeper's audit does.
//!
//! Runs when `PORTCULLIS_E2E_BIN` names the control plane's folder; skipped otherwise, except
//! under `CI=true`, where it fails.

mod common;

use std::process::Command;
use std::time::Duration;

use common::control_plane::{
    ControlPlane, PORTCULLIS, Portcullis, e2e_bin, eventually, stderr, write_serving_certs,
};
use common::fixture;

/// A Deployment `apps/name` of one container running `image`, its Pod running as non-root or
/// not.
fn deployment(name: &str, image: &str, non_root: bool) -> String {
    let mut pod_spec = serde_json::json!({"containers": [{"name": "web", "image": image}]});
    if non_root {
        pod_spec["securityContext"] = serde_json::json!({"runAsNonRoot": true});
    }
    serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        },
    })
    .to_string()
}

#[test]
fn a_deployments_pod_is_reviewed_at_the_webhook() {
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    cluster.kubectl_ok(&["create", "namespace", "apps"]);
    // Created before the webhook exists: its deletion is reviewed below.
    let created = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        &deployment("legacy", "nginx", false),
    );
    assert!(created.status.success(), "{}", stderr(&created));

    let work = tempfile::tempdir().unwrap();
    let certs = work.path().join("certs");
    write_serving_certs(&certs);
    let scenario = fixture("gatekeeper/expansion");
    let folders: Vec<String> = ["templates", "constraints", "expansion"]
        .iter()
        .map(|folder| scenario.join(folder).display().to_string())
        .collect();
    let mut args = vec!["--tls-dir", certs.to_str().unwrap(), "--no-cluster"];
    for folder in &folders {
        args.extend(["--policies", folder.as_str()]);
    }
    let portcullis = Portcullis::start(&args);

    let mut command = Command::new(PORTCULLIS);
    command
        .args(["webhook-config", "--name", "portcullis"])
        .args(["--url", &format!("https://{}", portcullis.webhook)])
        .arg("--ca-bundle")
        .arg(certs.join("ca.crt"))
        .args(["--failure-policy", "Fail"]);
    for folder in &folders {
        command.args(["--policies", folder]);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let generated = String::from_utf8(output.stdout).unwrap();
    assert!(
        generated.contains("- deployments"),
        "no rule for the expanded kind:\n{generated}"
    );
    cluster.apply(&generated);

    // The webhook configuration reaches the apiserver through an informer.
    let bad = deployment("web", "nginx", false);
    let denial = "[no-latest] [Implied by expand-deployments] container <web> uses tag \
                  <latest>: Pod apps/web-pod, operation \"CREATE\", owners [\"Deployment/web\"]";
    eventually(
        "a Deployment whose Pod uses latest to be denied",
        Duration::from_secs(60),
        || {
            let output = cluster.kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], &bad);
            let text = stderr(&output);
            if !output.status.success() && text.contains(denial) {
                Ok(())
            } else {
                Err(text)
            }
        },
    );

    // A tagged image: admitted, with the generated Pod's warning.
    let output = cluster.kubectl_stdin(
        &["create", "--dry-run=server", "-f", "-"],
        &deployment("tagged", "nginx:1.27", false),
    );
    let text = stderr(&output);
    assert!(output.status.success(), "{text}");
    assert!(
        text.contains(
            "Warning: [generated-pods-run-as-nonroot] [Implied by expand-deployments] pod \
             tagged-pod in apps must set runAsNonRoot (operation \"CREATE\")"
        ),
        "{text}"
    );
    // Compliant: admitted without a warning.
    let output = cluster.kubectl_stdin(
        &["create", "--dry-run=server", "-f", "-"],
        &deployment("good", "nginx:1.27", true),
    );
    let text = stderr(&output);
    assert!(
        output.status.success() && !text.contains("Warning"),
        "{text}"
    );

    // DELETE: the Pod is made from the old object, and its review carries the operation.
    let output = cluster.kubectl(&[
        "delete",
        "deployment",
        "-n",
        "apps",
        "legacy",
        "--dry-run=server",
    ]);
    let text = stderr(&output);
    assert!(!output.status.success(), "{text}");
    assert!(
        text.contains(
            "[no-latest] [Implied by expand-deployments] container <web> uses tag <latest>: \
             Pod apps/legacy-pod, operation \"DELETE\", owners [\"Deployment/legacy\"]"
        ),
        "{text}"
    );
    let status = portcullis.terminate();
    assert!(status.success(), "{status:?}");
}

#[test]
fn audit_reviews_the_pods_of_the_deployments_it_lists() {
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    cluster.kubectl_ok(&["create", "namespace", "apps"]);
    for (name, image, non_root) in [
        ("latest", "nginx", true),
        ("tagged", "nginx:1.27", false),
        ("good", "nginx:1.27", true),
    ] {
        let output =
            cluster.kubectl_stdin(&["create", "-f", "-"], &deployment(name, image, non_root));
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let scenario = fixture("gatekeeper/expansion");
    let mut command = Command::new(PORTCULLIS);
    command.args(["audit", "--kubeconfig", cluster.kubeconfig()]);
    for folder in ["templates", "constraints", "expansion"] {
        command.arg("--policies").arg(scenario.join(folder));
    }
    let output = command
        .args(["--output", "json"])
        .env_remove("PORTCULLIS_NAMESPACE")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let results: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let of = |name: &str| {
        results
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kind"] == "Deployment" && r["name"] == name)
            .unwrap_or_else(|| panic!("no result for Deployment {name}: {results}"))
            .clone()
    };
    // Offline, as the audit's reviews are, the operation is empty.
    let latest = of("latest");
    assert_eq!(latest["allowed"], false, "{latest}");
    assert_eq!(
        latest["violations"][0]["message"],
        "[no-latest] [Implied by expand-deployments] container <web> uses tag <latest>: Pod \
         apps/latest-pod, operation \"\", owners [\"Deployment/latest\"]",
        "{latest}"
    );
    let tagged = of("tagged");
    assert_eq!(tagged["allowed"], true, "{tagged}");
    assert_eq!(
        tagged["warnings"],
        serde_json::json!([
            "[generated-pods-run-as-nonroot] [Implied by expand-deployments] pod tagged-pod in \
             apps must set runAsNonRoot (operation \"\")"
        ]),
        "{tagged}"
    );
    let good = of("good");
    assert_eq!(good["allowed"], true, "{good}");
    assert_eq!(good["warnings"], serde_json::json!([]), "{good}");
}
