use crate::admission::JsonRead;

use super::{ALL_CONTAINERS, Finding, View};
use crate::policy::HostRules;

/// `host`: host namespaces, host ports and hostPath volumes.
#[derive(Debug)]
pub struct HostRule {
    rules: HostRules,
}

impl HostRule {
    /// Wraps the rules.
    pub fn new(rules: &HostRules) -> Self {
        HostRule {
            rules: rules.clone(),
        }
    }

    fn allowed_host_path(&self, path: &str) -> bool {
        self.rules.allowed_host_paths.iter().any(|prefix| {
            let prefix = prefix.trim_end_matches('/');
            path.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }

    /// Reports each use of the host the rule forbids.
    pub fn check<'a, J: JsonRead<'a>>(&self, view: &View<J>, findings: &mut Vec<Finding>) {
        let Some(spec) = view.pod_spec() else {
            return;
        };
        if self.rules.forbid_namespaces {
            for (field, namespace) in [
                ("hostNetwork", "network"),
                ("hostPID", "PID"),
                ("hostIPC", "IPC"),
            ] {
                if spec.get(field).and_then(JsonRead::as_bool) == Some(true) {
                    findings.push((
                        format!("{}.{field}", view.pod_spec_path()),
                        format!("sharing the host {namespace} namespace is not allowed"),
                    ));
                }
            }
        }
        if self.rules.forbid_ports {
            for container in view.containers(&ALL_CONTAINERS) {
                let ports = container.value.get("ports");
                for (i, port) in ports.into_iter().flat_map(JsonRead::items).enumerate() {
                    let host_port = port.get("hostPort").and_then(JsonRead::as_i64).unwrap_or(0);
                    if host_port != 0 {
                        findings.push((
                            format!("{}.ports[{i}].hostPort", container.path()),
                            format!(
                                "container {:?} must not use host port {host_port}",
                                container.name()
                            ),
                        ));
                    }
                }
            }
        }
        if self.rules.forbid_host_path {
            let volumes = spec.get("volumes");
            for (i, volume) in volumes.into_iter().flat_map(JsonRead::items).enumerate() {
                let Some(host_path) = volume.get("hostPath") else {
                    continue;
                };
                let path = host_path
                    .get("path")
                    .and_then(JsonRead::as_str)
                    .unwrap_or("");
                if !self.allowed_host_path(path) {
                    let name = volume.get("name").and_then(JsonRead::as_str).unwrap_or("");
                    findings.push((
                        format!("{}.volumes[{i}].hostPath", view.pod_spec_path()),
                        format!("volume {name:?} must not mount host path {path:?}"),
                    ));
                }
            }
        }
    }
}
