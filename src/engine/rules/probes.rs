use crate::admission::JsonRead;

use super::{APP_CONTAINERS, Finding, View};

/// `probes`: probes every app container must define.
#[derive(Debug)]
pub struct ProbeRule {
    require: Vec<(&'static str, &'static str)>,
}

impl ProbeRule {
    /// `require` holds `liveness`, `readiness`, `startup` (checked at load).
    pub fn new(require: &[String]) -> Self {
        ProbeRule {
            require: require
                .iter()
                .filter_map(|probe| match probe.as_str() {
                    "liveness" => Some(("liveness", "livenessProbe")),
                    "readiness" => Some(("readiness", "readinessProbe")),
                    "startup" => Some(("startup", "startupProbe")),
                    _ => None,
                })
                .collect(),
        }
    }

    /// Reports each missing probe.
    pub fn check<'a, J: JsonRead<'a>>(&self, view: &View<J>, findings: &mut Vec<Finding>) {
        for container in view.containers(&APP_CONTAINERS) {
            for (probe, field) in &self.require {
                if container.value.get(field).is_none_or(|v| v.is_null()) {
                    findings.push((
                        format!("{}.{field}", container.path()),
                        format!(
                            "container {:?} must define a {probe} probe",
                            container.name()
                        ),
                    ));
                }
            }
        }
    }
}
