//! `/proc` masking.
//!
//! - `procMount` (baseline, from v1.0): `securityContext.procMount` must be unset or
//!   `Default`. From v1.35 any value is allowed for pods in a user namespace
//!   (`hostUsers: false`).
//! - `procMount_restricted` (restricted, from v1.35, replacing the baseline check): the v1.0
//!   rule, with no user-namespace relaxation.

use super::pod::{Form, PodView, str_ptr_field};
use super::registry::Forbidden;
use super::text::{containers_phrase, join_quote, sorted_unique};

/// `procMount` must be unset or `Default`, whatever the pod.
pub(super) fn v1_0<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let mut containers: Vec<&str> = Vec::new();
    let mut types: Vec<&str> = Vec::new();
    for container in pod.containers() {
        let Some(context) = container.security_context() else {
            continue;
        };
        match str_ptr_field(context, "procMount") {
            None | Some("Default") => {}
            Some(proc_mount) => {
                containers.push(container.name());
                types.push(proc_mount);
            }
        }
    }
    if containers.is_empty() {
        return None;
    }
    Some(Forbidden::new(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            containers_phrase(&containers),
            join_quote(sorted_unique(types))
        ),
    ))
}

/// As v1.0, but pods in a user namespace pass.
pub(super) fn baseline_v1_35<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    if pod.in_user_namespace() {
        return None;
    }
    v1_0(pod)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::pod::run;
    use super::super::registry::forms;
    use super::*;

    #[test]
    fn forbids_unmasked_proc() {
        let cases = [
            (
                json!({"containers": [
                    {"name": "a"},
                    {"name": "b", "securityContext": {}},
                    {"name": "c", "securityContext": {"procMount": "Default"}},
                ]}),
                None,
            ),
            (
                json!({"containers": [
                    {"name": "a", "securityContext": {"procMount": "Unmasked"}},
                    {"name": "b", "securityContext": {"procMount": "other"}},
                    {"name": "c", "securityContext": {"procMount": "Unmasked"}},
                ]}),
                Some(
                    r#"containers "a", "b", "c" must not set securityContext.procMount to "Unmasked", "other""#,
                ),
            ),
        ];
        for (spec, detail) in cases {
            let want = detail.map(|d| ("procMount", d.to_owned()));
            assert_eq!(run(forms!(v1_0), &json!({}), &spec), want, "{spec}");
            assert_eq!(
                run(forms!(baseline_v1_35), &json!({}), &spec),
                want,
                "{spec}"
            );
        }
    }

    #[test]
    fn user_namespaces_relax_baseline_from_v1_35() {
        let unmasked = |host_users| {
            json!({
                "hostUsers": host_users,
                "containers": [{"name": "a", "securityContext": {"procMount": "Unmasked"}}],
            })
        };
        assert_eq!(
            run(forms!(baseline_v1_35), &json!({}), &unmasked(json!(false))),
            None
        );
        assert!(run(forms!(baseline_v1_35), &json!({}), &unmasked(json!(true))).is_some());
        assert!(run(forms!(baseline_v1_35), &json!({}), &unmasked(json!(null))).is_some());
        assert!(run(forms!(v1_0), &json!({}), &unmasked(json!(false))).is_some());
    }
}
