//! Deciding documents offline the way a cluster would: `/mutate` first, then `/validate` on the
//! patched object, each through the webhook's own [`Engine::evaluate`] call.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::input::{Input, InputDocument, Source};
use super::manifest::{api_version, offline_uid};
use crate::admission::{AdmissionRequest, ObjectForm, Operation};
use crate::authorization::AccessReviewer;
use crate::engine::gatekeeper::{EnforcementPoint, Inventory};
use crate::engine::{
    Decision, Endpoint, Engine, EvalContext, NamespaceLookup, ResourceRule, Violation,
};
use crate::patch::PatchOperation;

/// Why a document could not be decided (distinct from a denial).
#[derive(Debug, thiserror::Error)]
#[error("{document}: {message}")]
pub struct CheckError {
    /// The document.
    pub document: Source,
    /// What failed.
    pub message: String,
}

/// The decision about one document, as `check --output json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    /// Where the document came from.
    pub source: Source,
    /// The request uid: the review's, or derived from file and document for a manifest.
    pub uid: String,
    /// The operation decided.
    pub operation: Operation,
    /// `apiVersion` of the object (`v1`, `apps/v1`).
    pub api_version: String,
    /// Kind of the object.
    pub kind: String,
    /// Namespace of the request; null for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Name of the object; null when it has none.
    pub name: Option<String>,
    /// The endpoints called, in order (`mutate`, `validate`). For a manifest, an endpoint is
    /// called only when the rules registered for it (what `webhook-config` prints) match
    /// the request, as the apiserver does; a review is always given to both.
    pub webhooks: Vec<&'static str>,
    /// Whether the object is admitted.
    pub allowed: bool,
    /// Why not: the violations of denying rules.
    pub violations: Vec<Violation>,
    /// Warnings the client would print.
    pub warnings: Vec<String>,
    /// Audit annotations, by policy.
    pub audit_annotations: BTreeMap<String, String>,
    /// The JSON Patch `/mutate` returns, if any.
    pub patch: Option<Vec<PatchOperation>>,
    /// The object with the patch applied, if there is a patch.
    pub patched_object: Option<Value>,
}

impl CheckResult {
    /// The object as admitted: patched if `/mutate` changed it, else the request's object
    /// (`None` for DELETE).
    pub fn admitted_object<'a>(&'a self, request: &'a AdmissionRequest) -> Option<&'a Value> {
        self.patched_object.as_ref().or(request.object.as_deref())
    }
}

/// Whether the apiserver would send `request` to a webhook registered with `rules`.
pub fn is_registered(rules: &[ResourceRule], request: &AdmissionRequest) -> bool {
    let any = |values: &[String], value: &str| values.iter().any(|v| v == "*" || v == value);
    let resource = &request.resource.resource;
    let sub = request.sub_resource.as_deref().unwrap_or("");
    // `*` is every resource but no subresource, `*/*` everything, `pods/*` every
    // subresource of pods, `*/scale` the scale subresource of anything.
    let resource_matches = |entry: &String| match entry.split_once('/') {
        None => sub.is_empty() && (entry == "*" || entry == resource),
        Some(("*", "*")) => true,
        Some((r, s)) => !sub.is_empty() && (r == "*" || r == resource) && (s == "*" || s == sub),
    };
    rules.iter().any(|rule| {
        any(&rule.api_groups, &request.resource.group)
            && any(&rule.api_versions, &request.resource.version)
            && rule.resources.iter().any(resource_matches)
            && rule.operations.contains(&request.operation)
    })
}

/// Decides documents with one engine and one set of known namespaces.
pub struct Checker<'a> {
    engine: &'a Engine,
    namespaces: &'a dyn NamespaceLookup,
    authorizer: Option<Arc<dyn AccessReviewer>>,
    mutate_rules: Vec<ResourceRule>,
    validate_rules: Vec<ResourceRule>,
    enforcement_point: EnforcementPoint,
    inventory: Option<&'a Inventory>,
}

impl<'a> Checker<'a> {
    /// A checker for `engine`, looking namespace labels up in `namespaces`.
    pub fn new(engine: &'a Engine, namespaces: &'a dyn NamespaceLookup) -> Self {
        Checker {
            engine,
            namespaces,
            authorizer: None,
            mutate_rules: engine.webhook_rules(Endpoint::Mutate),
            validate_rules: engine.webhook_rules(Endpoint::Validate),
            enforcement_point: EnforcementPoint::Gator,
            inventory: None,
        }
    }

    /// The same checker with Gatekeeper's `data.inventory` (as `gator`, the objects given).
    #[must_use]
    pub fn with_inventory(self, inventory: &'a Inventory) -> Self {
        Checker {
            inventory: Some(inventory),
            ..self
        }
    }

    /// The same checker at another Gatekeeper enforcement point (by default `gator`'s, as
    /// `check` and `test` are; `audit` is Gatekeeper's audit).
    #[must_use]
    pub fn at_enforcement_point(self, enforcement_point: EnforcementPoint) -> Self {
        Checker {
            enforcement_point,
            ..self
        }
    }

    /// The same checker, with answers to CEL `authorizer` checks (`--authorizer`); without
    /// them, expressions that check fail.
    #[must_use]
    pub fn with_authorizer(self, authorizer: Arc<dyn AccessReviewer>) -> Self {
        Checker {
            authorizer: Some(authorizer),
            ..self
        }
    }

    /// The request a document stands for: a review's own, or the one for a manifest and
    /// `operation` (ignored for reviews) with the manifest's object as written.
    pub fn request(document: &InputDocument, operation: Operation) -> AdmissionRequest {
        match &document.input {
            Input::Review(review) => review.request.clone(),
            Input::Manifest(manifest) => {
                let seed = format!("{}#{operation}", document.source);
                manifest.request(operation, offline_uid(&seed))
            }
        }
    }

    /// The request the apiserver would send for a document: [`Checker::request`], with a
    /// manifest's object defaulted first as the apiserver defaults what it decodes
    /// ([`crate::kubernetes::defaulting::apply_defaults`]). A review is what the apiserver sent and is
    /// left as it is.
    pub fn admission_request(document: &InputDocument, operation: Operation) -> AdmissionRequest {
        match &document.input {
            Input::Review(review) => review.request.clone(),
            Input::Manifest(manifest) => {
                let seed = format!("{}#{operation}", document.source);
                manifest.defaulted().request(operation, offline_uid(&seed))
            }
        }
    }

    /// Decides a document: a review as the webhook would, a manifest as a cluster would
    /// (see [`CheckResult::webhooks`]).
    pub fn check(
        &self,
        document: &InputDocument,
        operation: Operation,
    ) -> Result<CheckResult, CheckError> {
        let request = Self::admission_request(document, operation);
        let written = document.manifest().map(|manifest| &manifest.object);
        self.decide(&document.source, &request, written.is_some(), written)
    }

    /// Decides a request. With `registration`, each endpoint is called only when its rules
    /// match the request; without it, both always are.
    pub fn check_request(
        &self,
        source: &Source,
        request: &AdmissionRequest,
        registration: bool,
    ) -> Result<CheckResult, CheckError> {
        let written = request.object.as_deref().filter(|_| registration);
        self.decide(source, request, registration, written)
    }

    /// [`Checker::check_request`] of a request made from `written` (the object as written),
    /// when it was made from an object.
    fn decide(
        &self,
        source: &Source,
        request: &AdmissionRequest,
        registration: bool,
        written: Option<&Value>,
    ) -> Result<CheckResult, CheckError> {
        let mut result = CheckResult {
            source: source.clone(),
            uid: request.uid.clone(),
            operation: request.operation,
            api_version: api_version(&request.kind),
            kind: request.kind.kind.clone(),
            // A Namespace's own request names the namespace itself; the document has none.
            namespace: request
                .namespace
                .clone()
                .filter(|_| !(request.kind.group.is_empty() && request.kind.kind == "Namespace")),
            name: request.name.clone(),
            webhooks: Vec::new(),
            allowed: true,
            violations: Vec::new(),
            warnings: Vec::new(),
            audit_annotations: BTreeMap::new(),
            patch: None,
            patched_object: None,
        };
        // Mutating webhooks run before validating ones, which see the patched object; a
        // mutating webhook's denial ends the request.
        if !registration || is_registered(&self.mutate_rules, request) {
            result.webhooks.push(Endpoint::Mutate.name());
            let mut decision = self.evaluate(source, request, Endpoint::Mutate, written)?;
            result.patch = decision.patch.take();
            result.patched_object = decision.patched_object.take();
            merge(&mut result, decision);
        }
        if result.violations.is_empty()
            && (!registration || is_registered(&self.validate_rules, request))
        {
            result.webhooks.push(Endpoint::Validate.name());
            let mut request = match &result.patched_object {
                Some(patched) => {
                    let mut patched_request = request.clone();
                    patched_request.object = Some(patched.clone().into());
                    Cow::Owned(patched_request)
                }
                None => Cow::Borrowed(request),
            };
            // Read as `serve` reads it: from object views where it would decode them.
            if self.engine.object_form(Endpoint::Validate) == ObjectForm::View {
                let request = request.to_mut();
                for object in [&mut request.object, &mut request.old_object] {
                    if let Some(object) = object.as_mut() {
                        *object = object.in_view();
                    }
                }
            }
            let decision = self.evaluate(source, &request, Endpoint::Validate, written)?;
            merge(&mut result, decision);
        }
        result.allowed = result.violations.is_empty();
        result.warnings = super::warnings::as_received(std::mem::take(&mut result.warnings));
        Ok(result)
    }

    /// The webhook's call, with the same context (no deadline offline) and panic guard; a
    /// request made `from_object` (as written) is not an AdmissionReview's.
    fn evaluate(
        &self,
        source: &Source,
        request: &AdmissionRequest,
        endpoint: Endpoint,
        from_object: Option<&Value>,
    ) -> Result<Decision, CheckError> {
        let mut context = EvalContext::new(endpoint)
            .with_namespaces(self.namespaces)
            .at_enforcement_point(self.enforcement_point)
            .with_inventory(self.inventory)
            .made_from_object(from_object);
        if let Some(authorizer) = &self.authorizer {
            context = context.with_authorizer(authorizer);
        }
        let failed = |message: String| CheckError {
            document: source.clone(),
            message,
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.engine.evaluate(request, &context)))
        {
            Ok(Ok(decision)) => Ok(decision),
            Ok(Err(error)) => Err(failed(format!("/{}: {error}", endpoint.name()))),
            Err(_) => Err(failed(format!(
                "/{}: a policy rule panicked",
                endpoint.name()
            ))),
        }
    }
}

fn merge(result: &mut CheckResult, decision: Decision) {
    result.violations.extend(decision.violations);
    result.warnings.extend(decision.warnings);
    for (key, value) in decision.audit_annotations {
        let entry = result.audit_annotations.entry(key).or_default();
        if !entry.is_empty() {
            entry.push_str("; ");
        }
        entry.push_str(&value);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::engine::{NoNamespaces, pod_spec_resource_rules};
    use crate::offline::input::parse_input;

    fn check(text: &str, operation: Operation) -> CheckResult {
        let documents = parse_input(Path::new("t.yaml"), text.as_bytes()).unwrap();
        let engine = Engine::builtin();
        Checker::new(&engine, &NoNamespaces)
            .check(&documents[0], operation)
            .unwrap()
    }

    const PRIVILEGED: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: nginx:1.27\n    securityContext: {privileged: true}\n";

    #[test]
    fn create_mutates_then_validates_the_patched_object() {
        let result = check(PRIVILEGED, Operation::Create);
        assert_eq!(result.webhooks, ["mutate", "validate"]);
        assert!(!result.allowed);
        assert_eq!(result.violations[0].policy, "pod-security");
        assert_eq!(result.violations[0].rule, "enforce");
        let patched = result.patched_object.unwrap();
        assert_eq!(
            patched["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert_eq!(patched["metadata"]["namespace"], "default");
    }

    #[test]
    fn delete_is_not_sent_to_rules_that_do_not_register_it() {
        let result = check(PRIVILEGED, Operation::Delete);
        assert!(result.webhooks.is_empty());
        assert!(result.allowed);
    }

    #[test]
    fn registration_matches_like_the_apiserver() {
        let rules = pod_spec_resource_rules(&[Operation::Create], true);
        let documents = parse_input(Path::new("t.yaml"), PRIVILEGED.as_bytes()).unwrap();
        let mut request = Checker::request(&documents[0], Operation::Create);
        assert!(is_registered(&rules, &request));
        request.sub_resource = Some("ephemeralcontainers".into());
        assert!(is_registered(&rules, &request));
        request.sub_resource = Some("exec".into());
        assert!(!is_registered(&rules, &request));
        request.sub_resource = None;
        request.operation = Operation::Update;
        assert!(!is_registered(&rules, &request));
        let all = vec![ResourceRule::new("*", &["*/*"], &[Operation::Update])];
        assert!(is_registered(&all, &request));
    }
}
