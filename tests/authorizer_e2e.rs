//! End-to-end, differential: the CEL `authorizer` of a ValidatingAdmissionPolicy
//! (`tests/fixtures/e2e/authorizer`) in the real kube-apiserver and in Portcullis. The policy
//! runs in-tree and in Portcullis (`serve --kubeconfig`, asking SubjectAccessReviews, called
//! as a webhook) under two `Warn` bindings, so every request gets both answers, told apart by
//! binding name; they must agree (allowed, reason, errored, error of resource, path,
//! `requestResource` and `serviceAccount` checks) for a user with the RBAC permission the
//! policy asks about, one without, one who has it through a group, and a service account, each
//! impersonated with `kubectl --as`. A MutatingAdmissionPolicy asking the authorizer (in
//! matchConditions and a mutation) runs the same way, in-tree and in Portcullis, each setting
//! its own label, and the labels must agree. An auditAnnotation using `authorizer` denies with
//! the same error in-tree and in Portcullis.
//!
//! Runs when `PORTCULLIS_E2E_BIN` names the folder with `etcd`, `kube-apiserver` and
//! `kubectl`; skipped otherwise, except under `CI=true`, where it fails.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::control_plane::{
    ControlPlane, PORTCULLIS, Portcullis, e2e_bin, eventually, stderr, write_serving_certs,
};
use common::fixture;

const NAMESPACE: &str = "authz-e2e";

fn fixture_path(name: &str) -> String {
    fixture(&format!("e2e/authorizer/{name}"))
        .display()
        .to_string()
}

/// The warnings of binding `binding` among kubectl's stderr, without their common prefix,
/// sorted.
fn warnings(stderr: &str, binding: &str) -> Vec<String> {
    let prefix = format!(
        "Warning: Validation failed for ValidatingAdmissionPolicy 'authz' with binding \
         '{binding}': "
    );
    let mut found: Vec<String> = stderr
        .lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .map(str::to_owned)
        .collect();
    found.sort();
    found
}

/// What the in-tree policies and Portcullis's said about one request.
#[derive(Debug, Default)]
struct Answers {
    /// The warnings of the in-tree ValidatingAdmissionPolicy binding, and of Portcullis's.
    warnings: (Vec<String>, Vec<String>),
    /// The label the in-tree MutatingAdmissionPolicy set, and Portcullis's.
    labels: (Option<String>, Option<String>),
}

/// One request as `user` (with `groups`): a server-side dry-run create of ConfigMap `name`,
/// with `replicas` in its data when `replicas` says so.
fn ask(cluster: &ControlPlane, user: &str, groups: &[&str], name: &str, replicas: bool) -> Answers {
    let mut args = vec!["--as", user];
    for group in groups {
        args.extend(["--as-group", group]);
    }
    args.extend([
        "create",
        "configmap",
        name,
        "-n",
        NAMESPACE,
        "--dry-run=server",
        "-o",
        "json",
    ]);
    if replicas {
        args.push("--from-literal=replicas=3");
    }
    let output = cluster.kubectl(&args);
    assert!(output.status.success(), "{user}: {}", stderr(&output));
    let text = stderr(&output);
    let object: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let label = |key: &str| {
        object["metadata"]["labels"][key]
            .as_str()
            .map(str::to_owned)
    };
    Answers {
        warnings: (
            warnings(&text, "authz-in-tree"),
            warnings(&text, "authz-portcullis"),
        ),
        labels: (label("in-tree"), label("portcullis")),
    }
}

fn webhook_config(webhook: std::net::SocketAddr, ca_bundle: &Path, policies: &[&str]) -> String {
    let output = Command::new(PORTCULLIS)
        .args([
            "webhook-config",
            "--name",
            "authz",
            "--namespace",
            "portcullis",
        ])
        .args(["--url", &format!("https://{webhook}")])
        .arg("--ca-bundle")
        .arg(ca_bundle)
        .args(["--failure-policy", "Fail", "--timeout-seconds", "5"])
        .args(policies.iter().flat_map(|policy| ["--policies", policy]))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    String::from_utf8(output.stdout).unwrap()
}

/// The value of the counter `name{result="<result>"}` in a metrics page; 0 when absent.
fn counter(metrics: &str, name: &str, result: &str) -> u64 {
    let prefix = format!("{name}_total{{result=\"{result}\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map_or(0, |value| value.trim().parse().unwrap())
}

#[test]
fn authorizer_agrees_with_the_apiserver() {
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    let version = cluster.server_version();
    let policy = fixture_path("policy.yaml");
    let portcullis_binding = fixture_path("portcullis-binding.yaml");
    let audit_policy = fixture_path("audit-policy.yaml");
    let audit_portcullis_binding = fixture_path("audit-portcullis-binding.yaml");
    let audit_in_tree_binding = fixture_path("audit-in-tree-binding.yaml");
    let map_portcullis = fixture_path("map-portcullis.yaml");
    cluster.kubectl_ok(&["apply", "-f", &fixture_path("rbac.yaml")]);
    // carol may update Deployments through a group.
    cluster.kubectl_ok(&[
        "create",
        "rolebinding",
        "editors-group",
        "-n",
        NAMESPACE,
        "--role=deployment-editor",
        "--group=deployment-editors",
    ]);
    cluster.kubectl_ok(&[
        "apply",
        "-f",
        &policy,
        "-f",
        &fixture_path("in-tree-binding.yaml"),
        "-f",
        &audit_policy,
        "-f",
        &audit_in_tree_binding,
        "-f",
        &fixture_path("map-in-tree.yaml"),
    ]);

    let work = tempfile::tempdir().unwrap();
    let certs = work.path().join("certs");
    write_serving_certs(&certs);
    let portcullis = Portcullis::start(&[
        "--tls-dir",
        certs.to_str().unwrap(),
        "--kubeconfig",
        cluster.kubeconfig(),
        "--policies",
        &policy,
        "--policies",
        &portcullis_binding,
        "--policies",
        &audit_policy,
        "--policies",
        &audit_portcullis_binding,
        "--policies",
        &map_portcullis,
    ]);
    cluster.apply(&webhook_config(
        portcullis.webhook,
        &certs.join("ca.crt"),
        &[
            &policy,
            &portcullis_binding,
            &audit_policy,
            &audit_portcullis_binding,
            &map_portcullis,
        ],
    ));

    eventually(
        "the in-tree policy and Portcullis to answer",
        Duration::from_secs(60),
        || {
            let answers = ask(&cluster, "bob", &[], "probe", true);
            let (in_tree, from_portcullis) = &answers.warnings;
            let (in_tree_label, portcullis_label) = &answers.labels;
            if in_tree.is_empty()
                || from_portcullis.is_empty()
                || in_tree_label.is_none()
                || portcullis_label.is_none()
            {
                return Err(format!("{answers:#?}"));
            }
            Ok(())
        },
    );

    let cases: [(&str, &[&str], bool); 6] = [
        ("alice", &[], true),
        ("alice", &[], false),
        ("bob", &[], true),
        ("bob", &[], false),
        ("carol", &["deployment-editors"], true),
        ("system:serviceaccount:authz-e2e:builder", &[], true),
    ];
    let mut answers = Vec::new();
    let mut labels_seen = Vec::new();
    for (user, groups, replicas) in cases {
        let Answers { warnings, labels } = ask(&cluster, user, groups, "probe", replicas);
        let (in_tree, from_portcullis) = warnings;
        assert_eq!(
            from_portcullis, in_tree,
            "disagreement for {user} {groups:?} (replicas: {replicas})"
        );
        assert_eq!(
            labels.1, labels.0,
            "MutatingAdmissionPolicy disagreement for {user} {groups:?}"
        );
        eprintln!(
            "e2e ({version}): {user} {groups:?} replicas={replicas}: label {:?}, warnings \
             {in_tree:#?}",
            labels.0
        );
        labels_seen.push((user, labels.0));
        answers.push(((user, replicas), in_tree));
    }
    let answer = |user: &str, replicas: bool| {
        answers
            .iter()
            .find(|((u, r), _)| *u == user && *r == replicas)
            .map(|(_, a)| a.clone())
            .unwrap()
    };
    let has = |answer: &[String], message: &str| answer.iter().any(|w| w == message);
    let denial = "setting replicas needs update on deployments";
    let no_delete = "may not delete this ConfigMap";
    let reason_given = "update: the authorizer gave a reason";
    // The apiserver is the judge; these say the comparison covered both outcomes.
    let alice = answer("alice", true);
    assert!(
        !has(&alice, denial) && !has(&alice, no_delete),
        "{alice:#?}"
    );
    assert!(has(&alice, reason_given), "{alice:#?}");
    let bob = answer("bob", true);
    assert!(has(&bob, denial) && has(&bob, no_delete), "{bob:#?}");
    assert!(!has(&bob, reason_given), "{bob:#?}");
    assert!(!has(&answer("bob", false), denial));
    assert!(!has(&answer("carol", true), denial));
    for answer in [&alice, &bob] {
        // No check errored; the builder's reason names its RoleBinding; every user may get
        // /healthz, none /metrics or Secret x.
        for absent in [
            "update: errored",
            "builder may not create ConfigMaps",
            "builder: the reason does not name the RoleBinding",
            "may not get /healthz",
        ] {
            assert!(!has(answer, absent), "{absent}: {answer:#?}");
        }
        for present in ["may not get /metrics", "may not get Secret x"] {
            assert!(has(answer, present), "{present}: {answer:#?}");
        }
    }
    let label = |user: &str| {
        labels_seen
            .iter()
            .find(|(u, _)| *u == user)
            .and_then(|(_, l)| l.clone())
    };
    assert_eq!(label("alice").as_deref(), Some("delete-true.update-true"));
    assert_eq!(label("bob").as_deref(), Some("delete-false.update-false"));
    // Only for a user who may update: the messageExpression reads a variable that uses
    // `authorizer`, fails, and the message is used instead.
    assert!(has(&alice, "messageExpressions have no authorizer"));

    // An auditAnnotation using `authorizer` is an error, which denies: in-tree first; with
    // the in-tree binding gone, Portcullis.
    let denied = |namespace_owner: &str| -> Result<String, String> {
        let output = cluster.kubectl(&[
            "create",
            "configmap",
            "probe",
            "-n",
            "authz-audit",
            "--dry-run=server",
        ]);
        let text = stderr(&output);
        match text
            .lines()
            .find_map(|line| line.split_once(namespace_owner))
        {
            Some((_, rest)) if !output.status.success() => Ok(rest.to_owned()),
            _ => Err(text),
        }
    };
    let mut in_tree = String::new();
    eventually(
        "the in-tree audit policy to deny",
        Duration::from_secs(60),
        || {
            in_tree = denied("'authz-audit' with binding 'authz-audit-in-tree' denied request: ")?;
            Ok(())
        },
    );
    cluster.kubectl_ok(&["delete", "-f", &audit_in_tree_binding]);
    let mut from_portcullis = String::new();
    eventually(
        "Portcullis to deny for the audit policy",
        Duration::from_secs(60),
        || {
            from_portcullis =
                denied("'authz-audit' with binding 'authz-audit-portcullis' denied request: ")?;
            Ok(())
        },
    );
    eprintln!("e2e ({version}): auditAnnotation with authorizer: in-tree {in_tree:?}");
    assert_eq!(from_portcullis, in_tree);

    // Every check asked the cluster or the cache; none failed.
    let metrics = portcullis.metrics();
    let allowed = counter(&metrics, "portcullis_authorizer_reviews", "allowed");
    let denied = counter(&metrics, "portcullis_authorizer_reviews", "denied");
    let errors = counter(&metrics, "portcullis_authorizer_reviews", "error");
    let hits = counter(&metrics, "portcullis_authorizer_cache", "hit");
    let misses = counter(&metrics, "portcullis_authorizer_cache", "miss");
    eprintln!(
        "e2e ({version}): SubjectAccessReviews allowed {allowed}, denied {denied}, error {errors}; \
         cache hits {hits}, misses {misses}"
    );
    assert!(allowed > 0 && denied > 0, "{metrics}");
    assert_eq!(errors, 0, "{metrics}");
    assert_eq!(allowed + denied, misses);
    assert!(hits > 0, "{metrics}");
    eprintln!(
        "e2e: kube-apiserver {version} and Portcullis agree on the authorizer for {} requests",
        cases.len()
    );
}
