//! Linux capabilities.
//!
//! - `capabilities_baseline` (baseline, from v1.0): `securityContext.capabilities.add` may only
//!   hold capabilities of the container runtime's default set.
//! - `capabilities_restricted` (restricted, from v1.22, replacing the baseline check): every
//!   container must drop `ALL` and may add only `NET_BIND_SERVICE`. From v1.25 Windows pods are
//!   exempt.

use super::pod::{Form, PodView, str_list};
use super::registry::Forbidden;
use super::text::{containers_phrase, join_quote, sorted_unique};

/// The container runtime's default capabilities, which baseline lets containers add.
const DEFAULT_SET: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

pub(super) fn baseline_v1_0<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let mut containers: Vec<&str> = Vec::new();
    let mut added: Vec<&str> = Vec::new();
    for container in pod.containers() {
        let Some(capabilities) = container.security_context_field("capabilities") else {
            continue;
        };
        let before = added.len();
        added.extend(str_list(capabilities, "add").filter(|c| !DEFAULT_SET.contains(c)));
        if added.len() > before {
            containers.push(container.name());
        }
    }
    if containers.is_empty() {
        return None;
    }
    Some(Forbidden::new(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&containers),
            join_quote(sorted_unique(added))
        ),
    ))
}

pub(super) fn restricted_v1_22<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let mut missing_drop_all: Vec<&str> = Vec::new();
    let mut adding: Vec<&str> = Vec::new();
    let mut added: Vec<&str> = Vec::new();
    for container in pod.containers() {
        let Some(capabilities) = container.security_context_field("capabilities") else {
            missing_drop_all.push(container.name());
            continue;
        };
        if !str_list(capabilities, "drop").any(|c| c == "ALL") {
            missing_drop_all.push(container.name());
        }
        let before = added.len();
        added.extend(str_list(capabilities, "add").filter(|c| *c != "NET_BIND_SERVICE"));
        if added.len() > before {
            adding.push(container.name());
        }
    }
    let mut details: Vec<String> = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            r#"{} must set securityContext.capabilities.drop=["ALL"]"#,
            containers_phrase(&missing_drop_all)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding),
            join_quote(sorted_unique(added))
        ));
    }
    if details.is_empty() {
        return None;
    }
    Some(Forbidden::new(
        "unrestricted capabilities",
        details.join("; "),
    ))
}

pub(super) fn restricted_v1_25<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    if pod.is_windows() {
        return None;
    }
    restricted_v1_22(pod)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::pod::run;
    use super::super::registry::forms;
    use super::*;

    #[test]
    fn baseline_allows_only_the_default_set() {
        let pass = json!({"containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {"capabilities": {"add": ["CHOWN", "NET_BIND_SERVICE"], "drop": ["ALL"]}}},
        ]});
        assert_eq!(run(forms!(baseline_v1_0), &json!({}), &pass), None);
        let fail = json!({
            "initContainers": [{"name": "i", "securityContext": {"capabilities": {"add": ["SYS_ADMIN", "CHOWN"]}}}],
            "containers": [
                {"name": "a", "securityContext": {"capabilities": {"add": ["NET_RAW", "SYS_ADMIN"]}}},
                {"name": "b", "securityContext": {"capabilities": {"add": ["chown"]}}},
            ],
        });
        assert_eq!(
            run(forms!(baseline_v1_0), &json!({}), &fail),
            Some((
                "non-default capabilities",
                r#"containers "i", "a", "b" must not include "NET_RAW", "SYS_ADMIN", "chown" in securityContext.capabilities.add"#
                    .to_owned()
            ))
        );
    }

    #[test]
    fn restricted_requires_drop_all_and_allows_net_bind_service() {
        let reason = "unrestricted capabilities";
        let cases = [
            (
                json!({"containers": [{"name": "a", "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}]}),
                None,
            ),
            (
                json!({"containers": [
                    {"name": "a"},
                    {"name": "b", "securityContext": {}},
                    {"name": "c", "securityContext": {"capabilities": {}}},
                    {"name": "d", "securityContext": {"capabilities": {"drop": ["all", "NET_RAW"]}}},
                    {"name": "e", "securityContext": {"capabilities": {"drop": ["ALL"]}}},
                ]}),
                Some(
                    r#"containers "a", "b", "c", "d" must set securityContext.capabilities.drop=["ALL"]"#,
                ),
            ),
            (
                json!({"containers": [
                    {"name": "a", "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["CHOWN", "NET_BIND_SERVICE"]}}},
                    {"name": "b", "securityContext": {"capabilities": {"add": ["SYS_ADMIN", "CHOWN"]}}},
                ]}),
                Some(
                    r#"container "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b" must not include "CHOWN", "SYS_ADMIN" in securityContext.capabilities.add"#,
                ),
            ),
        ];
        for (spec, detail) in cases {
            let want = detail.map(|d| (reason, d.to_owned()));
            assert_eq!(
                run(forms!(restricted_v1_22), &json!({}), &spec),
                want,
                "{spec}"
            );
            assert_eq!(
                run(forms!(restricted_v1_25), &json!({}), &spec),
                want,
                "{spec}"
            );
        }
        let windows = json!({"os": {"name": "windows"}, "containers": [{"name": "a"}]});
        assert!(run(forms!(restricted_v1_22), &json!({}), &windows).is_some());
        assert_eq!(run(forms!(restricted_v1_25), &json!({}), &windows), None);
    }
}
