use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::admission::JsonRead;

use super::quantity::parse_quantity;
use super::{Finding, RESOURCED_CONTAINERS, View};
use crate::policy::ResourceRules;

/// A bound on one resource: its name, the quantity as written, and its value.
type Bound = (String, String, f64);

/// `resources`: requests and limits required, and bounds on them.
#[derive(Debug)]
pub struct ResourceRule {
    require_requests: Vec<String>,
    require_limits: Vec<String>,
    max_limits: Vec<Bound>,
    max_requests: Vec<Bound>,
    min_requests: Vec<Bound>,
}

fn bounds(map: &BTreeMap<String, String>) -> Result<Vec<Bound>, (String, String)> {
    map.iter()
        .map(|(resource, text)| {
            parse_quantity(text)
                .map(|value| (resource.clone(), text.clone(), value))
                .ok_or_else(|| (resource.clone(), format!("invalid quantity {text:?}")))
        })
        .collect()
}

impl ResourceRule {
    /// Parses the bounds' quantities here, once.
    pub fn new(rules: &ResourceRules) -> Result<Self, (String, String)> {
        Ok(ResourceRule {
            require_requests: rules.require_requests.clone(),
            require_limits: rules.require_limits.clone(),
            max_limits: bounds(&rules.max_limits)
                .map_err(|(k, m)| (format!("maxLimits.{k}"), m))?,
            max_requests: bounds(&rules.max_requests)
                .map_err(|(k, m)| (format!("maxRequests.{k}"), m))?,
            min_requests: bounds(&rules.min_requests)
                .map_err(|(k, m)| (format!("minRequests.{k}"), m))?,
        })
    }

    /// Reports each container that lacks or exceeds what the rule says.
    pub fn check<'a, J: JsonRead<'a>>(&self, view: &View<J>, findings: &mut Vec<Finding>) {
        for container in view.containers(&RESOURCED_CONTAINERS) {
            let name = || container.name();
            let resources = container.value.get("resources");
            let requests = resources.and_then(|r| r.get("requests"));
            let limits = resources.and_then(|r| r.get("limits"));
            let quantity = |kind: &str, resource: &str| {
                if kind == "requests" { requests } else { limits }
                    .and_then(|s| s.get(resource))
                    .map(|v| match v.as_str() {
                        Some(s) => Cow::Borrowed(s),
                        None => Cow::Owned(v.to_value().to_string()),
                    })
            };
            for (kind, required) in [
                ("requests", &self.require_requests),
                ("limits", &self.require_limits),
            ] {
                for resource in required {
                    if quantity(kind, resource).is_none() {
                        findings.push((
                            format!("{}.resources.{kind}.{resource}", container.path()),
                            format!(
                                "container {:?} must set resources.{kind}.{resource}",
                                name()
                            ),
                        ));
                    }
                }
            }
            for (kind, bounds, above) in [
                ("limits", &self.max_limits, true),
                ("requests", &self.max_requests, true),
                ("requests", &self.min_requests, false),
            ] {
                for (resource, text, bound) in bounds {
                    let Some(value) = quantity(kind, resource) else {
                        continue;
                    };
                    let out_of_bounds = match parse_quantity(&value) {
                        Some(v) if above => v > *bound,
                        Some(v) => v < *bound,
                        None => true,
                    };
                    if out_of_bounds {
                        let relation = if above { "at most" } else { "at least" };
                        findings.push((
                            format!("{}.resources.{kind}.{resource}", container.path()),
                            format!(
                                "container {:?} resources.{kind}.{resource} is {value}; it must be {relation} {text}",
                                name()
                            ),
                        ));
                    }
                }
            }
        }
    }
}
