//! `batch/v1`: Jobs and CronJobs, with their pod templates.

use serde_json::{Value, json};

use super::fields::{
    Object, child, child_or_empty, default_pointer_number, default_text, default_value, is_empty,
    is_unset, items, template_labels,
};
use super::pod;

pub(super) fn job(object: &mut Object) {
    let template_labels = template_labels(object);
    let Some(spec) = child_or_empty(object, "spec") else {
        return;
    };
    if is_unset(spec, "completions") && is_unset(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
    }
    default_pointer_number(spec, "parallelism", 1);
    let backoff_limit = if is_unset(spec, "backoffLimitPerIndex") {
        6
    } else {
        i64::from(i32::MAX)
    };
    default_pointer_number(spec, "backoffLimit", backoff_limit);
    default_value(spec, "completionMode", || json!("NonIndexed"));
    default_value(spec, "suspend", || json!(false));
    let replacement = if is_unset(spec, "podFailurePolicy") {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    default_value(spec, "podReplacementPolicy", || json!(replacement));
    default_value(spec, "manualSelector", || json!(false));
    job_spec_templates(spec);
    if let Some(labels) = template_labels
        && let Some(metadata) = child_or_empty(object, "metadata")
        && is_empty(metadata, "labels")
    {
        metadata.insert("labels".into(), labels);
    }
}

/// The defaults a Job's spec shares with a CronJob's job template: pod failure policy
/// patterns and the pod template (a CronJob's job template gets no other Job defaults).
fn job_spec_templates(spec: &mut Object) {
    if let Some(policy) = child(spec, "podFailurePolicy") {
        for rule in items(policy, "rules") {
            for pattern in items(rule, "onPodConditions") {
                default_text(pattern, "status", "True");
            }
        }
    }
    pod::template(child(spec, "template"));
}

pub(super) fn cron_job(object: &mut Object) {
    let Some(spec) = child_or_empty(object, "spec") else {
        return;
    };
    default_text(spec, "concurrencyPolicy", "Allow");
    default_value(spec, "suspend", || Value::Bool(false));
    default_pointer_number(spec, "successfulJobsHistoryLimit", 3);
    default_pointer_number(spec, "failedJobsHistoryLimit", 1);
    if let Some(job_template) = child(spec, "jobTemplate") {
        // `metadata` is a struct value: the typed object always shows it.
        default_value(job_template, "metadata", || json!({}));
        if let Some(job_spec) = child(job_template, "spec") {
            job_spec_templates(job_spec);
        }
    }
}
