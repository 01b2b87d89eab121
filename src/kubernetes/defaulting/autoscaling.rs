//! `autoscaling/v2` and `autoscaling/v1`: HorizontalPodAutoscalers.

use serde_json::{Value, json};

use super::fields::{
    Object, child, child_or_empty, default_pointer_number, is_empty, is_unset, items,
};
use super::quantity::quantity_field;

pub(super) fn horizontal_pod_autoscaler(object: &mut Object) {
    let Some(spec) = child_or_empty(object, "spec") else {
        return;
    };
    default_pointer_number(spec, "minReplicas", 1);
    if is_empty(spec, "metrics") {
        spec.insert(
            "metrics".into(),
            json!([{
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80}
                }
            }]),
        );
    }
    for metric in items(spec, "metrics") {
        for source in [
            "object",
            "pods",
            "resource",
            "containerResource",
            "external",
        ] {
            if let Some(target) = child(metric, source).and_then(|s| child(s, "target")) {
                quantity_field(target, "value");
                quantity_field(target, "averageValue");
            }
        }
    }
    if let Some(behavior) = child(spec, "behavior") {
        let scale_up = json!({
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15}
            ]
        });
        let scale_down = json!({
            "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]
        });
        for (key, defaults) in [("scaleUp", scale_up), ("scaleDown", scale_down)] {
            let mut rules = merged_rules(behavior.get(key), defaults);
            if let Some(rules) = rules.as_object_mut() {
                quantity_field(rules, "tolerance");
            }
            behavior.insert(key.into(), rules);
        }
    }
}

/// The scaling rules as given, with each unset field taken from `defaults`.
fn merged_rules(given: Option<&Value>, mut defaults: Value) -> Value {
    let (Some(given), Some(merged)) = (given.and_then(Value::as_object), defaults.as_object_mut())
    else {
        return defaults;
    };
    for key in [
        "selectPolicy",
        "stabilizationWindowSeconds",
        "policies",
        "tolerance",
    ] {
        if !is_unset(given, key) {
            merged.insert(key.into(), given[key].clone());
        }
    }
    defaults
}

/// An `autoscaling/v1` HorizontalPodAutoscaler: `minReplicas: 1`, and the CPU target of 80%
/// that its conversion adds when no metric is given. With the
/// `autoscaling.alpha.kubernetes.io/metrics` annotation (metrics carried over from v2) the
/// conversion derives the target from it; such an object is left as written.
pub(super) fn horizontal_pod_autoscaler_v1(object: &mut Object) {
    let annotated = object
        .get("metadata")
        .and_then(|metadata| metadata.get("annotations"))
        .and_then(|annotations| annotations.get("autoscaling.alpha.kubernetes.io/metrics"))
        .is_some();
    let Some(spec) = child_or_empty(object, "spec") else {
        return;
    };
    default_pointer_number(spec, "minReplicas", 1);
    if !annotated {
        default_pointer_number(spec, "targetCPUUtilizationPercentage", 80);
    }
}
