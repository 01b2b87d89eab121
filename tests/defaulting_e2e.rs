//! Differential test of `portcullis::kubernetes::defaulting::apply_defaults` against a real kube-apiserver
//! v1.37.2 (the judge): a few hundred generated objects (seeded, deterministic) of the built-in
//! kinds Portcullis defaults are sent with `kubectl create --dry-run=server -o json`, and what
//! the apiserver returns is compared field for field with `apply_defaults` on the same input.
//!
//! The apiserver's answer holds more than its defaulting. What else changes the object is
//! named here, one entry per cause, and either modelled (the expected object gets the same
//! change, so the test still checks it) or removed from both sides:
//!
//! - server-set metadata (`uid`, `resourceVersion`, `creationTimestamp`, `generation`,
//!   `managedFields`) and top-level `status` (REST strategies reset it; the typed form shows
//!   an empty shell) except where defaulting sets a phase (PersistentVolumeClaim,
//!   PersistentVolume, Namespace; the PV strategy's `lastPhaseTransitionTime` is removed):
//!   removed;
//! - admission plugins enabled by default that mutate these kinds (see [`ADMISSION_PLUGINS`]):
//!   DefaultTolerationSeconds and Priority on Pods, StorageObjectInUseProtection on claims
//!   and volumes: modelled. LimitRanger, DefaultStorageClass, DefaultIngressClass and
//!   RuntimeClass change nothing here (the test namespace has no LimitRange, there is no
//!   default StorageClass or IngressClass, and no Pod names a runtime class);
//! - REST strategies (`PrepareForCreate`): Namespace `spec.finalizers: [kubernetes]` and
//!   DaemonSet annotation `deprecated.daemonset.template.generation: "1"` modelled; Job `spec.selector` and the `controller-uid`/`job-name` labels (they carry the
//!   random uid) removed where the input had none;
//! - the Service allocator: `clusterIP`, `clusterIPs`, `ipFamilies`, `ipFamilyPolicy`,
//!   `nodePort`, `healthCheckNodePort` removed where the input had none.
//!
//! Run with `PORTCULLIS_E2E_BIN=$(e2e/build-controlplane.sh | tail -n 1) cargo test --test
//! defaulting_e2e`. Without PORTCULLIS_E2E_BIN it is skipped with a message, except under
//! `CI=true`, where it fails.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use common::control_plane::{ControlPlane, e2e_bin};
use portcullis::admission::GroupVersionKind;
use portcullis::kubernetes::defaulting::apply_defaults;
use serde_json::{Map, Value, json};

/// The namespace every namespaced object is created in (dry run: nothing is stored).
const NAMESPACE: &str = "defaulting";
/// The generator's seed: the same objects on every run.
const SEED: u64 = 0x5eed_0fde_fa17_u64;
/// Objects per generator family (see [`generate`]).
const PER_FAMILY: usize = 24;
/// Objects per `kubectl create` call.
const BATCH: usize = 120;

/// The mutating admission plugins of a default v1.37 apiserver that change objects of the
/// kinds generated here, and what they do (modelled by [`admission_plugins`]).
const ADMISSION_PLUGINS: &[(&str, &str)] = &[
    (
        "DefaultTolerationSeconds",
        "Pod: tolerates node.kubernetes.io/not-ready and /unreachable (NoExecute) for 300s",
    ),
    (
        "Priority",
        "Pod without priorityClassName: priority 0, preemptionPolicy PreemptLowerPriority",
    ),
    (
        "StorageObjectInUseProtection",
        "PersistentVolumeClaim / PersistentVolume: the pvc-protection / pv-protection finalizer",
    ),
];

// ---------------------------------------------------------------------------------------------
// A small deterministic generator.

/// SplitMix64: enough randomness for test data, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// True with probability `percent`%.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const DIGEST: &str = "sha256:4bcff63911fcb4448bd4fdacec207030997caf25e9bea4045fa6c8c44de311d1";

fn image(rng: &mut Rng) -> String {
    let images = [
        "nginx".to_owned(),
        "nginx:latest".to_owned(),
        "nginx:1.27".to_owned(),
        "busybox:1.36".to_owned(),
        "registry.example.com:5000/team/app".to_owned(),
        "registry.example.com:5000/team/app:v2".to_owned(),
        "localhost/tool:latest".to_owned(),
        "ghcr.io/org/tool:2024.1".to_owned(),
        format!("busybox@{DIGEST}"),
        format!("busybox:latest@{DIGEST}"),
        format!("quay.io/org/app:1.0@{DIGEST}"),
        // References the kubelet's parser refuses: the apiserver defaults them IfNotPresent.
        "Nginx:latest".to_owned(),
        "busybox:latest@sha256:abc".to_owned(),
        "nginx:".to_owned(),
        "registry.example.com:5000/Team/app".to_owned(),
    ];
    rng.pick(&images).clone()
}

/// A container; `kind` is "main", "init" or "sidecar".
fn container(rng: &mut Rng, name: &str, kind: &str, ports: &mut usize) -> Value {
    let mut c = json!({"name": name, "image": image(rng)});
    if rng.chance(25) {
        c["imagePullPolicy"] = json!(rng.pick(&["Always", "IfNotPresent", "Never"]));
    }
    if kind == "sidecar" {
        c["restartPolicy"] = json!("Always");
    }
    if rng.chance(15) {
        c["terminationMessagePolicy"] = json!("FallbackToLogsOnError");
    }
    if rng.chance(10) {
        c["terminationMessagePath"] = json!("/tmp/termination");
    }
    if kind != "init" && rng.chance(50) {
        let n = 1 + rng.below(2);
        let list: Vec<Value> = (0..n)
            .map(|_| {
                *ports += 1;
                let mut port = json!({"containerPort": 8000 + *ports as u64});
                if rng.chance(40) {
                    port["protocol"] = json!(rng.pick(&["TCP", "UDP", "SCTP"]));
                }
                if rng.chance(50) {
                    port["name"] = json!(format!("p{ports}"));
                }
                port
            })
            .collect();
        c["ports"] = json!(list);
    }
    if rng.chance(40) {
        let mut env = vec![json!({"name": "PLAIN", "value": "x"})];
        if rng.chance(60) {
            let mut field_ref = json!({"fieldPath": "metadata.name"});
            if rng.chance(30) {
                field_ref["apiVersion"] = json!("v1");
            }
            env.push(json!({"name": "POD_NAME", "valueFrom": {"fieldRef": field_ref}}));
        }
        if rng.chance(30) {
            env.push(json!({"name": "FROM_CM", "valueFrom":
                {"configMapKeyRef": {"name": "cm", "key": "k"}}}));
        }
        c["env"] = json!(env);
    }
    match rng.below(6) {
        0 => c["resources"] = json!({"limits": {"cpu": "500m", "memory": "128Mi"}}),
        1 => c["resources"] = json!({"requests": {"cpu": "100m"}}),
        2 => {
            c["resources"] = json!({"limits": {"cpu": "1", "memory": "1Gi"},
                "requests": {"cpu": "250m"}})
        }
        3 if rng.chance(30) => c["resources"] = json!({}),
        // Quantities the apiserver rewrites (canonical form, milliunit round-up).
        4 | 5 => c["resources"] = rng.pick(&ODD_RESOURCES[..]).clone(),
        _ => {}
    }
    if kind != "init" {
        for (field, may_succeed_more) in [
            ("livenessProbe", false),
            ("readinessProbe", true),
            ("startupProbe", false),
        ] {
            if rng.chance(35) {
                c[field] = probe(rng, may_succeed_more);
            }
        }
    }
    if kind != "init" && rng.chance(20) {
        let mut lifecycle = Map::new();
        if rng.chance(50) {
            let mut http = json!({"port": 8080});
            if rng.chance(50) {
                http["path"] = json!("/start");
            }
            lifecycle.insert("postStart".into(), json!({"httpGet": http}));
        }
        let pre_stop = match rng.below(3) {
            0 => json!({"exec": {"command": ["sh", "-c", "sleep 1"]}}),
            1 => json!({"httpGet": {"port": "http", "scheme": "HTTPS"}}),
            _ => json!({"sleep": {"seconds": 0}}),
        };
        lifecycle.insert("preStop".into(), pre_stop);
        c["lifecycle"] = Value::Object(lifecycle);
    }
    if rng.chance(20) {
        c["securityContext"] = json!({"allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]}});
    }
    c
}

/// Container resources written in non-canonical ways (requests never above limits).
static ODD_RESOURCES: std::sync::LazyLock<[Value; 8]> = std::sync::LazyLock::new(|| {
    [
        json!({"limits": {"cpu": "1000m", "memory": "1024Mi"}, "requests": {"cpu": "0.5", "memory": "1.5Mi"}}),
        json!({"limits": {"cpu": "1.5", "memory": "1.5Gi"}, "requests": {"cpu": "100.0m", "memory": "512Mi"}}),
        json!({"limits": {"cpu": 2, "memory": "1e9"}, "requests": {"cpu": 1.5, "memory": "12e6"}}),
        json!({"limits": {"cpu": "0.0001", "memory": "1G"}, "requests": {"memory": "1000M"}}),
        json!({"limits": {"memory": "0.5Gi", "ephemeral-storage": "2048"}, "requests": {"cpu": "0.25"}}),
        json!({"limits": {"cpu": "2000m"}}),
        json!({"requests": {"cpu": "1.0001", "memory": "100000000"}}),
        json!({"limits": {"memory": "8Mi", "example.com/gpu": "1"}, "requests": {"example.com/gpu": "1"}}),
    ]
});

fn probe(rng: &mut Rng, may_succeed_more: bool) -> Value {
    let mut probe = match rng.below(4) {
        0 => {
            let mut http = json!({"port": 8080});
            if rng.chance(40) {
                http["path"] = json!("/healthz");
            }
            if rng.chance(30) {
                http["scheme"] = json!("HTTPS");
            }
            if rng.chance(20) {
                http["httpHeaders"] = json!([{"name": "X-Probe", "value": "1"}]);
            }
            json!({"httpGet": http})
        }
        1 => json!({"tcpSocket": {"port": 8080}}),
        2 => json!({"exec": {"command": ["true"]}}),
        _ => {
            let mut grpc = json!({"port": 9090});
            if rng.chance(40) {
                grpc["service"] = json!("health");
            }
            json!({"grpc": grpc})
        }
    };
    for (field, value) in [
        ("initialDelaySeconds", 5),
        ("timeoutSeconds", 3),
        ("periodSeconds", 20),
        ("failureThreshold", 5),
    ] {
        if rng.chance(30) {
            probe[field] = json!(value);
        }
    }
    if may_succeed_more && rng.chance(30) {
        probe["successThreshold"] = json!(2);
    }
    probe
}

fn volume(rng: &mut Rng, name: &str) -> Value {
    let mut v = json!({"name": name});
    match rng.below(15) {
        0 | 1 => {}
        2 => {
            v["emptyDir"] = rng
                .pick(&[
                    json!({}),
                    json!({"medium": "Memory"}),
                    json!({"sizeLimit": "1024Mi"}),
                    json!({"sizeLimit": "0.5Gi", "medium": "Memory"}),
                ])
                .clone()
        }
        3 => {
            let mut cm = json!({"name": "settings"});
            if rng.chance(30) {
                cm["defaultMode"] = json!(0o400);
            }
            if rng.chance(30) {
                cm["items"] = json!([{"key": "a", "path": "a.txt"}]);
            }
            v["configMap"] = cm;
        }
        4 => {
            let mut secret = json!({"secretName": "creds"});
            if rng.chance(30) {
                secret["defaultMode"] = json!(0o440);
            }
            v["secret"] = secret;
        }
        5 => {
            let mut field_ref = json!({"fieldPath": "metadata.labels"});
            if rng.chance(30) {
                field_ref["apiVersion"] = json!("v1");
            }
            v["downwardAPI"] = json!({"items": [{"path": "labels", "fieldRef": field_ref}]});
        }
        6 => {
            let mut token = json!({"path": "token"});
            if rng.chance(40) {
                token["expirationSeconds"] = json!(7200);
            }
            if rng.chance(40) {
                token["audience"] = json!("vault");
            }
            let mut projected = json!({"sources": [
                {"serviceAccountToken": token},
                {"configMap": {"name": "ca"}},
                {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}
            ]});
            if rng.chance(30) {
                projected["defaultMode"] = json!(0o444);
            }
            v["projected"] = projected;
        }
        7 => {
            let mut host_path = json!({"path": "/var/log"});
            if rng.chance(50) {
                host_path["type"] = json!(rng.pick(&["Directory", "DirectoryOrCreate", "File"]));
            }
            v["hostPath"] = host_path;
        }
        8 => v["persistentVolumeClaim"] = json!({"claimName": "data"}),
        9 => {
            let mut spec = json!({"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}});
            if rng.chance(30) {
                spec["volumeMode"] = json!("Block");
            }
            v["ephemeral"] = json!({"volumeClaimTemplate": {"spec": spec}});
        }
        10 => {
            let mut image = json!({"reference": image(rng)});
            if rng.chance(30) {
                image["pullPolicy"] = json!("Never");
            }
            v["image"] = image;
        }
        11 => v["nfs"] = json!({"server": "nfs.example.com", "path": "/exports"}),
        // In-tree sources with `+default` markers.
        13 => {
            let sources = [
                (
                    "iscsi",
                    json!({"targetPortal": "10.0.0.1:3260",
                    "iqn": "iqn.2001-04.com.example:storage.disk1", "lun": 0}),
                ),
                (
                    "rbd",
                    json!({"monitors": ["10.0.0.1:6789"], "image": "disk"}),
                ),
                (
                    "rbd",
                    json!({"monitors": ["10.0.0.1:6789"], "image": "disk", "pool": "kube",
                    "user": "kube"}),
                ),
                (
                    "azureDisk",
                    json!({"diskName": "d", "diskURI": "https://acct.blob.core.windows.net/c/d.vhd"}),
                ),
                (
                    "azureDisk",
                    json!({"diskName": "d", "diskURI": "/subscriptions/s/resourcegroups/g/providers/microsoft.compute/disks/d",
                    "kind": "Managed", "cachingMode": "None"}),
                ),
                (
                    "scaleIO",
                    json!({"gateway": "https://gw", "system": "sio",
                    "secretRef": {"name": "sio"}, "volumeName": "vol"}),
                ),
                ("cephfs", json!({"monitors": ["10.0.0.1:6789"]})),
                ("fc", json!({"targetWWNs": ["500a0982991b8dc5"], "lun": 2})),
            ];
            let (field, source) = rng.pick(&sources).clone();
            v[field] = source;
        }
        _ => v["csi"] = json!({"driver": "csi.example.com"}),
    }
    v
}

/// A PodSpec; `restart` is the restart policies the owner allows (`None`: leave it unset
/// sometimes).
fn pod_spec(rng: &mut Rng, restart: &[&str], top_level_pod: bool) -> Value {
    let mut ports = 0;
    let mut containers = vec![];
    for i in 0..1 + rng.below(3) {
        containers.push(container(rng, &format!("c{i}"), "main", &mut ports));
    }
    let mut spec = json!({"containers": containers});
    if rng.chance(35) {
        let kind = if rng.chance(40) { "sidecar" } else { "init" };
        spec["initContainers"] = json!([container(rng, "init0", kind, &mut ports)]);
    }
    if rng.chance(70) {
        let n = 1 + rng.below(4);
        let volumes: Vec<Value> = (0..n).map(|i| volume(rng, &format!("v{i}"))).collect();
        spec["volumes"] = json!(volumes);
    }
    if !restart.is_empty() && (rng.chance(50) || !restart.contains(&"Always")) {
        spec["restartPolicy"] = json!(rng.pick(restart));
    }
    if rng.chance(20) {
        spec["dnsPolicy"] = json!(rng.pick(&["Default", "ClusterFirstWithHostNet", "None"]));
        if spec["dnsPolicy"] == "None" {
            spec["dnsConfig"] = json!({"nameservers": ["1.1.1.1"]});
        }
    }
    match rng.below(6) {
        0 => spec["serviceAccountName"] = json!("builder"),
        1 => spec["serviceAccount"] = json!("legacy"),
        2 => {
            spec["serviceAccountName"] = json!("builder");
            spec["serviceAccount"] = json!("builder");
        }
        _ => {}
    }
    if rng.chance(15) {
        // An env file (EnvFiles, beta and on in 1.37): `optional` defaults to false.
        let volumes = spec
            .as_object_mut()
            .unwrap()
            .entry("volumes")
            .or_insert(json!([]));
        volumes
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "envs", "emptyDir": {}}));
        let container = spec["containers"][0].as_object_mut().unwrap();
        let env = container.entry("env").or_insert(json!([]));
        env.as_array_mut()
            .unwrap()
            .push(json!({"name": "FROM_FILE", "valueFrom":
            {"fileKeyRef": {"volumeName": "envs", "path": "a.env", "key": "K"}}}));
    }
    let projects_token = spec["volumes"]
        .as_array()
        .is_some_and(|volumes| volumes.iter().any(|v| v.get("projected").is_some()));
    if projects_token
        && spec.get("serviceAccountName").is_none()
        && spec.get("serviceAccount").is_none()
    {
        spec["serviceAccountName"] = json!("builder");
    }
    if rng.chance(20) {
        let seconds: i64 = if top_level_pod && rng.chance(30) {
            -5
        } else {
            *rng.pick(&[10, 60])
        };
        spec["terminationGracePeriodSeconds"] = json!(seconds);
    }
    if rng.chance(15) {
        spec["enableServiceLinks"] = json!(false);
    }
    if rng.chance(15) {
        spec["hostNetwork"] = json!(true);
    }
    if rng.chance(25) {
        spec["securityContext"] = json!({"runAsNonRoot": true, "runAsUser": 1000,
            "seccompProfile": {"type": "RuntimeDefault"}});
    }
    if rng.chance(10) {
        spec["schedulerName"] = json!("custom-scheduler");
    }
    if top_level_pod && rng.chance(20) {
        spec["tolerations"] = json!([{"key": "dedicated", "operator": "Equal",
            "value": "gpu", "effect": "NoSchedule"}]);
    }
    spec
}

fn metadata(name: &str, namespaced: bool, labels: Option<Value>) -> Value {
    let mut metadata = json!({"name": name});
    if namespaced {
        metadata["namespace"] = json!(NAMESPACE);
    }
    if let Some(labels) = labels {
        metadata["labels"] = labels;
    }
    metadata
}

fn object(api_version: &str, kind: &str, metadata: Value, spec: Value) -> Value {
    let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": metadata});
    if !spec.is_null() {
        object["spec"] = spec;
    }
    object
}

/// A pod template with labels `app: NAME`.
fn template(rng: &mut Rng, name: &str, restart: &[&str]) -> Value {
    let mut labels = json!({"app": name});
    if rng.chance(30) {
        labels["tier"] = json!("web");
    }
    json!({"metadata": {"labels": labels}, "spec": pod_spec(rng, restart, false)})
}

fn workload(rng: &mut Rng, kind: &str, name: &str) -> Value {
    let selector = json!({"matchLabels": {"app": name}});
    let mut labels = None;
    if rng.chance(30) {
        labels = Some(json!({"owner": "team-a"}));
    }
    let meta = metadata(name, true, labels);
    match kind {
        "Deployment" => {
            let mut spec =
                json!({"selector": selector, "template": template(rng, name, &["Always"])});
            match rng.below(4) {
                0 => spec["strategy"] = json!({"type": "Recreate"}),
                1 => spec["strategy"] = json!({"type": "RollingUpdate"}),
                2 => {
                    spec["strategy"] =
                        json!({"rollingUpdate": {"maxSurge": 1}, "type": "RollingUpdate"})
                }
                _ => {}
            }
            if rng.chance(30) {
                spec["replicas"] = json!(rng.below(4));
            }
            if rng.chance(20) {
                spec["revisionHistoryLimit"] = json!(3);
            }
            if rng.chance(20) {
                spec["progressDeadlineSeconds"] = json!(120);
            }
            if rng.chance(20) {
                spec["minReadySeconds"] = json!(5);
            }
            object("apps/v1", kind, meta, spec)
        }
        "StatefulSet" => {
            let mut spec =
                json!({"selector": selector, "template": template(rng, name, &["Always"])});
            if rng.chance(50) {
                spec["serviceName"] = json!("headless");
            }
            match rng.below(4) {
                0 => spec["updateStrategy"] = json!({"type": "OnDelete"}),
                1 => spec["updateStrategy"] = json!({"type": "RollingUpdate"}),
                2 => {
                    spec["updateStrategy"] =
                        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}})
                }
                _ => {}
            }
            if rng.chance(30) {
                spec["podManagementPolicy"] = json!("Parallel");
            }
            if rng.chance(25) {
                spec["persistentVolumeClaimRetentionPolicy"] = json!({"whenDeleted": "Delete"});
            }
            if rng.chance(40) {
                let mut claim_spec = json!({"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "2Gi"}}});
                if rng.chance(30) {
                    claim_spec["storageClassName"] = json!("fast");
                }
                spec["volumeClaimTemplates"] =
                    json!([{"metadata": {"name": "data"}, "spec": claim_spec}]);
            }
            object("apps/v1", kind, meta, spec)
        }
        "DaemonSet" => {
            let mut spec =
                json!({"selector": selector, "template": template(rng, name, &["Always"])});
            match rng.below(4) {
                0 => spec["updateStrategy"] = json!({"type": "OnDelete"}),
                1 => {
                    spec["updateStrategy"] =
                        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}})
                }
                _ => {}
            }
            object("apps/v1", kind, meta, spec)
        }
        "ReplicaSet" => {
            let mut spec =
                json!({"selector": selector, "template": template(rng, name, &["Always"])});
            if rng.chance(40) {
                spec["replicas"] = json!(2);
            }
            object("apps/v1", kind, meta, spec)
        }
        "ReplicationController" => {
            let mut spec = json!({"template": template(rng, name, &["Always"])});
            if rng.chance(30) {
                spec["selector"] = json!({"app": name});
            }
            object("v1", kind, meta, spec)
        }
        "PodTemplate" => {
            let mut object = object("v1", kind, meta, Value::Null);
            object["template"] = template(rng, name, &["Always", "OnFailure", "Never"]);
            object
        }
        "Job" => json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": job_spec(rng, name)}),
        "CronJob" => {
            let mut spec = json!({"schedule": "*/5 * * * *",
                "jobTemplate": {"spec": job_spec(rng, name)}});
            if rng.chance(30) {
                spec["concurrencyPolicy"] = json!(rng.pick(&["Forbid", "Replace"]));
            }
            if rng.chance(20) {
                spec["successfulJobsHistoryLimit"] = json!(1);
            }
            if rng.chance(20) {
                spec["suspend"] = json!(true);
            }
            if rng.chance(20) {
                spec["timeZone"] = json!("Etc/UTC");
            }
            object("batch/v1", kind, meta, spec)
        }
        other => panic!("not a workload: {other}"),
    }
}

fn job_spec(rng: &mut Rng, name: &str) -> Value {
    let failure_policy = rng.chance(25);
    let restart: &[&str] = if failure_policy {
        &["Never"]
    } else {
        &["OnFailure", "Never"]
    };
    let mut spec = json!({"template": template(rng, name, restart)});
    match rng.below(5) {
        0 => spec["completions"] = json!(3),
        1 => spec["parallelism"] = json!(2),
        2 => {
            spec["completions"] = json!(4);
            spec["parallelism"] = json!(2);
            spec["completionMode"] = json!("Indexed");
            if !failure_policy && rng.chance(50) {
                spec["backoffLimitPerIndex"] = json!(1);
                spec["template"]["spec"]["restartPolicy"] = json!("Never");
            }
        }
        _ => {}
    }
    if failure_policy {
        let mut pattern = json!({"type": "DisruptionTarget"});
        if rng.chance(40) {
            pattern["status"] = json!("False");
        }
        spec["podFailurePolicy"] = json!({"rules": [
            {"action": "Ignore", "onPodConditions": [pattern]},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}
        ]});
    }
    if rng.chance(20) {
        spec["backoffLimit"] = json!(2);
    }
    if rng.chance(15) {
        spec["suspend"] = json!(true);
    }
    if rng.chance(15) {
        spec["ttlSecondsAfterFinished"] = json!(60);
    }
    spec
}

fn service(rng: &mut Rng, name: &str) -> Value {
    let service_type = *rng.pick(&["", "ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]);
    let mut spec = json!({});
    if !service_type.is_empty() {
        spec["type"] = json!(service_type);
    }
    if service_type == "ExternalName" {
        spec["externalName"] = json!("db.example.com");
    } else {
        spec["selector"] = json!({"app": name});
        if matches!(service_type, "" | "ClusterIP") && rng.chance(20) {
            spec["clusterIP"] = json!("None");
        }
    }
    let n = 1 + rng.below(3);
    let ports: Vec<Value> = (0..n)
        .map(|i| {
            let mut port = json!({"port": 80 + i as u64});
            if n > 1 {
                port["name"] = json!(format!("port-{i}"));
            }
            match rng.below(4) {
                0 => port["targetPort"] = json!(8080),
                1 => port["targetPort"] = json!("http"),
                _ => {}
            }
            if rng.chance(30) {
                port["protocol"] = json!(rng.pick(&["TCP", "UDP"]));
            }
            port
        })
        .collect();
    spec["ports"] = json!(ports);
    if service_type != "ExternalName" && rng.chance(30) {
        spec["sessionAffinity"] = json!("ClientIP");
        match rng.below(3) {
            0 => spec["sessionAffinityConfig"] = json!({"clientIP": {"timeoutSeconds": 600}}),
            // No timeout: defaulting replaces the whole config.
            1 => spec["sessionAffinityConfig"] = json!({"clientIP": {}}),
            _ => {}
        }
    } else if service_type != "ExternalName" && rng.chance(10) {
        // Dropped by defaulting when the affinity is None.
        spec["sessionAffinity"] = json!("None");
        spec["sessionAffinityConfig"] = json!({"clientIP": {"timeoutSeconds": 600}});
    }
    if matches!(service_type, "NodePort" | "LoadBalancer") && rng.chance(30) {
        spec["externalTrafficPolicy"] = json!("Local");
    }
    if service_type == "ClusterIP" && spec.get("clusterIP").is_none() && rng.chance(30) {
        spec["externalIPs"] = json!(["192.0.2.10"]);
    }
    if service_type == "LoadBalancer" && rng.chance(30) {
        spec["allocateLoadBalancerNodePorts"] = json!(false);
    }
    object("v1", "Service", metadata(name, true, None), spec)
}

/// The other kinds, one per `which`.
fn other(rng: &mut Rng, which: usize, name: &str) -> Value {
    match which % 15 {
        0 => {
            let mut secret = object("v1", "Secret", metadata(name, true, None), Value::Null);
            secret["stringData"] = json!({"password": "x"});
            if rng.chance(40) {
                secret["type"] = json!("kubernetes.io/basic-auth");
                secret["stringData"] = json!({"username": "u", "password": "p"});
            }
            secret
        }
        1 => {
            let labels = rng.chance(50).then(|| json!({"team": "a"}));
            object(
                "v1",
                "Namespace",
                metadata(name, false, labels),
                Value::Null,
            )
        }
        2 => {
            let mut config_map = object("v1", "ConfigMap", metadata(name, true, None), Value::Null);
            if rng.chance(60) {
                config_map["data"] = json!({"k": "v"});
            }
            config_map
        }
        3 => {
            let storage = *rng.pick(&["5Gi", "5120Mi", "1.5Gi", "10G", "1e10"]);
            let mut spec = json!({"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": storage}}});
            if rng.chance(30) {
                spec["volumeMode"] = json!("Block");
            }
            if rng.chance(30) {
                spec["storageClassName"] = json!("standard");
            }
            object(
                "v1",
                "PersistentVolumeClaim",
                metadata(name, true, None),
                spec,
            )
        }
        4 => {
            let mut spec = json!({"podSelector": {"matchLabels": {"app": "db"}}});
            if rng.chance(30) {
                spec["podSelector"] = json!({});
            }
            let mut port = json!({"port": 5432});
            if rng.chance(40) {
                port["protocol"] = json!("UDP");
            }
            match rng.below(3) {
                0 => spec["ingress"] = json!([{"ports": [port]}]),
                1 => {
                    spec["ingress"] = json!([{"from": [{"podSelector": {}}]}]);
                    spec["egress"] = json!([{"ports": [port, {"port": "dns"}]}]);
                }
                _ => spec["policyTypes"] = json!(["Egress"]),
            }
            object(
                "networking.k8s.io/v1",
                "NetworkPolicy",
                metadata(name, true, None),
                spec,
            )
        }
        5 => {
            let mut spec = json!({"scaleTargetRef": {"apiVersion": "apps/v1",
                "kind": "Deployment", "name": "web"}, "maxReplicas": 5});
            if rng.chance(40) {
                spec["minReplicas"] = json!(2);
            }
            match rng.below(3) {
                0 => {
                    spec["metrics"] = json!([{"type": "Resource", "resource": {"name": "memory",
                        "target": {"type": "Utilization", "averageUtilization": 60}}}])
                }
                1 => {
                    spec["metrics"] = json!([{"type": "Pods", "pods": {
                        "metric": {"name": "requests"},
                        "target": {"type": "AverageValue", "averageValue": "1000m"}}}])
                }
                _ => {}
            }
            match rng.below(4) {
                0 => spec["behavior"] = json!({}),
                1 => spec["behavior"] = json!({"scaleDown": {"stabilizationWindowSeconds": 60}}),
                2 => {
                    spec["behavior"] = json!({"scaleUp": {"selectPolicy": "Min",
                        "policies": [{"type": "Pods", "value": 2, "periodSeconds": 30}]}})
                }
                _ => {}
            }
            if rng.chance(25) {
                // The older version: only minReplicas and the CPU target.
                let mut v1 = json!({"scaleTargetRef": spec["scaleTargetRef"].clone(),
                    "maxReplicas": 5});
                if rng.chance(40) {
                    v1["targetCPUUtilizationPercentage"] = json!(50);
                }
                return object(
                    "autoscaling/v1",
                    "HorizontalPodAutoscaler",
                    metadata(name, true, None),
                    v1,
                );
            }
            object(
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                metadata(name, true, None),
                spec,
            )
        }
        6 => {
            let spec = if rng.chance(50) {
                json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}})
            } else {
                json!({"maxUnavailable": "20%", "selector": {"matchLabels": {"app": "web"}}})
            };
            object(
                "policy/v1",
                "PodDisruptionBudget",
                metadata(name, true, None),
                spec,
            )
        }
        7 => {
            let path = json!({"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}});
            let spec = json!({"rules": [{"host": "example.com", "http": {"paths": [path]}}]});
            object(
                "networking.k8s.io/v1",
                "Ingress",
                metadata(name, true, None),
                spec,
            )
        }
        8 => {
            let mut role = object(
                "rbac.authorization.k8s.io/v1",
                "Role",
                metadata(name, true, None),
                Value::Null,
            );
            role["rules"] =
                json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]);
            role
        }
        9 => {
            let cluster = rng.chance(30);
            let kind = if cluster {
                "ClusterRoleBinding"
            } else {
                "RoleBinding"
            };
            let mut binding = object(
                "rbac.authorization.k8s.io/v1",
                kind,
                metadata(name, !cluster, None),
                Value::Null,
            );
            let mut role_ref = json!({"kind": "ClusterRole", "name": "view"});
            if rng.chance(40) {
                role_ref["apiGroup"] = json!("rbac.authorization.k8s.io");
            }
            binding["roleRef"] = role_ref;
            binding["subjects"] = json!([
                {"kind": "User", "name": "jane"},
                {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"},
                {"kind": "ServiceAccount", "name": "builder", "namespace": NAMESPACE}
            ]);
            binding
        }
        10 => {
            let mut item = json!({"type": "Container"});
            match rng.below(5) {
                0 => item["max"] = json!({"cpu": "2", "memory": "1Gi"}),
                4 => {
                    item["max"] = json!({"cpu": "2000m", "memory": "1024Mi"});
                    item["min"] = json!({"cpu": "0.1"});
                }
                1 => item["default"] = json!({"cpu": "500m"}),
                2 => {
                    item["min"] = json!({"cpu": "100m"});
                    item["max"] = json!({"cpu": "1"});
                }
                _ => item["defaultRequest"] = json!({"memory": "64Mi"}),
            }
            let mut limits = vec![item];
            if rng.chance(30) {
                limits.push(json!({"type": "Pod", "max": {"cpu": "4"}}));
            }
            object(
                "v1",
                "LimitRange",
                metadata(name, true, None),
                json!({"limits": limits}),
            )
        }
        11 => {
            let mut endpoints = object("v1", "Endpoints", metadata(name, true, None), Value::Null);
            endpoints["subsets"] = json!([{"addresses": [{"ip": "10.1.0.1"}],
                "ports": [{"port": 80, "name": "http"}, {"port": 53, "protocol": "UDP", "name": "dns"}]}]);
            endpoints
        }
        12 => {
            let mut spec = json!({"capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}});
            if rng.chance(30) {
                spec["persistentVolumeReclaimPolicy"] = json!("Delete");
            }
            object("v1", "PersistentVolume", metadata(name, false, None), spec)
        }
        14 => {
            let hard = json!({"pods": "10", "requests.cpu": "4000m", "limits.memory": "2.5Gi"});
            object(
                "v1",
                "ResourceQuota",
                metadata(name, true, None),
                json!({"hard": hard}),
            )
        }
        _ => {
            let mut spec = json!({"controller": "example.com/ingress"});
            if rng.chance(60) {
                spec["parameters"] = json!({"apiGroup": "example.com", "kind": "Params",
                    "name": "p"});
            }
            object(
                "networking.k8s.io/v1",
                "IngressClass",
                metadata(name, false, None),
                spec,
            )
        }
    }
}

/// Cluster-wide kinds: storage, scheduling, webhook configurations, admission policies.
fn cluster_kind(rng: &mut Rng, which: usize, name: &str) -> Value {
    let meta = metadata(name, false, None);
    let rule = |rng: &mut Rng| {
        let mut rule = json!({"apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["pods"], "operations": ["CREATE"]});
        if rng.chance(40) {
            rule["scope"] = json!("Namespaced");
        }
        rule
    };
    match which % 9 {
        0 => {
            let mut class = object("storage.k8s.io/v1", "StorageClass", meta, Value::Null);
            class["provisioner"] = json!("example.com/disk");
            if rng.chance(40) {
                class["reclaimPolicy"] = json!("Retain");
            }
            if rng.chance(40) {
                class["volumeBindingMode"] = json!("WaitForFirstConsumer");
            }
            class
        }
        1 => {
            let mut spec = json!({});
            if rng.chance(40) {
                spec["attachRequired"] = json!(false);
                spec["volumeLifecycleModes"] = json!(["Ephemeral"]);
            }
            if rng.chance(30) {
                spec["fsGroupPolicy"] = json!("File");
            }
            let meta = metadata(&format!("{name}.csi.example.com"), false, None);
            object("storage.k8s.io/v1", "CSIDriver", meta, spec)
        }
        2 => {
            let mut class = object("scheduling.k8s.io/v1", "PriorityClass", meta, Value::Null);
            class["value"] = json!(1000);
            if rng.chance(40) {
                class["preemptionPolicy"] = json!("Never");
            }
            class
        }
        3 | 4 => {
            let mutating = which % 9 == 4;
            let kind = if mutating {
                "MutatingWebhookConfiguration"
            } else {
                "ValidatingWebhookConfiguration"
            };
            let client = if rng.chance(50) {
                json!({"service": {"namespace": "system", "name": "hook"}})
            } else {
                json!({"url": "https://127.0.0.1:9443/hook"})
            };
            let mut webhook = json!({"name": "pods.hooks.example.com",
                "clientConfig": client, "rules": [rule(rng)],
                "sideEffects": "None", "admissionReviewVersions": ["v1"]});
            if rng.chance(30) {
                webhook["failurePolicy"] = json!("Ignore");
                webhook["timeoutSeconds"] = json!(5);
            }
            let mut configuration =
                object("admissionregistration.k8s.io/v1", kind, meta, Value::Null);
            configuration["webhooks"] = json!([webhook]);
            configuration
        }
        5 | 6 => {
            let kind = if which % 9 == 6 {
                "MutatingAdmissionPolicy"
            } else {
                "ValidatingAdmissionPolicy"
            };
            let mut spec = json!({"matchConstraints": {"resourceRules": [rule(rng)]}});
            if kind == "MutatingAdmissionPolicy" {
                spec["mutations"] = json!([{"patchType": "ApplyConfiguration",
                    "applyConfiguration": {"expression":
                        "Object{metadata: Object.metadata{labels: {\"x\": \"y\"}}}"}}]);
                spec["reinvocationPolicy"] = json!("Never");
            } else {
                spec["validations"] = json!([{"expression": "object.metadata.name != ''"}]);
            }
            if rng.chance(30) {
                spec["failurePolicy"] = json!("Ignore");
            }
            object("admissionregistration.k8s.io/v1", kind, meta, spec)
        }
        _ => {
            let kind = if which % 9 == 7 {
                "ValidatingAdmissionPolicyBinding"
            } else {
                "MutatingAdmissionPolicyBinding"
            };
            let mut spec = json!({"policyName": "some-policy"});
            if kind == "ValidatingAdmissionPolicyBinding" {
                spec["validationActions"] = json!(["Deny"]);
            }
            if rng.chance(60) {
                spec["matchResources"] =
                    json!({"namespaceSelector": {"matchLabels": {"team": "a"}}});
                if rng.chance(50) {
                    spec["matchResources"]["excludeResourceRules"] = json!([rule(rng)]);
                }
            }
            object("admissionregistration.k8s.io/v1", kind, meta, spec)
        }
    }
}

fn endpoint_slice(rng: &mut Rng, name: &str) -> Value {
    let mut slice = object(
        "discovery.k8s.io/v1",
        "EndpointSlice",
        metadata(name, true, None),
        Value::Null,
    );
    slice["addressType"] = json!("IPv4");
    slice["endpoints"] = json!([{"addresses": ["10.1.0.1"]}]);
    let mut port = json!({"port": 80});
    if rng.chance(40) {
        port["name"] = json!("http");
        port["protocol"] = json!("UDP");
    }
    slice["ports"] = json!([port]);
    slice
}

/// The generated objects: Pods, every workload, Services and the other kinds.
fn generate() -> Vec<Value> {
    let mut rng = Rng(SEED);
    let mut objects = vec![];
    for i in 0..PER_FAMILY * 4 {
        let name = format!("pod-{i}");
        let labels = rng.chance(50).then(|| json!({"app": "web"}));
        let spec = pod_spec(&mut rng, &["Always", "OnFailure", "Never"], true);
        objects.push(object("v1", "Pod", metadata(&name, true, labels), spec));
    }
    for kind in [
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "ReplicaSet",
        "ReplicationController",
        "PodTemplate",
        "Job",
        "CronJob",
    ] {
        for i in 0..PER_FAMILY {
            let name = format!("{}-{i}", kind.to_ascii_lowercase());
            objects.push(workload(&mut rng, kind, &name));
        }
    }
    for i in 0..PER_FAMILY * 2 {
        objects.push(service(&mut rng, &format!("service-{i}")));
    }
    for i in 0..PER_FAMILY * 5 {
        objects.push(other(&mut rng, i, &format!("other-{i}")));
    }
    for i in 0..PER_FAMILY * 2 {
        objects.push(cluster_kind(&mut rng, i, &format!("cluster-{i}")));
    }
    for i in 0..PER_FAMILY / 2 {
        objects.push(endpoint_slice(&mut rng, &format!("slice-{i}")));
    }
    objects
}

// ---------------------------------------------------------------------------------------------
// What the apiserver does besides defaulting.

fn gvk(object: &Value) -> GroupVersionKind {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    GroupVersionKind {
        group: group.into(),
        version: version.into(),
        kind: object["kind"].as_str().unwrap().into(),
    }
}

/// The expected object: the input, defaulted by Portcullis, with the changes of
/// [`ADMISSION_PLUGINS`] and the modelled REST strategy changes.
fn expected(input: &Value) -> Value {
    let mut object = input.clone();
    assert!(
        apply_defaults(&gvk(&object), &mut object),
        "Portcullis has no defaulting for {}",
        object["kind"]
    );
    admission_plugins(&mut object);
    match object["kind"].as_str() {
        Some("Namespace") => object["spec"] = json!({"finalizers": ["kubernetes"]}),
        Some("DaemonSet") => {
            let metadata = object["metadata"].as_object_mut().unwrap();
            let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
            annotations["deprecated.daemonset.template.generation"] = json!("1");
        }
        _ => {}
    }
    object
}

/// Models [`ADMISSION_PLUGINS`].
fn admission_plugins(object: &mut Value) {
    match object["kind"].as_str() {
        Some("Pod") => {
            let spec = object["spec"].as_object_mut().unwrap();
            let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
            for key in [
                "node.kubernetes.io/not-ready",
                "node.kubernetes.io/unreachable",
            ] {
                tolerations.as_array_mut().unwrap().push(json!({"key": key,
                    "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
            }
            if spec.get("priorityClassName").is_none() {
                spec.insert("priority".into(), json!(0));
                spec.insert("preemptionPolicy".into(), json!("PreemptLowerPriority"));
            }
        }
        Some("PersistentVolumeClaim") => {
            object["metadata"]["finalizers"] = json!(["kubernetes.io/pvc-protection"]);
        }
        Some("PersistentVolume") => {
            object["metadata"]["finalizers"] = json!(["kubernetes.io/pv-protection"]);
        }
        _ => {}
    }
}

/// The apiserver's answer without server-set fields, and without what the REST strategies
/// and the Service allocator set with values that cannot be predicted (random uids, IPs and
/// ports) where the input did not set them.
fn normalised_answer(input: &Value, mut answer: Value) -> Value {
    let map = answer.as_object_mut().unwrap();
    // Defaulting sets the phase of these; other kinds' status is the typed form's empty
    // shell, or the strategy's.
    if !matches!(
        input["kind"].as_str(),
        Some("PersistentVolumeClaim" | "PersistentVolume" | "Namespace")
    ) {
        map.remove("status");
    }
    if let Some(status) = map.get_mut("status").and_then(Value::as_object_mut) {
        // A timestamp set by the PersistentVolume strategy.
        status.remove("lastPhaseTransitionTime");
    }
    if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
        ] {
            metadata.remove(field);
        }
    }
    match input["kind"].as_str() {
        Some("Job") => {
            const JOB_LABELS: [&str; 4] = [
                "batch.kubernetes.io/controller-uid",
                "batch.kubernetes.io/job-name",
                "controller-uid",
                "job-name",
            ];
            for pointer in ["/metadata/labels", "/spec/template/metadata/labels"] {
                if let Some(labels) = answer.pointer_mut(pointer).and_then(Value::as_object_mut) {
                    for label in JOB_LABELS {
                        labels.remove(label);
                    }
                }
            }
            if input["spec"].get("selector").is_none() {
                answer["spec"].as_object_mut().unwrap().remove("selector");
            }
        }
        Some("Service") => {
            let spec = answer["spec"].as_object_mut().unwrap();
            for field in [
                "clusterIP",
                "clusterIPs",
                "ipFamilies",
                "ipFamilyPolicy",
                "healthCheckNodePort",
            ] {
                if input["spec"].get(field).is_none() {
                    spec.remove(field);
                }
            }
            if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                    port.remove("nodePort");
                }
            }
        }
        _ => {}
    }
    answer
}

// ---------------------------------------------------------------------------------------------
// Comparing.

/// Each difference between `expected` and `actual`, as `path: expected …, apiserver …`.
fn differences(path: &str, expected: &Value, actual: &Value, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            let keys: std::collections::BTreeSet<&String> = e.keys().chain(a.keys()).collect();
            for key in keys {
                let here = format!("{path}.{key}");
                match (e.get(key), a.get(key)) {
                    (Some(e), Some(a)) => differences(&here, e, a, out),
                    (Some(e), None) => {
                        out.push(format!("{here}: Portcullis {e}, apiserver absent"))
                    }
                    (None, Some(a)) => {
                        out.push(format!("{here}: Portcullis absent, apiserver {a}"))
                    }
                    (None, None) => {}
                }
            }
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (i, (e, a)) in e.iter().zip(a).enumerate() {
                differences(&format!("{path}[{i}]"), e, a, out);
            }
        }
        _ if expected == actual => {}
        _ => out.push(format!("{path}: Portcullis {expected}, apiserver {actual}")),
    }
}

fn key(object: &Value) -> (String, String) {
    (
        object["kind"].as_str().unwrap_or("?").to_owned(),
        object["metadata"]["name"]
            .as_str()
            .unwrap_or("?")
            .to_owned(),
    )
}

#[test]
fn defaulting_agrees_with_the_apiserver() {
    let Some(bin) = e2e_bin() else {
        return;
    };
    let objects = generate();
    let kinds: BTreeMap<String, usize> = objects.iter().fold(BTreeMap::new(), |mut m, o| {
        *m.entry(o["kind"].as_str().unwrap().to_owned()).or_default() += 1;
        m
    });
    eprintln!("{} generated objects: {kinds:?}", objects.len());
    eprintln!("admission plugins accounted for: {ADMISSION_PLUGINS:?}");

    let cluster = ControlPlane::start(&bin);
    cluster.kubectl_ok(&["create", "namespace", NAMESPACE]);

    let mut answers: BTreeMap<(String, String), Value> = BTreeMap::new();
    let mut refused = String::new();
    for batch in objects.chunks(BATCH) {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": batch});
        let output = cluster.kubectl_stdin(
            &["create", "--dry-run=server", "-o", "json", "-f", "-"],
            &list.to_string(),
        );
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            for line in stderr.lines().filter(|l| !l.starts_with("Warning: ")) {
                refused.push_str(line);
                refused.push('\n');
            }
        }
        for answer in serde_json::Deserializer::from_slice(&output.stdout).into_iter::<Value>() {
            let answer = answer.expect("kubectl prints JSON objects");
            answers.insert(key(&answer), answer);
        }
    }

    let mut agreed = 0;
    let mut diverged = 0;
    // Divergences by field (list indices left out): how many objects, and a first example.
    let mut by_field: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let mut report = String::new();
    for input in &objects {
        let Some(answer) = answers.get(&key(input)) else {
            continue;
        };
        let expected = expected(input);
        let actual = normalised_answer(input, answer.clone());
        let mut found = vec![];
        differences("", &expected, &actual, &mut found);
        if found.is_empty() {
            agreed += 1;
            continue;
        }
        diverged += 1;
        let (kind, name) = key(input);
        for line in &found {
            let field = line.split(':').next().unwrap_or_default();
            let field: String = field
                .split('[')
                .map(|part| part.split_once(']').map_or(part, |(_, rest)| rest))
                .collect::<Vec<_>>()
                .join("[]");
            let entry = by_field
                .entry(format!("{kind} {field}"))
                .or_insert_with(|| (0, format!("{name} {line}")));
            entry.0 += 1;
        }
        if diverged <= 3 {
            let _ = writeln!(report, "{kind} {name}: {input}");
        }
    }
    for (field, (count, example)) in &by_field {
        let _ = writeln!(report, "{count:>4} × {field}\n         e.g. {example}");
    }
    let compared = agreed + diverged;
    eprintln!(
        "compared {compared} of {} objects with the apiserver: {agreed} agree",
        objects.len()
    );
    assert!(
        diverged == 0,
        "{diverged} of {compared} objects differ from the apiserver's:\n{report}"
    );
    assert!(
        refused.is_empty(),
        "the apiserver refused generated objects (fix the generator):\n{refused}"
    );
    assert_eq!(compared, objects.len(), "kubectl returned too few objects");
}

/// Without an apiserver: the generator is deterministic, and the comparison reports a changed,
/// a missing and an added field (so the differential test can fail).
#[test]
fn the_comparison_finds_differences() {
    let objects = generate();
    assert_eq!(objects, generate(), "the generator is seeded");
    assert!(objects.len() >= 500, "{} objects", objects.len());
    let pod = objects.iter().find(|o| o["kind"] == "Pod").unwrap();
    let expected = expected(pod);
    let mut answer = expected.clone();
    answer["spec"]["dnsPolicy"] = json!("not-a-policy");
    answer["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("terminationMessagePath");
    answer["spec"]["hostname"] = json!("extra");
    let mut found = vec![];
    differences("", &expected, &answer, &mut found);
    found.sort();
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].starts_with(".spec.containers[0].terminationMessagePath: Portcullis "));
    assert!(found[1].starts_with(".spec.dnsPolicy: Portcullis "));
    assert_eq!(
        found[2],
        ".spec.hostname: Portcullis absent, apiserver \"extra\""
    );
    let mut same = vec![];
    differences("", &expected, &expected, &mut same);
    assert!(same.is_empty());
}
