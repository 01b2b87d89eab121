//! Defaults of each family, on small objects; the differential test against a real apiserver
//! (tests/defaulting_e2e.rs) covers the combinations.

use serde_json::{Value, json};

use super::apply_defaults;
use crate::admission::GroupVersionKind;

fn defaulted(group: &str, kind: &str, mut object: Value) -> Value {
    let version = if group == "autoscaling" { "v2" } else { "v1" };
    let gvk = GroupVersionKind {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    };
    assert!(apply_defaults(&gvk, &mut object), "{kind} is known");
    object
}

#[test]
fn pod_spec_and_containers() {
    let pod = defaulted(
        "",
        "Pod",
        json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "a", "image": "nginx", "ports": [{"containerPort": 80}],
                "resources": {"limits": {"cpu": "1"}},
                "livenessProbe": {"httpGet": {"port": 80}}}],
            "initContainers": [{"name": "i", "image": "busybox:1.36"}],
            "volumes": [{"name": "scratch"}, {"name": "c", "configMap": {"name": "x"}},
                {"name": "h", "hostPath": {"path": "/tmp"}}],
            "serviceAccount": "builder"
        }}),
    );
    assert_eq!(
        pod["spec"],
        json!({
            "containers": [{"name": "a", "image": "nginx", "imagePullPolicy": "Always",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}},
                "livenessProbe": {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
                    "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                    "failureThreshold": 3},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"}],
            "initContainers": [{"name": "i", "image": "busybox:1.36",
                "imagePullPolicy": "IfNotPresent", "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"}],
            "volumes": [{"name": "scratch", "emptyDir": {}},
                {"name": "c", "configMap": {"name": "x", "defaultMode": 420}},
                {"name": "h", "hostPath": {"path": "/tmp", "type": ""}}],
            "serviceAccount": "builder",
            "serviceAccountName": "builder",
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "securityContext": {},
            "terminationGracePeriodSeconds": 30,
            "schedulerName": "default-scheduler",
            "enableServiceLinks": true
        })
    );
}

#[test]
fn templates_get_pod_spec_defaults_but_not_pod_ones() {
    let deployment = defaulted(
        "apps",
        "Deployment",
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1", "resources": {"limits": {"cpu": "1"}}}]}}}}),
    );
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    let pod_spec = &spec["template"]["spec"];
    assert_eq!(pod_spec["dnsPolicy"], "ClusterFirst");
    assert!(pod_spec.get("enableServiceLinks").is_none());
    assert!(
        pod_spec["containers"][0]["resources"]
            .get("requests")
            .is_none()
    );
}

#[test]
fn jobs_and_cron_jobs() {
    let job = defaulted(
        "batch",
        "Job",
        json!({"spec": {"backoffLimitPerIndex": 1, "completionMode": "Indexed", "completions": 3,
            "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": []}}}}),
    );
    assert_eq!(job["metadata"]["labels"], json!({"app": "x"}));
    assert_eq!(job["spec"]["backoffLimit"], i32::MAX);
    assert_eq!(job["spec"]["parallelism"], 1);
    assert_eq!(job["spec"]["podReplacementPolicy"], "TerminatingOrFailed");
    let cron = defaulted(
        "batch",
        "CronJob",
        json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}}),
    );
    assert_eq!(cron["spec"]["concurrencyPolicy"], "Allow");
    assert!(
        cron["spec"]["jobTemplate"]["spec"]
            .get("backoffLimit")
            .is_none()
    );
    assert_eq!(
        cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"],
        "Always"
    );
}

#[test]
fn services_secrets_namespaces() {
    let service = defaulted(
        "",
        "Service",
        json!({"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP",
            "ports": [{"port": 80}, {"port": 443, "targetPort": "https", "protocol": "UDP"}]}}),
    );
    assert_eq!(
        service["spec"],
        json!({"type": "LoadBalancer", "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80},
                {"port": 443, "targetPort": "https", "protocol": "UDP"}],
            "externalTrafficPolicy": "Cluster", "internalTrafficPolicy": "Cluster",
            "allocateLoadBalancerNodePorts": true})
    );
    assert_eq!(defaulted("", "Secret", json!({}))["type"], "Opaque");
    let namespace = defaulted("", "Namespace", json!({"metadata": {"name": "team"}}));
    assert_eq!(
        namespace["metadata"]["labels"],
        json!({"kubernetes.io/metadata.name": "team"})
    );
}

#[test]
fn wrong_types_are_left_alone_and_never_panic() {
    for object in [
        json!(null),
        json!([]),
        json!({"spec": []}),
        json!({"spec": {"containers": {"a": 1}, "volumes": [1, null, "x"], "dnsPolicy": 5}}),
        json!({"spec": {"containers": [{"image": 3, "ports": "80", "livenessProbe": []}]}}),
        json!({"spec": {"template": "x", "strategy": 1}}),
    ] {
        for (group, kind) in [
            ("", "Pod"),
            ("apps", "Deployment"),
            ("apps", "StatefulSet"),
            ("batch", "Job"),
            ("", "Service"),
            ("", "LimitRange"),
            ("autoscaling", "HorizontalPodAutoscaler"),
        ] {
            let mut copy = object.clone();
            let gvk = GroupVersionKind {
                group: group.into(),
                version: if group == "autoscaling" { "v2" } else { "v1" }.into(),
                kind: kind.into(),
            };
            apply_defaults(&gvk, &mut copy);
        }
    }
    let pod = defaulted("", "Pod", json!({"spec": {"dnsPolicy": 5}}));
    assert_eq!(pod["spec"]["dnsPolicy"], 5);
}

#[test]
fn unknown_kinds_are_untouched() {
    let mut object = json!({"spec": {}});
    let gvk = GroupVersionKind {
        group: "example.com".into(),
        version: "v1".into(),
        kind: "Widget".into(),
    };
    assert!(!apply_defaults(&gvk, &mut object));
    assert_eq!(object, json!({"spec": {}}));
}

/// Random objects built from the field names defaulting looks at, with values of every JSON
/// type at every level: defaulting never panics, and defaulting twice changes nothing more.
#[test]
fn random_shapes_never_panic_and_defaulting_is_idempotent() {
    const NAMES: &[&str] = &[
        "metadata",
        "labels",
        "name",
        "spec",
        "template",
        "jobTemplate",
        "containers",
        "initContainers",
        "ephemeralContainers",
        "volumes",
        "emptyDir",
        "configMap",
        "secret",
        "projected",
        "sources",
        "serviceAccountToken",
        "downwardAPI",
        "items",
        "fieldRef",
        "hostPath",
        "ephemeral",
        "volumeClaimTemplate",
        "image",
        "resources",
        "limits",
        "requests",
        "cpu",
        "memory",
        "ports",
        "containerPort",
        "hostPort",
        "protocol",
        "livenessProbe",
        "httpGet",
        "grpc",
        "lifecycle",
        "preStop",
        "env",
        "valueFrom",
        "hostNetwork",
        "strategy",
        "rollingUpdate",
        "updateStrategy",
        "type",
        "selector",
        "stringData",
        "data",
        "behavior",
        "scaleUp",
        "policies",
        "metrics",
        "target",
        "averageValue",
        "webhooks",
        "rules",
        "clientConfig",
        "service",
        "subjects",
        "roleRef",
        "limits",
        "max",
        "default",
        "status",
        "volumeClaimTemplates",
        "podFailurePolicy",
        "terminationGracePeriodSeconds",
        "serviceAccount",
        "serviceAccountName",
        "egress",
    ];
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }
    fn value(rng: &mut Rng, depth: u32) -> Value {
        match rng.below(if depth > 5 { 6 } else { 9 }) {
            0 => Value::Null,
            1 => json!(rng.below(2) == 0),
            2 => json!(rng.below(2000) as i64 - 1000),
            3 => json!(
                [
                    "1000m", "1.5Gi", "nginx", "", "Always", "0.5", "x:latest", "1e400"
                ][rng.below(8) as usize]
            ),
            4 => json!(1.5),
            5 => json!("RollingUpdate"),
            6 | 7 => {
                let mut map = serde_json::Map::new();
                for _ in 0..rng.below(6) {
                    let name = NAMES[rng.below(NAMES.len() as u64) as usize];
                    map.insert(name.into(), value(rng, depth + 1));
                }
                Value::Object(map)
            }
            _ => Value::Array((0..rng.below(4)).map(|_| value(rng, depth + 1)).collect()),
        }
    }
    let kinds = [
        ("", "v1", "Pod"),
        ("", "v1", "PodTemplate"),
        ("", "v1", "ReplicationController"),
        ("", "v1", "Service"),
        ("", "v1", "Secret"),
        ("", "v1", "Namespace"),
        ("", "v1", "PersistentVolumeClaim"),
        ("", "v1", "PersistentVolume"),
        ("", "v1", "LimitRange"),
        ("", "v1", "ResourceQuota"),
        ("apps", "v1", "Deployment"),
        ("apps", "v1", "StatefulSet"),
        ("apps", "v1", "DaemonSet"),
        ("batch", "v1", "Job"),
        ("batch", "v1", "CronJob"),
        ("networking.k8s.io", "v1", "NetworkPolicy"),
        ("autoscaling", "v2", "HorizontalPodAutoscaler"),
        ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
        (
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
        ),
        ("discovery.k8s.io", "v1", "EndpointSlice"),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        let mut map = serde_json::Map::new();
        for _ in 0..1 + rng.below(4) {
            let name = NAMES[rng.below(NAMES.len() as u64) as usize];
            map.insert(name.into(), value(&mut rng, 0));
        }
        let object = Value::Object(map);
        for (group, version, kind) in kinds {
            let gvk = GroupVersionKind {
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
            };
            let mut once = object.clone();
            apply_defaults(&gvk, &mut once);
            let mut twice = once.clone();
            apply_defaults(&gvk, &mut twice);
            assert_eq!(once, twice, "{kind} from {object}");
        }
    }
}

#[test]
fn node_allocatable_defaults_to_capacity() {
    // As `kubectl create --dry-run=server` on the e2e apiserver shows it.
    let node = defaulted(
        "",
        "Node",
        json!({"status": {"capacity": {"cpu": "4000m", "memory": "1024Mi"}}}),
    );
    assert_eq!(
        node["status"],
        json!({"capacity": {"cpu": "4", "memory": "1Gi"},
            "allocatable": {"cpu": "4", "memory": "1Gi"}})
    );
}
