//! Seccomp profiles.
//!
//! - `seccompProfile_baseline` (baseline): up to v1.18 the deprecated annotations
//!   (`seccomp.security.alpha.kubernetes.io/pod`,
//!   `container.seccomp.security.alpha.kubernetes.io/NAME`) may only name `runtime/default`,
//!   `docker/default` or a `localhost/` profile; from v1.19 `securityContext.seccompProfile.type`
//!   (pod or container), when set, must be `RuntimeDefault` or `Localhost`.
//! - `seccompProfile_restricted` (restricted, from v1.19, replacing the baseline check): as
//!   baseline v1.19, and the profile must be set, on the pod or else on every container. From
//!   v1.25 Windows pods are exempt.

use crate::admission::JsonRead;

use super::pod::{Form, PodView, field, str_field};
use super::registry::Forbidden;
use super::text::{containers_phrase, go_quote, join_quote, pluralize, sorted_unique};

const POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

fn allowed_type(profile_type: &str) -> bool {
    matches!(profile_type, "RuntimeDefault" | "Localhost")
}

fn allowed_annotation(value: &str) -> bool {
    value == "runtime/default" || value == "docker/default" || value.starts_with("localhost/")
}

/// Checks the deprecated seccomp annotations of the pod and of each container.
pub(super) fn baseline_v1_0<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let mut forbidden: Vec<String> = Vec::new();
    if let Some(value) = pod.annotation(POD_ANNOTATION)
        && !allowed_annotation(value)
    {
        forbidden.push(format!("{POD_ANNOTATION}={}", go_quote(value)));
    }
    // Looking up a key per container needs the key; only build it when the pod has
    // container annotations at all.
    if pod
        .annotations()
        .any(|(key, _)| key.starts_with(CONTAINER_ANNOTATION_PREFIX))
    {
        for container in pod.containers() {
            let key = format!("{CONTAINER_ANNOTATION_PREFIX}{}", container.name());
            if let Some(value) = pod.annotation(&key)
                && !allowed_annotation(value)
            {
                forbidden.push(format!("{key}={}", go_quote(value)));
            }
        }
    }
    if forbidden.is_empty() {
        return None;
    }
    let forbidden = sorted_unique(forbidden);
    Some(Forbidden::new(
        "seccompProfile",
        format!(
            "forbidden {} {}",
            pluralize("annotation", "annotations", forbidden.len()),
            forbidden.join(", ")
        ),
    ))
}

/// The profile type a security context sets (`""` for a profile without one); `None` when it
/// sets no profile.
fn profile_type<'a, J: JsonRead<'a>>(context: Option<J>) -> Option<&'a str> {
    field(context?, "seccompProfile").map(|profile| str_field(profile, "type"))
}

/// What the pod and its containers set, sorted into upstream's categories.
struct Profiles<'a> {
    /// The pod sets a forbidden type.
    pod_bad: bool,
    /// The pod sets an allowed type.
    pod_set: bool,
    /// Containers that set a forbidden type.
    explicitly_bad: Vec<&'a str>,
    /// Containers that set nothing while the pod sets no allowed profile either.
    unset: Vec<&'a str>,
    /// The forbidden types.
    bad_types: Vec<&'a str>,
}

impl<'a> Profiles<'a> {
    fn of<F: Form>(pod: &PodView<'a, F>) -> Self {
        let mut profiles = Profiles {
            pod_bad: false,
            pod_set: false,
            explicitly_bad: Vec::new(),
            unset: Vec::new(),
            bad_types: Vec::new(),
        };
        if let Some(pod_type) = profile_type(pod.security_context()) {
            if allowed_type(pod_type) {
                profiles.pod_set = true;
            } else {
                profiles.pod_bad = true;
                profiles.bad_types.push(pod_type);
            }
        }
        for container in pod.containers() {
            match profile_type(container.security_context()) {
                Some(t) if allowed_type(t) => {}
                Some(t) => {
                    profiles.explicitly_bad.push(container.name());
                    profiles.bad_types.push(t);
                }
                // Covered by the pod's profile; only listed (allocating) when it is not.
                None if profiles.pod_set => {}
                None => profiles.unset.push(container.name()),
            }
        }
        profiles
    }

    /// The failure for explicitly forbidden types, if any.
    fn forbidden_types(self) -> Result<Forbidden, Self> {
        if !self.pod_bad && self.explicitly_bad.is_empty() {
            return Err(self);
        }
        let mut setters: Vec<String> = Vec::new();
        if self.pod_bad {
            setters.push("pod".to_owned());
        }
        if !self.explicitly_bad.is_empty() {
            setters.push(containers_phrase(&self.explicitly_bad));
        }
        Ok(Forbidden::new(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                setters.join(" and "),
                join_quote(sorted_unique(self.bad_types))
            ),
        ))
    }
}

/// A seccomp profile, where set, must be `RuntimeDefault` or `Localhost`.
pub(super) fn baseline_v1_19<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    Profiles::of(pod).forbidden_types().ok()
}

/// As baseline v1.19, and every container must be covered by a profile.
pub(super) fn restricted_v1_19<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let profiles = match Profiles::of(pod).forbidden_types() {
        Ok(forbidden) => return Some(forbidden),
        Err(profiles) => profiles,
    };
    if profiles.unset.is_empty() {
        return None;
    }
    Some(Forbidden::new(
        "seccompProfile",
        format!(
            r#"pod or {} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
            containers_phrase(&profiles.unset)
        ),
    ))
}

/// As restricted v1.19, but Windows pods pass.
pub(super) fn restricted_v1_25<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    if pod.is_windows() {
        return None;
    }
    restricted_v1_19(pod)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::pod::run;
    use super::super::registry::forms;
    use super::*;

    #[test]
    fn baseline_v1_0_checks_annotations() {
        let spec = json!({"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]});
        let cases = [
            (json!({}), None),
            (
                json!({"annotations": {
                    "seccomp.security.alpha.kubernetes.io/pod": "runtime/default",
                    "container.seccomp.security.alpha.kubernetes.io/a": "docker/default",
                    "container.seccomp.security.alpha.kubernetes.io/b": "localhost/x",
                    "container.seccomp.security.alpha.kubernetes.io/other": "unconfined",
                }}),
                None,
            ),
            (
                json!({"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}),
                Some(
                    r#"forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined""#,
                ),
            ),
            (
                json!({"annotations": {
                    "seccomp.security.alpha.kubernetes.io/pod": "",
                    "container.seccomp.security.alpha.kubernetes.io/c": "unconfined",
                    "container.seccomp.security.alpha.kubernetes.io/a": "foo",
                }}),
                Some(
                    r#"forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="foo", container.seccomp.security.alpha.kubernetes.io/c="unconfined", seccomp.security.alpha.kubernetes.io/pod="""#,
                ),
            ),
        ];
        for (metadata, detail) in cases {
            let want = detail.map(|d| ("seccompProfile", d.to_owned()));
            assert_eq!(
                run(forms!(baseline_v1_0), &metadata, &spec),
                want,
                "{metadata}"
            );
        }
        // The field is not looked at before v1.19.
        let field_only = json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}});
        assert_eq!(run(forms!(baseline_v1_0), &json!({}), &field_only), None);
    }

    #[test]
    fn baseline_v1_19_checks_types_where_set() {
        let cases = [
            (json!({"containers": [{"name": "a"}]}), None),
            (
                json!({
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "a", "securityContext": {"seccompProfile": {"type": "Localhost"}}}],
                }),
                None,
            ),
            (
                json!({
                    "securityContext": {"seccompProfile": {"type": "Unconfined"}},
                    "containers": [
                        {"name": "a", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                        {"name": "b", "securityContext": {"seccompProfile": {}}},
                        {"name": "c"},
                    ],
                }),
                Some(
                    r#"pod and containers "a", "b" must not set securityContext.seccompProfile.type to "", "Unconfined""#,
                ),
            ),
        ];
        for (spec, detail) in cases {
            let want = detail.map(|d| ("seccompProfile", d.to_owned()));
            assert_eq!(
                run(forms!(baseline_v1_19), &json!({}), &spec),
                want,
                "{spec}"
            );
        }
    }

    #[test]
    fn restricted_requires_a_profile() {
        let cases = [
            (
                json!({"containers": [{"name": "a"}]}),
                Some(
                    r#"pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
                ),
            ),
            (
                json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [{"name": "a"}]}),
                Some(r#"pod must not set securityContext.seccompProfile.type to "Unconfined""#),
            ),
            (
                json!({
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [
                        {"name": "a"},
                        {"name": "b", "securityContext": {}},
                        {"name": "c", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                        {"name": "d", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                        {"name": "e", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
                    ],
                }),
                Some(
                    r#"containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined""#,
                ),
            ),
            (
                json!({"containers": [
                    {"name": "a"},
                    {"name": "b", "securityContext": {}},
                    {"name": "d", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
                ]}),
                Some(
                    r#"pod or containers "a", "b" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
                ),
            ),
            (
                json!({"securityContext": {"seccompProfile": {"type": "Localhost"}}, "containers": [{"name": "a"}]}),
                None,
            ),
        ];
        for (spec, detail) in cases {
            let want = detail.map(|d| ("seccompProfile", d.to_owned()));
            for check in [forms!(restricted_v1_19), forms!(restricted_v1_25)] {
                assert_eq!(run(check, &json!({}), &spec), want, "{spec}");
            }
        }
        let windows = json!({"os": {"name": "windows"}, "containers": [{"name": "a"}]});
        assert!(run(forms!(restricted_v1_19), &json!({}), &windows).is_some());
        assert_eq!(run(forms!(restricted_v1_25), &json!({}), &windows), None);
    }
}
