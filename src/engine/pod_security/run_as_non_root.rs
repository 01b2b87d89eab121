//! `runAsNonRoot` (restricted, from v1.0): the pod, or else every container, must set
//! `securityContext.runAsNonRoot: true`, and nothing may set it to `false`. From v1.35 pods in
//! a user namespace (`hostUsers: false`) pass.

use super::pod::{Form, PodView, bool_field};
use super::registry::Forbidden;
use super::text::containers_phrase;

pub(super) fn v1_0<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    const REASON: &str = "runAsNonRoot != true";
    let pod_setting = pod
        .security_context()
        .and_then(|context| bool_field(context, "runAsNonRoot"));
    let mut explicitly_bad: Vec<&str> = Vec::new();
    let mut implicitly_bad: Vec<&str> = Vec::new();
    for container in pod.containers() {
        match container
            .security_context()
            .and_then(|context| bool_field(context, "runAsNonRoot"))
        {
            Some(true) => {}
            Some(false) => explicitly_bad.push(container.name()),
            None if pod_setting == Some(true) => {}
            None => implicitly_bad.push(container.name()),
        }
    }
    let mut setters: Vec<String> = Vec::new();
    if pod_setting == Some(false) {
        setters.push("pod".to_owned());
    }
    if !explicitly_bad.is_empty() {
        setters.push(containers_phrase(&explicitly_bad));
    }
    if !setters.is_empty() {
        return Some(Forbidden::new(
            REASON,
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters.join(" and ")
            ),
        ));
    }
    if !implicitly_bad.is_empty() {
        return Some(Forbidden::new(
            REASON,
            format!(
                "pod or {} must set securityContext.runAsNonRoot=true",
                containers_phrase(&implicitly_bad)
            ),
        ));
    }
    None
}

pub(super) fn v1_35<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
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
    fn requires_run_as_non_root() {
        let cases = [
            (
                json!({"securityContext": {"runAsNonRoot": true}, "containers": [{"name": "a"}]}),
                None,
            ),
            (
                json!({"containers": [
                    {"name": "a", "securityContext": {"runAsNonRoot": true}},
                ]}),
                None,
            ),
            (
                json!({"containers": [{"name": "a"}, {"name": "b", "securityContext": {}}, {"name": "c", "securityContext": {"runAsNonRoot": true}}]}),
                Some(r#"pod or containers "a", "b" must set securityContext.runAsNonRoot=true"#),
            ),
            (
                json!({"securityContext": {"runAsNonRoot": false}, "containers": [{"name": "a"}]}),
                Some("pod must not set securityContext.runAsNonRoot=false"),
            ),
            (
                json!({
                    "securityContext": {"runAsNonRoot": false},
                    "containers": [
                        {"name": "a", "securityContext": {"runAsNonRoot": false}},
                        {"name": "b", "securityContext": {"runAsNonRoot": true}},
                        {"name": "c", "securityContext": {"runAsNonRoot": false}},
                    ],
                }),
                Some(
                    r#"pod and containers "a", "c" must not set securityContext.runAsNonRoot=false"#,
                ),
            ),
            (
                json!({
                    "securityContext": {"runAsNonRoot": true},
                    "containers": [{"name": "a", "securityContext": {"runAsNonRoot": false}}],
                }),
                Some(r#"container "a" must not set securityContext.runAsNonRoot=false"#),
            ),
        ];
        for (spec, detail) in cases {
            let want = detail.map(|d| ("runAsNonRoot != true", d.to_owned()));
            assert_eq!(run(forms!(v1_0), &json!({}), &spec), want, "{spec}");
            assert_eq!(run(forms!(v1_35), &json!({}), &spec), want, "{spec}");
        }
    }

    #[test]
    fn user_namespaces_relax_from_v1_35() {
        let spec = json!({"hostUsers": false, "containers": [{"name": "a"}]});
        assert!(run(forms!(v1_0), &json!({}), &spec).is_some());
        assert_eq!(run(forms!(v1_35), &json!({}), &spec), None);
    }
}
