//! `appArmorProfile` (baseline, from v1.0): AppArmor profiles may only be the runtime default
//! or a localhost profile, whether set by `securityContext.appArmorProfile.type` (pod or
//! container) or by the deprecated `container.apparmor.security.beta.kubernetes.io/*`
//! annotations.

use crate::admission::JsonRead;

use super::pod::{Form, PodView, field, str_field};
use super::registry::Forbidden;
use super::text::{containers_phrase, go_quote, join_quote, pluralize, sorted_unique};

const ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

fn allowed_type(profile_type: &str) -> bool {
    matches!(profile_type, "RuntimeDefault" | "Localhost")
}

fn allowed_annotation(value: &str) -> bool {
    value.is_empty() || value == "runtime/default" || value.starts_with("localhost/")
}

/// The profile type a security context sets, if it sets a forbidden one.
fn forbidden_type<'a, J: JsonRead<'a>>(security_context: Option<J>) -> Option<&'a str> {
    let profile = field(security_context?, "appArmorProfile")?;
    let profile_type = str_field(profile, "type");
    (!allowed_type(profile_type)).then_some(profile_type)
}

pub(super) fn v1_0<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let mut setters: Vec<String> = Vec::new();
    let mut values: Vec<&str> = Vec::new();
    if let Some(profile_type) = forbidden_type(pod.security_context()) {
        setters.push("pod".to_owned());
        values.push(profile_type);
    }
    let mut containers: Vec<&str> = Vec::new();
    for container in pod.containers() {
        if let Some(profile_type) = forbidden_type(container.security_context()) {
            containers.push(container.name());
            values.push(profile_type);
        }
    }
    if !containers.is_empty() {
        setters.push(containers_phrase(&containers));
    }
    let mut annotations: Vec<String> = pod
        .annotations()
        .filter(|(key, value)| key.starts_with(ANNOTATION_PREFIX) && !allowed_annotation(value))
        .map(|(key, value)| format!("{key}={}", go_quote(value)))
        .collect();
    if !annotations.is_empty() {
        annotations.sort_unstable();
        setters.push(pluralize("annotation", "annotations", annotations.len()).to_owned());
    }
    if setters.is_empty() {
        return None;
    }
    let values = sorted_unique(values);
    let count = values.len() + annotations.len();
    let listed = values
        .into_iter()
        .chain(annotations.iter().map(String::as_str));
    Some(Forbidden::new(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            count,
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            setters.join(" and "),
            join_quote(listed)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::pod::run;
    use super::super::registry::forms;
    use super::*;

    const ONE: &str = "forbidden AppArmor profile";
    const MANY: &str = "forbidden AppArmor profiles";

    #[test]
    fn checks_fields_and_annotations() {
        let cases = [
            (json!({}), json!({"containers": [{"name": "a"}]}), None),
            (
                json!({"annotations": {
                    "container.apparmor.security.beta.kubernetes.io/a": "runtime/default",
                    "container.apparmor.security.beta.kubernetes.io/b": "localhost/foo",
                    "container.apparmor.security.beta.kubernetes.io/c": "",
                    "other": "unconfined",
                }}),
                json!({
                    "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "a", "securityContext": {"appArmorProfile": {"type": "Localhost", "localhostProfile": "x"}}}],
                }),
                None,
            ),
            (
                json!({}),
                json!({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}),
                Some((
                    ONE,
                    r#"pod must not set AppArmor profile type to "Unconfined""#,
                )),
            ),
            (
                json!({}),
                json!({"securityContext": {"appArmorProfile": {}}}),
                Some((ONE, r#"pod must not set AppArmor profile type to """#)),
            ),
            (
                json!({}),
                json!({"containers": [
                    {"name": "a", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
                    {"name": "b", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
                    {"name": "c", "securityContext": {"appArmorProfile": {"type": "Bogus"}}},
                ]}),
                Some((
                    MANY,
                    r#"containers "a", "b", "c" must not set AppArmor profile type to "Bogus", "Unconfined""#,
                )),
            ),
            (
                json!({"annotations": {
                    "container.apparmor.security.beta.kubernetes.io/b": "unconfined",
                    "container.apparmor.security.beta.kubernetes.io/a": "bad\"value",
                }}),
                json!({
                    "securityContext": {"appArmorProfile": {"type": "Unconfined"}},
                    "containers": [{"name": "a", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}],
                }),
                Some((
                    MANY,
                    r#"pod and container "a" and annotations must not set AppArmor profile type to "Unconfined", "container.apparmor.security.beta.kubernetes.io/a="bad\"value"", "container.apparmor.security.beta.kubernetes.io/b="unconfined"""#,
                )),
            ),
            (
                json!({"annotations": {"container.apparmor.security.beta.kubernetes.io/a": "unconfined"}}),
                json!({}),
                Some((
                    ONE,
                    r#"annotation must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/a="unconfined"""#,
                )),
            ),
        ];
        for (metadata, spec, want) in cases {
            let want = want.map(|(reason, detail)| (reason, detail.to_owned()));
            assert_eq!(
                run(forms!(v1_0), &metadata, &spec),
                want,
                "{metadata} {spec}"
            );
        }
    }
}
