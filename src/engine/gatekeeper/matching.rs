//! Which requests a Constraint applies to: its `spec.match`, as Gatekeeper v3.23 matches it at
//! admission (`pkg/target/matcher.go` `Matcher.Match` over `pkg/mutation/match/match.go`
//! `Matches`), with the request made into what it matches as the webhook makes it
//! (`pkg/webhook/policy.go` `createReviewForRequest`, `pkg/target/target.go` `handleReview`).

use crate::admission::object_view::{JsonKind, JsonRead, JsonRef, unique_members};
use crate::admission::{AdmissionRequest, GroupVersionKind, Operation, RequestObject};
use crate::engine::matching::{SelectorMatcher, same_text};
use crate::engine::{NamespaceLabels, NamespaceLookup, ReadFailure};
use crate::kubernetes::names;
use crate::kubernetes::vocabulary::LabelSelector;
use crate::policy::gatekeeper::Match;

/// The pattern Gatekeeper's CRD gives `name` and each `namespaces` and `excludedNamespaces`
/// entry (`pkg/wildcard` `Wildcard`).
const WILDCARD_PATTERN: &str = r"^\*?[-:a-z0-9]*\*?$";

/// A compiled `spec.match`.
///
/// A request is matched as Gatekeeper's webhook matches it:
///
/// - What is matched is each of the request's objects (`Matcher.Match`, `matchAny`): `object`
///   then `oldObject`, the constraint applying when either matches every field, so on UPDATE
///   every field (not only `labelSelector`) may be met by the new or the old object. On DELETE
///   `object` is replaced by `oldObject` (`setObjectOnDelete`), so only the old object counts.
/// - The request's namespace is the Namespace Gatekeeper reads for it
///   (`createReviewForRequest`): the one the request names, except for a request on a core
///   `Namespace`, whose `namespace` Gatekeeper clears; a cluster-scoped request has none.
/// - The fields, in `Matches`' order, each met when absent or empty:
///   - `kinds` (`kindsMatch`): some entry whose `kinds` is empty, holds `*` or the object's
///     kind, and whose `apiGroups` is empty, holds `*` or its group. The object's `apiVersion`
///     and `kind` are read as the request's `kind` (the engine has checked they agree).
///   - `scope` (`scopeMatch`): `Cluster` matches a Namespace and any object with neither a
///     namespace nor a `metadata.namespace`; `Namespaced` any other object; `*` all.
///   - `namespaces` and `excludedNamespaces` (`namespacesMatch`, `excludedNamespacesMatch`):
///     on a Namespace's own name, else the request's namespace when it is known (in the
///     namespace lookup), else the object's `metadata.namespace`; an object with none of these
///     (cluster-scoped) is neither included nor excluded. Entries are `pkg/wildcard`
///     `Wildcard.Matches`: `abc*` a prefix, `*abc` a suffix, `*abc*` a substring (`*` all),
///     anything else the whole name; no `*` in between.
///   - `labelSelector` (`labelSelectorMatch`): the object's labels.
///   - `namespaceSelector` (`namespaceSelectorMatch`): a Namespace's own labels; the labels of
///     the known namespace; an object with no namespace anywhere matches; a namespaced object
///     whose namespace is not known is an error (see [`ConstraintMatcher::match_error`]).
///   - `name` (`namesMatch`): `Wildcard.Matches` on `metadata.name`, or
///     `Wildcard.MatchesGenerateName` on `metadata.generateName` (`abc*` and `*abc*` only).
///   - `source` (`sourceMatch`): requests and objects are `Original`, the objects an
///     ExpansionTemplate generates from them `Generated`; `All` (the default) matches both.
/// - Labels, names and namespaces are read as `unstructured` reads them: a `metadata.labels`
///   with a value that is not a string is no labels at all.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConstraintMatcher {
    /// `None`: no `spec.match`, which Gatekeeper's `Matcher.Match` matches to every request
    /// without reading it.
    criteria: Option<Criteria>,
}

/// The fields of a `spec.match`.
#[derive(Debug, Clone)]
struct Criteria {
    kinds: Vec<KindsEntry>,
    scope: Scope,
    namespaces: Vec<Wildcard>,
    excluded_namespaces: Vec<Wildcard>,
    label_selector: Option<LabelSelector>,
    namespace_selector: Option<LabelSelector>,
    name: Option<Wildcard>,
    source: SourceMatch,
}

/// `spec.match.source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SourceMatch {
    All,
    Original,
    Generated,
}

impl SourceMatch {
    fn admits(self, generated: bool) -> bool {
        match self {
            SourceMatch::All => true,
            SourceMatch::Original => !generated,
            SourceMatch::Generated => generated,
        }
    }
}

/// One `kinds` entry; an empty list (or one holding `*`) is any.
#[derive(Debug, Clone)]
struct KindsEntry {
    api_groups: Vec<String>,
    kinds: Vec<String>,
}

impl KindsEntry {
    fn matches(&self, group: &str, kind: &str) -> bool {
        (self.kinds.is_empty() || self.kinds.iter().any(|k| k == kind))
            && (self.api_groups.is_empty() || self.api_groups.iter().any(|g| same_text(g, group)))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Any,
    Cluster,
    Namespaced,
}

/// `pkg/wildcard` `Wildcard`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wildcard {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
}

impl Wildcard {
    fn new(text: &str) -> Self {
        match (text.strip_prefix('*'), text.strip_suffix('*')) {
            (Some(rest), Some(_)) => {
                Wildcard::Contains(rest.strip_suffix('*').unwrap_or(rest).to_owned())
            }
            (Some(suffix), None) => Wildcard::Suffix(suffix.to_owned()),
            (None, Some(prefix)) => Wildcard::Prefix(prefix.to_owned()),
            (None, None) => Wildcard::Exact(text.to_owned()),
        }
    }

    /// `Wildcard.Matches`.
    pub(crate) fn matches(&self, candidate: &str) -> bool {
        match self {
            Wildcard::Exact(text) => candidate == text,
            Wildcard::Prefix(prefix) => candidate.starts_with(prefix.as_str()),
            Wildcard::Suffix(suffix) => candidate.ends_with(suffix.as_str()),
            Wildcard::Contains(part) => candidate.contains(part.as_str()),
        }
    }

    /// `Wildcard.MatchesGenerateName`: a generated name ends in random characters, so only a
    /// prefix or a substring can be judged on its `generateName`.
    fn matches_generate_name(&self, candidate: &str) -> bool {
        match self {
            Wildcard::Prefix(prefix) => candidate.starts_with(prefix.as_str()),
            Wildcard::Contains(part) => candidate.contains(part.as_str()),
            Wildcard::Exact(_) | Wildcard::Suffix(_) => false,
        }
    }
}

/// Whether `text` matches [`WILDCARD_PATTERN`].
fn is_wildcard(text: &str) -> bool {
    let text = text.strip_prefix('*').unwrap_or(text);
    let text = text.strip_suffix('*').unwrap_or(text);
    text.bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b':')
}

/// The wildcard `text`, or the error at `field` Gatekeeper's schema gives when it is not one.
pub(crate) fn wildcard(field: String, text: &str) -> Result<Wildcard, (String, String)> {
    if is_wildcard(text) {
        Ok(Wildcard::new(text))
    } else {
        Err((
            field,
            format!("Invalid value: {text:?}: should match '{WILDCARD_PATTERN}'"),
        ))
    }
}

/// What Gatekeeper's target rejects in a selector (`ValidateConstraint`:
/// `ValidateLabelSelector`), as `(field under the selector, message)`.
fn selector_error(selector: &LabelSelector) -> Option<(String, String)> {
    for (key, value) in &selector.match_labels {
        if let Some(message) = names::qualified_name_errors(key).into_iter().next() {
            return Some((
                "matchLabels".into(),
                format!("Invalid value: {key:?}: {message}"),
            ));
        }
        if let Some(message) = names::label_value_errors(value).into_iter().next() {
            return Some((
                "matchLabels".into(),
                format!("Invalid value: {value:?}: {message}"),
            ));
        }
    }
    for (i, requirement) in selector.match_expressions.iter().enumerate() {
        let at = format!("matchExpressions[{i}]");
        match requirement.operator.as_str() {
            "In" | "NotIn" if requirement.values.is_empty() => {
                return Some((
                    format!("{at}.values"),
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'".into(),
                ));
            }
            "Exists" | "DoesNotExist" if !requirement.values.is_empty() => {
                return Some((
                    format!("{at}.values"),
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                        .into(),
                ));
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => {
                return Some((
                    format!("{at}.operator"),
                    format!(
                        "Invalid value: {other:?}: not a valid selector operator (In, NotIn, Exists or DoesNotExist)"
                    ),
                ));
            }
        }
        if let Some(message) = names::qualified_name_errors(&requirement.key)
            .into_iter()
            .next()
        {
            return Some((
                format!("{at}.key"),
                format!("Invalid value: {:?}: {message}", requirement.key),
            ));
        }
        for (j, value) in requirement.values.iter().enumerate() {
            if let Some(message) = names::label_value_errors(value).into_iter().next() {
                return Some((
                    format!("{at}.values[{j}]"),
                    format!("Invalid value: {value:?}: {message}"),
                ));
            }
        }
    }
    None
}

/// Why Gatekeeper's matcher fails on a request: the constraint is then not evaluated but
/// gives an autoreject result.
#[derive(Debug, Clone, PartialEq, Eq)]
enum MatchError {
    /// `namespaceSelectorMatch` on a namespaced object whose Namespace is not known; the name
    /// of the object.
    MissingNamespace(String),
    /// `matchAny` without `object` or `oldObject`.
    NoObject,
}

impl MatchError {
    /// The result's message, as frameworks' `constraintMatchResult.ToResult` words it.
    fn message(&self) -> String {
        match self {
            MatchError::MissingNamespace(name) => format!(
                "unable to match constraints: error matching the requested object: {name} \
                 :failed to run Match criteria: namespace selector for namespace-scoped object \
                 but missing Namespace"
            ),
            MatchError::NoObject => "unable to match constraints: invalid request object: \
                                     neither object nor old object are defined"
                .to_owned(),
        }
    }
}

/// What the webhook matches a request's objects with.
struct Target<'r> {
    gvk: &'r GroupVersionKind,
    /// `IsNamespace`: a core `Namespace`.
    is_namespace: bool,
    /// The namespace Gatekeeper reads for the request (`createReviewForRequest`).
    namespace: Option<&'r str>,
}

impl<'r> Target<'r> {
    fn of(request: &'r AdmissionRequest) -> Self {
        let is_namespace = request.kind.group.is_empty() && request.kind.kind == "Namespace";
        Target {
            gvk: &request.kind,
            is_namespace,
            namespace: request
                .namespace
                .as_deref()
                .filter(|n| !is_namespace && !n.is_empty()),
        }
    }
}

/// An object's metadata as `unstructured`'s getters read it.
struct ObjectMetadata<'v> {
    name: &'v str,
    generate_name: &'v str,
    namespace: &'v str,
    labels: Option<JsonRef<'v>>,
}

impl<'v> ObjectMetadata<'v> {
    fn of(object: JsonRef<'v>) -> Self {
        let metadata = object
            .get("metadata")
            .filter(|m| m.kind() == JsonKind::Object);
        let text = |field: &str| {
            metadata
                .and_then(|m| m.get(field))
                .and_then(JsonRead::as_str)
                .unwrap_or("")
        };
        ObjectMetadata {
            name: text("name"),
            generate_name: text("generateName"),
            namespace: text("namespace"),
            // `NestedStringMap`: one value that is not a string and there are none (of
            // duplicate keys, the value decoded last counts).
            labels: metadata
                .and_then(|m| m.get("labels"))
                .filter(|labels| labels.kind() == JsonKind::Object)
                .filter(|labels| {
                    unique_members(*labels).all(|(_, value)| value.kind() == JsonKind::String)
                }),
        }
    }

    fn selected_by(&self, selector: &LabelSelector) -> bool {
        SelectorMatcher::selects(selector, &|key| {
            self.labels
                .and_then(|l| l.get(key))
                .and_then(JsonRead::as_str)
        })
    }
}

/// A request's known namespace: its name and labels.
type KnownNamespace<'a> = Option<(&'a str, NamespaceLabels<'a>)>;

impl Criteria {
    fn kinds_match(&self, gvk: &GroupVersionKind) -> bool {
        self.kinds.is_empty()
            || self
                .kinds
                .iter()
                .any(|entry| entry.matches(&gvk.group, &gvk.kind))
    }

    /// `Matches` for one object.
    fn matches_object(
        &self,
        target: &Target<'_>,
        namespace: &KnownNamespace<'_>,
        object: &ObjectMetadata<'_>,
        generated: bool,
    ) -> Result<bool, MatchError> {
        if !self.kinds_match(target.gvk) {
            return Ok(false);
        }
        let has_namespace = !object.namespace.is_empty() || namespace.is_some();
        let in_scope = match self.scope {
            Scope::Any => true,
            Scope::Cluster => target.is_namespace || !has_namespace,
            Scope::Namespaced => !target.is_namespace && has_namespace,
        };
        if !in_scope {
            return Ok(false);
        }
        let namespace_name = if target.is_namespace {
            Some(object.name)
        } else if let Some((name, _)) = namespace {
            Some(*name)
        } else {
            Some(object.namespace).filter(|n| !n.is_empty())
        };
        if let Some(name) = namespace_name {
            if !self.namespaces.is_empty() && !self.namespaces.iter().any(|w| w.matches(name)) {
                return Ok(false);
            }
            if self.excluded_namespaces.iter().any(|w| w.matches(name)) {
                return Ok(false);
            }
        }
        if let Some(selector) = &self.label_selector
            && !object.selected_by(selector)
        {
            return Ok(false);
        }
        if let Some(selector) = &self.namespace_selector {
            let selected = if target.is_namespace {
                object.selected_by(selector)
            } else if let Some((_, labels)) = namespace {
                SelectorMatcher::selects(selector, &|key| labels.get(key))
            } else if object.namespace.is_empty() {
                true
            } else {
                return Err(MatchError::MissingNamespace(object.name.to_owned()));
            };
            if !selected {
                return Ok(false);
            }
        }
        if let Some(name) = &self.name
            && !name.matches(object.name)
            && !name.matches_generate_name(object.generate_name)
        {
            return Ok(false);
        }
        Ok(self.source.admits(generated))
    }

    /// [`Criteria::matches_object`] for any object the request may carry: the object's labels,
    /// name and `metadata.namespace`, and a Namespace's own name and labels, are unknown.
    /// `true` also when the match may fail with an error.
    fn may_match_any_object(&self, target: &Target<'_>, namespace: &KnownNamespace<'_>) -> bool {
        if !self.kinds_match(target.gvk) {
            return false;
        }
        let in_scope = match self.scope {
            Scope::Any => true,
            Scope::Cluster => target.is_namespace || namespace.is_none(),
            Scope::Namespaced => !target.is_namespace,
        };
        if !in_scope {
            return false;
        }
        if let (false, Some((name, labels))) = (target.is_namespace, namespace) {
            if !self.namespaces.is_empty() && !self.namespaces.iter().any(|w| w.matches(name)) {
                return false;
            }
            if self.excluded_namespaces.iter().any(|w| w.matches(name)) {
                return false;
            }
            if let Some(selector) = &self.namespace_selector
                && !SelectorMatcher::selects(selector, &|key| labels.get(key))
            {
                return false;
            }
        } else if !target.is_namespace && self.namespace_selector.is_some() {
            // A namespaced object of an unknown namespace: an error.
            return true;
        }
        self.source.admits(false)
    }
}

impl ConstraintMatcher {
    /// Compiles `spec.match` (`None`: matches everything); what Gatekeeper refuses when a
    /// constraint is added is an error naming the field under `spec.match`: a selector that
    /// `ValidateConstraint` rejects (`ValidateLabelSelector`: operator, values, label keys and
    /// values); a `name`, `namespaces` or `excludedNamespaces` entry not matching the CRD's
    /// pattern `^\*?[-:a-z0-9]*\*?$`; a `source` other than `All`, `Original` and `Generated`
    /// (the CRD's enum). Also refused, though Gatekeeper accepts it and matches it as `*`
    /// (`scopeMatch`'s default): a `scope` other than `*`, `Cluster` and `Namespaced`.
    pub(crate) fn new(spec: Option<&Match>) -> Result<Self, (String, String)> {
        let Some(spec) = spec else {
            return Ok(ConstraintMatcher { criteria: None });
        };
        let scope = match spec.scope.as_deref().unwrap_or("") {
            "" | "*" => Scope::Any,
            "Cluster" => Scope::Cluster,
            "Namespaced" => Scope::Namespaced,
            other => {
                return Err((
                    "spec.match.scope".into(),
                    format!(
                        "Unsupported value: {other:?}: supported values: \"*\", \"Cluster\", \"Namespaced\""
                    ),
                ));
            }
        };
        let source = match spec.source.as_deref() {
            None | Some("All") => SourceMatch::All,
            Some("Original") => SourceMatch::Original,
            Some("Generated") => SourceMatch::Generated,
            Some(other) => {
                return Err((
                    "spec.match.source".into(),
                    format!(
                        "Unsupported value: {other:?}: supported values: \"All\", \"Generated\", \"Original\""
                    ),
                ));
            }
        };
        let globs = |field: &str, list: &[String]| -> Result<Vec<Wildcard>, (String, String)> {
            list.iter()
                .enumerate()
                .map(|(i, text)| wildcard(format!("spec.match.{field}[{i}]"), text))
                .collect()
        };
        let namespaces = globs("namespaces", &spec.namespaces)?;
        let excluded_namespaces = globs("excludedNamespaces", &spec.excluded_namespaces)?;
        let name = match spec.name.as_deref() {
            None | Some("") => None,
            Some(text) => Some(wildcard("spec.match.name".into(), text)?),
        };
        for (field, selector) in [
            ("labelSelector", &spec.label_selector),
            ("namespaceSelector", &spec.namespace_selector),
        ] {
            if let Some((at, message)) = selector.as_ref().and_then(selector_error) {
                return Err((format!("spec.match.{field}.{at}"), message));
            }
        }
        let any = |list: &[String]| {
            if list.iter().any(|item| item == "*") {
                Vec::new()
            } else {
                list.to_vec()
            }
        };
        let kinds = spec
            .kinds
            .iter()
            .map(|entry| KindsEntry {
                api_groups: any(&entry.api_groups),
                kinds: any(&entry.kinds),
            })
            .collect();
        Ok(ConstraintMatcher {
            criteria: Some(Criteria {
                kinds,
                scope,
                namespaces,
                excluded_namespaces,
                label_selector: spec.label_selector.clone(),
                namespace_selector: spec.namespace_selector.clone(),
                name,
                source,
            }),
        })
    }

    /// Whether the constraint applies to the request (see [`ConstraintMatcher`]), an
    /// expansion's resultant when `generated`; false when Gatekeeper's matcher fails on it
    /// ([`ConstraintMatcher::match_error`]).
    pub(crate) fn matches(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        generated: bool,
    ) -> bool {
        self.evaluate(request, namespaces, generated) == Ok(true)
    }

    /// The message of the result Gatekeeper gives when its matcher fails on the request: the
    /// constraint is not evaluated, and frameworks' `Client.Review` answers an autoreject
    /// result with this message and the constraint's enforcement action instead. It fails on:
    ///
    /// - a namespaced object whose namespace Gatekeeper does not have, when the constraint has
    ///   a `namespaceSelector` and every field before it matched (`namespaceSelectorMatch`:
    ///   "namespace selector for namespace-scoped object but missing Namespace"; the target's
    ///   namespace cache, `nsCache.GetNamespace`, answers nil for a namespace it does not
    ///   hold: an error, not a namespace without labels). At the webhook it does not arise:
    ///   the namespace is read before matching (`createReviewForRequest`, through the cached
    ///   client, then the API server when not found) and the request fails when it cannot be
    ///   read (see [`ConstraintMatcher::namespace_read_failure`]) or does not exist; offline
    ///   (`gator`) it does, for an object whose Namespace is not among the inputs.
    /// - a request with neither `object` nor `oldObject` (`matchAny`) when there is a
    ///   `spec.match`.
    ///
    /// Not here: a DELETE without `oldObject` fails the whole review in Gatekeeper
    /// (`setObjectOnDelete`, "oldObject cannot be nil for DELETE operations") and never
    /// matches here; an object without `kind` fails its decoding (`gkReviewToObject`), and
    /// is matched here as the request's kind.
    pub(crate) fn match_error(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        generated: bool,
    ) -> Option<String> {
        self.evaluate(request, namespaces, generated)
            .err()
            .map(|error| error.message())
    }

    /// `Matcher.Match`: `matchAny` over the request's objects.
    fn evaluate(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        generated: bool,
    ) -> Result<bool, MatchError> {
        let Some(criteria) = &self.criteria else {
            return Ok(true);
        };
        let object = request.object.as_ref().map(RequestObject::json);
        let old_object = request.old_object.as_ref().map(RequestObject::json);
        let objects = match request.operation {
            Operation::Delete => match old_object {
                Some(old) => [Some(old), None],
                None => return Ok(false),
            },
            _ => [object, old_object],
        };
        if objects.iter().all(Option::is_none) {
            return Err(MatchError::NoObject);
        }
        let target = Target::of(request);
        let namespace = known_namespace(&target, namespaces);
        for object in objects.into_iter().flatten() {
            if criteria.matches_object(
                &target,
                &namespace,
                &ObjectMetadata::of(object),
                generated,
            )? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether the constraint may apply, judged without the objects, from the request's kind,
    /// its namespace's name and labels only (a Namespace's own name and labels, the objects'
    /// labels, names, and `metadata.namespace` when the request names no namespace, are
    /// assumed to match): true whenever [`ConstraintMatcher::matches`] is, and whenever
    /// [`ConstraintMatcher::match_error`] or [`ConstraintMatcher::namespace_read_failure`]
    /// may have an answer.
    pub(crate) fn may_match(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> bool {
        let Some(criteria) = &self.criteria else {
            return true;
        };
        let target = Target::of(request);
        let namespace = known_namespace(&target, namespaces);
        criteria.may_match_any_object(&target, &namespace)
            || self.namespace_read_failure(request, namespaces).is_some()
    }

    /// Why the request's namespace could not be read, when Gatekeeper would read it for this
    /// constraint: Gatekeeper's webhook reads the namespace of every request it receives that
    /// names one (but a core `Namespace`'s), whatever the constraints match, before matching
    /// any (`createReviewForRequest`), and answers a failed read with an error (500) for the
    /// whole request. The requests it would receive because of this constraint are those of
    /// the kinds it names ([`ConstraintMatcher::kinds`], its webhook rules); for them the
    /// lookup's failure is answered, whether or not the constraint reads the labels.
    pub(crate) fn namespace_read_failure(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> Option<ReadFailure> {
        let target = Target::of(request);
        let name = target.namespace?;
        if self
            .criteria
            .as_ref()
            .is_some_and(|criteria| !criteria.kinds_match(target.gvk))
        {
            return None;
        }
        namespaces.read_failure(name)
    }

    /// The `(apiGroups, kinds)` of each `kinds` entry, for webhook rules, an empty list being
    /// any group or kind (as is `*`, which is dropped); `None` when every kind matches (no
    /// `spec.match`, no `kinds`, or an entry with neither groups nor kinds).
    pub(crate) fn kinds(&self) -> Option<Vec<(Vec<String>, Vec<String>)>> {
        let criteria = self.criteria.as_ref()?;
        if criteria.kinds.is_empty()
            || criteria
                .kinds
                .iter()
                .any(|entry| entry.api_groups.is_empty() && entry.kinds.is_empty())
        {
            return None;
        }
        Some(
            criteria
                .kinds
                .iter()
                .map(|entry| (entry.api_groups.clone(), entry.kinds.clone()))
                .collect(),
        )
    }
}

/// The request's namespace when the lookup has it: Gatekeeper's `Namespace` of the review.
fn known_namespace<'a>(
    target: &Target<'a>,
    namespaces: &'a dyn NamespaceLookup,
) -> KnownNamespace<'a> {
    let name = target.namespace?;
    namespaces.labels_ref(name).map(|labels| (name, labels))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::engine::matching::plural_resource;
    use crate::engine::{Labels, NoNamespaces, StaticNamespaces};

    #[test]
    fn metadata_reads_a_view_as_its_tree() {
        // Of a label written twice, the value decoded last counts, whatever the other.
        for (labels, team) in [
            (r#"{"team": 1, "team": "a", "tier": "web"}"#, Some("a")),
            (r#"{"team": "a", "tier": "web", "team": 1}"#, None),
        ] {
            let text = format!(r#"{{"metadata": {{"name": "p", "labels": {labels}}}}}"#);
            let tree: Value = serde_json::from_str(&text).unwrap();
            let view = crate::admission::ObjectView::parse(&text).unwrap();
            for object in [
                ObjectMetadata::of(JsonRef::Tree(&tree)),
                ObjectMetadata::of(view.root().into()),
            ] {
                assert_eq!(object.name, "p");
                let read = object.labels.and_then(|l| l.get("team")?.as_str());
                assert_eq!(read, team, "{labels}");
            }
        }
    }

    /// A request as the apiserver sends it: kind and resource from the object (or the old
    /// object), `namespace` as given (`""`: none).
    fn request(
        operation: &str,
        namespace: &str,
        object: Value,
        old_object: Value,
    ) -> AdmissionRequest {
        let subject = if object.is_null() {
            &old_object
        } else {
            &object
        };
        let api_version = subject["apiVersion"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = subject["kind"].as_str().unwrap();
        let mut request = json!({
            "uid": "u",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": plural_resource(kind)},
            "name": subject["metadata"]["name"],
            "operation": operation,
            "userInfo": {"username": "alice"},
        });
        if !namespace.is_empty() {
            request["namespace"] = namespace.into();
        }
        if !object.is_null() {
            request["object"] = object;
        }
        if !old_object.is_null() {
            request["oldObject"] = old_object;
        }
        serde_json::from_value(request).unwrap()
    }

    fn object(api_version: &str, kind: &str, namespace: &str, name: &str, labels: Value) -> Value {
        let mut object = json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"name": name, "labels": labels},
        });
        if !namespace.is_empty() {
            object["metadata"]["namespace"] = namespace.into();
        }
        object
    }

    fn config_map(namespace: &str, name: &str, labels: Value) -> Value {
        object("v1", "ConfigMap", namespace, name, labels)
    }

    fn namespace(name: &str, labels: Value) -> Value {
        object("v1", "Namespace", "", name, labels)
    }

    fn cluster_role(name: &str, labels: Value) -> Value {
        object(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "",
            name,
            labels,
        )
    }

    /// A CREATE of a namespaced object in its namespace.
    fn create(object: Value) -> AdmissionRequest {
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        request("CREATE", &namespace, object, Value::Null)
    }

    /// A CREATE of a Namespace: the apiserver names no namespace.
    fn create_namespace(object: Value) -> AdmissionRequest {
        request("CREATE", "", object, Value::Null)
    }

    fn compile(spec: Value) -> Result<ConstraintMatcher, (String, String)> {
        let spec: Match = serde_json::from_value(spec).unwrap();
        ConstraintMatcher::new(Some(&spec))
    }

    fn matcher(spec: Value) -> ConstraintMatcher {
        compile(spec).unwrap()
    }

    /// team-a (env: dev), team-b (env: prod), team-c (no labels).
    fn namespaces() -> StaticNamespaces {
        let mut namespaces = StaticNamespaces::default();
        namespaces.insert("team-a", Labels::from([("env".into(), "dev".into())]));
        namespaces.insert("team-b", Labels::from([("env".into(), "prod".into())]));
        namespaces.insert("team-c", Labels::new());
        namespaces
    }

    /// A lookup whose reads of namespace `broken` failed.
    struct Unreadable;

    impl NamespaceLookup for Unreadable {
        fn labels(&self, _name: &str) -> Option<Labels> {
            None
        }

        fn read_failure(&self, name: &str) -> Option<ReadFailure> {
            (name == "broken").then(|| ReadFailure {
                status: Some((403, "Forbidden".into())),
                message: "namespaces \"broken\" is forbidden".into(),
            })
        }
    }

    /// The request without its objects, as `may_match` is asked.
    fn envelope(request: &AdmissionRequest) -> AdmissionRequest {
        let mut envelope = request.clone();
        envelope.object = None;
        envelope.old_object = None;
        envelope
    }

    /// `matches` on `request` with [`namespaces`], checking that `may_match` on its envelope
    /// agrees.
    fn check(matcher: &ConstraintMatcher, request: &AdmissionRequest) -> bool {
        let lookup = namespaces();
        let matched = matcher.matches(request, &lookup, false);
        if matched || matcher.match_error(request, &lookup, false).is_some() {
            assert!(
                matcher.may_match(&envelope(request), &lookup),
                "may_match is false for {request:?}"
            );
        }
        matched
    }

    #[test]
    fn no_match_block_matches_everything_without_reading_the_request() {
        let matcher = ConstraintMatcher::new(None).unwrap();
        let lookup = namespaces();
        let pod = create(config_map("ghost", "c", json!({})));
        assert!(matcher.matches(&pod, &lookup, false));
        assert!(matcher.matches(&envelope(&pod), &lookup, false));
        assert!(matcher.may_match(&envelope(&pod), &lookup));
        assert_eq!(matcher.match_error(&envelope(&pod), &lookup, false), None);
        assert_eq!(matcher.kinds(), None);
    }

    #[test]
    fn an_empty_match_block_matches_every_object_but_needs_one() {
        let matcher = matcher(json!({}));
        assert!(check(
            &matcher,
            &create(config_map("team-a", "c", json!({})))
        ));
        assert!(check(
            &matcher,
            &create_namespace(namespace("x", json!({})))
        ));
        assert!(check(&matcher, &create(cluster_role("r", json!({})))));
        assert_eq!(matcher.kinds(), None);
        // `matchAny` with neither object: an error, which autorejects.
        let bare = envelope(&create(config_map("team-a", "c", json!({}))));
        assert!(!matcher.matches(&bare, &namespaces(), false));
        assert_eq!(
            matcher.match_error(&bare, &namespaces(), false).as_deref(),
            Some(
                "unable to match constraints: invalid request object: neither object nor old \
                 object are defined"
            )
        );
    }

    #[test]
    fn kinds() {
        let cm = create(config_map("team-a", "c", json!({})));
        let role = create(cluster_role("r", json!({})));
        let deployment = create(object("apps/v1", "Deployment", "team-a", "d", json!({})));
        let ns = create_namespace(namespace("x", json!({})));
        for (kinds, expected) in [
            (json!([]), [true, true, true, true]),
            (json!([{}]), [true, true, true, true]),
            (
                json!([{"apiGroups": ["*"], "kinds": ["*"]}]),
                [true, true, true, true],
            ),
            (
                json!([{"apiGroups": [""], "kinds": ["ConfigMap"]}]),
                [true, false, false, false],
            ),
            (
                json!([{"apiGroups": [""], "kinds": []}]),
                [true, false, false, true],
            ),
            (
                json!([{"kinds": ["ConfigMap", "Deployment"]}]),
                [true, false, true, false],
            ),
            (
                json!([{"apiGroups": ["*"], "kinds": ["Deployment"]}]),
                [false, false, true, false],
            ),
            (
                json!([{"apiGroups": ["apps"]}]),
                [false, false, true, false],
            ),
            // A kind in the wrong group.
            (
                json!([{"apiGroups": ["apps"], "kinds": ["ConfigMap"]}]),
                [false, false, false, false],
            ),
            // Kinds are compared exactly.
            (
                json!([{"apiGroups": [""], "kinds": ["configmap"]}]),
                [false, false, false, false],
            ),
            // Either entry.
            (
                json!([
                    {"apiGroups": [""], "kinds": ["Namespace"]},
                    {"apiGroups": ["rbac.authorization.k8s.io"], "kinds": ["ClusterRole"]},
                ]),
                [false, true, false, true],
            ),
            // `*` among other kinds is any kind.
            (
                json!([{"apiGroups": ["apps"], "kinds": ["Foo", "*"]}]),
                [false, false, true, false],
            ),
        ] {
            let matcher = matcher(json!({"kinds": kinds}));
            let got = [&cm, &role, &deployment, &ns].map(|r| check(&matcher, r));
            assert_eq!(got, expected, "{kinds}");
            let got = [&cm, &role, &deployment, &ns]
                .map(|r| matcher.may_match(&envelope(r), &namespaces()));
            assert_eq!(got, expected, "may_match {kinds}");
        }
    }

    #[test]
    fn kinds_for_webhook_rules() {
        let kinds = |spec: Value| matcher(spec).kinds();
        assert_eq!(kinds(json!({"kinds": []})), None);
        assert_eq!(kinds(json!({"kinds": [{"apiGroups": ["apps"]}, {}]})), None);
        assert_eq!(
            kinds(json!({"kinds": [{"apiGroups": ["*"], "kinds": ["*"]}]})),
            None
        );
        assert_eq!(
            kinds(json!({"kinds": [
                {"apiGroups": [""], "kinds": ["Pod"]},
                {"apiGroups": ["*"], "kinds": ["Deployment"]},
                {"apiGroups": ["apps", "batch"], "kinds": ["*"]},
                {"kinds": ["Job"]},
            ]})),
            Some(vec![
                (vec![String::new()], vec!["Pod".to_owned()]),
                (vec![], vec!["Deployment".to_owned()]),
                (vec!["apps".to_owned(), "batch".to_owned()], vec![]),
                (vec![], vec!["Job".to_owned()]),
            ])
        );
    }

    #[test]
    fn scope() {
        let cm = create(config_map("team-a", "c", json!({})));
        let role = create(cluster_role("r", json!({})));
        let ns = create_namespace(namespace("x", json!({})));
        // An UPDATE of a Namespace names the namespace itself; Gatekeeper clears it.
        let ns_update = request(
            "UPDATE",
            "team-a",
            namespace("team-a", json!({})),
            namespace("team-a", json!({})),
        );
        // A cluster-scoped request whose object claims a namespace (never from the
        // apiserver): `scopeMatch` counts the object's `metadata.namespace`.
        let mut claims = request("CREATE", "", cluster_role("r", json!({})), Value::Null);
        claims.object.as_mut().unwrap()["metadata"]["namespace"] = "team-a".into();
        for (scope, expected) in [
            (json!(null), [true, true, true, true, true]),
            (json!(""), [true, true, true, true, true]),
            (json!("*"), [true, true, true, true, true]),
            (json!("Namespaced"), [true, false, false, false, true]),
            (json!("Cluster"), [false, true, true, true, false]),
        ] {
            let matcher = matcher(json!({"scope": scope}));
            let got = [&cm, &role, &ns, &ns_update, &claims].map(|r| check(&matcher, r));
            assert_eq!(got, expected, "{scope}");
        }
        // A namespaced request whose namespace is unknown is still namespaced.
        let ghost = create(config_map("ghost", "c", json!({})));
        assert!(check(&matcher(json!({"scope": "Namespaced"})), &ghost));
        assert!(!check(&matcher(json!({"scope": "Cluster"})), &ghost));
    }

    #[test]
    fn invalid_fields_are_refused_with_their_path() {
        for (spec, field, message) in [
            (
                json!({"scope": "cluster"}),
                "spec.match.scope",
                "Unsupported value: \"cluster\"",
            ),
            (
                json!({"scope": "Namespace"}),
                "spec.match.scope",
                "Unsupported value",
            ),
            (
                json!({"source": "Mutated"}),
                "spec.match.source",
                "Unsupported value: \"Mutated\"",
            ),
            (
                json!({"source": ""}),
                "spec.match.source",
                "Unsupported value",
            ),
            (json!({"name": "Web"}), "spec.match.name", "should match"),
            (json!({"name": "a*b"}), "spec.match.name", "should match"),
            (json!({"name": "***"}), "spec.match.name", "should match"),
            (
                json!({"namespaces": ["ok", "kube_system"]}),
                "spec.match.namespaces[1]",
                "should match",
            ),
            (
                json!({"excludedNamespaces": ["a b"]}),
                "spec.match.excludedNamespaces[0]",
                "should match",
            ),
            (
                json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]}}),
                "spec.match.labelSelector.matchExpressions[0].operator",
                "not a valid selector operator",
            ),
            (
                json!({"namespaceSelector": {"matchExpressions": [
                    {"key": "a", "operator": "Exists"},
                    {"key": "a", "operator": "In"},
                ]}}),
                "spec.match.namespaceSelector.matchExpressions[1].values",
                "Required value",
            ),
            (
                json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["b"]}]}}),
                "spec.match.labelSelector.matchExpressions[0].values",
                "Forbidden",
            ),
            (
                json!({"labelSelector": {"matchExpressions": [{"key": "-a", "operator": "Exists"}]}}),
                "spec.match.labelSelector.matchExpressions[0].key",
                "Invalid value: \"-a\"",
            ),
            (
                json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", "not ok"]}]}}),
                "spec.match.labelSelector.matchExpressions[0].values[1]",
                "Invalid value: \"not ok\"",
            ),
            (
                json!({"namespaceSelector": {"matchLabels": {"a/b/c": "x"}}}),
                "spec.match.namespaceSelector.matchLabels",
                "Invalid value: \"a/b/c\"",
            ),
            (
                json!({"labelSelector": {"matchLabels": {"app": "-web"}}}),
                "spec.match.labelSelector.matchLabels",
                "Invalid value: \"-web\"",
            ),
        ] {
            let (got_field, got_message) = compile(spec.clone()).unwrap_err();
            assert_eq!(got_field, field, "{spec}");
            assert!(got_message.contains(message), "{spec}: {got_message}");
        }
        for spec in [
            json!({"scope": "*", "source": "All", "name": "*", "namespaces": ["**", "kube-*", "*:x"]}),
            json!({"source": "Original", "name": "", "excludedNamespaces": ["*-system"]}),
            json!({"labelSelector": {"matchLabels": {"example.com/app": ""}}}),
        ] {
            assert!(compile(spec.clone()).is_ok(), "{spec}");
        }
    }

    #[test]
    fn wildcards() {
        for (pattern, form) in [
            ("web", Wildcard::Exact("web".into())),
            ("web-*", Wildcard::Prefix("web-".into())),
            ("*-web", Wildcard::Suffix("-web".into())),
            ("*web*", Wildcard::Contains("web".into())),
            ("*", Wildcard::Contains(String::new())),
            ("**", Wildcard::Contains(String::new())),
            ("", Wildcard::Exact(String::new())),
        ] {
            assert_eq!(Wildcard::new(pattern), form, "{pattern}");
        }
        for (pattern, candidate, name, generate_name) in [
            ("web", "web", true, false),
            ("web", "web-1", false, false),
            ("web", "", false, false),
            ("web-*", "web-1", true, true),
            ("web-*", "web-", true, true),
            ("web-*", "my-web-1", false, false),
            ("*-web", "my-web", true, false),
            ("*-web", "-web", true, false),
            ("*-web", "my-web-1", false, false),
            ("*web*", "my-web-1", true, true),
            ("*web*", "web", true, true),
            ("*web*", "we", false, false),
            ("*", "", true, true),
            ("*", "anything", true, true),
        ] {
            let wildcard = Wildcard::new(pattern);
            assert_eq!(wildcard.matches(candidate), name, "{pattern} {candidate}");
            assert_eq!(
                wildcard.matches_generate_name(candidate),
                generate_name,
                "{pattern} generateName {candidate}"
            );
        }
    }

    #[test]
    fn namespaces_and_excluded_namespaces() {
        let in_a = create(config_map("team-a", "c", json!({})));
        let in_b = create(config_map("team-b", "c", json!({})));
        let in_kube = create(config_map("kube-system", "c", json!({})));
        // A Namespace is matched by its own name, whatever the request names.
        let ns_a = create_namespace(namespace("team-a", json!({})));
        let ns_kube = request(
            "UPDATE",
            "team-b",
            namespace("kube-system", json!({})),
            namespace("kube-system", json!({})),
        );
        // Cluster-scoped: neither included nor excluded.
        let role = create(cluster_role("r", json!({})));
        let requests = [&in_a, &in_b, &in_kube, &ns_a, &ns_kube, &role];
        for (spec, expected) in [
            (
                json!({"namespaces": ["team-a"]}),
                [true, false, false, true, false, true],
            ),
            (
                json!({"namespaces": ["team-*"]}),
                [true, true, false, true, false, true],
            ),
            (
                json!({"namespaces": ["*-system"]}),
                [false, false, true, false, true, true],
            ),
            (
                json!({"namespaces": ["*m-*"]}),
                [true, true, false, true, false, true],
            ),
            (
                json!({"namespaces": ["*"]}),
                [true, true, true, true, true, true],
            ),
            (
                json!({"namespaces": ["team", "kube-system"]}),
                [false, false, true, false, true, true],
            ),
            (
                json!({"excludedNamespaces": ["team-a"]}),
                [false, true, true, false, true, true],
            ),
            (
                json!({"excludedNamespaces": ["kube-*"]}),
                [true, true, false, true, false, true],
            ),
            (
                json!({"excludedNamespaces": ["*-b"]}),
                [true, false, true, true, true, true],
            ),
            (
                json!({"excludedNamespaces": ["*"]}),
                [false, false, false, false, false, true],
            ),
            (
                json!({"namespaces": ["team-*"], "excludedNamespaces": ["*-b"]}),
                [true, false, false, true, false, true],
            ),
        ] {
            let matcher = matcher(spec.clone());
            let got = requests.map(|r| check(&matcher, r));
            assert_eq!(got, expected, "{spec}");
        }
    }

    #[test]
    fn an_unknown_namespace_is_read_from_the_object() {
        // Without the Namespace (`ns == nil`), `namespacesMatch` falls back to the object's
        // `metadata.namespace`.
        let mut request = create(config_map("team-x", "c", json!({})));
        let included = matcher(json!({"namespaces": ["team-x"]}));
        assert!(check(&included, &request));
        request.object.as_mut().unwrap()["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("namespace");
        assert!(included.matches(&request, &namespaces(), false));
        assert!(included.may_match(&envelope(&request), &namespaces()));
        let excluded = matcher(json!({"excludedNamespaces": ["team-x"]}));
        assert!(excluded.matches(&request, &namespaces(), false));
        // A known namespace is the request's, whatever the object says.
        let mut known = create(config_map("team-a", "c", json!({})));
        known.object.as_mut().unwrap()["metadata"]["namespace"] = "team-x".into();
        assert!(!included.matches(&known, &namespaces(), false));
    }

    #[test]
    fn label_selector() {
        let matcher = matcher(json!({"labelSelector": {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "edge"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
            ],
        }}));
        for (labels, expected) in [
            (json!({"app": "web", "tier": "front"}), true),
            (json!({"app": "web", "tier": "edge", "env": "dev"}), true),
            (json!({"app": "web", "tier": "edge", "env": "prod"}), false),
            (json!({"app": "web", "tier": "back"}), false),
            (json!({"app": "web", "tier": "front", "legacy": ""}), false),
            (json!({"tier": "front"}), false),
            (json!(null), false),
            // `NestedStringMap`: a label that is not a string and there are no labels.
            (json!({"app": "web", "tier": "front", "n": 1}), false),
        ] {
            let cm = create(config_map("team-a", "c", labels.clone()));
            assert_eq!(check(&matcher, &cm), expected, "{labels}");
            let ns = create_namespace(namespace("x", labels.clone()));
            assert_eq!(check(&matcher, &ns), expected, "Namespace {labels}");
            let role = create(cluster_role("r", labels.clone()));
            assert_eq!(check(&matcher, &role), expected, "ClusterRole {labels}");
        }
        let exists = self::matcher(json!({"labelSelector": {"matchExpressions": [
            {"key": "env", "operator": "Exists"},
        ]}}));
        assert!(check(
            &exists,
            &create(config_map("team-a", "c", json!({"env": ""})))
        ));
        assert!(!check(
            &exists,
            &create(config_map("team-a", "c", json!({})))
        ));
        let empty = self::matcher(json!({"labelSelector": {}}));
        assert!(check(
            &empty,
            &create(config_map("team-a", "c", json!(null)))
        ));
    }

    #[test]
    fn update_matches_the_new_or_the_old_object() {
        let matcher = matcher(json!({"labelSelector": {"matchLabels": {"app": "web"}}}));
        let web = config_map("team-a", "c", json!({"app": "web"}));
        let db = config_map("team-a", "c", json!({"app": "db"}));
        assert!(check(
            &matcher,
            &request("UPDATE", "team-a", web.clone(), db.clone())
        ));
        assert!(check(
            &matcher,
            &request("UPDATE", "team-a", db.clone(), web.clone())
        ));
        assert!(!check(
            &matcher,
            &request("UPDATE", "team-a", db.clone(), db.clone())
        ));
        // Every field of one object: not the label of one and the name of the other.
        let both = self::matcher(json!({
            "labelSelector": {"matchLabels": {"app": "web"}},
            "name": "new-*",
        }));
        let new_db = config_map("team-a", "new-c", json!({"app": "db"}));
        let old_web = config_map("team-a", "old-c", json!({"app": "web"}));
        assert!(!check(&both, &request("UPDATE", "team-a", new_db, old_web)));
        // A Namespace's UPDATE: its own labels, new or old.
        let selected = self::matcher(json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}));
        let dev = namespace("team-b", json!({"env": "dev"}));
        let prod = namespace("team-b", json!({"env": "prod"}));
        assert!(check(
            &selected,
            &request("UPDATE", "team-b", prod.clone(), dev.clone())
        ));
        assert!(check(
            &selected,
            &request("UPDATE", "team-b", dev, prod.clone())
        ));
        assert!(!check(
            &selected,
            &request("UPDATE", "team-b", prod.clone(), prod)
        ));
    }

    #[test]
    fn delete_matches_the_old_object() {
        let matcher = matcher(json!({"labelSelector": {"matchLabels": {"app": "web"}}}));
        let web = config_map("team-a", "c", json!({"app": "web"}));
        let db = config_map("team-a", "c", json!({"app": "db"}));
        assert!(check(
            &matcher,
            &request("DELETE", "team-a", Value::Null, web.clone())
        ));
        assert!(!check(
            &matcher,
            &request("DELETE", "team-a", Value::Null, db.clone())
        ));
        // `object` (never sent on DELETE) is replaced by `oldObject`.
        assert!(!check(
            &matcher,
            &request("DELETE", "team-a", web.clone(), db.clone())
        ));
        assert!(check(
            &matcher,
            &request("DELETE", "team-a", db, web.clone())
        ));
        // Without `oldObject` Gatekeeper fails the whole review: no match, no match error.
        let without = request("DELETE", "team-a", web, Value::Null);
        assert!(!matcher.matches(&without, &namespaces(), false));
        assert_eq!(matcher.match_error(&without, &namespaces(), false), None);
        // A Namespace's DELETE: its old labels.
        let selected = self::matcher(json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}));
        let old = namespace("gone", json!({"env": "dev"}));
        assert!(check(
            &selected,
            &request("DELETE", "gone", Value::Null, old)
        ));
        let old = namespace("gone", json!({"env": "prod"}));
        assert!(!check(
            &selected,
            &request("DELETE", "gone", Value::Null, old)
        ));
    }

    #[test]
    fn namespace_selector() {
        let matcher = matcher(json!({"namespaceSelector": {
            "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}],
        }}));
        assert!(check(
            &matcher,
            &create(config_map("team-a", "c", json!({})))
        ));
        assert!(!check(
            &matcher,
            &create(config_map("team-b", "c", json!({})))
        ));
        assert!(check(
            &matcher,
            &create(config_map("team-c", "c", json!({})))
        ));
        // Not the object's labels.
        assert!(!check(
            &matcher,
            &create(config_map("team-b", "c", json!({"env": "dev"})))
        ));
        // A Namespace: its own labels, not the lookup's (team-b is prod there).
        let ns = create_namespace(namespace("team-b", json!({"env": "dev"})));
        assert!(check(&matcher, &ns));
        let ns = create_namespace(namespace("team-a", json!({"env": "prod"})));
        assert!(!check(&matcher, &ns));
        let ns = request(
            "UPDATE",
            "team-a",
            namespace("team-a", json!({"env": "prod"})),
            namespace("team-a", json!({"env": "prod"})),
        );
        assert!(!check(&matcher, &ns));
        // A cluster-scoped object always matches.
        assert!(check(
            &matcher,
            &create(cluster_role("r", json!({"env": "prod"})))
        ));
        let dev = self::matcher(json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}));
        assert!(check(&dev, &create(cluster_role("r", json!({})))));
        assert!(check(&dev, &create(config_map("team-a", "c", json!({})))));
        assert!(!check(&dev, &create(config_map("team-c", "c", json!({})))));
        assert!(!dev.may_match(
            &envelope(&create(config_map("team-c", "c", json!({})))),
            &namespaces()
        ));
        // The lookup's labels: an unknown namespace has none of them, even its name label.
        let named = self::matcher(json!({"namespaceSelector": {"matchLabels": {
            "kubernetes.io/metadata.name": "team-a",
        }}}));
        assert!(!check(
            &named,
            &create(config_map("team-a", "c", json!({})))
        ));
        let mut lookup = StaticNamespaces::default();
        assert!(lookup.insert_object(&namespace("team-a", json!({}))));
        let request = create(config_map("team-a", "c", json!({})));
        assert!(named.matches(&request, &lookup, false));
    }

    #[test]
    fn an_unknown_namespace_fails_a_namespace_selector() {
        let matcher = matcher(json!({
            "kinds": [{"apiGroups": [""], "kinds": ["ConfigMap"]}],
            "labelSelector": {"matchLabels": {"app": "web"}},
            "namespaceSelector": {"matchLabels": {"env": "dev"}},
        }));
        let ghost = create(config_map("ghost", "orphan", json!({"app": "web"})));
        assert!(!check(&matcher, &ghost));
        assert_eq!(
            matcher.match_error(&ghost, &namespaces(), false).as_deref(),
            Some(
                "unable to match constraints: error matching the requested object: orphan \
                 :failed to run Match criteria: namespace selector for namespace-scoped object \
                 but missing Namespace"
            )
        );
        assert!(matcher.may_match(&envelope(&ghost), &NoNamespaces));
        // Only once every field before it matched.
        let other = create(config_map("ghost", "orphan", json!({"app": "db"})));
        assert_eq!(matcher.match_error(&other, &namespaces(), false), None);
        let secret = create(object("v1", "Secret", "ghost", "s", json!({"app": "web"})));
        assert_eq!(matcher.match_error(&secret, &namespaces(), false), None);
        assert!(!matcher.may_match(&envelope(&secret), &namespaces()));
        // Whatever comes after it: `source: Generated` never matches, but fails first.
        let generated = self::matcher(json!({
            "namespaceSelector": {"matchLabels": {"env": "dev"}},
            "source": "Generated",
        }));
        assert!(
            generated
                .match_error(&ghost, &namespaces(), false)
                .is_some()
        );
        assert!(generated.may_match(&envelope(&ghost), &namespaces()));
        // With no `namespace` on the object (Gatekeeper's `ns == nil`), it is cluster-scoped.
        let mut bare = ghost.clone();
        bare.object.as_mut().unwrap()["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("namespace");
        assert!(matcher.matches(&bare, &namespaces(), false));
        assert_eq!(matcher.match_error(&bare, &namespaces(), false), None);
        // A read failure is answered first; the match fails the same way.
        let broken = create(config_map("broken", "orphan", json!({"app": "web"})));
        assert!(
            matcher
                .namespace_read_failure(&broken, &Unreadable)
                .is_some()
        );
        assert!(matcher.match_error(&broken, &Unreadable, false).is_some());
        assert!(matcher.may_match(&envelope(&broken), &Unreadable));
    }

    #[test]
    fn name() {
        let mut generated = config_map("team-a", "", json!({}));
        generated["metadata"]["generateName"] = "web-".into();
        for (name, expected) in [
            (json!(null), [true, true, true, true]),
            (json!(""), [true, true, true, true]),
            (json!("web"), [true, false, false, false]),
            (json!("web-*"), [false, true, false, true]),
            (json!("*-web"), [false, false, true, false]),
            (json!("*web*"), [true, true, true, true]),
            (json!("*eb-*"), [false, true, false, true]),
            (json!("*"), [true, true, true, true]),
        ] {
            let matcher = matcher(json!({"name": name}));
            let got = [
                create(config_map("team-a", "web", json!({}))),
                create(config_map("team-a", "web-1", json!({}))),
                create(config_map("team-a", "my-web", json!({}))),
                create(generated.clone()),
            ]
            .map(|r| check(&matcher, &r));
            assert_eq!(got, expected, "{name}");
        }
        // A Namespace's and a cluster-scoped object's name too.
        let matcher = matcher(json!({"name": "team-*"}));
        assert!(check(
            &matcher,
            &create_namespace(namespace("team-a", json!({})))
        ));
        assert!(!check(&matcher, &create(cluster_role("admin", json!({})))));
    }

    #[test]
    fn source() {
        let cm = create(config_map("team-a", "c", json!({})));
        for (source, expected) in [
            (json!(null), true),
            (json!("All"), true),
            (json!("Original"), true),
            (json!("Generated"), false),
        ] {
            let matcher = matcher(json!({"source": source}));
            assert_eq!(check(&matcher, &cm), expected, "{source}");
            assert_eq!(
                matcher.may_match(&envelope(&cm), &namespaces()),
                expected,
                "{source}"
            );
        }
    }

    #[test]
    fn may_match_judges_the_envelope() {
        let lookup = namespaces();
        let may = |spec: Value, request: &AdmissionRequest| {
            matcher(spec).may_match(&envelope(request), &lookup)
        };
        let in_b = create(config_map("team-b", "c", json!({"app": "web"})));
        assert!(!may(json!({"namespaces": ["team-a"]}), &in_b));
        assert!(!may(json!({"excludedNamespaces": ["team-*"]}), &in_b));
        assert!(!may(
            json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}),
            &in_b
        ));
        assert!(!may(json!({"scope": "Cluster"}), &in_b));
        // The object's labels and name are assumed to match.
        assert!(may(
            json!({"labelSelector": {"matchLabels": {"app": "db"}}}),
            &in_b
        ));
        assert!(may(json!({"name": "other"}), &in_b));
        // A Namespace's own name and labels too.
        let ns = create_namespace(namespace("team-b", json!({})));
        assert!(may(json!({"excludedNamespaces": ["team-b"]}), &ns));
        assert!(may(
            json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}),
            &ns
        ));
        assert!(!may(json!({"scope": "Namespaced"}), &ns));
        // A cluster-scoped object's `metadata.namespace` is not known from the envelope.
        let role = create(cluster_role("r", json!({})));
        assert!(may(json!({"scope": "Namespaced"}), &role));
        assert!(may(json!({"namespaces": ["team-a"]}), &role));
        assert!(!may(json!({"kinds": [{"kinds": ["Pod"]}]}), &role));
    }

    #[test]
    fn namespace_read_failure_is_answered_for_every_namespaced_request_of_its_kinds() {
        let broken = create(config_map("broken", "c", json!({})));
        let failure = Some(ReadFailure {
            status: Some((403, "Forbidden".into())),
            message: "namespaces \"broken\" is forbidden".into(),
        });
        // Whether or not it reads the labels, and whatever else it matches.
        for spec in [
            json!({}),
            json!({"kinds": [{"kinds": ["ConfigMap"]}]}),
            json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}),
            json!({"excludedNamespaces": ["broken"], "scope": "Cluster", "source": "Generated"}),
        ] {
            let matcher = matcher(spec.clone());
            assert_eq!(
                matcher.namespace_read_failure(&broken, &Unreadable),
                failure,
                "{spec}"
            );
            assert!(matcher.may_match(&envelope(&broken), &Unreadable), "{spec}");
        }
        assert_eq!(
            ConstraintMatcher::new(None)
                .unwrap()
                .namespace_read_failure(&broken, &Unreadable),
            failure
        );
        // Not for a kind it does not name (its webhook rules do not send it).
        let pods = matcher(json!({"kinds": [{"kinds": ["Pod"]}]}));
        assert_eq!(pods.namespace_read_failure(&broken, &Unreadable), None);
        assert!(!pods.may_match(&envelope(&broken), &Unreadable));
        // Not for a Namespace (Gatekeeper clears its request's namespace), nor a
        // cluster-scoped object, nor a namespace that was read.
        let any = matcher(json!({}));
        let ns = request(
            "UPDATE",
            "broken",
            namespace("broken", json!({})),
            namespace("broken", json!({})),
        );
        assert_eq!(any.namespace_read_failure(&ns, &Unreadable), None);
        assert_eq!(
            any.namespace_read_failure(&create(cluster_role("r", json!({}))), &Unreadable),
            None
        );
        assert_eq!(
            any.namespace_read_failure(&create(config_map("fine", "c", json!({}))), &Unreadable),
            None
        );
    }

    #[test]
    fn may_match_is_true_whenever_matches_or_match_error_is() {
        let specs = [
            json!({}),
            json!({"kinds": [{"apiGroups": [""], "kinds": ["ConfigMap", "Namespace"]}]}),
            json!({"scope": "Cluster"}),
            json!({"scope": "Namespaced", "namespaces": ["team-*"]}),
            json!({"excludedNamespaces": ["*-b", "ghost"]}),
            json!({"labelSelector": {"matchLabels": {"app": "web"}}}),
            json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}),
            json!({"namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}}),
            json!({"name": "web*", "source": "Original"}),
            json!({"source": "Generated", "namespaceSelector": {}}),
        ];
        let mut claims = create(cluster_role("r", json!({})));
        claims.object.as_mut().unwrap()["metadata"]["namespace"] = "ghost".into();
        let requests = [
            create(config_map("team-a", "web", json!({"app": "web"}))),
            create(config_map("team-b", "web", json!({}))),
            create(config_map("team-c", "db", json!({"app": "web"}))),
            create(config_map("ghost", "web", json!({"app": "web"}))),
            create(config_map("broken", "web", json!({"app": "web"}))),
            create(cluster_role("web", json!({"app": "web"}))),
            claims,
            create_namespace(namespace("team-b", json!({"env": "dev", "app": "web"}))),
            request(
                "UPDATE",
                "team-b",
                namespace("team-b", json!({})),
                namespace("team-b", json!({"env": "dev"})),
            ),
            request(
                "DELETE",
                "team-a",
                Value::Null,
                config_map("team-a", "web", json!({"app": "web"})),
            ),
        ];
        let lookups: [&dyn NamespaceLookup; 3] = [&namespaces(), &NoNamespaces, &Unreadable];
        for spec in &specs {
            let matcher = matcher(spec.clone());
            for request in &requests {
                for lookup in lookups {
                    if matcher.matches(request, lookup, false)
                        || matcher.match_error(request, lookup, false).is_some()
                        || matcher.namespace_read_failure(request, lookup).is_some()
                    {
                        assert!(
                            matcher.may_match(&envelope(request), lookup),
                            "{spec} {request:?}"
                        );
                    }
                }
            }
        }
    }
}
