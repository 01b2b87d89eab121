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

/// Canonical, short and stable rules: per group and resource the union of versions (any
/// version when one rule says `*`) and of operations, then resources sharing group, versions
/// and operations listed together.
pub fn merge_rules(rules: Vec<ResourceRule>) -> Vec<ResourceRule> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut per_resource: BTreeMap<(String, String), (BTreeSet<String>, BTreeSet<Operation>)> =
        BTreeMap::new();
    for rule in rules {
        for group in &rule.api_groups {
            for resource in &rule.resources {
                let entry = per_resource
                    .entry((group.clone(), resource.clone()))
                    .or_default();
                entry.0.extend(rule.api_versions.iter().cloned());
                entry.1.extend(rule.operations.iter().copied());
            }
        }
    }
    let mut grouped: BTreeMap<(String, Vec<String>, Vec<Operation>), Vec<String>> = BTreeMap::new();
    for ((group, resource), (versions, operations)) in per_resource {
        let versions = if versions.contains("*") {
            vec!["*".to_owned()]
        } else {
            versions.into_iter().collect()
        };
        grouped
            .entry((group, versions, operations.into_iter().collect()))
            .or_default()
            .push(resource);
    }
    grouped
        .into_iter()
        .map(
            |((group, api_versions, operations), resources)| ResourceRule {
                api_groups: vec![group],
                api_versions,
                resources,
                operations,
            },
        )
        .collect()
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
