//! `windowsHostProcess` (baseline, from v1.0): neither the pod nor a container may set
//! `securityContext.windowsOptions.hostProcess: true`.

use crate::admission::JsonRead;

use super::pod::{Form, PodView, bool_field, field};
use super::registry::Forbidden;
use super::text::containers_phrase;

fn host_process<'a, J: JsonRead<'a>>(context: Option<J>) -> bool {
    context
        .and_then(|c| field(c, "windowsOptions"))
        .and_then(|options| bool_field(options, "hostProcess"))
        == Some(true)
}

pub(super) fn v1_0<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let containers: Vec<&str> = pod
        .containers()
        .filter(|c| host_process(c.security_context()))
        .map(|c| c.name())
        .collect();
    let pod_forbidden = host_process(pod.security_context());
    if !pod_forbidden && containers.is_empty() {
        return None;
    }
    let mut setters: Vec<String> = Vec::new();
    if pod_forbidden {
        setters.push("pod".to_owned());
    }
    if !containers.is_empty() {
        setters.push(containers_phrase(&containers));
    }
    Some(Forbidden::new(
        "hostProcess",
        format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            setters.join(" and ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::pod::run;
    use super::super::registry::forms;
    use super::*;

    #[test]
    fn forbids_host_process() {
        let cases = [
            (
                json!({
                    "securityContext": {"windowsOptions": {"hostProcess": false}},
                    "containers": [{"name": "a", "securityContext": {"windowsOptions": {}}}],
                }),
                None,
            ),
            (
                json!({"securityContext": {"windowsOptions": {"hostProcess": true}}}),
                Some("pod must not set securityContext.windowsOptions.hostProcess=true"),
            ),
            (
                json!({
                    "securityContext": {"windowsOptions": {"hostProcess": true}},
                    "containers": [
                        {"name": "a", "securityContext": {"windowsOptions": {"hostProcess": true}}},
                        {"name": "b", "securityContext": {"windowsOptions": {"hostProcess": true}}},
                    ],
                }),
                Some(
                    r#"pod and containers "a", "b" must not set securityContext.windowsOptions.hostProcess=true"#,
                ),
            ),
        ];
        for (spec, detail) in cases {
            let want = detail.map(|d| ("hostProcess", d.to_owned()));
            assert_eq!(run(forms!(v1_0), &json!({}), &spec), want, "{spec}");
        }
    }
}
