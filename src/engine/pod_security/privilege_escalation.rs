//! `allowPrivilegeEscalation` (restricted, from v1.8): every container must set
//! `securityContext.allowPrivilegeEscalation: false`. From v1.25 Windows pods
//! (`spec.os.name: windows`) are exempt: the API refuses the field for them.

use super::pod::{ContainerView, Form, PodView, bool_field};
use super::registry::Forbidden;
use super::text::containers_phrase;

/// Every container must set `allowPrivilegeEscalation: false`.
pub(super) fn v1_8<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let allows = |container: &ContainerView<'_, F>| {
        container
            .security_context()
            .and_then(|context| bool_field(context, "allowPrivilegeEscalation"))
            != Some(false)
    };
    // Collecting nothing does not allocate.
    let bad: Vec<&str> = pod
        .containers()
        .filter(allows)
        .map(ContainerView::name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    Some(Forbidden::new(
        "allowPrivilegeEscalation != false",
        format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            containers_phrase(&bad)
        ),
    ))
}

/// As v1.8, but Windows pods pass.
pub(super) fn v1_25<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    if pod.is_windows() {
        return None;
    }
    v1_8(pod)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::pod::run;
    use super::super::registry::forms;
    use super::*;

    #[test]
    fn requires_false_on_every_container() {
        let cases: &[(Value, Option<&str>)] = &[
            (
                json!({"containers": [{"name": "a", "securityContext": {"allowPrivilegeEscalation": false}}]}),
                None,
            ),
            (json!({"containers": []}), None),
            (
                json!({"containers": [{"name": "app"}]}),
                Some(r#"container "app" must set securityContext.allowPrivilegeEscalation=false"#),
            ),
            (
                json!({
                    "initContainers": [{"name": "i", "securityContext": {}}],
                    "containers": [
                        {"name": "a", "securityContext": {"allowPrivilegeEscalation": null}},
                        {"name": "b", "securityContext": {"allowPrivilegeEscalation": false}},
                        {"name": "c", "securityContext": {"allowPrivilegeEscalation": true}},
                    ],
                    "ephemeralContainers": [{"name": "e"}],
                }),
                Some(
                    r#"containers "i", "a", "c", "e" must set securityContext.allowPrivilegeEscalation=false"#,
                ),
            ),
        ];
        for (spec, detail) in cases {
            for check in [forms!(v1_8), forms!(v1_25)] {
                let got = run(check, &json!({}), spec);
                let want = detail.map(|d| ("allowPrivilegeEscalation != false", d.to_owned()));
                assert_eq!(got, want, "{spec}");
            }
        }
    }

    #[test]
    fn exempts_windows_pods_from_v1_25() {
        let spec = json!({"os": {"name": "windows"}, "containers": [{"name": "a"}]});
        assert!(run(forms!(v1_8), &json!({}), &spec).is_some());
        assert_eq!(run(forms!(v1_25), &json!({}), &spec), None);
        let linux = json!({"os": {"name": "linux"}, "containers": [{"name": "a"}]});
        assert!(run(forms!(v1_25), &json!({}), &linux).is_some());
    }
}
