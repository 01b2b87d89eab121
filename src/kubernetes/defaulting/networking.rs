//! `networking.k8s.io/v1`: NetworkPolicies and IngressClasses (Ingress has no defaults).

use serde_json::json;

use super::fields::{Object, child, child_or_empty, default_value, is_empty, items};

pub(super) fn network_policy(object: &mut Object) {
    let Some(spec) = child_or_empty(object, "spec") else {
        return;
    };
    // `podSelector` is a struct value: the typed object always shows it.
    default_value(spec, "podSelector", || json!({}));
    if is_empty(spec, "policyTypes") {
        let types = if is_empty(spec, "egress") {
            json!(["Ingress"])
        } else {
            json!(["Ingress", "Egress"])
        };
        spec.insert("policyTypes".into(), types);
    }
    for direction in ["ingress", "egress"] {
        for rule in items(spec, direction) {
            for port in items(rule, "ports") {
                default_value(port, "protocol", || json!("TCP"));
            }
        }
    }
}

pub(super) fn ingress_class(object: &mut Object) {
    if let Some(parameters) = child(object, "spec").and_then(|spec| child(spec, "parameters")) {
        default_value(parameters, "scope", || json!("Cluster"));
    }
}
