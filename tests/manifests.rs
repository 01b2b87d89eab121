//! The webhook configurations in manifests/ are what `portcullis webhook-config` prints for the
//! built-in rules (`make manifests` regenerates them).

use portcullis::commands::load_engine;
use portcullis::webhook_config::{
    FailurePolicy, WebhookOptions, WebhookTarget, to_yaml_documents, webhook_configurations,
};

#[test]
fn base_webhook_configurations_match_the_generator() {
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
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/manifests/base/webhookconfigurations.yaml"
    );
    let committed = std::fs::read_to_string(path).unwrap();
    let body: String = committed
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| format!("{line}\n"))
        .collect();
    assert_eq!(body, generated, "manifests drifted: run `make manifests`");
}
