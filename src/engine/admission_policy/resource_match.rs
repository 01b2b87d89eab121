//! `matchConstraints` and binding `matchResources`, with the apiserver's rules: namespace and
//! object selectors, `resourceRules` (with `*`, `*/*`, `pods/*`, `*/scale`, scope and
//! `resourceNames`), `excludeResourceRules` first, and `matchPolicy`.

use crate::admission::{AdmissionRequest, GroupVersionResource, Operation};
use crate::engine::matching::{SelectorMatcher, same_text};
use crate::engine::{NamespaceLookup, ReadFailure, ResourceRule};
use crate::policy::admission_policy::{MatchPolicy, MatchResources, NamedRule};

/// A compiled `MatchResources`.
#[derive(Debug, Clone)]
pub struct ResourceMatcher {
    namespace_selector: Option<SelectorMatcher>,
    object_selector: Option<SelectorMatcher>,
    /// `resourceRules` as written, for the webhook rules.
    rules: Vec<NamedRule>,
    include: Vec<RuleMatcher>,
    exclude: Vec<RuleMatcher>,
    match_policy: MatchPolicy,
}

/// A list of names where `*` stands for any name.
#[derive(Debug, Clone)]
struct Names {
    any: bool,
    names: Vec<String>,
}

impl Names {
    fn new(list: &[String]) -> Self {
        Names {
            any: list.iter().any(|item| item == "*"),
            names: list.to_vec(),
        }
    }

    fn contains(&self, value: &str) -> bool {
        self.any || self.names.iter().any(|name| same_text(name, value))
    }
}

/// A name, or `*` for any.
#[derive(Debug, Clone)]
enum Pattern {
    Any,
    Exactly(String),
}

impl Pattern {
    fn new(text: &str) -> Self {
        match text {
            "*" => Pattern::Any,
            name => Pattern::Exactly(name.to_owned()),
        }
    }

    fn matches(&self, value: &str) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Exactly(name) => same_text(name, value),
        }
    }
}

/// Which requests a rule's `scope` admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RuleScope {
    Any,
    Cluster,
    Namespaced,
    /// A scope the API does not know matches nothing.
    Nothing,
}

/// One `resourceRules` (or `excludeResourceRules`) item, compiled.
#[derive(Debug, Clone)]
struct RuleMatcher {
    scope: RuleScope,
    /// The operations matched, as bits by [`operation_bit`].
    operations: u8,
    api_groups: Names,
    api_versions: Names,
    /// `resources` entries as resource and subresource: `pods` is (`pods`, ``), `*/scale` is
    /// (any, `scale`).
    resources: Vec<(Pattern, Pattern)>,
    resource_names: Vec<String>,
}

const OPERATIONS: [Operation; 4] = [
    Operation::Create,
    Operation::Update,
    Operation::Delete,
    Operation::Connect,
];

fn operation_bit(operation: Operation) -> u8 {
    match operation {
        Operation::Create => 1,
        Operation::Update => 2,
        Operation::Delete => 4,
        Operation::Connect => 8,
    }
}

impl RuleMatcher {
    fn new(rule: &NamedRule) -> Self {
        let scope = match rule.scope.as_deref() {
            None | Some("*") => RuleScope::Any,
            Some("Cluster") => RuleScope::Cluster,
            Some("Namespaced") => RuleScope::Namespaced,
            Some(_) => RuleScope::Nothing,
        };
        let operations = OPERATIONS
            .into_iter()
            .filter(|candidate| {
                rule.operations
                    .iter()
                    .any(|op| op == "*" || op == candidate.as_str())
            })
            .fold(0, |bits, operation| bits | operation_bit(operation));
        let resources = rule
            .resources
            .iter()
            .map(|entry| {
                let (resource, sub_resource) = entry.split_once('/').unwrap_or((entry, ""));
                (Pattern::new(resource), Pattern::new(sub_resource))
            })
            .collect();
        RuleMatcher {
            scope,
            operations,
            api_groups: Names::new(&rule.api_groups),
            api_versions: Names::new(&rule.api_versions),
            resources,
            resource_names: rule.resource_names.clone(),
        }
    }

    fn matches(
        &self,
        request: &AdmissionRequest,
        resource: &GroupVersionResource,
        sub_resource: &str,
    ) -> bool {
        let scope = match self.scope {
            RuleScope::Any => true,
            RuleScope::Cluster => !is_namespaced(request),
            RuleScope::Namespaced => is_namespaced(request),
            RuleScope::Nothing => false,
        };
        scope
            && self.operations & operation_bit(request.operation) != 0
            && self.api_groups.contains(&resource.group)
            && self.api_versions.contains(&resource.version)
            && self
                .resources
                .iter()
                .any(|(res, sub)| res.matches(&resource.resource) && sub.matches(sub_resource))
            && (self.resource_names.is_empty()
                || request
                    .name
                    .as_deref()
                    .is_some_and(|name| self.resource_names.iter().any(|n| n == name)))
    }
}

fn is_namespaced(request: &AdmissionRequest) -> bool {
    request.namespace.as_deref().is_some_and(|n| !n.is_empty())
}

impl ResourceMatcher {
    /// Compiles a `MatchResources` (selectors were checked at load).
    pub fn new(spec: &MatchResources) -> Self {
        ResourceMatcher {
            namespace_selector: spec.namespace_selector.as_ref().map(SelectorMatcher::new),
            object_selector: spec.object_selector.as_ref().map(SelectorMatcher::new),
            rules: spec.resource_rules.clone(),
            include: spec.resource_rules.iter().map(RuleMatcher::new).collect(),
            exclude: spec
                .exclude_resource_rules
                .iter()
                .map(RuleMatcher::new)
                .collect(),
            match_policy: spec.match_policy.unwrap_or_default(),
        }
    }

    fn any_rule(&self, rules: &[RuleMatcher], request: &AdmissionRequest) -> bool {
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
            rule.matches(request, requested, requested_sub)
                || (self.match_policy == MatchPolicy::Equivalent
                    && rule.matches(request, &request.resource, sub))
        })
    }

    fn namespace_matches(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> bool {
        self.namespace_selector
            .as_ref()
            .is_none_or(|selector| selector.matches_namespace(request, namespaces))
    }

    fn object_matches(&self, request: &AdmissionRequest) -> bool {
        let Some(selector) = &self.object_selector else {
            return true;
        };
        selector.matches_objects(request, |object| object.pointer("/metadata/labels"))
    }

    /// Whether the matcher has an `objectSelector` (on UPDATE it matches the old object's
    /// labels too).
    pub fn has_object_selector(&self) -> bool {
        self.object_selector.is_some()
    }

    /// Whether the request is matched. Empty `resourceRules` match every request (a binding's
    /// `matchResources` narrows what the policy matches).
    pub fn matches(&self, request: &AdmissionRequest, namespaces: &dyn NamespaceLookup) -> bool {
        self.namespace_matches(request, namespaces)
            && self.object_matches(request)
            && !self.any_rule(&self.exclude, request)
            && (self.include.is_empty() || self.any_rule(&self.include, request))
    }

    /// [`ResourceMatcher::matches`] in the apiserver's order, which reports a failure to read
    /// the namespace's labels only for a request everything else matches: the
    /// `namespaceSelector` (when it does not match, nothing else is asked), the
    /// `objectSelector`, the excluded and the included rules, then the failure.
    pub fn matches_unless_unreadable(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> Result<bool, ReadFailure> {
        let failure = self
            .namespace_selector
            .as_ref()
            .and_then(|selector| selector.namespace_read_failure(request, namespaces));
        if failure.is_none() && !self.namespace_matches(request, namespaces) {
            return Ok(false);
        }
        if !self.object_matches(request) || !self.matches_resource(request) {
            return Ok(false);
        }
        failure.map_or(Ok(true), Err)
    }

    /// Whether the request's resource and operation are matched, whatever the namespace and
    /// object selectors say: true for every request [`ResourceMatcher::matches`] matches.
    pub fn matches_resource(&self, request: &AdmissionRequest) -> bool {
        !self.any_rule(&self.exclude, request)
            && (self.include.is_empty() || self.any_rule(&self.include, request))
    }

    /// Whether the request may be matched, judged from its envelope and the labels of its
    /// namespace: its resource and operation, and the `namespaceSelector` against
    /// `namespaces` where it reads them there; true for every request
    /// [`ResourceMatcher::matches`] matches with the same `namespaces` (the object selector
    /// and a Namespace's own labels need the objects).
    pub fn may_match(&self, request: &AdmissionRequest, namespaces: &dyn NamespaceLookup) -> bool {
        self.matches_resource(request)
            && self
                .namespace_selector
                .as_ref()
                .is_none_or(|selector| selector.may_match_namespace(request, namespaces))
    }

    /// The webhook rules that reach every request this matcher can match.
    pub fn resource_rules(&self) -> Vec<ResourceRule> {
        self.rules
            .iter()
            .map(|rule| {
                let mut operations: Vec<Operation> = Vec::new();
                for op in &rule.operations {
                    for candidate in OPERATIONS {
                        if op == "*" || op == candidate.as_str() {
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
