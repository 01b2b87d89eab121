//! The Helm chart (charts/portcullis): `helm lint`, `helm template` for the main value
//! combinations with assertions on the rendered objects, agreement of its webhook
//! configurations with `portcullis webhook-config`, and the rendered objects against a real
//! kube-apiserver (`kubectl apply --dry-run=server`, then `helm install`, `upgrade` and
//! `uninstall`).
//!
//! Helm is built from the Go module proxy by `e2e/build-helm.sh` (`PORTCULLIS_HELM` names the
//! binary); without it these tests are skipped with a message, except under `CI=true`.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use portcullis::commands::load_engine;
use portcullis::webhook_config::{
    FailurePolicy, WebhookOptions, WebhookTarget, to_yaml_documents, webhook_configurations,
};
use serde::Deserialize;
use serde_json::{Value, json};

use common::control_plane::{ControlPlane, PORTCULLIS, e2e_bin, eventually, stderr};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn chart() -> String {
    format!("{ROOT}/charts/portcullis")
}

fn fixture(name: &str) -> String {
    format!("{ROOT}/tests/fixtures/helm/{name}")
}

/// The Helm binary (`PORTCULLIS_HELM`); `None` skips the test with a message, except under
/// `CI=true`, where a missing binary fails it.
fn helm() -> Option<PathBuf> {
    match std::env::var_os("PORTCULLIS_HELM") {
        Some(path) => Some(PathBuf::from(path)),
        None if std::env::var_os("CI").is_some() => {
            panic!("CI is set but PORTCULLIS_HELM is not: run `make test` or `make helm-test`")
        }
        None => {
            eprintln!(
                "SKIPPED helm test: PORTCULLIS_HELM is not set (`make helm-test` builds helm \
                 with e2e/build-helm.sh and sets it)"
            );
            None
        }
    }
}

fn run(command: &mut Command) -> Output {
    command.output().expect("run command")
}

/// `helm ARGS` with Helm's state kept in a throwaway folder (no user config, no network).
fn helm_command(helm: &Path, home: &Path) -> Command {
    let mut command = Command::new(helm);
    command
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .stdin(Stdio::null());
    command
}

/// `helm template RELEASE charts/portcullis -n NAMESPACE ARGS`, as text.
fn template_text(helm: &Path, release: &str, namespace: &str, args: &[&str]) -> String {
    let home = tempfile::tempdir().unwrap();
    let output = run(helm_command(helm, home.path())
        .args(["template", release, &chart(), "--namespace", namespace])
        .args(args));
    assert!(
        output.status.success(),
        "helm template {args:?} failed: {}",
        stderr(&output)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The documents of a multi-document YAML stream (empty documents left out).
fn documents(yaml: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(yaml)
        .map(|document| Value::deserialize(document).unwrap())
        .filter(|value| !value.is_null())
        .collect()
}

/// The rendered chart as JSON values.
fn template(helm: &Path, release: &str, namespace: &str, args: &[&str]) -> Vec<Value> {
    documents(&template_text(helm, release, namespace, args))
}

fn kinds(objects: &[Value]) -> BTreeSet<String> {
    objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_owned())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "expected one {kind}, got {}", found.len());
    found[0]
}

fn find_named<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn container(objects: &[Value]) -> &Value {
    &find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
}

fn args(objects: &[Value]) -> Vec<String> {
    container(objects)["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

/// `portcullis webhook-config ARGS` output as JSON values.
fn webhook_config(args: &[&str]) -> (String, Vec<Value>) {
    let output = run(Command::new(PORTCULLIS).arg("webhook-config").args(args));
    assert!(
        output.status.success(),
        "webhook-config: {}",
        stderr(&output)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let values = documents(&text);
    (text, values)
}

/// The fields of each webhook that the chart must render exactly as `webhook-config` does.
const SHARED_FIELDS: [&str; 11] = [
    "name",
    "rules",
    "namespaceSelector",
    "matchConditions",
    "sideEffects",
    "admissionReviewVersions",
    "matchPolicy",
    "reinvocationPolicy",
    "failurePolicy",
    "timeoutSeconds",
    "clientConfig",
];

/// Renders the chart and runs `webhook-config` for the same release and compares the two sets of
/// configurations field by field (caBundle aside: the chart's comes from its own Secret).
fn assert_webhooks_agree(helm: &Path, release: &str, namespace: &str, policies: Option<&str>) {
    let objects = template(helm, release, namespace, &[]);
    let fullname = find(&objects, "Deployment")["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let service = format!("{namespace}/{fullname}");
    let mut generator_args = vec!["--service", &service, "--name", &fullname];
    let mut chart_args: Vec<String> = Vec::new();
    let generated_file = tempfile::NamedTempFile::new().unwrap();
    if let Some(policies) = policies {
        generator_args.extend(["--policies", policies]);
        // The chart is given the output for another namespace and name: it must put its own in.
        let (text, _) = webhook_config(&["--policies", policies, "--service", "elsewhere/other"]);
        std::fs::write(generated_file.path(), text).unwrap();
        chart_args.extend([
            "--set-file".into(),
            format!("webhooks.generated={}", generated_file.path().display()),
            "--set".into(),
            "policies.files.policy\\.yaml=x".into(),
        ]);
    }
    let (_, mut expected) = webhook_config(&generator_args);
    expected.retain(|c| {
        c["kind"]
            .as_str()
            .unwrap()
            .ends_with("WebhookConfiguration")
    });
    expected.sort_by_key(|c| c["kind"].to_string());
    let chart_args: Vec<&str> = chart_args.iter().map(String::as_str).collect();
    let rendered = template(helm, release, namespace, &chart_args);
    let configurations: Vec<&Value> = rendered
        .iter()
        .filter(|o| {
            o["kind"]
                .as_str()
                .unwrap()
                .ends_with("WebhookConfiguration")
        })
        .collect();
    assert_eq!(
        configurations
            .iter()
            .map(|c| c["kind"].clone())
            .collect::<Vec<_>>(),
        expected
            .iter()
            .map(|c| c["kind"].clone())
            .collect::<Vec<_>>(),
        "the chart renders other configurations than webhook-config"
    );
    for (chart, generated) in configurations.iter().zip(&expected) {
        let kind = &generated["kind"];
        assert_eq!(chart["metadata"]["name"], generated["metadata"]["name"]);
        let (ours, theirs) = (&chart["webhooks"], &generated["webhooks"]);
        assert_eq!(ours.as_array().unwrap().len(), 1);
        assert_eq!(theirs.as_array().unwrap().len(), 1);
        for field in SHARED_FIELDS {
            let mut ours = ours[0][field].clone();
            if field == "clientConfig" {
                ours.as_object_mut().unwrap().remove("caBundle");
            }
            assert_eq!(
                ours, theirs[0][field],
                "{kind} {field} differs between the chart ({release} in {namespace}, policies \
                 {policies:?}) and `portcullis webhook-config {generator_args:?}`"
            );
        }
    }
}

/// The RBAC of admission policy parameters in webhooks.generated is rendered with the chart's
/// names and bound to the chart's ServiceAccount: the same rules, nothing more.
#[test]
fn param_rbac_from_the_generator_is_bound_to_the_charts_service_account() {
    let Some(helm) = helm() else { return };
    let policies = [
        fixture_path_of("e2e/params/policy.yaml"),
        fixture_path_of("e2e/params/portcullis-bindings.yaml"),
    ];
    let (text, generated) = webhook_config(&[
        "--service",
        "elsewhere/other",
        "--policies",
        &policies[0],
        "--policies",
        &policies[1],
    ]);
    let generated_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(generated_file.path(), text).unwrap();
    let rendered = template(
        &helm,
        "rel",
        "ops",
        &[
            "--set-file",
            &format!("webhooks.generated={}", generated_file.path().display()),
            "--set",
            "policies.files.policy\\.yaml=x",
        ],
    );
    let role = find_named(&rendered, "ClusterRole", "rel-portcullis-params-reader");
    assert_eq!(role["rules"], find(&generated, "ClusterRole")["rules"]);
    let binding = find_named(
        &rendered,
        "ClusterRoleBinding",
        "rel-portcullis-params-reader",
    );
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": "rel-portcullis", "namespace": "ops"}])
    );
    assert_eq!(binding["roleRef"]["name"], "rel-portcullis-params-reader");
    // Without params nothing is granted beyond the namespace reader.
    let plain = template(&helm, "rel", "ops", &[]);
    assert!(
        !plain
            .iter()
            .any(|o| o["metadata"]["name"] == "rel-portcullis-params-reader"),
        "params RBAC without params"
    );
}

#[test]
fn inventory_rbac_from_the_generator_is_bound_beside_the_param_rbac() {
    let Some(helm) = helm() else { return };
    let policies = [
        fixture_path_of("e2e/params/policy.yaml"),
        fixture_path_of("e2e/params/portcullis-bindings.yaml"),
        fixture_path_of("gatekeeper/inventory/templates/k8suniqueingresshost.yaml"),
        fixture_path_of("gatekeeper/inventory/constraints/unique-ingress-host.yaml"),
        fixture_path_of("e2e/gatekeeper-inventory/config.yaml"),
    ];
    let mut args = vec!["--service", "elsewhere/other"];
    for policy in &policies {
        args.extend(["--policies", policy.as_str()]);
    }
    let (text, generated) = webhook_config(&args);
    let generated_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(generated_file.path(), text).unwrap();
    let rendered = template(
        &helm,
        "rel",
        "ops",
        &[
            "--set-file",
            &format!("webhooks.generated={}", generated_file.path().display()),
            "--set",
            "policies.files.policy\\.yaml=x",
            "--set",
            "audit.enabled=true",
        ],
    );
    let generated_role = find_named(&generated, "ClusterRole", "portcullis-inventory-reader");
    let role = find_named(&rendered, "ClusterRole", "rel-portcullis-inventory-reader");
    assert_eq!(role["rules"], generated_role["rules"]);
    assert_eq!(
        role["rules"],
        serde_json::json!([{"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"],
                            "verbs": ["list", "watch"]}])
    );
    let binding = find_named(
        &rendered,
        "ClusterRoleBinding",
        "rel-portcullis-inventory-reader",
    );
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": "rel-portcullis", "namespace": "ops"}])
    );
    assert_eq!(
        binding["roleRef"]["name"],
        "rel-portcullis-inventory-reader"
    );
    // The param reader is still there, under its own name.
    find_named(&rendered, "ClusterRole", "rel-portcullis-params-reader");
    // The audit lists the synced kind.
    let audit = find_named(&rendered, "ClusterRole", "rel-portcullis-audit");
    assert!(
        audit["rules"].as_array().unwrap().iter().any(|rule| {
            rule["resources"] == serde_json::json!(["ingresses"])
                && rule["verbs"] == serde_json::json!(["list"])
        }),
        "{audit}"
    );
}

fn fixture_path_of(relative: &str) -> String {
    format!("{}/tests/fixtures/{relative}", env!("CARGO_MANIFEST_DIR"))
}

// ---------------------------------------------------------------------------------------------
// Without helm

/// charts/portcullis/files/webhook-config.yaml, which the chart renders its webhooks from, is
/// what `portcullis webhook-config` prints for the built-in set (`make chart` regenerates it).
#[test]
fn chart_webhook_config_file_matches_the_generator() {
    let options = WebhookOptions {
        target: WebhookTarget::parse_service("portcullis/portcullis").unwrap(),
        ca_bundle_pem: None,
        failure_policy: FailurePolicy::Fail,
        timeout_seconds: 5,
        name: "portcullis".into(),
        own_namespace: "portcullis".into(),
    };
    let generated = to_yaml_documents(&webhook_configurations(
        &load_engine(&[]).unwrap(),
        &options,
    ))
    .unwrap();
    let committed = std::fs::read_to_string(format!(
        "{ROOT}/charts/portcullis/files/webhook-config.yaml"
    ))
    .unwrap();
    let body: String = committed
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| format!("{line}\n"))
        .collect();
    assert_eq!(
        body, generated,
        "charts/portcullis/files/webhook-config.yaml drifted: run `make chart`"
    );
}

// ---------------------------------------------------------------------------------------------
// helm lint and helm template

/// The value combinations the tests render, each with `helm lint --strict` too.
fn variants() -> Vec<(&'static str, Vec<String>)> {
    let generated = generated_path();
    vec![
        ("defaults", vec![]),
        ("cert-manager", vec!["--set".into(), "tls.mode=cert-manager".into()]),
        (
            "policies",
            vec![
                "--set-file".into(),
                format!(
                    "policies.files.configmap-owner\\.yaml={}",
                    fixture("policies/configmap-owner.yaml")
                ),
                "--set-file".into(),
                format!("webhooks.generated={generated}"),
            ],
        ),
        (
            "ignore",
            vec![
                "--set".into(),
                "webhooks.validate.failurePolicy=Ignore,webhooks.mutate.failurePolicy=Ignore,webhooks.mutate.timeoutSeconds=3".into(),
            ],
        ),
        ("servicemonitor", vec!["--set".into(), "serviceMonitor.enabled=true".into()]),
        ("hpa", vec!["--set".into(), "autoscaling.enabled=true".into()]),
        ("audit", vec!["--set".into(), "audit.enabled=true".into()]),
    ]
}

/// Where [`variants`] reads the `webhook-config` output for the policy fixture.
fn generated_path() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        let (text, _) = webhook_config(&[
            "--policies",
            &fixture("policies"),
            "--service",
            "portcullis/portcullis",
        ]);
        let path = format!("{}/helm-test-generated.yaml", env!("CARGO_TARGET_TMPDIR"));
        std::fs::write(&path, text).unwrap();
        path
    })
}

fn variant_args(name: &str) -> Vec<String> {
    variants().into_iter().find(|(n, _)| *n == name).unwrap().1
}

fn render_variant(helm: &Path, name: &str) -> Vec<Value> {
    let args = variant_args(name);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    template(helm, "portcullis", "portcullis", &args)
}

#[test]
fn helm_lint_passes_for_every_variant() {
    let Some(helm) = helm() else { return };
    let home = tempfile::tempdir().unwrap();
    for (name, args) in variants() {
        let output = run(helm_command(&helm, home.path())
            .args(["lint", "--strict", &chart(), "--namespace", "portcullis"])
            .args(&args));
        assert!(
            output.status.success(),
            "helm lint ({name}) failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            stderr(&output)
        );
    }
}

#[test]
fn defaults_render_a_safe_deployment() {
    let Some(helm) = helm() else { return };
    let objects = render_variant(&helm, "defaults");
    assert_eq!(
        kinds(&objects),
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "MutatingWebhookConfiguration",
            "PodDisruptionBudget",
            "Secret",
            "Service",
            "ServiceAccount",
            "ValidatingWebhookConfiguration",
        ]
        .map(String::from)
        .into(),
    );
    for object in &objects {
        if !object["kind"].as_str().unwrap().starts_with("Cluster")
            && !object["kind"]
                .as_str()
                .unwrap()
                .ends_with("WebhookConfiguration")
        {
            assert_eq!(object["metadata"]["namespace"], "portcullis", "{object}");
        }
    }
    let deployment = find(&objects, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    let anti = &pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        [0]["podAffinityTerm"];
    assert_eq!(anti["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(
        anti["labelSelector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    let container = container(&objects);
    assert_eq!(container["image"], "ghcr.io/portcullis/portcullis:0.1.0");
    let security = &container["securityContext"];
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert!(container["resources"]["requests"]["memory"].is_string());
    assert!(container["resources"]["limits"]["memory"].is_string());
    assert_eq!(
        container["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "admin"})
    );
    assert_eq!(
        container["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "admin"})
    );
    let ports: Vec<(&Value, &Value)> = container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (&p["name"], &p["containerPort"]))
        .collect();
    assert_eq!(
        ports,
        [
            (&json!("https"), &json!(8443)),
            (&json!("admin"), &json!(8080))
        ]
    );
    let args = args(&objects);
    for expected in [
        "serve",
        "--listen=0.0.0.0:8443",
        "--admin-listen=0.0.0.0:8080",
        "--tls-dir=/etc/portcullis/tls",
        "--log-format=json",
        "--drain-delay=5s",
        "--shutdown-grace=20s",
    ] {
        assert!(
            args.contains(&expected.to_owned()),
            "{expected} not in {args:?}"
        );
    }
    // The built-in set: no --policies, no policies volume.
    assert!(
        !args.iter().any(|a| a.starts_with("--policies")),
        "{args:?}"
    );
    assert!(!args.contains(&"--no-cluster".to_owned()));
    // Those flags parse: `serve --help` knows every one the chart passes.
    let help = run(Command::new(PORTCULLIS).args(["serve", "--help"]));
    let help = String::from_utf8_lossy(&help.stdout);
    for arg in args.iter().skip(1) {
        let flag = arg.split('=').next().unwrap();
        assert!(help.contains(flag), "serve has no flag {flag}");
    }
    let pdb = find(&objects, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    let role = find_named(&objects, "ClusterRole", "portcullis-namespace-reader");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}])
    );
    let reviewer = find_named(&objects, "ClusterRole", "portcullis-access-reviewer");
    assert_eq!(
        reviewer["rules"],
        json!([{"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
                "verbs": ["create"]}])
    );
    for name in ["portcullis-namespace-reader", "portcullis-access-reviewer"] {
        let binding = find_named(&objects, "ClusterRoleBinding", name);
        assert_eq!(binding["roleRef"]["name"], name);
        assert_eq!(
            binding["subjects"][0],
            json!({"kind": "ServiceAccount", "name": "portcullis", "namespace": "portcullis"})
        );
    }
    let service = find(&objects, "Service");
    assert_eq!(service["spec"]["ports"][0]["port"], 443);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "https");
}

/// Self-managed TLS: the Secret's serving certificate verifies, for the Service's DNS name,
/// against the CA that both webhooks carry as caBundle.
#[test]
fn self_managed_certificate_is_trusted_through_the_ca_bundle() {
    let Some(helm) = helm() else { return };
    let objects = render_variant(&helm, "defaults");
    let secret = find(&objects, "Secret");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let data = |key: &str| {
        BASE64
            .decode(secret["data"][key].as_str().unwrap())
            .unwrap()
    };
    let ca_pem = data("ca.crt");
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        let bundle = &find(&objects, kind)["webhooks"][0]["clientConfig"]["caBundle"];
        assert_eq!(
            BASE64.decode(bundle.as_str().unwrap()).unwrap(),
            ca_pem,
            "{kind}"
        );
    }
    let volume = &find(&objects, "Deployment")["spec"]["template"]["spec"]["volumes"][0];
    assert_eq!(volume["secret"]["secretName"], secret["metadata"]["name"]);

    use rustls::client::danger::ServerCertVerifier as _;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(&ca_pem).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
    let leaf = CertificateDer::from_pem_slice(&data("tls.crt")).unwrap();
    PrivateKeyDer::from_pem_slice(&data("tls.key")).expect("tls.key is a PEM private key");
    for name in [
        "portcullis.portcullis.svc",
        "portcullis.portcullis.svc.cluster.local",
    ] {
        verifier
            .verify_server_cert(
                &leaf,
                &[],
                &ServerName::try_from(name).unwrap(),
                &[],
                UnixTime::now(),
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert!(
        verifier
            .verify_server_cert(
                &leaf,
                &[],
                &ServerName::try_from("portcullis.elsewhere.svc").unwrap(),
                &[],
                UnixTime::now(),
            )
            .is_err(),
        "the certificate must not hold for another namespace"
    );
}

#[test]
fn webhooks_agree_with_webhook_config() {
    let Some(helm) = helm() else { return };
    assert_webhooks_agree(&helm, "portcullis", "portcullis", None);
    assert_webhooks_agree(&helm, "gate", "security", None);
    assert_webhooks_agree(
        &helm,
        "portcullis",
        "policy-system",
        Some(&fixture("policies")),
    );
}

#[test]
fn cert_manager_issues_the_certificate_and_injects_the_ca() {
    let Some(helm) = helm() else { return };
    let objects = render_variant(&helm, "cert-manager");
    assert!(!kinds(&objects).contains("Secret"), "no chart-made Secret");
    let serving = find_named(&objects, "Certificate", "portcullis-serving");
    assert_eq!(serving["spec"]["secretName"], "portcullis-tls");
    assert_eq!(
        serving["spec"]["dnsNames"],
        json!([
            "portcullis",
            "portcullis.portcullis",
            "portcullis.portcullis.svc",
            "portcullis.portcullis.svc.cluster.local"
        ])
    );
    assert_eq!(serving["spec"]["issuerRef"]["name"], "portcullis-ca");
    find_named(&objects, "Issuer", "portcullis-ca");
    find_named(&objects, "Issuer", "portcullis-selfsigned");
    assert_eq!(
        find_named(&objects, "Certificate", "portcullis-ca")["spec"]["isCA"],
        true
    );
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        let configuration = find(&objects, kind);
        assert_eq!(
            configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "portcullis/portcullis-serving"
        );
        assert!(
            configuration["webhooks"][0]["clientConfig"]
                .get("caBundle")
                .is_none(),
            "{kind}: the cainjector fills caBundle"
        );
    }
    // An issuer of one's own replaces the private CA.
    let objects = template(
        &helm,
        "portcullis",
        "portcullis",
        &[
            "--set",
            "tls.mode=cert-manager,tls.certManager.issuerRef.kind=ClusterIssuer,tls.certManager.issuerRef.name=corp",
        ],
    );
    assert!(!kinds(&objects).contains("Issuer"));
    assert_eq!(
        find(&objects, "Certificate")["spec"]["issuerRef"],
        json!({"kind": "ClusterIssuer", "name": "corp"})
    );
}

#[test]
fn policies_come_from_a_configmap_folder() {
    let Some(helm) = helm() else { return };
    let objects = render_variant(&helm, "policies");
    let configmap = find(&objects, "ConfigMap");
    assert_eq!(configmap["metadata"]["name"], "portcullis-policies");
    assert_eq!(
        configmap["data"]["configmap-owner.yaml"].as_str().unwrap(),
        std::fs::read_to_string(fixture("policies/configmap-owner.yaml")).unwrap()
    );
    assert!(args(&objects).contains(&"--policies=/etc/portcullis/policies".to_owned()));
    let pod = &find(&objects, "Deployment")["spec"]["template"]["spec"];
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "policies")
        .expect("policies mount");
    assert_eq!(mount["mountPath"], "/etc/portcullis/policies");
    // A folder mount: a subPath mount never sees the kubelet's `..data` swap.
    assert!(mount.get("subPath").is_none());
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "policies")
        .unwrap();
    assert_eq!(volume["configMap"]["name"], "portcullis-policies");
    // These policies match ConfigMaps and mutate nothing: so do the webhooks.
    assert!(!kinds(&objects).contains("MutatingWebhookConfiguration"));
    let rules = &find(&objects, "ValidatingWebhookConfiguration")["webhooks"][0]["rules"];
    assert_eq!(rules[0]["resources"], json!(["configmaps"]), "{rules}");

    // The mounted folder loads in `serve`'s loader: `check` reads the same files.
    let check = run(Command::new(PORTCULLIS).args([
        "check",
        "--policies",
        &fixture("policies"),
        &format!("{ROOT}/tests/fixtures/e2e/pod-compliant.yaml"),
    ]));
    assert!(check.status.success(), "{}", stderr(&check));

    // An existing ConfigMap instead of files.
    let generated = format!("webhooks.generated={}", generated_path());
    let objects = template(
        &helm,
        "portcullis",
        "portcullis",
        &[
            "--set",
            "policies.existingConfigMap=mine",
            "--set-file",
            &generated,
        ],
    );
    assert!(!kinds(&objects).contains("ConfigMap"));
    let pod = &find(&objects, "Deployment")["spec"]["template"]["spec"];
    assert!(
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["configMap"]["name"] == "mine")
    );
}

/// Policies without the matching webhook configuration would leave their resources unsent:
/// the render fails and says how to generate it.
#[test]
fn policies_without_their_webhook_config_are_refused() {
    let Some(helm) = helm() else { return };
    let home = tempfile::tempdir().unwrap();
    let output = run(helm_command(&helm, home.path()).args([
        "template",
        "portcullis",
        &chart(),
        "--set",
        "policies.existingConfigMap=mine",
    ]));
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("portcullis webhook-config --policies DIR"),
        "{}",
        stderr(&output)
    );
    for (bad, message) in [
        (
            "webhooks.generated=not a configuration",
            "not `portcullis webhook-config` output",
        ),
        (
            "tls.mode=existing-secret",
            "is required with tls.mode=existing-secret",
        ),
    ] {
        let output = run(helm_command(&helm, home.path()).args([
            "template",
            "portcullis",
            &chart(),
            "--set",
            bad,
        ]));
        assert!(!output.status.success(), "{bad} was accepted");
        assert!(
            stderr(&output).contains(message),
            "{bad}: {}",
            stderr(&output)
        );
    }
    for bad in [
        "webhooks.validate.failurePolicy=Sometimes",
        "webhooks.mutate.timeoutSeconds=31",
        "tls.mode=manual",
    ] {
        let output = run(helm_command(&helm, home.path()).args([
            "template",
            "portcullis",
            &chart(),
            "--set",
            bad,
        ]));
        assert!(!output.status.success(), "{bad} was accepted");
    }
}

#[test]
fn failure_policy_and_timeout_are_per_webhook() {
    let Some(helm) = helm() else { return };
    let objects = render_variant(&helm, "ignore");
    let validate = &find(&objects, "ValidatingWebhookConfiguration")["webhooks"][0];
    let mutate = &find(&objects, "MutatingWebhookConfiguration")["webhooks"][0];
    assert_eq!(validate["failurePolicy"], "Ignore");
    assert_eq!(validate["timeoutSeconds"], 5);
    assert_eq!(mutate["failurePolicy"], "Ignore");
    assert_eq!(mutate["timeoutSeconds"], 3);
    let objects = template(
        &helm,
        "portcullis",
        "portcullis",
        &["--set", "webhooks.mutate.failurePolicy=Ignore"],
    );
    assert_eq!(
        find(&objects, "ValidatingWebhookConfiguration")["webhooks"][0]["failurePolicy"],
        "Fail"
    );
    assert_eq!(
        find(&objects, "MutatingWebhookConfiguration")["webhooks"][0]["failurePolicy"],
        "Ignore"
    );
    // More excluded namespaces add to the lockout-safe ones.
    let objects = template(
        &helm,
        "portcullis",
        "portcullis",
        &["--set", "webhooks.excludedNamespaces={monitoring}"],
    );
    assert_eq!(
        find(&objects, "ValidatingWebhookConfiguration")["webhooks"][0]["namespaceSelector"]["matchExpressions"]
            [0]["values"],
        json!(["kube-system", "kube-node-lease", "portcullis", "monitoring"])
    );
}

#[test]
fn service_monitor_scrapes_the_admin_port() {
    let Some(helm) = helm() else { return };
    assert!(!kinds(&render_variant(&helm, "defaults")).contains("ServiceMonitor"));
    let objects = render_variant(&helm, "servicemonitor");
    let monitor = find(&objects, "ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "admin");
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    assert_eq!(
        monitor["spec"]["selector"]["matchLabels"],
        find(&objects, "Service")["spec"]["selector"],
        "the ServiceMonitor selects the Service"
    );
    for (key, value) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&find(&objects, "Service")["metadata"]["labels"][key], value);
    }
    let service_ports = &find(&objects, "Service")["spec"]["ports"];
    assert!(
        service_ports
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "admin")
    );
}

#[test]
fn autoscaling_replaces_the_fixed_replica_count() {
    let Some(helm) = helm() else { return };
    let objects = render_variant(&helm, "hpa");
    let hpa = find(&objects, "HorizontalPodAutoscaler");
    assert_eq!(hpa["apiVersion"], "autoscaling/v2");
    assert_eq!(hpa["spec"]["minReplicas"], 2);
    assert_eq!(
        hpa["spec"]["scaleTargetRef"],
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "portcullis"})
    );
    assert!(
        find(&objects, "Deployment")["spec"]
            .get("replicas")
            .is_none(),
        "the HPA owns the replica count"
    );
}

// ---------------------------------------------------------------------------------------------
// Against the e2e kube-apiserver

/// Every variant's objects pass `kubectl apply --dry-run=server` (schemas, defaults, CEL of the
/// matchConditions, the priority class); then the chart is installed, upgraded (the
/// self-managed certificate is kept) and uninstalled (the webhook configurations are gone).
#[test]
fn chart_against_the_apiserver() {
    let Some(helm) = helm() else { return };
    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    cluster.kubectl_ok(&["create", "namespace", "portcullis"]);
    // cert-manager's and prometheus-operator's kinds, for those variants' objects.
    cluster.kubectl_ok(&[
        "apply",
        "-f",
        &format!("{ROOT}/tests/fixtures/e2e/cert-manager-crds.yaml"),
        "-f",
        &fixture("servicemonitor-crd.yaml"),
    ]);
    cluster.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/certificates.cert-manager.io",
        "crd/issuers.cert-manager.io",
        "crd/servicemonitors.monitoring.coreos.com",
    ]);
    // The apiserver does not resolve a pod template's priorityClassName: check it exists.
    let defaults = render_variant(&helm, "defaults");
    let class = find(&defaults, "Deployment")["spec"]["template"]["spec"]["priorityClassName"]
        .as_str()
        .unwrap()
        .to_owned();
    cluster.kubectl_ok(&["get", "priorityclass", &class]);
    for (name, args) in variants() {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let rendered = template_text(&helm, "portcullis", "portcullis", &args);
        let count = documents(&rendered).len();
        let output = cluster.kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &rendered);
        assert!(
            output.status.success(),
            "{name}: kubectl apply --dry-run=server: {}",
            stderr(&output)
        );
        let applied = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            applied
                .lines()
                .filter(|l| l.contains("(server dry run)"))
                .count(),
            count,
            "{name}: {applied}"
        );
    }

    // A real install, upgrade and uninstall with helm itself.
    let home = tempfile::tempdir().unwrap();
    let helm_in_cluster = |args: &[&str]| {
        let output = run(helm_command(&helm, home.path())
            .args([
                "--kubeconfig",
                cluster.kubeconfig(),
                "--namespace",
                "portcullis",
            ])
            .args(args));
        assert!(
            output.status.success(),
            "helm {args:?}: {}",
            stderr(&output)
        );
    };
    let ca_bundles = || -> Vec<String> {
        [
            "validatingwebhookconfiguration",
            "mutatingwebhookconfiguration",
        ]
        .iter()
        .map(|kind| {
            cluster.kubectl_ok(&[
                "get",
                kind,
                "portcullis",
                "-o",
                "jsonpath={.webhooks[0].clientConfig.caBundle}",
            ])
        })
        .collect()
    };
    helm_in_cluster(&["install", "portcullis", &chart()]);
    let installed = ca_bundles();
    let secret_ca = cluster.kubectl_ok(&[
        "get",
        "-n",
        "portcullis",
        "secret",
        "portcullis-tls",
        "-o",
        "jsonpath={.data.ca\\.crt}",
    ]);
    assert_eq!(installed, [secret_ca.clone(), secret_ca.clone()]);
    helm_in_cluster(&[
        "upgrade",
        "portcullis",
        &chart(),
        "--set",
        "serve.logLevel=debug",
    ]);
    assert_eq!(ca_bundles(), installed, "an upgrade keeps the certificate");
    let deployment_args = cluster.kubectl_ok(&[
        "get",
        "-n",
        "portcullis",
        "deployment",
        "portcullis",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].args}",
    ]);
    assert!(
        deployment_args.contains("--log-level=debug"),
        "{deployment_args}"
    );

    helm_in_cluster(&["uninstall", "portcullis"]);
    eventually(
        "the webhook configurations are deleted",
        Duration::from_secs(30),
        || {
            let output = cluster.kubectl(&[
                "get",
                "validatingwebhookconfigurations,mutatingwebhookconfigurations",
                "-l",
                "app.kubernetes.io/instance=portcullis",
                "-o",
                "name",
            ]);
            let names = String::from_utf8_lossy(&output.stdout).trim().to_owned();
            if output.status.success() && names.is_empty() {
                Ok(())
            } else {
                Err(format!("left: {names:?} {}", stderr(&output)))
            }
        },
    );
    let left = cluster.kubectl_ok(&["get", "clusterroles", "-o", "name"]);
    assert!(!left.contains("portcullis"), "{left}");
}

/// `serve` flags from values, the Namespace watch turned off, and client certificates.
#[test]
fn serve_values_become_flags() {
    let Some(helm) = helm() else { return };
    let objects = template(
        &helm,
        "portcullis",
        "portcullis",
        &[
            "--set",
            "serve.maxConnections=100,serve.celTimeout=50ms,serve.onError=allow,serve.logLevel=debug",
            "--set",
            "serve.clientCASecret=apiserver-client-ca,namespaceWatch=false",
            "--set",
            "serve.extraArgs={--max-header-bytes=32768}",
        ],
    );
    let args = args(&objects);
    for expected in [
        "--max-connections=100",
        "--cel-timeout=50ms",
        "--on-error=allow",
        "--log-level=debug",
        "--client-ca-file=/etc/portcullis/client-ca/ca.crt",
        "--no-cluster",
        "--max-header-bytes=32768",
    ] {
        assert!(
            args.contains(&expected.to_owned()),
            "{expected} not in {args:?}"
        );
    }
    // `serve` parses exactly this command line: it stops at the missing certificate, not a flag.
    let loopback: Vec<String> = args
        .iter()
        .map(|a| {
            a.replace("=0.0.0.0:8443", "=127.0.0.1:0")
                .replace("=0.0.0.0:8080", "=127.0.0.1:0")
        })
        .collect();
    let output = run(Command::new(PORTCULLIS).args(&loopback));
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("TLS: cannot read /etc/portcullis/tls/tls.crt"),
        "serve refused the chart's flags: {}",
        stderr(&output)
    );
    // Without the Namespace watch: no RBAC, no token.
    let kinds = kinds(&objects);
    assert!(!kinds.contains("ClusterRole") && !kinds.contains("ClusterRoleBinding"));
    let pod = &find(&objects, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert!(
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["secret"]["secretName"] == "apiserver-client-ca")
    );
}

/// `tls.mode=existing-secret`: your Secret is mounted and your CA is the caBundle.
#[test]
fn existing_secret_is_mounted_with_its_ca_as_bundle() {
    let Some(helm) = helm() else { return };
    // Any PEM: the chart only carries it.
    let ca_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        ca_file.path(),
        "-----BEGIN CERTIFICATE-----\nMIIBcA==\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let ca = ca_file.path().display().to_string();
    let objects = template(
        &helm,
        "portcullis",
        "portcullis",
        &[
            "--set",
            "tls.mode=existing-secret,tls.existingSecret.name=my-tls",
            "--set-file",
            &format!("tls.existingSecret.caBundle={ca}"),
        ],
    );
    assert!(!kinds(&objects).contains("Secret"));
    let pod = &find(&objects, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "my-tls");
    let bundle = &find(&objects, "ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"];
    assert_eq!(
        BASE64.decode(bundle.as_str().unwrap()).unwrap(),
        std::fs::read(&ca).unwrap()
    );
}

#[test]
fn audit_cronjob_lists_only_what_the_webhooks_register() {
    let Some(helm) = helm() else { return };
    assert!(!kinds(&render_variant(&helm, "defaults")).contains("CronJob"));
    let objects = render_variant(&helm, "audit");
    let cronjob = find(&objects, "CronJob");
    assert_eq!(cronjob["spec"]["concurrencyPolicy"], "Forbid");
    let pod = &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "portcullis-audit");
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "audit");
    assert!(args.contains(&"--webhook-namespace=portcullis"), "{args:?}");
    assert!(args.contains(&"--denied-exit-code=0"), "{args:?}");
    assert!(!args.contains(&"--apply"), "{args:?}");
    assert!(
        !args
            .iter()
            .any(|a| a.starts_with("--object-selector") || a.starts_with("--rego-timeout")),
        "{args:?}"
    );
    // Read-only: `list`, on the resources the webhook configurations register for CREATE.
    let role = find_named(&objects, "ClusterRole", "portcullis-audit");
    let mut listed = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        assert_eq!(rule["verbs"], json!(["list"]), "{rule}");
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                listed.insert(format!(
                    "{}/{}",
                    group.as_str().unwrap(),
                    resource.as_str().unwrap()
                ));
            }
        }
    }
    let (_, generated) = webhook_config(&["--service", "portcullis/portcullis"]);
    let mut registered = BTreeSet::from(["/namespaces".to_owned()]);
    for configuration in &generated {
        for rule in configuration["webhooks"][0]["rules"].as_array().unwrap() {
            for group in rule["apiGroups"].as_array().unwrap() {
                for resource in rule["resources"].as_array().unwrap() {
                    let resource = resource.as_str().unwrap();
                    if !resource.contains('/') {
                        registered.insert(format!("{}/{resource}", group.as_str().unwrap()));
                    }
                }
            }
        }
    }
    assert_eq!(listed, registered);

    // With apply: report writes, and only then.
    let objects = template(
        &helm,
        "portcullis",
        "portcullis",
        &[
            "--set",
            "audit.enabled=true,audit.apply=true,audit.output=openreports,audit.regoTimeout=30s",
        ],
    );
    let role = find_named(&objects, "ClusterRole", "portcullis-audit");
    let writes: Vec<&Value> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|rule| rule["apiGroups"] == json!(["openreports.io"]))
        .collect();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0]["resources"], json!(["reports", "clusterreports"]));
    let args = &find(&objects, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        [0]["args"];
    assert!(
        args.as_array().unwrap().contains(&json!("--apply")),
        "{args}"
    );
    assert!(
        args.as_array()
            .unwrap()
            .contains(&json!("--output=openreports")),
        "{args}"
    );
    assert!(
        args.as_array()
            .unwrap()
            .contains(&json!("--rego-timeout=30s")),
        "{args}"
    );

    // The webhooks' objectSelector is the scan's too.
    let selector = json!({"matchExpressions": [{"key": "audit-skip", "operator": "DoesNotExist"}]});
    let objects = template(
        &helm,
        "portcullis",
        "portcullis",
        &[
            "--set",
            "audit.enabled=true",
            "--set-json",
            &format!("webhooks.objectSelector={selector}"),
        ],
    );
    assert_eq!(
        find(&objects, "ValidatingWebhookConfiguration")["webhooks"][0]["objectSelector"],
        selector
    );
    let args = &find(&objects, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        [0]["args"];
    let flag = args
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find_map(|a| a.strip_prefix("--object-selector="))
        .unwrap_or_else(|| panic!("no --object-selector in {args}"));
    assert_eq!(serde_json::from_str::<Value>(flag).unwrap(), selector);
}
