//! `matchConstraints` and binding `matchResources`, with the apiserver's rules: namespace and
//! object selectors, `resourceRules` (with `*`, `*/*`, `pods/*`, `*/scale`, scope and
//! `resourceNames`), `excludeResourceRules` first, and `matchPolicy`.

use serde_json::Value;

use crate::admission::{AdmissionRequest, GroupVersionResource, Operation};
use crate::engine::matching::SelectorMatcher;
use crate::engine::namespaces::namespace_label;
use crate::engine::{NamespaceLookup, ResourceRule};
use crate::policy::admission_policy::{MatchPolicy, MatchResources, NamedRule};

/// A compiled `MatchResources`.
#[derive(Debug, Clone)]
pub struct ResourceMatcher {
    namespace_selector: Option<SelectorMatcher>,
    object_selector: Option<SelectorMatcher>,
    rules: Vec<NamedRule>,
    exclude: Vec<NamedRule>,
    match_policy: MatchPolicy,
}

fn contains_or_star(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == "*" || item == value)
}

fn rule_matches(
    rule: &NamedRule,
    request: &AdmissionRequest,
    resource: &GroupVersionResource,
    sub_resource: &str,
) -> bool {
    let namespaced = request.namespace.as_deref().is_some_and(|n| !n.is_empty());
    let scope = match rule.scope.as_deref() {
        None | Some("*") => true,
        Some("Cluster") => !namespaced,
        Some("Namespaced") => namespaced,
        Some(_) => false,
    };
    let operation = rule
        .operations
        .iter()
        .any(|op| op == "*" || op == request.operation.as_str());
    let resource_match = rule.resources.iter().any(|entry| {
        let (res, sub) = entry.split_once('/').unwrap_or((entry, ""));
        (res == "*" || res == resource.resource) && (sub == "*" || sub == sub_resource)
    });
    scope
        && operation
        && contains_or_star(&rule.api_groups, &resource.group)
        && contains_or_star(&rule.api_versions, &resource.version)
        && resource_match
        && (rule.resource_names.is_empty()
            || request
                .name
                .as_deref()
                .is_some_and(|name| rule.resource_names.iter().any(|n| n == name)))
}

fn object_labels(object: Option<&Value>) -> Option<&serde_json::Map<String, Value>> {
    object?.get("metadata")?.get("labels")?.as_object()
}

impl ResourceMatcher {
    /// Compiles a `MatchResources` (selectors were checked at load).
    pub fn new(spec: &MatchResources) -> Self {
        ResourceMatcher {
            namespace_selector: spec.namespace_selector.as_ref().map(SelectorMatcher::new),
            object_selector: spec.object_selector.as_ref().map(SelectorMatcher::new),
            rules: spec.resource_rules.clone(),
            exclude: spec.exclude_resource_rules.clone(),
            match_policy: spec.match_policy.unwrap_or_default(),
        }
    }

    fn any_rule(&self, rules: &[NamedRule], request: &AdmissionRequest) -> bool {
        let sub = request.sub_resource.as_deref().unwrap_or("");
        // The resource as requested; with `Equivalent`, also the resource the apiserver sent
        // (converted to a version a webhook rule registered).
        let requested = request
            .request_resource
            .as_ref()
            .unwrap_or(&request.resource);
        let requested_sub = request
            .request_sub_resource
            .as_deref()
            .or(request.sub_resource.as_deref())
            .unwrap_or("");
        rules.iter().any(|rule| {
            rule_matches(rule, request, requested, requested_sub)
                || (self.match_policy == MatchPolicy::Equivalent
                    && rule_matches(rule, request, &request.resource, sub))
        })
    }

    fn namespace_matches(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> bool {
        let Some(selector) = &self.namespace_selector else {
            return true;
        };
        match request.namespace.as_deref().filter(|n| !n.is_empty()) {
            None => {
                // Cluster-scoped: only a Namespace is matched, on its own labels.
                if request.kind.group.is_empty() && request.kind.kind == "Namespace" {
                    let labels = object_labels(request.subject());
                    selector.matches(&|key| labels.and_then(|l| l.get(key)).and_then(Value::as_str))
                } else {
                    true
                }
            }
            Some(namespace) => {
                let labels = namespaces.labels_ref(namespace);
                selector.matches(&|key| namespace_label(labels.as_ref(), namespace, key))
            }
        }
    }

    fn object_matches(&self, request: &AdmissionRequest) -> bool {
        let Some(selector) = &self.object_selector else {
            return true;
        };
        [request.object.as_ref(), request.old_object.as_ref()]
            .into_iter()
            .flatten()
            .any(|object| {
                let labels = object_labels(Some(object));
                selector.matches(&|key| labels.and_then(|l| l.get(key)).and_then(Value::as_str))
            })
    }

    /// Whether the request is matched. Empty `resourceRules` match every request (a binding's
    /// `matchResources` narrows what the policy matches).
    pub fn matches(&self, request: &AdmissionRequest, namespaces: &dyn NamespaceLookup) -> bool {
        self.namespace_matches(request, namespaces)
            && self.object_matches(request)
            && !self.any_rule(&self.exclude, request)
            && (self.rules.is_empty() || self.any_rule(&self.rules, request))
    }

    /// Whether the request's resource and operation are matched, whatever the namespace and
    /// object selectors say: true for every request [`ResourceMatcher::matches`] matches.
    pub fn matches_resource(&self, request: &AdmissionRequest) -> bool {
        !self.any_rule(&self.exclude, request)
            && (self.rules.is_empty() || self.any_rule(&self.rules, request))
    }

    /// The webhook rules that reach every request this matcher can match.
    pub fn resource_rules(&self) -> Vec<ResourceRule> {
        self.rules
            .iter()
            .map(|rule| {
                let mut operations: Vec<Operation> = Vec::new();
                for op in &rule.operations {
                    let all = [
                        Operation::Create,
                        Operation::Update,
                        Operation::Delete,
                        Operation::Connect,
                    ];
                    for candidate in all {
                        if op == "*" || *op == candidate.to_string() {
                            operations.push(candidate);
                        }
                    }
                }
                ResourceRule {
                    api_groups: rule.api_groups.clone(),
                    api_versions: rule.api_versions.clone(),
                    resources: rule.resources.clone(),
                    operations,
                }
            })
            .collect()
    }
}
