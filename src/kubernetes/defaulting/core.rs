//! The core group (`v1`): Pods and their templates, Services, Secrets, Namespaces, claims,
//! volumes, endpoints and limit ranges.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use super::fields::{
    Object, child, child_or_empty, default_pointer_number, default_text, default_value, is_empty,
    items, template_labels, text,
};
use super::pod;
use super::quantity::resource_list;

pub(super) fn pod(object: &mut Object) {
    pod::pod(object);
}

pub(super) fn pod_template(object: &mut Object) {
    pod::template(child(object, "template"));
}

pub(super) fn replication_controller(object: &mut Object) {
    let template_labels = template_labels(object);
    if let Some(labels) = template_labels {
        if let Some(spec) = child(object, "spec")
            && is_empty(spec, "selector")
        {
            spec.insert("selector".into(), labels.clone());
        }
        if let Some(metadata) = child_or_empty(object, "metadata")
            && is_empty(metadata, "labels")
        {
            metadata.insert("labels".into(), labels);
        }
    }
    let Some(spec) = child_or_empty(object, "spec") else {
        return;
    };
    default_pointer_number(spec, "replicas", 1);
    pod::template(child(spec, "template"));
}

pub(super) fn service(object: &mut Object) {
    let Some(spec) = child_or_empty(object, "spec") else {
        return;
    };
    default_text(spec, "sessionAffinity", "None");
    match text(spec, "sessionAffinity") {
        Some("None") => {
            spec.remove("sessionAffinityConfig");
        }
        Some("ClientIP") => {
            let has_timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|config| config.get("clientIP"))
                .and_then(|client_ip| client_ip.get("timeoutSeconds"))
                .is_some_and(|timeout| !timeout.is_null());
            if !has_timeout {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                );
            }
        }
        _ => {}
    }
    default_text(spec, "type", "ClusterIP");
    for port in items(spec, "ports") {
        default_text(port, "protocol", "TCP");
        let unset = match port.get("targetPort") {
            None | Some(Value::Null) => true,
            Some(Value::Number(number)) => number.as_i64() == Some(0),
            Some(Value::String(name)) => name.is_empty(),
            Some(_) => false,
        };
        if unset && let Some(number) = port.get("port").filter(|p| p.is_number()).cloned() {
            port.insert("targetPort".into(), number);
        }
    }
    let service_type = text(spec, "type").unwrap_or("").to_owned();
    let externally_accessible = matches!(service_type.as_str(), "LoadBalancer" | "NodePort")
        || (service_type == "ClusterIP" && !is_empty(spec, "externalIPs"));
    if externally_accessible {
        default_text(spec, "externalTrafficPolicy", "Cluster");
    }
    if matches!(
        service_type.as_str(),
        "NodePort" | "LoadBalancer" | "ClusterIP"
    ) {
        default_value(spec, "internalTrafficPolicy", || json!("Cluster"));
    }
    if service_type == "LoadBalancer" {
        default_value(spec, "allocateLoadBalancerNodePorts", || json!(true));
    }
}

/// `type: Opaque`, and `stringData` merged into `data` as decoding does (a key in both takes
/// the `stringData` value; `stringData` itself is not part of the stored object).
pub(super) fn secret(object: &mut Object) {
    default_text(object, "type", "Opaque");
    let Some(Value::Object(string_data)) = object.get("stringData") else {
        return;
    };
    if !string_data.values().all(Value::is_string) {
        return;
    }
    let encoded: Vec<(String, Value)> = string_data
        .iter()
        .map(|(key, value)| {
            let text = value.as_str().unwrap_or_default();
            (key.clone(), Value::String(BASE64.encode(text)))
        })
        .collect();
    object.remove("stringData");
    if encoded.is_empty() {
        return;
    }
    if let Some(data) = child_or_empty(object, "data") {
        data.extend(encoded);
    }
}

pub(super) fn namespace(object: &mut Object) {
    if let Some(status) = child_or_empty(object, "status") {
        default_text(status, "phase", "Active");
    }
    let Some(metadata) = child(object, "metadata") else {
        return;
    };
    let name = match text(metadata, "name") {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => return,
    };
    if let Some(labels) = child_or_empty(metadata, "labels") {
        labels.insert("kubernetes.io/metadata.name".into(), Value::String(name));
    }
}

pub(super) fn persistent_volume_claim(object: &mut Object) {
    if let Some(status) = child_or_empty(object, "status") {
        default_text(status, "phase", "Pending");
    }
    if let Some(spec) = child_or_empty(object, "spec") {
        pod::persistent_volume_claim_spec(spec);
    }
}

pub(super) fn persistent_volume(object: &mut Object) {
    if let Some(status) = child_or_empty(object, "status") {
        default_text(status, "phase", "Pending");
    }
    let Some(spec) = child_or_empty(object, "spec") else {
        return;
    };
    default_text(spec, "persistentVolumeReclaimPolicy", "Retain");
    default_value(spec, "volumeMode", || json!("Filesystem"));
    resource_list(spec, "capacity");
    pod::persistent_volume_source(spec);
}

pub(super) fn resource_quota(object: &mut Object) {
    if let Some(spec) = child(object, "spec") {
        resource_list(spec, "hard");
    }
}

pub(super) fn endpoints(object: &mut Object) {
    for subset in items(object, "subsets") {
        for port in items(subset, "ports") {
            default_text(port, "protocol", "TCP");
        }
    }
}

pub(super) fn limit_range(object: &mut Object) {
    let Some(spec) = child(object, "spec") else {
        return;
    };
    for item in items(spec, "limits") {
        for list in [
            "max",
            "min",
            "default",
            "defaultRequest",
            "maxLimitRequestRatio",
        ] {
            resource_list(item, list);
        }
        if text(item, "type") != Some("Container") {
            continue;
        }
        let max = item.get("max").and_then(Value::as_object).cloned();
        let min = item.get("min").and_then(Value::as_object).cloned();
        if let Some(default) = child_or_empty(item, "default") {
            for (name, quantity) in max.iter().flatten() {
                default
                    .entry(name.clone())
                    .or_insert_with(|| quantity.clone());
            }
        }
        let default = item.get("default").and_then(Value::as_object).cloned();
        if let Some(request) = child_or_empty(item, "defaultRequest") {
            for (name, quantity) in default.iter().flatten().chain(min.iter().flatten()) {
                request
                    .entry(name.clone())
                    .or_insert_with(|| quantity.clone());
            }
        }
        // An empty map is not serialised: the typed object has no such field.
        for key in ["default", "defaultRequest"] {
            if is_empty(item, key) {
                item.remove(key);
            }
        }
    }
}

/// A Node's `status.allocatable` is its `capacity` when unset; both are resource lists.
pub(super) fn node(object: &mut Object) {
    let Some(status) = child(object, "status") else {
        return;
    };
    if is_empty(status, "allocatable")
        && let Some(capacity) = status.get("capacity").filter(|c| c.is_object()).cloned()
    {
        status.insert("allocatable".into(), capacity);
    }
    resource_list(status, "capacity");
    resource_list(status, "allocatable");
}
