//! `hostProbesAndHostLifecycle` (baseline, from v1.34): probes (`httpGet`, `tcpSocket`) and
//! lifecycle handlers (`postStart`, `preStop`) must not set `host`, which would let the kubelet
//! reach other hosts on the pod's behalf.

use crate::admission::JsonRead;

use super::pod::{Form, PodView, field, str_field};
use super::registry::Forbidden;
use super::text::{join_quote, pluralize, sorted_unique};

/// The hosts an action set (`httpGet` then `tcpSocket`), as far as they are not empty.
fn hosts<'a, J: JsonRead<'a>>(handler: Option<J>) -> impl Iterator<Item = &'a str> {
    ["httpGet", "tcpSocket"]
        .into_iter()
        .filter_map(move |action| field(handler?, action))
        .map(|action| str_field(action, "host"))
        .filter(|host| !host.is_empty())
}

pub(super) fn v1_34<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let mut containers: Vec<&str> = Vec::new();
    let mut forbidden: Vec<&str> = Vec::new();
    for container in pod.containers() {
        let json = container.json();
        let lifecycle = field(json, "lifecycle");
        let handlers = [
            field(json, "livenessProbe"),
            field(json, "readinessProbe"),
            field(json, "startupProbe"),
            lifecycle.and_then(|l| field(l, "postStart")),
            lifecycle.and_then(|l| field(l, "preStop")),
        ];
        let before = forbidden.len();
        for handler in handlers {
            forbidden.extend(hosts(handler));
        }
        if forbidden.len() > before {
            containers.push(container.name());
        }
    }
    if containers.is_empty() {
        return None;
    }
    // Both are sets upstream: sorted, without repeats (containers too).
    let containers = sorted_unique(containers);
    let forbidden = sorted_unique(forbidden);
    Some(Forbidden::new(
        "probe or lifecycle host",
        format!(
            "{} {} {} {} {}",
            pluralize("container", "containers", containers.len()),
            join_quote(containers.iter().copied()),
            pluralize("uses", "use", containers.len()),
            pluralize(
                "probe or lifecycle host",
                "probe or lifecycle hosts",
                forbidden.len()
            ),
            join_quote(forbidden)
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
    fn forbids_hosts_in_probes_and_handlers() {
        let cases = [
            (
                json!({"containers": [{
                    "name": "a",
                    "livenessProbe": {"httpGet": {"port": 80, "host": ""}},
                    "readinessProbe": {"tcpSocket": {"port": 80}},
                    "lifecycle": {"preStop": {"exec": {"command": ["x"]}}},
                }]}),
                None,
            ),
            (
                json!({"containers": [{"name": "a", "livenessProbe": {"httpGet": {"host": "1.2.3.4"}}}]}),
                Some(r#"container "a" uses probe or lifecycle host "1.2.3.4""#),
            ),
            (
                json!({
                    "initContainers": [{"name": "z", "startupProbe": {"tcpSocket": {"host": "b.example"}}}],
                    "containers": [
                        {
                            "name": "b",
                            "readinessProbe": {"httpGet": {"host": "a.example"}, "tcpSocket": {"host": "a.example"}},
                            "lifecycle": {
                                "postStart": {"httpGet": {"host": "c.example"}},
                                "preStop": {"tcpSocket": {"host": "d.example"}},
                            },
                        },
                        {"name": "b", "livenessProbe": {"httpGet": {"host": "a.example"}}},
                    ],
                }),
                Some(
                    r#"containers "b", "z" use probe or lifecycle hosts "a.example", "b.example", "c.example", "d.example""#,
                ),
            ),
        ];
        for (spec, detail) in cases {
            let want = detail.map(|d| ("probe or lifecycle host", d.to_owned()));
            assert_eq!(run(forms!(v1_34), &json!({}), &spec), want, "{spec}");
        }
    }
}
