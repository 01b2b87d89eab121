//! `seLinuxOptions` (baseline, from v1.0): the SELinux type may only be unset or a container
//! type (`container_t`, `container_init_t`, `container_kvm_t`; from v1.31 also
//! `container_engine_t`), and the user and role must stay unset, on the pod and on every
//! container.

use crate::admission::JsonRead;

use super::pod::{Form, PodView, str_field};
use super::registry::Forbidden;
use super::text::{containers_phrase, join_quote, pluralize, sorted_unique};

const TYPES_V1_0: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t"];
const TYPES_V1_31: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

pub(super) fn v1_0<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    check(pod, TYPES_V1_0)
}

pub(super) fn v1_31<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    check(pod, TYPES_V1_31)
}

/// What a set of forbidden options adds up to.
#[derive(Default)]
struct Findings<'a> {
    types: Vec<&'a str>,
    user: bool,
    role: bool,
}

impl<'a> Findings<'a> {
    /// Records what `options` sets wrongly; true when it is all allowed.
    fn allowed<J: JsonRead<'a>>(&mut self, options: J, allowed_types: &[&str]) -> bool {
        let mut valid = true;
        let selinux_type = str_field(options, "type");
        if !allowed_types.contains(&selinux_type) {
            valid = false;
            self.types.push(selinux_type);
        }
        if !str_field(options, "user").is_empty() {
            valid = false;
            self.user = true;
        }
        if !str_field(options, "role").is_empty() {
            valid = false;
            self.role = true;
        }
        valid
    }
}

fn check<F: Form>(pod: &PodView<'_, F>, allowed_types: &[&str]) -> Option<Forbidden> {
    let mut findings = Findings::default();
    let pod_bad = pod
        .security_context_field("seLinuxOptions")
        .is_some_and(|options| !findings.allowed(options, allowed_types));
    let mut containers: Vec<&str> = Vec::new();
    for container in pod.containers() {
        if let Some(options) = container.security_context_field("seLinuxOptions")
            && !findings.allowed(options, allowed_types)
        {
            containers.push(container.name());
        }
    }
    if !pod_bad && containers.is_empty() {
        return None;
    }
    let mut setters: Vec<String> = Vec::new();
    if pod_bad {
        setters.push("pod".to_owned());
    }
    if !containers.is_empty() {
        setters.push(containers_phrase(&containers));
    }
    let mut data: Vec<String> = Vec::new();
    let types = sorted_unique(findings.types);
    if !types.is_empty() {
        data.push(format!(
            "{} {}",
            pluralize("type", "types", types.len()),
            join_quote(types.iter().copied())
        ));
    }
    if findings.user {
        data.push("user may not be set".to_owned());
    }
    if findings.role {
        data.push("role may not be set".to_owned());
    }
    Some(Forbidden::new(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters.join(" and "),
            data.join("; ")
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
    fn restricts_type_user_and_role() {
        let cases = [
            (
                json!({
                    "securityContext": {"seLinuxOptions": {"type": "container_t", "level": "s0:c1,c2"}},
                    "containers": [
                        {"name": "a", "securityContext": {"seLinuxOptions": {}}},
                        {"name": "b", "securityContext": {"seLinuxOptions": {"type": "container_kvm_t"}}},
                    ],
                }),
                None,
            ),
            (
                json!({"securityContext": {"seLinuxOptions": {"type": "bar"}}}),
                Some(r#"pod set forbidden securityContext.seLinuxOptions: type "bar""#),
            ),
            (
                json!({
                    "securityContext": {"seLinuxOptions": {"type": "foo", "user": "u", "role": "r"}},
                    "containers": [
                        {"name": "a", "securityContext": {"seLinuxOptions": {"type": "bar"}}},
                        {"name": "b", "securityContext": {"seLinuxOptions": {"type": "container_t"}}},
                        {"name": "c", "securityContext": {"seLinuxOptions": {"type": "foo", "role": "r"}}},
                    ],
                }),
                Some(
                    r#"pod and containers "a", "c" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; user may not be set; role may not be set"#,
                ),
            ),
            (
                json!({"containers": [{"name": "a", "securityContext": {"seLinuxOptions": {"user": "u"}}}]}),
                Some(
                    r#"container "a" set forbidden securityContext.seLinuxOptions: user may not be set"#,
                ),
            ),
        ];
        for (spec, detail) in cases {
            let want = detail.map(|d| ("seLinuxOptions", d.to_owned()));
            assert_eq!(run(forms!(v1_0), &json!({}), &spec), want, "{spec}");
            assert_eq!(run(forms!(v1_31), &json!({}), &spec), want, "{spec}");
        }
    }

    #[test]
    fn container_engine_t_is_allowed_from_v1_31() {
        let spec = json!({"securityContext": {"seLinuxOptions": {"type": "container_engine_t"}}});
        assert_eq!(
            run(forms!(v1_0), &json!({}), &spec),
            Some((
                "seLinuxOptions",
                r#"pod set forbidden securityContext.seLinuxOptions: type "container_engine_t""#
                    .to_owned()
            ))
        );
        assert_eq!(run(forms!(v1_31), &json!({}), &spec), None);
    }
}
