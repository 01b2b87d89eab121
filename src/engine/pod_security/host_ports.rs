//! `hostPorts` (baseline, from v1.0): containers must not use host ports (`hostPort` unset or
//! 0).

use super::pod::{Form, PodView, int_field, list};
use super::registry::Forbidden;
use super::text::{containers_phrase, pluralize, sorted_unique};

pub(super) fn v1_0<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let mut containers: Vec<&str> = Vec::new();
    let mut ports: Vec<String> = Vec::new();
    for container in pod.containers() {
        let before = ports.len();
        ports.extend(
            list(container.json(), "ports")
                .filter_map(|port| int_field(port, "hostPort"))
                .filter(|host_port| *host_port != 0)
                .map(|host_port| host_port.to_string()),
        );
        if ports.len() > before {
            containers.push(container.name());
        }
    }
    if containers.is_empty() {
        return None;
    }
    // Upstream sorts the ports as strings: "10000" before "8080".
    let ports = sorted_unique(ports);
    Some(Forbidden::new(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_phrase(&containers),
            pluralize("uses", "use", containers.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
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
    fn forbids_host_ports() {
        let cases = [
            (
                json!({"containers": [{"name": "a", "ports": [{"containerPort": 80}]}]}),
                None,
            ),
            (
                json!({"containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 0}]}]}),
                None,
            ),
            (
                json!({"containers": [{"name": "a", "ports": [{"hostPort": 8080}]}]}),
                Some(r#"container "a" uses hostPort 8080"#),
            ),
            (
                json!({
                    "initContainers": [{"name": "i", "ports": [{"hostPort": 8080}]}],
                    "containers": [
                        {"name": "a", "ports": [{"hostPort": 9090}, {"hostPort": 10000}]},
                        {"name": "b", "ports": [{"containerPort": 1}]},
                        {"name": "c", "ports": [{"hostPort": 8080}]},
                    ],
                }),
                Some(r#"containers "i", "a", "c" use hostPorts 10000, 8080, 9090"#),
            ),
        ];
        for (spec, detail) in cases {
            let want = detail.map(|d| ("hostPort", d.to_owned()));
            assert_eq!(run(forms!(v1_0), &json!({}), &spec), want, "{spec}");
        }
    }
}
