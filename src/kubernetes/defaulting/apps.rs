//! `apps/v1`: Deployments, StatefulSets, DaemonSets and ReplicaSets, with their pod templates.

use serde_json::json;

use super::fields::{
    Object, child, child_or_empty, default_pointer_number, default_text, default_value, items, text,
};
use super::pod;

pub(super) fn deployment(object: &mut Object) {
    let Some(spec) = child_or_empty(object, "spec") else {
        return;
    };
    default_pointer_number(spec, "replicas", 1);
    if let Some(strategy) = child_or_empty(spec, "strategy") {
        default_text(strategy, "type", "RollingUpdate");
        if text(strategy, "type") == Some("RollingUpdate")
            && let Some(rolling) = child_or_empty(strategy, "rollingUpdate")
        {
            default_value(rolling, "maxUnavailable", || json!("25%"));
            default_value(rolling, "maxSurge", || json!("25%"));
        }
    }
    default_pointer_number(spec, "revisionHistoryLimit", 10);
    default_pointer_number(spec, "progressDeadlineSeconds", 600);
    pod::template(child(spec, "template"));
}

pub(super) fn daemon_set(object: &mut Object) {
    let Some(spec) = child_or_empty(object, "spec") else {
        return;
    };
    if let Some(strategy) = child_or_empty(spec, "updateStrategy") {
        default_text(strategy, "type", "RollingUpdate");
        if text(strategy, "type") == Some("RollingUpdate")
            && let Some(rolling) = child_or_empty(strategy, "rollingUpdate")
        {
            default_value(rolling, "maxUnavailable", || json!(1));
            default_value(rolling, "maxSurge", || json!(0));
        }
    }
    default_pointer_number(spec, "revisionHistoryLimit", 10);
    pod::template(child(spec, "template"));
}

pub(super) fn stateful_set(object: &mut Object) {
    let Some(spec) = child_or_empty(object, "spec") else {
        return;
    };
    default_text(spec, "podManagementPolicy", "OrderedReady");
    // `serviceName` is a string without `omitempty`: the typed object always shows it.
    default_value(spec, "serviceName", || json!(""));
    if let Some(strategy) = child_or_empty(spec, "updateStrategy") {
        if text(strategy, "type") == Some("") {
            strategy.insert("type".into(), json!("RollingUpdate"));
            default_value(strategy, "rollingUpdate", || json!({}));
        }
        if text(strategy, "type") == Some("RollingUpdate")
            && let Some(rolling) = child(strategy, "rollingUpdate")
        {
            default_pointer_number(rolling, "partition", 0);
            // MaxUnavailableStatefulSet is on by default in 1.37.
            default_value(rolling, "maxUnavailable", || json!(1));
        }
    }
    if let Some(retention) = child_or_empty(spec, "persistentVolumeClaimRetentionPolicy") {
        default_text(retention, "whenDeleted", "Retain");
        default_text(retention, "whenScaled", "Retain");
    }
    default_pointer_number(spec, "replicas", 1);
    default_pointer_number(spec, "revisionHistoryLimit", 10);
    pod::template(child(spec, "template"));
    for claim in items(spec, "volumeClaimTemplates") {
        // The v1 conversion of a StatefulSet names the claims' kind (issue 87583).
        claim.insert("apiVersion".into(), json!("v1"));
        claim.insert("kind".into(), json!("PersistentVolumeClaim"));
        if let Some(status) = child_or_empty(claim, "status") {
            default_text(status, "phase", "Pending");
        }
        if let Some(claim_spec) = child_or_empty(claim, "spec") {
            pod::persistent_volume_claim_spec(claim_spec);
        }
    }
}

pub(super) fn replica_set(object: &mut Object) {
    let Some(spec) = child_or_empty(object, "spec") else {
        return;
    };
    default_pointer_number(spec, "replicas", 1);
    pod::template(child(spec, "template"));
}
