//! `admissionregistration.k8s.io/v1`: webhook configurations and admission policies with their
//! bindings.

use serde_json::json;

use super::fields::{Object, child, default_pointer_number, default_value, items};

/// A ValidatingWebhookConfiguration (`mutating: false`) or MutatingWebhookConfiguration.
pub(super) fn webhook_configuration(object: &mut Object, mutating: bool) {
    for webhook in items(object, "webhooks") {
        default_value(webhook, "failurePolicy", || json!("Fail"));
        default_value(webhook, "matchPolicy", || json!("Equivalent"));
        default_value(webhook, "namespaceSelector", || json!({}));
        default_value(webhook, "objectSelector", || json!({}));
        default_pointer_number(webhook, "timeoutSeconds", 10);
        if mutating {
            default_value(webhook, "reinvocationPolicy", || json!("Never"));
        }
        if let Some(service) = child(webhook, "clientConfig").and_then(|c| child(c, "service")) {
            default_pointer_number(service, "port", 443);
        }
        rules(webhook, "rules");
    }
}

/// A ValidatingAdmissionPolicy or MutatingAdmissionPolicy.
pub(super) fn policy(object: &mut Object) {
    let Some(spec) = child(object, "spec") else {
        return;
    };
    default_value(spec, "failurePolicy", || json!("Fail"));
    if let Some(constraints) = child(spec, "matchConstraints") {
        match_resources(constraints);
    }
}

/// A ValidatingAdmissionPolicyBinding or MutatingAdmissionPolicyBinding.
pub(super) fn binding(object: &mut Object) {
    if let Some(resources) = child(object, "spec").and_then(|s| child(s, "matchResources")) {
        match_resources(resources);
    }
}

fn match_resources(resources: &mut Object) {
    default_value(resources, "matchPolicy", || json!("Equivalent"));
    default_value(resources, "namespaceSelector", || json!({}));
    default_value(resources, "objectSelector", || json!({}));
    rules(resources, "resourceRules");
    rules(resources, "excludeResourceRules");
}

/// Rules match every scope unless they say otherwise.
fn rules(map: &mut Object, key: &str) {
    for rule in items(map, key) {
        default_value(rule, "scope", || json!("*"));
    }
}
