//! `runAsUser` (restricted, from v1.23): neither the pod nor a container may set
//! `securityContext.runAsUser: 0`. From v1.35 pods in a user namespace (`hostUsers: false`)
//! pass.

use super::pod::{Form, PodView, int_field};
use super::registry::Forbidden;
use super::text::containers_phrase;

pub(super) fn v1_23<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let is_root =
        |context: Option<F::Json<'_>>| context.and_then(|c| int_field(c, "runAsUser")) == Some(0);
    let containers: Vec<&str> = pod
        .containers()
        .filter(|c| is_root(c.security_context()))
        .map(|c| c.name())
        .collect();
    let pod_is_root = is_root(pod.security_context());
    if !pod_is_root && containers.is_empty() {
        return None;
    }
    let mut setters: Vec<String> = Vec::new();
    if pod_is_root {
        setters.push("pod".to_owned());
    }
    if !containers.is_empty() {
        setters.push(containers_phrase(&containers));
    }
    Some(Forbidden::new(
        "runAsUser=0",
        format!("{} must not set runAsUser=0", setters.join(" and ")),
    ))
}

pub(super) fn v1_35<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    if pod.in_user_namespace() {
        return None;
    }
    v1_23(pod)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::pod::run;
    use super::super::registry::forms;
    use super::*;

    #[test]
    fn forbids_root_uid() {
        let cases = [
            (
                json!({
                    "securityContext": {"runAsUser": 1000},
                    "containers": [{"name": "a"}, {"name": "b", "securityContext": {"runAsUser": 1}}],
                }),
                None,
            ),
            (
                json!({"securityContext": {"runAsUser": 0}}),
                Some("pod must not set runAsUser=0"),
            ),
            (
                json!({
                    "securityContext": {"runAsUser": 0},
                    "initContainers": [{"name": "i", "securityContext": {"runAsUser": 0}}],
                    "containers": [{"name": "a", "securityContext": {"runAsUser": 0}}],
                }),
                Some(r#"pod and containers "i", "a" must not set runAsUser=0"#),
            ),
            (
                json!({"containers": [{"name": "a", "securityContext": {"runAsUser": 0}}]}),
                Some(r#"container "a" must not set runAsUser=0"#),
            ),
        ];
        for (spec, detail) in cases {
            let want = detail.map(|d| ("runAsUser=0", d.to_owned()));
            assert_eq!(run(forms!(v1_23), &json!({}), &spec), want, "{spec}");
            assert_eq!(run(forms!(v1_35), &json!({}), &spec), want, "{spec}");
        }
    }

    #[test]
    fn user_namespaces_relax_from_v1_35() {
        let spec = json!({"hostUsers": false, "securityContext": {"runAsUser": 0}});
        assert!(run(forms!(v1_23), &json!({}), &spec).is_some());
        assert_eq!(run(forms!(v1_35), &json!({}), &spec), None);
    }
}
