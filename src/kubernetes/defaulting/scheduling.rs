//! `scheduling.k8s.io/v1`: PriorityClasses.

use serde_json::json;

use super::fields::{Object, default_value};

pub(super) fn priority_class(object: &mut Object) {
    default_value(object, "preemptionPolicy", || json!("PreemptLowerPriority"));
}
