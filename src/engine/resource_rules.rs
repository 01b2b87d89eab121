use serde::Serialize;

use crate::admission::Operation;

/// Which requests a rule can act on, in the shape of a webhook configuration's `rules` entry:
/// what `portcullis webhook-config` registers, so the apiserver sends nothing broader.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRule {
    /// API groups (`""` is the core group).
    pub api_groups: Vec<String>,
    /// API versions (`*` for all).
    pub api_versions: Vec<String>,
    /// Resources, with `/subresource` where one is meant.
    pub resources: Vec<String>,
    /// Operations.
    pub operations: Vec<Operation>,
}

impl ResourceRule {
    /// A rule for resources of one group, all versions.
    pub fn new(group: &str, resources: &[&str], operations: &[Operation]) -> Self {
        ResourceRule {
            api_groups: vec![group.to_owned()],
            api_versions: vec!["*".to_owned()],
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
            operations: operations.to_vec(),
        }
    }
}

/// Merges rules that differ only in resources, and sorts, so the output is stable and short.
pub fn merge_rules(mut rules: Vec<ResourceRule>) -> Vec<ResourceRule> {
    for rule in &mut rules {
        rule.operations.sort();
        rule.operations.dedup();
    }
    rules.sort();
    let mut merged: Vec<ResourceRule> = Vec::new();
    for rule in rules {
        match merged.last_mut() {
            Some(last)
                if last.api_groups == rule.api_groups
                    && last.api_versions == rule.api_versions
                    && last.operations == rule.operations =>
            {
                last.resources.extend(rule.resources);
                last.resources.sort();
                last.resources.dedup();
            }
            _ => merged.push(rule),
        }
    }
    merged
}

/// The resources that carry a pod spec, as [`super::pod_spec_location`] knows them.
pub fn pod_spec_resource_rules(operations: &[Operation], ephemeral: bool) -> Vec<ResourceRule> {
    let mut core = vec!["pods", "podtemplates", "replicationcontrollers"];
    if ephemeral {
        core.push("pods/ephemeralcontainers");
    }
    vec![
        ResourceRule::new("", &core, operations),
        ResourceRule::new(
            "apps",
            &["daemonsets", "deployments", "replicasets", "statefulsets"],
            operations,
        ),
        ResourceRule::new("batch", &["cronjobs", "jobs"], operations),
    ]
}
