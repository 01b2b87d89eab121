//! PodSpec defaulting, shared by Pods and every pod template (`SetDefaults_PodSpec` and the
//! generated defaults of volumes, containers, probes and ports), and the few defaults that
//! apply to a Pod only (`SetDefaults_Pod`).

use serde_json::{Value, json};

use super::fields::{
    Object, child, child_or_empty, default_number, default_pointer_number, default_text,
    default_value, is_unset, items, text,
};
use super::image::pull_policy_for;
use super::quantity::{quantity_field, resource_list};

/// The `defaultMode` of secret, configMap, downwardAPI and projected volumes: 0644 (420).
const DEFAULT_MODE: i64 = 0o644;

/// Every field of a VolumeSource: a volume that sets none of them is an `emptyDir`.
const VOLUME_SOURCES: [&str; 30] = [
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// The container lists of a PodSpec.
const CONTAINER_LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

/// Defaults a PodSpec (of a Pod or of a template).
pub(super) fn pod_spec(spec: &mut Object) {
    // serviceAccount is the deprecated alias of serviceAccountName; the name wins.
    if let (Some(name), Some(alias)) = (
        text(spec, "serviceAccountName"),
        text(spec, "serviceAccount"),
    ) {
        let account = if name.is_empty() { alias } else { name }.to_owned();
        if !account.is_empty() {
            spec.insert("serviceAccountName".into(), Value::String(account.clone()));
            spec.insert("serviceAccount".into(), Value::String(account));
        }
    }
    default_text(spec, "dnsPolicy", "ClusterFirst");
    default_text(spec, "restartPolicy", "Always");
    default_value(spec, "securityContext", || json!({}));
    default_pointer_number(spec, "terminationGracePeriodSeconds", 30);
    default_text(spec, "schedulerName", "default-scheduler");

    resource_list(spec, "overhead");
    if let Some(resources) = child(spec, "resources") {
        resources_lists(resources);
    }
    for volume in items(spec, "volumes") {
        self::volume(volume);
    }
    for list in CONTAINER_LISTS {
        for container in items(spec, list) {
            self::container(container);
        }
    }
}

/// Defaults a Pod's spec: the PodSpec defaults and the Pod-only ones.
pub(super) fn pod(pod: &mut Object) {
    let Some(spec) = child(pod, "spec") else {
        return;
    };
    // A negative grace period means "now", which the apiserver stores as 1 second.
    if spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|seconds| seconds < 0)
    {
        spec.insert("terminationGracePeriodSeconds".into(), json!(1));
    }
    for list in ["containers", "initContainers"] {
        for container in items(spec, list) {
            requests_from_limits(container);
        }
    }
    default_value(spec, "enableServiceLinks", || json!(true));
    if spec.get("hostNetwork") == Some(&Value::Bool(true)) {
        for list in ["containers", "initContainers"] {
            for container in items(spec, list) {
                for port in items(container, "ports") {
                    let unset = match port.get("hostPort") {
                        None | Some(Value::Null) => true,
                        Some(Value::Number(n)) => n.as_i64() == Some(0),
                        Some(_) => false,
                    };
                    if unset && let Some(container_port) = port.get("containerPort").cloned() {
                        port.insert("hostPort".into(), container_port);
                    }
                }
            }
        }
    }
    pod_spec(spec);
}

/// A container's `resources.requests` get every `limits` entry they lack (Pods only).
fn requests_from_limits(container: &mut Object) {
    let Some(resources) = child(container, "resources") else {
        return;
    };
    let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    if limits.is_empty() {
        return;
    }
    let Some(requests) = child_or_empty(resources, "requests") else {
        return;
    };
    for (name, quantity) in limits {
        requests.entry(name).or_insert(quantity);
    }
}

fn volume(volume: &mut Object) {
    let has_source = VOLUME_SOURCES
        .iter()
        .any(|source| !is_unset(volume, source));
    if !has_source {
        volume.insert("emptyDir".into(), json!({}));
    }
    persistent_volume_source(volume);
    if let Some(empty_dir) = child(volume, "emptyDir") {
        quantity_field(empty_dir, "sizeLimit");
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = child(volume, source) {
            default_pointer_number(source, "defaultMode", DEFAULT_MODE);
        }
    }
    if let Some(downward) = child(volume, "downwardAPI") {
        downward_api_items(downward);
    }
    if let Some(projected) = child(volume, "projected") {
        for source in items(projected, "sources") {
            if let Some(downward) = child(source, "downwardAPI") {
                downward_api_items(downward);
            }
            if let Some(token) = child(source, "serviceAccountToken") {
                default_pointer_number(token, "expirationSeconds", 3600);
            }
        }
    }
    if let Some(template) = child(volume, "ephemeral").and_then(|e| child(e, "volumeClaimTemplate"))
    {
        // `metadata` is a struct value: the typed object always shows it.
        default_value(template, "metadata", || json!({}));
        if let Some(spec) = child_or_empty(template, "spec") {
            persistent_volume_claim_spec(spec);
        }
    }
    if let Some(image) = child(volume, "image")
        && text(image, "pullPolicy") == Some("")
    {
        let reference = text(image, "reference").unwrap_or("").to_owned();
        image.insert("pullPolicy".into(), json!(pull_policy_for(&reference)));
    }
}

/// The defaults of the sources a Volume shares with a PersistentVolume: hostPath, iscsi,
/// rbd, azureDisk, scaleIO.
pub(super) fn persistent_volume_source(source: &mut Object) {
    if let Some(host_path) = child(source, "hostPath") {
        default_value(host_path, "type", || json!(""));
    }
    if let Some(iscsi) = child(source, "iscsi") {
        default_text(iscsi, "iscsiInterface", "default");
    }
    if let Some(rbd) = child(source, "rbd") {
        default_text(rbd, "pool", "rbd");
        default_text(rbd, "user", "admin");
        default_text(rbd, "keyring", "/etc/ceph/keyring");
    }
    if let Some(azure) = child(source, "azureDisk") {
        default_value(azure, "cachingMode", || json!("ReadWrite"));
        default_value(azure, "fsType", || json!("ext4"));
        default_value(azure, "readOnly", || json!(false));
        default_value(azure, "kind", || json!("Shared"));
    }
    if let Some(scale_io) = child(source, "scaleIO") {
        default_text(scale_io, "storageMode", "ThinProvisioned");
        default_text(scale_io, "fsType", "xfs");
    }
}

fn downward_api_items(downward: &mut Object) {
    for item in items(downward, "items") {
        if let Some(field_ref) = child(item, "fieldRef") {
            default_text(field_ref, "apiVersion", "v1");
        }
    }
}

/// Defaults a PersistentVolumeClaimSpec (of a claim, a claim template or an ephemeral volume).
pub(super) fn persistent_volume_claim_spec(spec: &mut Object) {
    default_value(spec, "volumeMode", || json!("Filesystem"));
    // `resources` is a struct value: the typed object always shows it.
    default_value(spec, "resources", || json!({}));
    if let Some(resources) = child(spec, "resources") {
        resources_lists(resources);
    }
}

/// The `limits` and `requests` of a ResourceRequirements, as resource lists.
fn resources_lists(resources: &mut Object) {
    resource_list(resources, "limits");
    resource_list(resources, "requests");
}

fn container(container: &mut Object) {
    if text(container, "imagePullPolicy") == Some("") {
        let image = text(container, "image").unwrap_or("").to_owned();
        container.insert("imagePullPolicy".into(), json!(pull_policy_for(&image)));
    }
    default_text(container, "terminationMessagePath", "/dev/termination-log");
    default_text(container, "terminationMessagePolicy", "File");
    // `resources` is a struct value: the typed object always shows it.
    default_value(container, "resources", || json!({}));
    if let Some(resources) = child(container, "resources") {
        resources_lists(resources);
    }
    for port in items(container, "ports") {
        default_text(port, "protocol", "TCP");
    }
    for env in items(container, "env") {
        let Some(value_from) = child(env, "valueFrom") else {
            continue;
        };
        if let Some(field_ref) = child(value_from, "fieldRef") {
            default_text(field_ref, "apiVersion", "v1");
        }
        if let Some(file_key_ref) = child(value_from, "fileKeyRef") {
            default_value(file_key_ref, "optional", || json!(false));
        }
    }
    for name in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = child(container, name) {
            self::probe(probe);
        }
    }
    if let Some(lifecycle) = child(container, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(http_get) = child(lifecycle, hook).and_then(|h| child(h, "httpGet")) {
                self::http_get(http_get);
            }
        }
    }
}

fn probe(probe: &mut Object) {
    default_number(probe, "timeoutSeconds", 1);
    default_number(probe, "periodSeconds", 10);
    default_number(probe, "successThreshold", 1);
    default_number(probe, "failureThreshold", 3);
    if let Some(http_get) = child(probe, "httpGet") {
        self::http_get(http_get);
    }
    if let Some(grpc) = child(probe, "grpc") {
        default_value(grpc, "service", || json!(""));
    }
}

fn http_get(action: &mut Object) {
    default_text(action, "path", "/");
    default_text(action, "scheme", "HTTP");
}

/// Defaults the pod template at `template` (a PodTemplateSpec) of a workload, if present.
pub(super) fn template(template: Option<&mut Object>) {
    let Some(template) = template else {
        return;
    };
    // `metadata` is a struct value: the typed object always shows it.
    default_value(template, "metadata", || json!({}));
    if let Some(spec) = child(template, "spec") {
        pod_spec(spec);
    }
}
