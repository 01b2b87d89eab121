//! What a scan lists: exactly the resources the loaded policies register webhooks for
//! ([`Engine::webhook_rules`], what `webhook-config` prints), resolved against the cluster's
//! discovery to one served version each.

use std::collections::{BTreeMap, BTreeSet};

use crate::admission::Operation;
use crate::engine::{Endpoint, Engine, ResourceRule};

/// One resource to list.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ScanTarget {
    /// API group; empty for the core group.
    pub group: String,
    /// The version listed.
    pub version: String,
    /// The resource (plural).
    pub resource: String,
    /// The kind of its objects.
    pub kind: String,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

impl ScanTarget {
    /// `apiVersion` of its objects (`v1`, `apps/v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The URL path of its collection, in `namespace` or across all namespaces.
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let root = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        match namespace {
            Some(namespace) => format!("{root}/namespaces/{namespace}/{}", self.resource),
            None => format!("{root}/{}", self.resource),
        }
    }

    /// `group/version/resource` as people write it (`v1/pods` for the core group).
    pub fn display(&self) -> String {
        if self.group.is_empty() {
            format!("{}/{}", self.version, self.resource)
        } else {
            format!("{}/{}/{}", self.group, self.version, self.resource)
        }
    }
}

/// A resource as the policies name it: a group and resource (either may be `*`) and the
/// versions the rule lists (`*` for any).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct WantedResource {
    /// API group or `*`.
    pub group: String,
    /// Resource or `*`.
    pub resource: String,
    /// Versions, or `["*"]`.
    pub versions: BTreeSet<String>,
}

/// The resources a scan must list: those the `/validate` and `/mutate` rules register for
/// CREATE (a scan presents each object as a CREATE), without subresources.
pub fn wanted_resources(engine: &Engine) -> Vec<WantedResource> {
    let mut rules: Vec<ResourceRule> = engine.webhook_rules(Endpoint::Validate);
    rules.extend(engine.webhook_rules(Endpoint::Mutate));
    wanted_from_rules(&rules)
}

/// [`wanted_resources`] for a list of rules.
pub fn wanted_from_rules(rules: &[ResourceRule]) -> Vec<WantedResource> {
    let mut wanted: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for rule in rules {
        if !rule.operations.contains(&Operation::Create) {
            continue;
        }
        for group in &rule.api_groups {
            for resource in &rule.resources {
                // `*/*` is every resource and every subresource: the resources are listed.
                let resource = match resource.split_once('/') {
                    None => resource.as_str(),
                    Some(("*", "*")) => "*",
                    Some(_) => continue,
                };
                wanted
                    .entry((group.clone(), resource.to_owned()))
                    .or_default()
                    .extend(rule.api_versions.iter().cloned());
            }
        }
    }
    wanted
        .into_iter()
        .map(|((group, resource), versions)| WantedResource {
            group,
            resource,
            versions,
        })
        .collect()
}

/// A resource the cluster serves, from discovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedResource {
    /// The resource (plural); subresources have a `/`.
    pub name: String,
    /// Its kind.
    pub kind: String,
    /// Whether it is namespaced.
    pub namespaced: bool,
    /// Whether `list` is among its verbs.
    pub listable: bool,
}

/// One API group as discovery describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServedGroup {
    /// Versions served, the preferred one first.
    pub versions: Vec<String>,
    /// The resources of each version (filled for the versions fetched).
    pub resources: BTreeMap<String, Vec<ServedResource>>,
}

/// Groups by name (`""` for the core group).
pub type Discovery = BTreeMap<String, ServedGroup>;

/// The group versions whose resource lists a scan of `wanted` needs from `discovery` (whose
/// groups and versions are known): for each wanted group, the versions
/// [`choose_version`] could pick.
pub fn versions_to_fetch(
    wanted: &[WantedResource],
    discovery: &Discovery,
) -> Vec<(String, String)> {
    let mut fetch = BTreeSet::new();
    for want in wanted {
        for (group, served) in discovery {
            if want.group != "*" && &want.group != group {
                continue;
            }
            if let Some(version) = choose_version(&want.versions, &served.versions) {
                fetch.insert((group.clone(), version));
            }
        }
    }
    fetch.into_iter().collect()
}

/// The version to list: the preferred one when the rule takes any version, otherwise the
/// first served version (in discovery's order, preferred first) the rule names. Under the
/// generated webhooks' `matchPolicy: Equivalent` every version of a resource is sent, so
/// one version lists each object once.
pub fn choose_version(rule_versions: &BTreeSet<String>, served: &[String]) -> Option<String> {
    if rule_versions.contains("*") {
        return served.first().cloned();
    }
    served.iter().find(|v| rule_versions.contains(*v)).cloned()
}

/// The targets for `wanted` in `discovery`: one per served group and resource, listable,
/// in a stable order (group, resource).
pub fn resolve(wanted: &[WantedResource], discovery: &Discovery) -> Vec<ScanTarget> {
    let mut targets: BTreeMap<(String, String), ScanTarget> = BTreeMap::new();
    for want in wanted {
        for (group, served) in discovery {
            if want.group != "*" && &want.group != group {
                continue;
            }
            let Some(version) = choose_version(&want.versions, &served.versions) else {
                continue;
            };
            for resource in served.resources.get(&version).into_iter().flatten() {
                if resource.name.contains('/') || !resource.listable {
                    continue;
                }
                if want.resource != "*" && want.resource != resource.name {
                    continue;
                }
                targets
                    .entry((group.clone(), resource.name.clone()))
                    .or_insert_with(|| ScanTarget {
                        group: group.clone(),
                        version: version.clone(),
                        resource: resource.name.clone(),
                        kind: resource.kind.clone(),
                        namespaced: resource.namespaced,
                    });
            }
        }
    }
    targets.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(name: &str, kind: &str, namespaced: bool) -> ServedResource {
        ServedResource {
            name: name.into(),
            kind: kind.into(),
            namespaced,
            listable: true,
        }
    }

    fn discovery() -> Discovery {
        let mut discovery = Discovery::new();
        discovery.insert(
            String::new(),
            ServedGroup {
                versions: vec!["v1".into()],
                resources: BTreeMap::from([(
                    "v1".into(),
                    vec![
                        served("pods", "Pod", true),
                        served("pods/ephemeralcontainers", "Pod", true),
                        served("namespaces", "Namespace", false),
                        served("configmaps", "ConfigMap", true),
                        ServedResource {
                            listable: false,
                            ..served("bindings", "Binding", true)
                        },
                    ],
                )]),
            },
        );
        discovery.insert(
            "apps".into(),
            ServedGroup {
                versions: vec!["v1".into()],
                resources: BTreeMap::from([(
                    "v1".into(),
                    vec![served("deployments", "Deployment", true)],
                )]),
            },
        );
        discovery.insert(
            "example.com".into(),
            ServedGroup {
                versions: vec!["v2".into(), "v1".into()],
                resources: BTreeMap::from([
                    ("v2".into(), vec![served("widgets", "Widget", true)]),
                    ("v1".into(), vec![served("widgets", "Widget", true)]),
                ]),
            },
        );
        discovery
    }

    #[test]
    fn the_builtin_set_scans_pod_bearing_resources_and_namespaces() {
        let wanted = wanted_resources(&Engine::builtin());
        let targets = resolve(&wanted, &discovery());
        let names: Vec<String> = targets.iter().map(ScanTarget::display).collect();
        // Subresources and resources the discovery does not serve are left out.
        assert_eq!(names, ["v1/namespaces", "v1/pods", "apps/v1/deployments"]);
        assert!(!targets[0].namespaced);
        assert_eq!(targets[2].kind, "Deployment");
        assert_eq!(
            targets[2].collection_path(Some("team")),
            "/apis/apps/v1/namespaces/team/deployments"
        );
        assert_eq!(targets[1].collection_path(None), "/api/v1/pods");
    }

    #[test]
    fn versions_follow_the_rule_and_discovery_order() {
        let rule = |versions: &[&str], operations: &[Operation]| ResourceRule {
            api_groups: vec!["example.com".into()],
            api_versions: versions.iter().map(|v| (*v).to_owned()).collect(),
            resources: vec!["widgets".into()],
            operations: operations.to_vec(),
        };
        let any = resolve(
            &wanted_from_rules(&[rule(&["*"], &[Operation::Create])]),
            &discovery(),
        );
        assert_eq!(any[0].version, "v2");
        let v1 = resolve(
            &wanted_from_rules(&[rule(&["v1"], &[Operation::Create])]),
            &discovery(),
        );
        assert_eq!(v1[0].version, "v1");
        let none = wanted_from_rules(&[rule(&["v3"], &[Operation::Create])]);
        assert!(resolve(&none, &discovery()).is_empty());
        // Rules without CREATE are not scanned: a scan presents objects as CREATE.
        assert!(wanted_from_rules(&[rule(&["*"], &[Operation::Update])]).is_empty());
    }

    #[test]
    fn wildcards_expand_to_every_listable_resource() {
        let all = ResourceRule::new("*", &["*/*"], &[Operation::Create]);
        let targets = resolve(&wanted_from_rules(&[all]), &discovery());
        let names: Vec<String> = targets.iter().map(ScanTarget::display).collect();
        assert_eq!(
            names,
            [
                "v1/configmaps",
                "v1/namespaces",
                "v1/pods",
                "apps/v1/deployments",
                "example.com/v2/widgets"
            ]
        );
        let fetch = versions_to_fetch(
            &wanted_from_rules(&[ResourceRule::new("*", &["*"], &[Operation::Create])]),
            &discovery(),
        );
        assert_eq!(fetch.len(), 3);
    }
}

#[cfg(test)]
mod wildcard_tests {
    use super::*;

    #[test]
    fn a_wildcard_admission_policy_wants_every_group() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/audit/wildcard-policy.yaml");
        let engine = Engine::load(&[path]).unwrap();
        let wanted = wanted_resources(&engine);
        assert_eq!(
            wanted,
            [WantedResource {
                group: "*".into(),
                resource: "*".into(),
                versions: BTreeSet::from(["*".to_owned()]),
            }]
        );
    }
}
