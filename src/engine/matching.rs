//! Which requests a native policy applies to: resources and kinds, operations, subresources,
//! namespaces by glob, object and namespace label selectors, and excluded requesters.

use serde_json::Value;

use super::namespaces::{NamespaceLookup, ReadFailure, namespace_label};
use super::pod_specs::{PodSpecLocation, pod_spec_location};
use super::resource_rules::{ResourceRule, pod_spec_resource_rules};
use crate::admission::{AdmissionRequest, Operation};
use crate::patch::PathSegment;
use crate::policy::{LabelSelector, MatchSpec, ResourceMatch};

/// `*` matches any run of characters; everything else matches itself.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            pi += 1;
            mark = ti;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A compiled LabelSelector.
#[derive(Debug, Clone)]
pub struct SelectorMatcher {
    selector: LabelSelector,
}

impl SelectorMatcher {
    /// Wraps a selector whose operators were checked at load.
    pub fn new(selector: &LabelSelector) -> Self {
        SelectorMatcher {
            selector: selector.clone(),
        }
    }

    /// Kubernetes LabelSelector semantics: every matchLabels entry and every expression holds.
    /// `labels` gives the value of a label, borrowed.
    pub fn matches<'l>(&self, labels: &dyn Fn(&str) -> Option<&'l str>) -> bool {
        Self::selects(&self.selector, labels)
    }

    /// The apiserver's object matcher (`MatchObjectSelector`): an empty selector matches every
    /// request; otherwise the labels of the object or of the old object must match, as
    /// `labels_of` reads them from each (a request with neither does not match).
    pub fn matches_objects<'v>(
        &self,
        request: &'v AdmissionRequest,
        labels_of: impl Fn(&'v Value) -> Option<&'v Value>,
    ) -> bool {
        Self::selects_objects(&self.selector, request, labels_of)
    }

    /// [`SelectorMatcher::matches_objects`] for a selector not compiled into a matcher.
    pub fn selects_objects<'v>(
        selector: &LabelSelector,
        request: &'v AdmissionRequest,
        labels_of: impl Fn(&'v Value) -> Option<&'v Value>,
    ) -> bool {
        if selector.match_labels.is_empty() && selector.match_expressions.is_empty() {
            return true;
        }
        [request.object.as_deref(), request.old_object.as_deref()]
            .into_iter()
            .flatten()
            .any(|object| {
                let labels = labels_of(object);
                Self::selects(selector, &|key| {
                    labels.and_then(|l| l.get(key)).and_then(Value::as_str)
                })
            })
    }

    /// The apiserver's namespace matcher (`MatchNamespaceSelector`): whether the selector
    /// matches the labels of the request's namespace, read where
    /// [`namespace_labels_of`] says (`namespaces` for a namespace other than the object).
    pub fn matches_namespace(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> bool {
        match namespace_labels_of(request) {
            NamespaceLabelsOf::NotNamespaced => true,
            NamespaceLabelsOf::Object(object) => self.matches(&|key| object_label(object, key)),
            NamespaceLabelsOf::Namespace(name) => {
                let labels = namespaces.labels_ref(name);
                self.matches(&|key| namespace_label(labels.as_ref(), name, key))
            }
        }
    }

    /// Why the labels [`SelectorMatcher::matches_namespace`] reads could not be had: the read
    /// of the request's namespace failed (the apiserver's namespace matcher then answers an
    /// internal error). An empty selector reads no labels and never fails.
    pub fn namespace_read_failure(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> Option<ReadFailure> {
        if self.selector.match_labels.is_empty() && self.selector.match_expressions.is_empty() {
            return None;
        }
        match namespace_labels_of(request) {
            NamespaceLabelsOf::Namespace(name) => namespaces.read_failure(name),
            NamespaceLabelsOf::NotNamespaced | NamespaceLabelsOf::Object(_) => None,
        }
    }

    /// Whether [`SelectorMatcher::matches_namespace`] may be true, judged without the objects:
    /// true when the labels are an object's, or could not be read (the request is decided, and
    /// answered with the failure).
    pub fn may_match_namespace(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> bool {
        matches!(namespace_labels_of(request), NamespaceLabelsOf::Object(_))
            || self.matches_namespace(request, namespaces)
            || self.namespace_read_failure(request, namespaces).is_some()
    }

    /// [`SelectorMatcher::matches`] for a selector not compiled into a matcher.
    pub fn selects<'l>(selector: &LabelSelector, labels: &dyn Fn(&str) -> Option<&'l str>) -> bool {
        let listed = |values: &[String], value: &str| values.iter().any(|v| v == value);
        selector
            .match_labels
            .iter()
            .all(|(key, value)| labels(key) == Some(value.as_str()))
            && selector.match_expressions.iter().all(|requirement| {
                let value = labels(&requirement.key);
                match requirement.operator.as_str() {
                    "In" => value.is_some_and(|v| listed(&requirement.values, v)),
                    "NotIn" => value.is_none_or(|v| !listed(&requirement.values, v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }
}

/// Where a `namespaceSelector` reads the labels of a request's namespace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NamespaceLabelsOf<'r> {
    /// Nowhere: the request is cluster-scoped and not on `namespaces`, and a namespace
    /// selector matches it.
    NotNamespaced,
    /// The labels of the Namespace in the request's object (or, for a request on
    /// `namespaces` that names no namespace, such as one built offline, in the object it is
    /// about).
    Object(Option<&'r Value>),
    /// Namespace `name`, as the namespace lookup has it.
    Namespace(&'r str),
}

/// Where the apiserver's namespace matcher (k8s.io/apiserver
/// `pkg/admission/plugin/webhook/predicates/namespace`) reads the labels a namespace selector
/// is matched on: a CREATE or UPDATE of a namespace itself (resource `namespaces`, no
/// subresource) on the object's own labels, since the namespace in the cluster does not have
/// them yet (an UPDATE's `namespace` names the namespace updated); any other request naming a
/// namespace on that namespace's; a cluster-scoped request other than on `namespaces` is
/// matched whatever the selector says.
pub fn namespace_labels_of(request: &AdmissionRequest) -> NamespaceLabelsOf<'_> {
    let on_namespaces = request.resource.resource == "namespaces";
    let namespace = request.namespace.as_deref().unwrap_or("");
    if on_namespaces
        && request.sub_resource.as_deref().unwrap_or("").is_empty()
        && matches!(request.operation, Operation::Create | Operation::Update)
    {
        NamespaceLabelsOf::Object(request.object.as_deref())
    } else if !namespace.is_empty() {
        NamespaceLabelsOf::Namespace(namespace)
    } else if on_namespaces {
        NamespaceLabelsOf::Object(request.subject())
    } else {
        NamespaceLabelsOf::NotNamespaced
    }
}

fn object_label<'a>(object: Option<&'a Value>, key: &str) -> Option<&'a str> {
    object?.get("metadata")?.get("labels")?.get(key)?.as_str()
}

/// The labels an object selector reads: the object's, or its pod template's.
fn template_labels(object: &Value, view: MatchedView) -> Option<&Value> {
    let MatchedView::PodTemplate(location) = view else {
        return object.pointer("/metadata/labels");
    };
    let mut node = object;
    for segment in &location.path[..location.path.len() - 1] {
        let PathSegment::Key(key) = segment else {
            return None;
        };
        node = node.get(key)?;
    }
    node.pointer("/metadata/labels")
}

/// How a policy applies to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchedView {
    /// To the object itself.
    Object,
    /// To the pod template of a workload, because the policy matches Pods.
    PodTemplate(PodSpecLocation),
}

/// A compiled match block.
#[derive(Debug, Clone)]
pub struct Matcher {
    resources: Vec<ResourceMatch>,
    operations: Vec<Operation>,
    include_namespaces: Vec<String>,
    exclude_namespaces: Vec<String>,
    object_selector: Option<SelectorMatcher>,
    namespace_selector: Option<SelectorMatcher>,
    excluded_users: Vec<String>,
    excluded_groups: Vec<String>,
    excluded_service_accounts: Vec<(String, String)>,
    pod_templates: bool,
}

fn any_or(list: &[String], value: &str) -> bool {
    list.iter()
        .any(|item| item == "*" || same_text(item, value))
}

/// `a == b`, with empty strings (the core API group, no subresource) compared without a
/// call to `memcmp`: glibc's AVX-512 `memcmp` reads an empty string's dangling pointer under
/// a zero mask, which the CPU serves through a slow fault-suppression assist (over 100 ns a
/// comparison, measured).
pub(crate) fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

impl Matcher {
    /// Compiles a match block (already validated at load).
    pub fn new(spec: &MatchSpec, pod_templates: bool) -> Self {
        Matcher {
            resources: spec.resources.clone(),
            operations: spec.operations.clone(),
            include_namespaces: spec.namespaces.include.clone(),
            exclude_namespaces: spec.namespaces.exclude.clone(),
            object_selector: spec.object_selector.as_ref().map(SelectorMatcher::new),
            namespace_selector: spec.namespace_selector.as_ref().map(SelectorMatcher::new),
            excluded_users: spec.exclude.users.clone(),
            excluded_groups: spec.exclude.groups.clone(),
            excluded_service_accounts: spec
                .exclude
                .service_accounts
                .iter()
                .filter_map(|sa| sa.split_once('/'))
                .map(|(ns, name)| (ns.to_owned(), name.to_owned()))
                .collect(),
            pod_templates,
        }
    }

    fn resource_matches(&self, request: &AdmissionRequest) -> bool {
        let subresource = request.sub_resource.as_deref().unwrap_or("");
        self.resources.iter().any(|entry| {
            (entry.group == "*" || same_text(&entry.group, &request.kind.group))
                && any_or(&entry.versions, &request.kind.version)
                && (any_or(&entry.kinds, &request.kind.kind)
                    || any_or(&entry.resources, &request.resource.resource))
                && (subresource.is_empty() || any_or(&entry.subresources, subresource))
        })
    }

    /// Whether the policy names Pods, so that it also reaches pod templates.
    fn matches_pods(&self) -> bool {
        self.resources.iter().any(|entry| {
            (entry.group.is_empty() || entry.group == "*")
                && (entry.kinds.iter().any(|k| k == "Pod")
                    || entry.resources.iter().any(|r| r == "pods"))
        })
    }

    fn requester_excluded(&self, request: &AdmissionRequest) -> bool {
        let user = &request.user_info;
        if self.excluded_users.contains(&user.username) {
            return true;
        }
        if !self.excluded_groups.is_empty()
            && user.groups.iter().any(|g| self.excluded_groups.contains(g))
        {
            return true;
        }
        if self.excluded_service_accounts.is_empty() {
            return false;
        }
        if let Some(account) = user.username.strip_prefix("system:serviceaccount:")
            && let Some((namespace, name)) = account.split_once(':')
        {
            return self
                .excluded_service_accounts
                .iter()
                .any(|(ns, n)| glob_match(ns, namespace) && glob_match(n, name));
        }
        false
    }

    /// Whether the `namespaces` globs let the request's namespace through (a cluster-scoped
    /// request has none, and they do not apply).
    fn namespace_name_allowed(&self, request: &AdmissionRequest) -> bool {
        request
            .namespace
            .as_deref()
            .filter(|namespace| !namespace.is_empty())
            .is_none_or(|namespace| self.namespace_name_matches(namespace))
    }

    /// Whether the `namespaces` globs (include, then exclude) let `namespace` through.
    fn namespace_name_matches(&self, namespace: &str) -> bool {
        (self.include_namespaces.is_empty()
            || self
                .include_namespaces
                .iter()
                .any(|p| glob_match(p, namespace)))
            && !self
                .exclude_namespaces
                .iter()
                .any(|p| glob_match(p, namespace))
    }

    fn object_matches(&self, request: &AdmissionRequest, view: MatchedView) -> bool {
        let Some(selector) = &self.object_selector else {
            return true;
        };
        // On UPDATE the apiserver matches when either the old or the new object matches.
        selector.matches_objects(request, |object| template_labels(object, view))
    }

    /// Whether the policy may apply to `request`, from its envelope alone (operation,
    /// resource, requester, the namespace's name against the `namespaces` globs and its
    /// labels from `namespaces` against the `namespaceSelector`): true for every request
    /// [`Matcher::matches`] matches with the same `namespaces`; the objects' labels (an
    /// `objectSelector`, a Namespace's own labels) are not consulted.
    pub fn may_match(&self, request: &AdmissionRequest, namespaces: &dyn NamespaceLookup) -> bool {
        self.operations.contains(&request.operation)
            && self.namespace_name_allowed(request)
            && self
                .namespace_selector
                .as_ref()
                .is_none_or(|selector| selector.may_match_namespace(request, namespaces))
            && (self.resource_matches(request)
                || (self.pod_templates
                    && self.matches_pods()
                    && pod_spec_location(request).is_some_and(|location| location.path.len() > 1)))
            && !self.requester_excluded(request)
    }

    /// How the policy applies to `request`, or `None` when it does not.
    pub fn matches(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> Option<MatchedView> {
        self.matches_unless_unreadable(request, namespaces)
            .ok()
            .flatten()
    }

    /// [`Matcher::matches`], except that when everything else matches and the namespace labels
    /// its `namespaceSelector` reads could not be read, that read's failure.
    pub fn matches_unless_unreadable(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> Result<Option<MatchedView>, ReadFailure> {
        if !self.operations.contains(&request.operation) {
            return Ok(None);
        }
        let view = if self.resource_matches(request) {
            MatchedView::Object
        } else if self.pod_templates && self.matches_pods() {
            let Some(location) = pod_spec_location(request) else {
                return Ok(None);
            };
            if location.path.len() == 1 {
                return Ok(None);
            }
            MatchedView::PodTemplate(location)
        } else {
            return Ok(None);
        };
        if self.requester_excluded(request)
            || !self.namespace_name_allowed(request)
            || !self.object_matches(request, view)
        {
            return Ok(None);
        }
        let Some(selector) = &self.namespace_selector else {
            return Ok(Some(view));
        };
        if let Some(failure) = selector.namespace_read_failure(request, namespaces) {
            return Err(failure);
        }
        Ok(selector
            .matches_namespace(request, namespaces)
            .then_some(view))
    }

    /// What a webhook must register for this match block.
    pub fn resource_rules(&self) -> Vec<ResourceRule> {
        let mut rules = Vec::new();
        for entry in &self.resources {
            let mut resources: Vec<String> = entry.resources.clone();
            if resources.is_empty() {
                resources = entry
                    .kinds
                    .iter()
                    .map(|kind| plural_resource(kind))
                    .collect();
            }
            let mut with_subresources = resources.clone();
            for resource in &resources {
                for subresource in &entry.subresources {
                    with_subresources.push(format!("{resource}/{subresource}"));
                }
            }
            rules.push(ResourceRule {
                api_groups: vec![entry.group.clone()],
                api_versions: entry.versions.clone(),
                resources: with_subresources,
                operations: self.operations.clone(),
            });
        }
        if self.pod_templates && self.matches_pods() {
            rules.extend(pod_spec_resource_rules(&self.operations, false));
        }
        rules
    }
}

/// The resource name of a kind: lower case, pluralised the way Kubernetes' built-in kinds are.
/// Policies matching custom resources by kind should name `resources` for exact registration.
pub fn plural_resource(kind: &str) -> String {
    match kind {
        "*" => "*".into(),
        _ if kind.eq_ignore_ascii_case("endpoints") => "endpoints".into(),
        _ => crate::kubernetes::names::plural_resource(kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::parse_review;
    use crate::engine::{NoNamespaces, StaticNamespaces};
    use crate::policy::{LabelSelectorRequirement, NamespaceFilter, SubjectExclusions};
    use serde_json::json;

    fn request(
        kind: &str,
        group: &str,
        namespace: &str,
        operation: &str,
        object: Value,
    ) -> AdmissionRequest {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "kind": {"group": group, "version": "v1", "kind": kind},
                "resource": {"group": group, "version": "v1", "resource": plural_resource(kind)},
                "namespace": namespace, "operation": operation, "object": object,
                "userInfo": {"username": "system:serviceaccount:ci:deployer", "groups": ["system:serviceaccounts"]},
            }
        });
        parse_review(review.to_string().as_bytes()).unwrap().request
    }

    fn spec(resources: Vec<ResourceMatch>) -> MatchSpec {
        MatchSpec {
            resources,
            operations: vec![Operation::Create, Operation::Update],
            namespaces: NamespaceFilter::default(),
            object_selector: None,
            namespace_selector: None,
            exclude: SubjectExclusions::default(),
        }
    }

    fn pods() -> ResourceMatch {
        ResourceMatch {
            group: String::new(),
            versions: vec!["*".into()],
            kinds: vec!["Pod".into()],
            resources: vec![],
            subresources: vec![],
        }
    }

    #[test]
    fn globs() {
        for (pattern, text, expected) in [
            ("team-*", "team-a", true),
            ("team-*", "team-", true),
            ("team-*", "staff", false),
            ("*", "", true),
            ("a*b*c", "aXXbYc", true),
            ("a*b*c", "aXXbY", false),
            ("kube-system", "kube-system", true),
        ] {
            assert_eq!(glob_match(pattern, text), expected, "{pattern} {text}");
        }
    }

    #[test]
    fn kinds_operations_and_pod_templates() {
        let matcher = Matcher::new(&spec(vec![pods()]), true);
        let pod = request("Pod", "", "a", "CREATE", json!({}));
        assert_eq!(
            matcher.matches(&pod, &NoNamespaces),
            Some(MatchedView::Object)
        );
        let delete = request("Pod", "", "a", "DELETE", json!({}));
        assert_eq!(matcher.matches(&delete, &NoNamespaces), None);
        let deployment = request("Deployment", "apps", "a", "CREATE", json!({}));
        assert!(matches!(
            matcher.matches(&deployment, &NoNamespaces),
            Some(MatchedView::PodTemplate(_))
        ));
        let no_templates = Matcher::new(&spec(vec![pods()]), false);
        assert_eq!(no_templates.matches(&deployment, &NoNamespaces), None);
        let config_map = request("ConfigMap", "", "a", "CREATE", json!({}));
        assert_eq!(matcher.matches(&config_map, &NoNamespaces), None);
        let mut status = request("Pod", "", "a", "UPDATE", json!({}));
        status.sub_resource = Some("status".into());
        assert_eq!(matcher.matches(&status, &NoNamespaces), None);
    }

    #[test]
    fn namespaces_selectors_and_exclusions() {
        let mut match_spec = spec(vec![pods()]);
        match_spec.namespaces.exclude = vec!["kube-*".into()];
        match_spec.namespace_selector = Some(LabelSelector {
            match_labels: Default::default(),
            match_expressions: vec![LabelSelectorRequirement {
                key: "env".into(),
                operator: "In".into(),
                values: vec!["prod".into()],
            }],
        });
        match_spec.object_selector = Some(LabelSelector {
            match_labels: [("app".to_owned(), "web".to_owned())].into(),
            match_expressions: vec![],
        });
        let matcher = Matcher::new(&match_spec, true);
        let mut namespaces = StaticNamespaces::default();
        namespaces.insert("shop", [("env".to_owned(), "prod".to_owned())].into());
        namespaces.insert("dev", [("env".to_owned(), "dev".to_owned())].into());
        let web = json!({"metadata": {"labels": {"app": "web"}}});
        assert!(
            matcher
                .matches(
                    &request("Pod", "", "shop", "CREATE", web.clone()),
                    &namespaces
                )
                .is_some()
        );
        assert!(
            matcher
                .matches(
                    &request("Pod", "", "dev", "CREATE", web.clone()),
                    &namespaces
                )
                .is_none()
        );
        assert!(
            matcher
                .matches(
                    &request("Pod", "", "unknown", "CREATE", web.clone()),
                    &namespaces
                )
                .is_none()
        );
        assert!(
            matcher
                .matches(
                    &request("Pod", "", "kube-system", "CREATE", web),
                    &namespaces
                )
                .is_none()
        );
        let other = json!({"metadata": {"labels": {"app": "db"}}});
        assert!(
            matcher
                .matches(&request("Pod", "", "shop", "CREATE", other), &namespaces)
                .is_none()
        );

        let mut excluding = spec(vec![pods()]);
        excluding.exclude.service_accounts = vec!["ci/*".into()];
        let matcher = Matcher::new(&excluding, true);
        assert!(
            matcher
                .matches(&request("Pod", "", "a", "CREATE", json!({})), &NoNamespaces)
                .is_none()
        );
    }

    #[test]
    fn a_namespace_selector_reads_a_namespace_update_on_the_object_as_the_apiserver_does() {
        let gold = json!({"metadata": {"name": "team", "labels": {"tier": "gold"}}});
        let plain = json!({"metadata": {"name": "team"}});
        let old_gold = |operation: &str, object: Value| {
            let mut request = request("Namespace", "", "team", operation, object);
            request.old_object = Some(gold.clone().into());
            request
        };
        // The apiserver names the namespace updated or deleted in `namespace`; a CREATE
        // names none.
        let update_to_plain = old_gold("UPDATE", plain.clone());
        let update_to_gold = old_gold("UPDATE", gold.clone());
        let create_gold = request("Namespace", "", "", "CREATE", gold.clone());
        let mut delete = old_gold("DELETE", Value::Null);
        delete.object = None;
        let mut status = old_gold("UPDATE", gold.clone());
        status.sub_resource = Some("status".into());
        let pod = request("Pod", "", "team", "CREATE", json!({}));
        let role = request(
            "ClusterRole",
            "rbac.authorization.k8s.io",
            "",
            "CREATE",
            json!({}),
        );
        assert_eq!(
            namespace_labels_of(&update_to_plain),
            NamespaceLabelsOf::Object(Some(&plain))
        );
        assert_eq!(
            namespace_labels_of(&create_gold),
            NamespaceLabelsOf::Object(Some(&gold))
        );
        assert_eq!(
            namespace_labels_of(&delete),
            NamespaceLabelsOf::Namespace("team")
        );
        assert_eq!(
            namespace_labels_of(&status),
            NamespaceLabelsOf::Namespace("team")
        );
        assert_eq!(
            namespace_labels_of(&pod),
            NamespaceLabelsOf::Namespace("team")
        );
        assert_eq!(namespace_labels_of(&role), NamespaceLabelsOf::NotNamespaced);

        // The namespace as stored still has its old labels.
        let mut stored = StaticNamespaces::default();
        stored.insert(
            "team",
            [
                ("tier".to_owned(), "gold".to_owned()),
                ("kubernetes.io/metadata.name".to_owned(), "team".to_owned()),
            ]
            .into(),
        );
        let selector = SelectorMatcher::new(&LabelSelector {
            match_labels: [("tier".to_owned(), "gold".to_owned())].into(),
            match_expressions: vec![],
        });
        for (request, matched) in [
            (&update_to_plain, false),
            (&update_to_gold, true),
            (&create_gold, true),
            (&delete, true),
            (&pod, true),
            (&role, true),
        ] {
            assert_eq!(
                selector.matches_namespace(request, &stored),
                matched,
                "{:?} {:?}",
                request.operation,
                request.object
            );
            // Without the objects, only a request matched on its object may still match.
            let envelope = AdmissionRequest {
                object: None,
                old_object: None,
                ..request.clone()
            };
            assert!(!matched || selector.may_match_namespace(&envelope, &stored));
        }
        let mut moved = pod.clone();
        moved.namespace = Some("elsewhere".into());
        assert!(!selector.may_match_namespace(&moved, &stored));
    }

    #[test]
    fn plurals() {
        for (kind, plural) in [
            ("Pod", "pods"),
            ("Ingress", "ingresses"),
            ("NetworkPolicy", "networkpolicies"),
            ("StorageClass", "storageclasses"),
            ("Endpoints", "endpoints"),
            ("Gateway", "gateways"),
        ] {
            assert_eq!(plural_resource(kind), plural);
        }
    }

    #[test]
    fn object_selectors_match_as_the_apiservers_object_matcher() {
        fn labels(object: &Value) -> Option<&Value> {
            object.pointer("/metadata/labels")
        }
        let team: LabelSelector =
            serde_json::from_value(json!({"matchLabels": {"team": "a"}})).unwrap();
        let empty = LabelSelector::default();
        let labelled = json!({"metadata": {"labels": {"team": "a"}}});
        let mut connect = request("Pod", "", "ns", "CONNECT", Value::Null);
        connect.object = None;
        // An empty selector matches every request, one without objects included.
        assert!(SelectorMatcher::selects_objects(&empty, &connect, labels));
        assert!(!SelectorMatcher::selects_objects(&team, &connect, labels));
        let mut update = request("Pod", "", "ns", "UPDATE", json!({"metadata": {}}));
        assert!(!SelectorMatcher::selects_objects(&team, &update, labels));
        update.old_object = Some(labelled.clone().into());
        assert!(SelectorMatcher::new(&team).matches_objects(&update, labels));
    }
}
