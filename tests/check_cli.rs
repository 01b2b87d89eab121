//! `portcullis check` run as a process on fixture manifests and reviews: exit codes, the JSON
//! and text output, operations, namespaces among the inputs, bad input; and the promise that a
//! review gets from `check` the same decision and patch as from the webhook router.

mod common;

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use axum::Router;
use base64::Engine as _;
use common::{body_bytes, post_json};
use portcullis::engine::Engine;
use portcullis::server::{AppState, RequestSettings, webhook_router};
use serde_json::{Value, json};
use tower::ServiceExt;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Runs the binary in the crate root, so fixture paths are relative as a user would type them.
fn portcullis(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(args)
        .current_dir(ROOT)
        .env_remove("PORTCULLIS_POLICIES")
        .output()
        .unwrap()
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exited by a signal")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// `check --output json` on `args`: the exit code and the array.
fn run_json(args: &[&str]) -> (i32, Vec<Value>) {
    let mut all = vec!["check", "--output", "json"];
    all.extend(args);
    let output = portcullis(&all);
    let results = serde_json::from_str(&stdout(&output))
        .unwrap_or_else(|e| panic!("{args:?}: {e}; stderr: {}", stderr(&output)));
    (code(&output), results)
}

/// `check --output json` on `args`; asserts the exit code and returns the array.
fn check_json(args: &[&str], expected_code: i32) -> Vec<Value> {
    let (code, results) = run_json(args);
    assert_eq!(code, expected_code, "{args:?}");
    results
}

fn find<'a>(results: &'a [Value], kind: &str, name: &str) -> &'a Value {
    results
        .iter()
        .find(|r| r["kind"] == kind && r["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {results:#?}"))
}

/// The fields of every object in `check --output json`.
const FIELDS: [&str; 14] = [
    "source",
    "uid",
    "operation",
    "apiVersion",
    "kind",
    "namespace",
    "name",
    "webhooks",
    "allowed",
    "violations",
    "warnings",
    "auditAnnotations",
    "patch",
    "patchedObject",
];

#[test]
fn everything_allowed_exits_0() {
    let output = portcullis(&["check", "tests/fixtures/check/compliant.yaml"]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains("ALLOWED  CREATE Pod shop/web"),
        "text output: {text}"
    );
    // The pod meets Pod Security "restricted" only with the seccomp default /mutate adds: no
    // warning shows that /validate saw the patched object.
    assert!(!text.contains("    warning "), "{text}");
    // A cluster-scoped kind has no namespace, whatever the manifest says.
    assert!(text.contains("CREATE ClusterRole reader "), "{text}");
    assert!(
        text.contains("2 documents: 2 allowed (0 with warnings)"),
        "{text}"
    );
}

#[test]
fn json_output_has_one_object_per_document() {
    let results = check_json(&["tests/fixtures/check/pods.yaml"], 1);
    assert_eq!(results.len(), 5);
    let mut expected = FIELDS.to_vec();
    expected.sort_unstable();
    for (index, result) in results.iter().enumerate() {
        let mut keys: Vec<&str> = result
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, expected);
        assert_eq!(
            result["source"],
            json!({"file": "tests/fixtures/check/pods.yaml", "index": index})
        );
        assert_eq!(result["operation"], "CREATE");
    }

    // The Namespace is evaluated too: Pod Security registers namespaces on /validate (to
    // refuse invalid pod-security labels); nothing mutates them.
    let namespace = find(&results, "Namespace", "team-a");
    assert_eq!(namespace["namespace"], Value::Null);
    assert_eq!(namespace["webhooks"], json!(["validate"]));
    assert_eq!(namespace["allowed"], true);
    assert_eq!(namespace["violations"], json!([]));

    // Defaulted, then "restricted" once the seccomp default is in: no warning, only the
    // enforced level recorded.
    let web = find(&results, "Pod", "web");
    assert_eq!(web["allowed"], true);
    assert_eq!(web["webhooks"], json!(["mutate", "validate"]));
    assert_eq!(web["warnings"], json!([]));
    assert_eq!(
        web["auditAnnotations"],
        json!({"pod-security-enforce-policy": "baseline:latest"})
    );
    // The apiserver has already defaulted imagePullPolicy (a tagged image: IfNotPresent)
    // before admission, so the built-in default rule has nothing to add there.
    assert_eq!(
        web["patch"],
        json!([
            {"op": "add", "path": "/spec/securityContext/seccompProfile",
             "value": {"type": "RuntimeDefault"}}
        ])
    );
    assert_eq!(
        web["patchedObject"],
        // As the apiserver defaults it (kubectl create --dry-run=server shows the same
        // fields), then patched.
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web", "namespace": "team-a"},
               "spec": {"containers": [{"name": "web",
                                        "image": "nginxinc/nginx-unprivileged:1.27.3",
                                        "imagePullPolicy": "IfNotPresent",
                                        "resources": {},
                                        "terminationMessagePath": "/dev/termination-log",
                                        "terminationMessagePolicy": "File",
                                        "securityContext": {
                                            "allowPrivilegeEscalation": false,
                                            "capabilities": {"drop": ["ALL"]}}}],
                        "dnsPolicy": "ClusterFirst",
                        "enableServiceLinks": true,
                        "restartPolicy": "Always",
                        "schedulerName": "default-scheduler",
                        "terminationGracePeriodSeconds": 30,
                        "securityContext": {"runAsNonRoot": true,
                                            "seccompProfile": {"type": "RuntimeDefault"}}},
               // Go encodes the typed Pod's (empty) status struct: admission sees it.
               "status": {}})
    );

    // Refused by the enforced "baseline" level, in upstream's words; a refused request gets
    // no warning, but the audited "restricted" level is recorded.
    let netdebug = find(&results, "Pod", "netdebug");
    assert_eq!(netdebug["allowed"], false);
    assert_eq!(
        netdebug["violations"],
        json!([
            {"policy": "pod-security", "rule": "enforce", "path": "",
             "message": "violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true), privileged (container \"netdebug\" must not set securityContext.privileged=true)"}
        ])
    );
    assert_eq!(netdebug["warnings"], json!([]));
    assert_eq!(
        netdebug["auditAnnotations"]["pod-security-enforce-policy"],
        "baseline:latest"
    );
    assert!(
        netdebug["auditAnnotations"]["pod-security-audit-violations"]
            .as_str()
            .unwrap()
            .starts_with("would violate PodSecurity \"restricted:latest\": host namespaces (hostNetwork=true), privileged (container \"netdebug\"")
    );
    assert_eq!(netdebug["patch"], Value::Null);
    assert_eq!(netdebug["patchedObject"], Value::Null);

    // No namespace in the manifest: the request is for "default", as kubectl makes it.
    // Warned about, not refused: an unpinned image, and "restricted" not met.
    let scratch = find(&results, "Pod", "scratch");
    assert_eq!(scratch["namespace"], "default");
    assert_eq!(scratch["allowed"], true);
    assert_eq!(scratch["violations"], json!([]));
    let warnings: Vec<&str> = scratch["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert_eq!(
        warnings[0],
        "[builtin-image-tags/pinned] spec.containers[0].image: container \"shell\" image \"busybox:latest\" must have a tag other than latest"
    );
    assert!(
        warnings[1].starts_with(
            "would violate PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"shell\""
        ),
        "{warnings:?}"
    );
    assert_eq!(
        scratch["auditAnnotations"]["pod-security-audit-violations"],
        warnings[1]
    );

    let settings = find(&results, "ConfigMap", "settings");
    assert_eq!(settings["webhooks"], json!([]));
    assert_eq!(settings["allowed"], true);

    // Uids are derived from file and document: the same on every run, distinct per document.
    let again = check_json(&["tests/fixtures/check/pods.yaml"], 1);
    assert_eq!(results[1]["uid"], again[1]["uid"]);
    assert_ne!(results[1]["uid"], results[2]["uid"]);
}

#[test]
fn text_output_lists_verdicts_violations_warnings_and_patches() {
    let output = portcullis(&["check", "tests/fixtures/check/pods.yaml"]);
    assert_eq!(code(&output), 1);
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    let line_of = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?} in\n{text}"))
    };
    let denied = line_of("DENIED   CREATE Pod team-a/netdebug");
    assert!(lines[denied].ends_with("tests/fixtures/check/pods.yaml (document 2)"));
    // Pod Security violations have no path: the message follows the rule.
    assert_eq!(
        lines[denied + 1],
        "    violation  [pod-security/enforce] violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true), privileged (container \"netdebug\" must not set securityContext.privileged=true)"
    );
    assert!(
        lines[denied + 2].starts_with(
            "    audit      pod-security-audit-violations: would violate PodSecurity \"restricted:latest\": "
        ),
        "{text}"
    );
    assert_eq!(
        lines[denied + 3],
        "    audit      pod-security-enforce-policy: baseline:latest"
    );
    let warned = line_of("WARN     CREATE Pod default/scratch");
    assert!(
        lines[warned + 1].starts_with(
            "    warning    [builtin-image-tags/pinned] spec.containers[0].image: container \"shell\""
        ),
        "{text}"
    );
    assert!(
        lines[warned + 2]
            .starts_with("    warning    would violate PodSecurity \"restricted:latest\": "),
        "{text}"
    );
    let allowed = line_of("ALLOWED  CREATE Pod team-a/web");
    assert_eq!(
        lines[allowed + 1..allowed + 3],
        [
            "    audit      pod-security-enforce-policy: baseline:latest",
            "    patch      add /spec/securityContext/seccompProfile {\"type\":\"RuntimeDefault\"}",
        ]
    );
    assert!(lines[line_of("ALLOWED  CREATE ConfigMap team-a/settings")].contains("not sent"));
    assert_eq!(
        lines.last().unwrap(),
        &"5 documents: 4 allowed (1 with warnings), 1 denied, 1 patched"
    );
}

#[test]
fn json_manifests_and_workload_templates() {
    // Pod Security never refuses a workload, as upstream: the privileged template with a host
    // port is warned about and audited at "restricted" (the enforced level is not evaluated),
    // and defaulted.
    let results = check_json(&["tests/fixtures/check/deployment.json"], 0);
    assert_eq!(results.len(), 1);
    let deployment = &results[0];
    assert_eq!(deployment["apiVersion"], "apps/v1");
    assert_eq!(deployment["namespace"], "logging");
    assert_eq!(deployment["allowed"], true);
    assert_eq!(deployment["violations"], json!([]));
    let warning = deployment["warnings"][0].as_str().unwrap();
    assert_eq!(deployment["warnings"].as_array().unwrap().len(), 1);
    assert!(
        warning.starts_with(
            "would violate PodSecurity \"restricted:latest\": hostPort (container \"shipper\" uses hostPort 24224), privileged (container \"shipper\" must not set securityContext.privileged=true), "
        ),
        "{warning}"
    );
    assert_eq!(
        deployment["auditAnnotations"],
        json!({"pod-security-audit-violations": warning})
    );
    // The apiserver defaults the template's securityContext to {} before admission: the
    // seccomp default goes inside it.
    assert_eq!(
        deployment["patch"][0]["path"],
        "/spec/template/spec/securityContext/seccompProfile"
    );

    // A native Deny rule looks into the template and names the field there.
    let results = check_json(
        &[
            "--policies",
            "tests/fixtures/check/policies/no-host-ports.yaml",
            "tests/fixtures/check/deployment.json",
        ],
        1,
    );
    assert_eq!(
        results[0]["violations"],
        json!([{"policy": "no-host-ports", "rule": "ports",
                "path": "spec.template.spec.containers[0].ports[0].hostPort",
                "message": "container \"shipper\" must not use host port 24224"}])
    );
}

#[test]
fn update_and_delete_operations() {
    // UPDATE: a Pod's spec is immutable, so it is not defaulted; a Deployment is. An UPDATE
    // that changes no container or image is not re-evaluated by Pod Security (upstream's
    // significant pod updates), so even the privileged Pod passes; the workload is warned.
    let results = check_json(
        &[
            "--operation",
            "UPDATE",
            "tests/fixtures/check/pods.yaml",
            "tests/fixtures/check/deployment.json",
        ],
        0,
    );
    assert!(results.iter().all(|r| r["operation"] == "UPDATE"));
    let web = find(&results, "Pod", "web");
    assert_eq!(web["allowed"], true);
    assert_eq!(web["patch"], Value::Null);
    let netdebug = find(&results, "Pod", "netdebug");
    assert_eq!(netdebug["allowed"], true);
    assert_eq!(netdebug["auditAnnotations"], json!({}));
    let deployment = find(&results, "Deployment", "log-shipper");
    assert_eq!(deployment["allowed"], true);
    assert!(
        deployment["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("would violate PodSecurity \"restricted:latest\": ")
    );
    // Only the seccomp default: imagePullPolicy is already defaulted by the apiserver.
    assert_eq!(deployment["patch"].as_array().unwrap().len(), 1);
    assert_eq!(
        deployment["patchedObject"]["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );

    // A native Deny rule checks every UPDATE, workload templates included.
    let results = check_json(
        &[
            "--operation",
            "UPDATE",
            "--policies",
            "tests/fixtures/check/policies/no-host-ports.yaml",
            "tests/fixtures/check/deployment.json",
        ],
        1,
    );
    assert_eq!(results[0]["operation"], "UPDATE");
    assert_eq!(results[0]["allowed"], false);
    assert_eq!(
        results[0]["violations"][0]["path"],
        "spec.template.spec.containers[0].ports[0].hostPort"
    );

    // A review carries both objects: a changed image is a significant update, and the
    // privileged Pod is refused.
    let results = check_json(
        &["tests/fixtures/check/reviews/pod-update-image-privileged.json"],
        1,
    );
    assert_eq!(results[0]["operation"], "UPDATE");
    assert_eq!(results[0]["violations"][0]["rule"], "enforce");
    assert_eq!(results[0]["patch"], Value::Null);

    // Offline the uid does not matter: a review without one (as other tools' test suites
    // write them) is decided the same.
    let without_uid = check_json(&["tests/fixtures/check/offline/pod-update-no-uid.json"], 1);
    assert_eq!(without_uid[0]["violations"], results[0]["violations"]);

    // DELETE: no rule registers DELETE, so the apiserver would not call the webhook and even
    // the privileged Pod may be deleted.
    let results = check_json(
        &["--operation", "DELETE", "tests/fixtures/check/pods.yaml"],
        0,
    );
    for result in &results {
        assert_eq!(result["operation"], "DELETE");
        assert_eq!(result["webhooks"], json!([]));
        assert_eq!(result["allowed"], true);
        assert_eq!(result["patch"], Value::Null);
    }

    // A review carries its own operation.
    let results = check_json(
        &[
            "--operation",
            "CREATE",
            "tests/fixtures/reviews/configmap-delete.json",
        ],
        0,
    );
    assert_eq!(results[0]["operation"], "DELETE");
}

#[test]
fn namespace_manifests_feed_namespace_selectors() {
    let policy = "tests/fixtures/check/namespaces/prod-pinned.yaml";
    let pods = "tests/fixtures/check/namespaces/pods.yaml";
    let results = check_json(
        &[
            "--policies",
            policy,
            "tests/fixtures/check/namespaces/namespaces.yaml",
            pods,
        ],
        1,
    );
    assert_eq!(results.len(), 4);
    let prod = results.iter().find(|r| r["namespace"] == "prod").unwrap();
    assert_eq!(prod["allowed"], false);
    assert_eq!(prod["violations"][0]["policy"], "prod-pinned");
    let dev = results.iter().find(|r| r["namespace"] == "dev").unwrap();
    assert_eq!(dev["allowed"], true);

    // Without the Namespace objects the labels are unknown and the selector does not match.
    let results = check_json(&["--policies", policy, pods], 0);
    assert!(results.iter().all(|r| r["allowed"] == true));
}

/// `namespaceObject` is the whole Namespace document, decoded and defaulted as the apiserver
/// stores it (a phase of Active when it has no status), not just its name and labels.
#[test]
fn namespace_object_is_the_whole_namespace() {
    let folder = "tests/fixtures/check/namespace-object";
    let policy = format!("{folder}/policy.yaml");
    let namespaces = format!("{folder}/namespaces.yaml");
    let configmaps = format!("{folder}/configmaps.yaml");
    let results = check_json(&["--policies", &policy, &namespaces, &configmaps], 1);
    let denial = |namespace: &str| -> Vec<String> {
        results
            .iter()
            .find(|r| r["kind"] == "ConfigMap" && r["namespace"] == namespace)
            .unwrap_or_else(|| panic!("no ConfigMap in {namespace}"))["violations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                v["message"]
                    .as_str()
                    .unwrap()
                    .strip_prefix(
                        "ValidatingAdmissionPolicy 'namespace-object' with binding \
                         'namespace-object' denied request: ",
                    )
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    // Annotation x=allow and no status: defaulted to Active.
    assert!(denial("allowed").is_empty());
    assert_eq!(denial("denied"), ["namespace denied says x=deny"]);
    // An exported object keeps its status.
    assert_eq!(denial("leaving"), ["namespace leaving is Terminating"]);
    // No annotations at all: a missing key, as in the apiserver (failurePolicy Fail).
    assert_eq!(
        denial("bare"),
        [
            "expression 'namespaceObject.metadata.annotations['x'] != 'deny'' resulted in error: \
          no such key: annotations"
        ]
    );
    // A namespace without a document: only its name and labels are known.
    assert_eq!(
        denial("elsewhere"),
        [
            "expression 'namespaceObject.status.phase == 'Active'' resulted in error: no such \
             key: phase",
            "expression 'namespaceObject.metadata.annotations['x'] != 'deny'' resulted in \
             error: no such key: annotations"
        ]
    );
}

#[test]
fn namespace_manifests_set_pod_security_levels() {
    let namespaces = "tests/fixtures/check/namespaces/pod-security-namespaces.yaml";
    let pods = "tests/fixtures/check/namespaces/pod-security-pods.yaml";
    let results = check_json(&[namespaces, pods], 1);
    assert_eq!(results.len(), 5);
    for name in ["payments", "sandbox"] {
        assert_eq!(find(&results, "Namespace", name)["allowed"], true);
    }
    // An invalid level label refuses the Namespace, with upstream's message.
    assert_eq!(
        find(&results, "Namespace", "typo")["violations"],
        json!([{"policy": "pod-security", "rule": "namespace-labels", "path": "",
                "message": "Namespace \"typo\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"}])
    );
    // enforce=restricted: a pod that meets "baseline" is refused.
    let api = find(&results, "Pod", "api");
    assert_eq!(api["allowed"], false);
    assert!(
        api["violations"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with(
                "violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false"
            )
    );
    assert_eq!(
        api["auditAnnotations"]["pod-security-enforce-policy"],
        "restricted:latest"
    );
    // enforce=privileged: a privileged pod is admitted; warn stays at the default.
    let netdebug = find(&results, "Pod", "netdebug");
    assert_eq!(netdebug["allowed"], true);
    assert_eq!(
        netdebug["auditAnnotations"]["pod-security-enforce-policy"],
        "privileged:latest"
    );
    assert!(
        netdebug["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("would violate PodSecurity \"restricted:latest\": privileged")
    );

    // Without the Namespace objects the defaults apply: baseline admits the first pod (with a
    // warning) and refuses the privileged one.
    let results = check_json(&[pods], 1);
    let api = find(&results, "Pod", "api");
    assert_eq!(api["allowed"], true);
    assert_eq!(api["warnings"].as_array().unwrap().len(), 1);
    assert_eq!(find(&results, "Pod", "netdebug")["allowed"], false);
}

#[test]
fn lists_and_standard_input() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["check", "--output", "json", "-"])
        .current_dir(ROOT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let list = std::fs::read(format!("{ROOT}/tests/fixtures/check/list.yaml")).unwrap();
    child.stdin.take().unwrap().write_all(&list).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    let results: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(
        results[1]["source"],
        json!({"file": "-", "index": 0, "item": 1})
    );
    assert_eq!(results[0]["allowed"], true);
    assert_eq!(results[1]["allowed"], false);
    assert_eq!(results[1]["violations"][0]["policy"], "pod-security");
}

#[test]
fn bad_input_exits_2_naming_file_and_document() {
    let cases = [
        (
            vec!["tests/fixtures/check/missing.yaml"],
            "error: tests/fixtures/check/missing.yaml: cannot read:",
        ),
        (
            vec!["tests/fixtures/check/bad/invalid-yaml.yaml"],
            "error: tests/fixtures/check/bad/invalid-yaml.yaml (document 1): invalid YAML:",
        ),
        (
            vec!["tests/fixtures/check/bad/no-kind.yaml"],
            "error: tests/fixtures/check/bad/no-kind.yaml (document 1): the document has no kind",
        ),
        (
            vec!["tests/fixtures/check/bad/unknown-kind.yaml"],
            "error: tests/fixtures/check/bad/unknown-kind.yaml (document 0): Widget has no apiVersion",
        ),
        (
            vec!["tests/fixtures/check/bad/pod-hostnetwork-string.yaml"],
            "error: tests/fixtures/check/bad/pod-hostnetwork-string.yaml (document 0): Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field PodSpec.spec.hostNetwork of type bool",
        ),
        (
            vec!["tests/fixtures/check/bad/pod-containers-object.yaml"],
            "error: tests/fixtures/check/bad/pod-containers-object.yaml (document 0): Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container",
        ),
        // A good file first changes nothing: input errors stop the run before any output.
        (
            vec![
                "tests/fixtures/check/compliant.yaml",
                "tests/fixtures/check/bad/no-kind.yaml",
            ],
            "error: tests/fixtures/check/bad/no-kind.yaml (document 1)",
        ),
        (
            vec![
                "--policies",
                "tests/fixtures/check/no-such-policies",
                "tests/fixtures/check/compliant.yaml",
            ],
            "error: cannot load the policies: cannot read tests/fixtures/check/no-such-policies",
        ),
        (
            vec!["--operation", "PATCH", "x.yaml"],
            "error: invalid value 'PATCH'",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["check"];
        all.extend(&args);
        let output = portcullis(&all);
        let message = stderr(&output);
        assert_eq!(code(&output), 2, "{args:?}: {message}");
        assert!(
            message.starts_with(expected),
            "{args:?}: expected {expected:?}, got {message}"
        );
        assert_eq!(stdout(&output), "", "{args:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// The promise: check decides a review as the webhook does.

async fn post(router: &Router, path: &str, body: Vec<u8>) -> Value {
    let response = router.clone().oneshot(post_json(path, body)).await.unwrap();
    assert_eq!(response.status(), 200);
    serde_json::from_slice(&body_bytes(response).await).unwrap()
}

/// For every fixture review: `/mutate` on the router returns exactly the patch `check`
/// reports, and `/validate` on the patched review (what the apiserver sends the validating
/// webhook) returns the same allowed, message, warnings and audit annotations.
#[tokio::test]
async fn reviews_get_the_same_decision_as_from_the_router() {
    let router = webhook_router(AppState::new(Engine::builtin(), RequestSettings::default()));
    let mut reviews: Vec<_> = ["tests/fixtures/reviews", "tests/fixtures/check/reviews"]
        .iter()
        .flat_map(|folder| std::fs::read_dir(format!("{ROOT}/{folder}")).unwrap())
        .map(|entry| entry.unwrap().path())
        .collect();
    reviews.sort();
    assert!(reviews.len() >= 8);
    let (mut denied, mut patched, mut warned) = (0, 0, 0);
    for path in &reviews {
        let name = path.display().to_string();
        let (code, results) = run_json(&[&name]);
        let [result] = results.as_slice() else {
            panic!("{name}: one result expected, got {results:?}");
        };
        let body = std::fs::read(path).unwrap();
        let mut review: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(result["uid"], review["request"]["uid"], "{name}");
        assert_eq!(result["webhooks"], json!(["mutate", "validate"]), "{name}");

        let mutated = post(&router, "/mutate", body).await;
        let response = &mutated["response"];
        match response.get("patch") {
            Some(encoded) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(encoded.as_str().unwrap())
                    .unwrap();
                let patch: Value = serde_json::from_slice(&bytes).unwrap();
                assert_eq!(result["patch"], patch, "{name}: patch");
                let mut object = review["request"]["object"].clone();
                let operations: json_patch::Patch = serde_json::from_value(patch).unwrap();
                json_patch::patch(&mut object, &operations).unwrap();
                assert_eq!(result["patchedObject"], object, "{name}: patched object");
                review["request"]["object"] = object;
                patched += 1;
            }
            None => {
                assert_eq!(result["patch"], Value::Null, "{name}");
                assert_eq!(result["patchedObject"], Value::Null, "{name}");
            }
        }

        let validated = post(&router, "/validate", serde_json::to_vec(&review).unwrap()).await;
        let response = &validated["response"];
        assert_eq!(result["allowed"], response["allowed"], "{name}: allowed");
        assert_eq!(
            code,
            if response["allowed"] == true { 0 } else { 1 },
            "{name}: exit code"
        );
        if response["allowed"] == false {
            let texts: Vec<String> = result["violations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| {
                    // As `Violation`'s Display: no `path: ` when there is none (Pod Security).
                    let path = v["path"].as_str().unwrap();
                    format!(
                        "[{}/{}] {}{}",
                        v["policy"].as_str().unwrap(),
                        v["rule"].as_str().unwrap(),
                        if path.is_empty() {
                            String::new()
                        } else {
                            format!("{path}: ")
                        },
                        v["message"].as_str().unwrap()
                    )
                })
                .collect();
            assert_eq!(
                response["status"]["message"],
                texts.join("; "),
                "{name}: message"
            );
            denied += 1;
        }
        assert_eq!(
            result["warnings"],
            response.get("warnings").cloned().unwrap_or(json!([])),
            "{name}: warnings"
        );
        if !result["warnings"].as_array().unwrap().is_empty() {
            warned += 1;
        }
        assert_eq!(
            result["auditAnnotations"],
            response
                .get("auditAnnotations")
                .cloned()
                .unwrap_or(json!({})),
            "{name}: audit annotations"
        );
    }
    assert!(
        denied >= 3 && patched >= 3 && warned >= 2,
        "the fixtures must exercise denials, patches and warnings"
    );
}

#[test]
fn startup_errors_name_each_cause_once() {
    let output = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["serve", "--no-cluster", "--listen", "127.0.0.1:0"])
        .args(["--admin-listen", "127.0.0.1:0"])
        .args(["--tls-cert-file", "tests/fixtures/missing/tls.crt"])
        .args(["--tls-key-file", "tests/fixtures/missing/tls.key"])
        .current_dir(ROOT)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = stderr(&output);
    let line = stderr.lines().last().unwrap();
    assert!(
        line.starts_with("error: TLS: cannot read tests/fixtures/missing/tls.crt: "),
        "{line}"
    );
    assert_eq!(line.matches("(os error 2)").count(), 1, "{line}");
}

#[test]
fn cel_limits_come_from_flags() {
    let policy = "bench/fixtures/vap/policy.yaml";
    let pod = "tests/fixtures/bench/pod-10kb.json";
    let allowed = portcullis(&["check", "--policies", policy, pod]);
    assert_eq!(code(&allowed), 0, "{}", stdout(&allowed));
    // Three containers: a comprehension over them needs three iterations.
    let starved = portcullis(&[
        "check",
        "--cel-max-iterations",
        "2",
        "--policies",
        policy,
        pod,
    ]);
    assert_eq!(code(&starved), 1, "{}", stdout(&starved));
    assert!(
        stdout(&starved)
            .contains("resulted in error: operation cancelled: comprehension iteration limit exceeded (--cel-max-iterations)"),
        "{}",
        stdout(&starved)
    );
    let zero = portcullis(&["check", "--cel-timeout", "0s", "--policies", policy, pod]);
    assert_eq!(code(&zero), 2);
    assert!(
        stderr(&zero).contains("must be more than zero"),
        "{}",
        stderr(&zero)
    );
}

#[test]
fn manifests_are_defaulted_before_admission() {
    // The apiserver turns a volume without a source into an emptyDir before admission, so
    // "restricted" admits the Pod; a review is what the apiserver sent and is not defaulted.
    let results = check_json(&["tests/fixtures/check/defaulted-volume.yaml"], 0);
    let pod = find(&results, "Pod", "scratch-user");
    assert_eq!(pod["allowed"], true, "{pod:#}");
    assert_eq!(pod["violations"], json!([]));
    assert_eq!(pod["warnings"], json!([]));
    assert_eq!(pod["patch"], Value::Null);
}

#[test]
fn type_checking_warnings_go_to_standard_error() {
    let output = portcullis(&[
        "check",
        "--policies",
        "tests/fixtures/check/type-checking/policy.yaml",
        "tests/fixtures/check/deployment.json",
    ]);
    // The policy loads and decides (the misspelled field is absent, so `has` is false); the
    // columns are kube-controller-manager's (a `has()` at its parenthesis).
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "warning: ValidatingAdmissionPolicy \"replicas-typo\": spec.validations[0].expression \
         does not type-check:\n\
         apps/v1, Kind=Deployment: ERROR: <input>:1:5: undefined field 'replicaz'\n | \
         !has(object.spec.replicaz) || object.spec.replicaz <= 5\n | ....^\n\
         ERROR: <input>:1:42: undefined field 'replicaz'\n | \
         !has(object.spec.replicaz) || object.spec.replicaz <= 5\n | \
         .........................................^\n"
    );
}

/// `--cel-evaluator interpreter` gives exactly what the compiled evaluator gives: every
/// admission policy fixture on every object fixture, output and exit code alike.
#[test]
fn both_cel_evaluators_give_the_same_answers() {
    let policies = [
        "bench/fixtures/vap",
        "tests/fixtures/admission_policies/demo-policy.yaml",
        "tests/fixtures/admission_policies/replica-limit.yaml",
        "tests/fixtures/admission_policies/audit-annotations.yaml",
        "tests/fixtures/admission_policies/match-conditions.yaml",
        "tests/fixtures/admission_policies/variables.yaml",
        "tests/fixtures/admission_policies/map-one-step.yaml",
        "tests/fixtures/check/policies",
    ];
    let mut denied = 0;
    for policy in policies {
        let args = |evaluator: &'static str| {
            vec![
                "check",
                "--output",
                "json",
                "--cel-evaluator",
                evaluator,
                "--policies",
                policy,
                "tests/fixtures/admission_policies/objects/configmap.yaml",
                "tests/fixtures/admission_policies/objects/deployment.yaml",
                "tests/fixtures/admission_policies/objects/pod.yaml",
                "tests/fixtures/check/pods.yaml",
                "tests/fixtures/check/deployment.json",
            ]
        };
        let compiled = portcullis(&args("compiled"));
        let interpreted = portcullis(&args("interpreter"));
        assert_eq!(code(&compiled), code(&interpreted), "{policy}");
        assert!(
            matches!(code(&compiled), 0 | 1),
            "{policy}: {}",
            stderr(&compiled)
        );
        assert_eq!(stdout(&compiled), stdout(&interpreted), "{policy}");
        denied += usize::from(code(&compiled) == 1);
    }
    assert!(
        denied >= 3,
        "the fixtures deny something: {denied} sets did"
    );
}

#[test]
fn a_rego_template_that_runs_past_rego_timeout_is_a_violation_naming_the_flag() {
    let results = check_json(
        &[
            "--policies",
            "tests/fixtures/gatekeeper-deadline",
            "--rego-timeout",
            "200ms",
            "tests/fixtures/gatekeeper/request-context/objects/configmap-default.yaml",
        ],
        1,
    );
    let configmap = find(&results, "ConfigMap", "greeting");
    assert_eq!(configmap["allowed"], false, "{configmap}");
    let violations = configmap["violations"].to_string();
    assert!(
        violations
            .contains("[slow-pairs] template evaluation stopped after 200ms (--rego-timeout)"),
        "{violations}"
    );
}
