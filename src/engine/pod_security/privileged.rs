//! `privileged` (baseline, from v1.0): containers must not set
//! `securityContext.privileged: true`.

use super::pod::{ContainerView, Form, PodView, bool_field};
use super::registry::Forbidden;
use super::text::containers_phrase;

pub(super) fn v1_0<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let containers: Vec<&str> = pod
        .containers()
        .filter(|c| {
            c.security_context()
                .and_then(|context| bool_field(context, "privileged"))
                == Some(true)
        })
        .map(ContainerView::name)
        .collect();
    if containers.is_empty() {
        return None;
    }
    Some(Forbidden::new(
        "privileged",
        format!(
            "{} must not set securityContext.privileged=true",
            containers_phrase(&containers)
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
    fn forbids_privileged_containers() {
        let cases = [
            (
                json!({"containers": [
                    {"name": "a"},
                    {"name": "b", "securityContext": {}},
                    {"name": "c", "securityContext": {"privileged": false}},
                    {"name": "d", "securityContext": {"privileged": null}},
                ]}),
                None,
            ),
            (
                json!({"containers": [{"name": "a", "securityContext": {"privileged": true}}]}),
                Some(r#"container "a" must not set securityContext.privileged=true"#),
            ),
            (
                json!({
                    "containers": [{"name": "a", "securityContext": {"privileged": true}}],
                    "ephemeralContainers": [{"name": "e", "securityContext": {"privileged": true}}],
                }),
                Some(r#"containers "a", "e" must not set securityContext.privileged=true"#),
            ),
        ];
        for (spec, detail) in cases {
            let want = detail.map(|d| ("privileged", d.to_owned()));
            assert_eq!(run(forms!(v1_0), &json!({}), &spec), want, "{spec}");
        }
    }
}
