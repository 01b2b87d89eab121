//! The policy engine: one [`Engine::evaluate`] for the webhook and the offline commands.
//!
//! Rules are compiled into an [`Engine`] when policies load; a request is only evaluated.
//! Validation rules report [`Violation`]s; defaulting rules edit a copy of the object through
//! an [`ObjectEditor`](crate::patch::ObjectEditor), which records the JSON Patch.

pub mod admission_policy;
mod cel_input;
mod compile;
mod decision;
pub mod gatekeeper;
pub mod matching;
mod namespaces;
mod native;
pub mod pod_security;
mod pod_specs;
mod resource_rules;
pub mod rules;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crate::admission::{AdmissionRequest, JsonRead, JsonRef, ObjectForm, Operation, WantedObjects};
use crate::authorization::AccessReviewer;
use crate::patch::ObjectEditor;
use crate::policy::admission_policy::{ParamKind, ParamRef};
use cel_input::{AuthorizerBinding, CelInputCell};

pub use crate::kubernetes::vocabulary::Action;
pub use admission_policy::{ExpressionWarning, ParamLookup, ParamNeed};
pub use decision::{
    Decision, DenialStatus, PolicyOutcome, Violation, ViolationForm, audit_annotation_key,
};
use gatekeeper::GatekeeperContext;
pub use namespaces::{
    FetchFuture, Labels, NamespaceLabels, NamespaceLookup, NoNamespaces, ReadFailure,
    StaticNamespaces, namespace_object, partial_namespace_object,
};
pub use native::CompiledPolicy;
pub use pod_specs::{CONTAINER_LISTS, PodSpecLocation, pod_spec, pod_spec_location};
pub use resource_rules::{ResourceRule, merge_rules, pod_spec_resource_rules};

/// Which webhook endpoint a request came to; it selects the rules that run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `/validate`: validation rules; never a patch.
    Validate,
    /// `/mutate`: defaulting rules; never a denial by policy.
    Mutate,
}

impl Endpoint {
    /// The endpoint's path without the slash, as used in metrics labels.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Validate => "validate",
            Endpoint::Mutate => "mutate",
        }
    }
}

/// What an evaluation needs besides the request.
#[derive(Clone, Copy)]
pub struct EvalContext<'a> {
    /// The endpoint asked.
    pub endpoint: Endpoint,
    /// When the answer is due; evaluation stops between rules once it has passed.
    pub deadline: Option<Instant>,
    /// Labels of namespaces, for namespace selectors and Pod Security namespace labels.
    pub namespaces: &'a dyn NamespaceLookup,
    /// Who answers CEL `authorizer` checks; without one they fail their expression.
    pub authorizer: Option<&'a Arc<dyn AccessReviewer>>,
    /// Parameter objects of admission policies from the cluster; `None`: from the policy
    /// folders.
    pub params: Option<&'a dyn ParamLookup>,
    /// Where Gatekeeper constraints are enforced: their scoped enforcement actions, and the
    /// review their templates see (the webhook's AdmissionRequest, or gator's).
    pub enforcement_point: gatekeeper::EnforcementPoint,
    /// Gatekeeper's `data.inventory`; none: empty.
    pub inventory: Option<&'a gatekeeper::Inventory>,
    /// The object as written when the request was made from an object alone (a manifest
    /// given to `check`, an object `audit` lists): Gatekeeper's templates then see the review
    /// `gator` and Gatekeeper's audit make of that object, not the request.
    pub from_object: Option<&'a serde_json::Value>,
    /// Which code of a Gatekeeper template that carries both engines runs.
    pub template_engine: gatekeeper::TemplateEngine,
}

impl EvalContext<'static> {
    /// A context for `endpoint` with no deadline and no known namespaces.
    pub fn new(endpoint: Endpoint) -> Self {
        EvalContext {
            endpoint,
            deadline: None,
            namespaces: &NoNamespaces,
            authorizer: None,
            params: None,
            enforcement_point: gatekeeper::EnforcementPoint::Webhook,
            inventory: None,
            from_object: None,
            template_engine: gatekeeper::TemplateEngine::Preferred,
        }
    }
}

impl<'a> EvalContext<'a> {
    /// The same context with a deadline.
    #[must_use]
    pub fn with_deadline(self, deadline: Instant) -> Self {
        EvalContext {
            deadline: Some(deadline),
            ..self
        }
    }

    /// The same context with a namespace lookup.
    #[must_use]
    pub fn with_namespaces<'b>(self, namespaces: &'b dyn NamespaceLookup) -> EvalContext<'b>
    where
        'a: 'b,
    {
        EvalContext {
            endpoint: self.endpoint,
            deadline: self.deadline,
            namespaces,
            params: self.params,
            authorizer: self.authorizer,
            enforcement_point: self.enforcement_point,
            inventory: self.inventory,
            from_object: self.from_object,
            template_engine: self.template_engine,
        }
    }

    /// The same context for a request made from `object` alone, as written (see
    /// [`EvalContext::from_object`]).
    #[must_use]
    pub fn made_from_object(self, from_object: Option<&'a serde_json::Value>) -> Self {
        EvalContext {
            from_object,
            ..self
        }
    }

    /// The same context running `engine`'s code of Gatekeeper templates that carry both.
    #[must_use]
    pub fn with_template_engine(self, template_engine: gatekeeper::TemplateEngine) -> Self {
        EvalContext {
            template_engine,
            ..self
        }
    }

    /// The same context with Gatekeeper's `data.inventory`.
    #[must_use]
    pub fn with_inventory(self, inventory: Option<&'a gatekeeper::Inventory>) -> Self {
        EvalContext { inventory, ..self }
    }

    /// The same context at another Gatekeeper enforcement point.
    #[must_use]
    pub fn at_enforcement_point(self, enforcement_point: gatekeeper::EnforcementPoint) -> Self {
        EvalContext {
            enforcement_point,
            ..self
        }
    }

    /// The same context with an authorizer for CEL `authorizer` checks.
    #[must_use]
    pub fn with_authorizer(self, authorizer: &'a Arc<dyn AccessReviewer>) -> Self {
        EvalContext {
            authorizer: Some(authorizer),
            ..self
        }
    }

    /// The same context with parameter objects from the cluster (`None`: from the policy
    /// folders).
    #[must_use]
    pub fn with_params(self, params: Option<&'a dyn ParamLookup>) -> Self {
        EvalContext { params, ..self }
    }
}

/// Why a request could not be evaluated (distinct from a denial, which is a [`Decision`]).
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The request deadline passed during evaluation.
    #[error("evaluation did not finish before the request deadline")]
    DeadlineExceeded,
    /// The object's `apiVersion` and `kind` are not the request's `kind`.
    #[error("the object is {object}, but the request is for {request}")]
    KindMismatch {
        /// `apiVersion kind` of the object.
        object: String,
        /// `apiVersion kind` of the request.
        request: String,
    },
    /// The object does not decode into its kind's Go type, as the apiserver would have
    /// refused it: a rule reading its fields would read the wrong types.
    #[error("{0}")]
    Undecodable(String),
    /// A native policy would apply, but the request's namespace, whose labels or object it
    /// needs, could not be read from the cluster (not: does not exist).
    #[error("namespace {namespace:?} could not be read: {message}")]
    NamespaceUnreadable {
        /// The namespace.
        namespace: String,
        /// Why: the failed read's Status message or client error.
        message: String,
    },
}

/// Checks what the apiserver guarantees of an object it sends: `apiVersion` and `kind` are the
/// request's, and, where Pod Security reads typed fields (Pods and workloads), the fields it
/// reads decode into their Go types. A request from elsewhere (curl, a test) that breaks this
/// gets an evaluation error rather than a decision on misread fields; a type error in a field
/// no check reads is not looked for (the apiserver never sends one).
fn check_object_shape(request: &AdmissionRequest, pod_security: bool) -> Result<(), EvalError> {
    for object in [&request.object, &request.old_object].into_iter().flatten() {
        let kind = &request.kind;
        let type_strings = match object.json() {
            JsonRef::Tree(tree) => type_strings(tree),
            JsonRef::View(node) => type_strings(node),
        };
        if let (Some(object_version), Some(object_kind)) = type_strings
            && !kind.is_type_of(object_version, object_kind)
        {
            let api_version = if kind.group.is_empty() {
                kind.version.clone()
            } else {
                format!("{}/{}", kind.group, kind.version)
            };
            return Err(EvalError::KindMismatch {
                object: format!("{object_version} {object_kind}"),
                request: format!("{api_version} {}", kind.kind),
            });
        }
        if pod_security && pod_spec_location(request).is_some() {
            crate::kubernetes::schema::decode::check_object_fields(
                kind,
                object.json(),
                pod_security::fields_read,
            )
            .map_err(|error| EvalError::Undecodable(error.to_string()))?;
        }
    }
    Ok(())
}

/// An object's `apiVersion` and `kind`, where they are strings.
fn type_strings<'a, J: JsonRead<'a>>(object: J) -> (Option<&'a str>, Option<&'a str>) {
    let field = |name: &str| object.get(name).and_then(JsonRead::as_str);
    (field("apiVersion"), field("kind"))
}

/// The built-in policy set, embedded in the binary.
pub const BUILTIN_POLICIES: &str = include_str!("builtin.yaml");

/// A compiled, immutable rule set. Swapped whole on reload.
#[derive(Default)]
pub struct Engine {
    policies: Vec<CompiledPolicy>,
    pod_security: Vec<pod_security::PodSecurityAdmission>,
    admission_policies: admission_policy::AdmissionPolicies,
    gatekeeper: gatekeeper::Gatekeeper,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("rules", &self.rule_count())
            .field(
                "policies",
                &self
                    .policies
                    .iter()
                    .map(CompiledPolicy::name)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Engine {
    /// An engine with no rules: everything is allowed unchanged.
    pub fn empty() -> Self {
        Engine::default()
    }

    /// The built-in policy set that `serve`, `check` and `webhook-config` use when no policies
    /// are given: `src/engine/builtin.yaml` (Pod Security baseline enforced and restricted
    /// warned and audited, a warning for unpinned images, seccomp and pull-policy defaults).
    pub fn builtin() -> Self {
        let documents =
            crate::policy::documents_from_str(Path::new("builtin.yaml"), BUILTIN_POLICIES)
                .and_then(|documents| Engine::compile(&documents));
        match documents {
            Ok(engine) => engine,
            // The embedded set is compiled by the tests; an error here is a build defect.
            Err(error) => panic!("the built-in policy set does not compile: {error}"),
        }
    }

    /// Adds a Pod Security configuration (evaluated after the native policies).
    #[must_use]
    pub fn with_pod_security(mut self, admission: pod_security::PodSecurityAdmission) -> Self {
        self.pod_security.push(admission);
        self
    }

    /// Adds a compiled native policy (evaluated after those added before it).
    #[must_use]
    pub fn with_policy(mut self, policy: CompiledPolicy) -> Self {
        self.policies.push(policy);
        self
    }

    /// What a webhook configuration must register for `endpoint`: the union of its rules'
    /// resource rules, merged.
    pub fn webhook_rules(&self, endpoint: Endpoint) -> Vec<ResourceRule> {
        let mut rules: Vec<ResourceRule> = Vec::new();
        for policy in &self.policies {
            rules.extend(policy.resource_rules(endpoint));
        }
        if endpoint == Endpoint::Validate {
            for admission in &self.pod_security {
                rules.extend(admission.resource_rules());
            }
        }
        rules.extend(self.admission_policies.webhook_rules(endpoint));
        if endpoint == Endpoint::Validate {
            rules.extend(self.gatekeeper.resource_rules());
        }
        merge_rules(rules)
    }

    /// The type-checking warnings of every ValidatingAdmissionPolicy, by policy name, as the
    /// apiserver reports them in `status.typeChecking` (an empty list where everything
    /// type-checks). Warnings never stop a policy from loading.
    pub fn type_checking(&self) -> BTreeMap<String, Vec<ExpressionWarning>> {
        self.admission_policies.type_checking().clone()
    }

    /// Whether deciding the request may take long whatever the object's size: an admission
    /// policy that runs on `endpoint` for its resource and operation nests comprehensions, so
    /// its work can grow as a power of the object's list lengths, or uses `authorizer`, whose
    /// checks wait for a SubjectAccessReview (native `cel` rules cannot use it). The server
    /// decides such requests off the async workers.
    pub fn may_run_long(&self, request: &AdmissionRequest, endpoint: Endpoint) -> bool {
        self.admission_policies.may_run_long(request, endpoint)
    }

    /// Whether some rule may act on `request` at `endpoint`, judged from its envelope (kind,
    /// resource, operation, name, requester) and the labels of its namespace from
    /// `namespaces` (namespace selectors, Pod Security's namespace levels); the objects are
    /// not consulted, so neither are object selectors. When false, [`Engine::evaluate`] with
    /// the same `namespaces` could only allow the request unchanged, so `serve` does not
    /// decode its objects.
    pub fn wants(
        &self,
        request: &AdmissionRequest,
        endpoint: Endpoint,
        namespaces: &dyn NamespaceLookup,
    ) -> bool {
        self.policies
            .iter()
            .any(|policy| policy.wants(request, endpoint, namespaces))
            || (endpoint == Endpoint::Validate
                && self
                    .pod_security
                    .iter()
                    .any(|admission| admission.wants(request, namespaces)))
            || self.admission_policies.wants(request, endpoint, namespaces)
            || (endpoint == Endpoint::Validate && self.gatekeeper.wants(request, namespaces))
    }

    /// Which of the request's objects `serve` decodes, from its envelope and `namespaces`:
    /// [`WantedObjects::Neither`] when no rule may act on it ([`Engine::wants`]);
    /// [`WantedObjects::Object`] for an UPDATE that no rule which may act on it reads
    /// `oldObject` of (an expression naming it, an object selector, which also matches the
    /// old labels, or Pod Security on Pods and Namespaces, which compares them); otherwise
    /// [`WantedObjects::Both`]. [`Engine::evaluate`] with the same `namespaces` decides a
    /// request without its `oldObject` as it decides it with it when the answer is `Object`.
    pub fn wanted_objects(
        &self,
        request: &AdmissionRequest,
        endpoint: Endpoint,
        namespaces: &dyn NamespaceLookup,
    ) -> WantedObjects {
        if !self.wants(request, endpoint, namespaces) {
            return WantedObjects::Neither;
        }
        let reads_old_object = request.operation != Operation::Update
            || self
                .policies
                .iter()
                .any(|policy| policy.reads_old_object(request, endpoint, namespaces))
            || (endpoint == Endpoint::Validate
                && !self.pod_security.is_empty()
                && pod_security::PodSecurityAdmission::reads_old_object(request))
            || self.admission_policies.reads_old_object(request, endpoint)
            // Gatekeeper matches a constraint on the old object too.
            || (endpoint == Endpoint::Validate && self.gatekeeper.wants(request, namespaces));
        if reads_old_object {
            WantedObjects::Both
        } else {
            WantedObjects::Object
        }
    }

    /// How `serve` decodes the objects of a request to `endpoint`: into an object view when
    /// the rules that may run there read one (at `/validate`: Pod Security, the shape checks,
    /// the native rule families, the compiled CEL of native rules and admission policies,
    /// Gatekeeper's templates and matching), else into a tree (mutation edits a tree;
    /// Gatekeeper's ExpansionTemplates generate from one). Either way
    /// [`Engine::evaluate`] decides alike: a reader that needs a tree (an expression the
    /// interpreter evaluates, an object selector) gets one built from the view
    /// ([`crate::admission::RequestObject`]).
    pub fn object_form(&self, endpoint: Endpoint) -> ObjectForm {
        let views_only = endpoint == Endpoint::Validate && !self.gatekeeper.reads_trees();
        if views_only {
            ObjectForm::View
        } else {
            ObjectForm::Tree
        }
    }

    /// Whether some rule may read the labels or the object of a request's namespace: any
    /// rule at all, since native policies, Pod Security, admission policies and Gatekeeper
    /// constraints all may. A
    /// request in a namespace the lookup does not hold yet is worth reading it for only then.
    pub fn reads_namespaces(&self) -> bool {
        !(self.policies.is_empty()
            && self.pod_security.is_empty()
            && self.admission_policies.is_empty()
            && self.gatekeeper.is_empty())
    }

    /// The parameter objects by name that the admission policies running on `endpoint` would
    /// read for `request`: each paramKind with the paramRef naming the object. `serve` reads
    /// those its cluster watches do not hold yet before deciding the request.
    pub fn params_by_name(
        &self,
        request: &AdmissionRequest,
        endpoint: Endpoint,
        namespaces: &dyn NamespaceLookup,
    ) -> Vec<(&ParamKind, &ParamRef)> {
        self.admission_policies
            .params_by_name(request, endpoint, namespaces)
    }

    /// The paramKinds of bound admission policies with their bindings' paramRefs: what
    /// `serve` watches in the cluster.
    pub fn param_needs(&self) -> Vec<ParamNeed> {
        self.admission_policies.param_needs()
    }

    /// How many rules the engine holds.
    pub fn rule_count(&self) -> usize {
        self.policies
            .iter()
            .map(CompiledPolicy::rule_count)
            .sum::<usize>()
            + self.admission_policies.rule_count()
            + self.gatekeeper.rule_count()
    }

    /// Decides a request. `/validate` runs every validation rule and collects every violation;
    /// `/mutate` runs the defaulting rules in order and returns one patch for all of them.
    pub fn evaluate(
        &self,
        request: &AdmissionRequest,
        context: &EvalContext<'_>,
    ) -> Result<Decision, EvalError> {
        let mut decision = Decision::default();
        let cel = CelInputCell::new(
            context.namespaces,
            self.admission_policies
                .uses_authorizer()
                .then(|| AuthorizerBinding {
                    reviewer: context.authorizer.cloned(),
                    deadline: context.deadline,
                }),
        );
        let past_deadline = || context.deadline.is_some_and(|d| Instant::now() >= d);
        check_object_shape(request, !self.pod_security.is_empty())?;
        match context.endpoint {
            Endpoint::Validate => {
                for policy in &self.policies {
                    if past_deadline() {
                        return Err(EvalError::DeadlineExceeded);
                    }
                    policy.validate(request, context.namespaces, &cel, &mut decision)?;
                }
                for admission in &self.pod_security {
                    if past_deadline() {
                        return Err(EvalError::DeadlineExceeded);
                    }
                    admission.evaluate(request, context.namespaces, &mut decision);
                }
                if past_deadline() {
                    return Err(EvalError::DeadlineExceeded);
                }
                self.gatekeeper.validate(
                    request,
                    context.namespaces,
                    GatekeeperContext {
                        point: context.enforcement_point,
                        inventory: context.inventory,
                        from_object: context.from_object,
                        engine: context.template_engine,
                        deadline: context.deadline,
                    },
                    &mut decision,
                )?;
                self.admission_policies.validate(
                    request,
                    context.namespaces,
                    context.params,
                    &cel,
                    &mut decision,
                );
            }
            Endpoint::Mutate => {
                let Some(object) = request.object.as_deref() else {
                    return Ok(decision);
                };
                let mut editor = ObjectEditor::new(object);
                for policy in &self.policies {
                    if past_deadline() {
                        return Err(EvalError::DeadlineExceeded);
                    }
                    policy.apply_defaults(request, context.namespaces, &cel, &mut editor)?;
                }
                if self.admission_policies.mutates() {
                    if past_deadline() {
                        return Err(EvalError::DeadlineExceeded);
                    }
                    // MutatingAdmissionPolicies see the native defaults; the answer is one
                    // minimal patch from the object as sent to the object as all left it.
                    let defaulted = editor.finish().1;
                    let mutated = self.admission_policies.mutate(
                        request,
                        context.namespaces,
                        context.params,
                        &cel,
                        defaulted,
                        &mut decision,
                    );
                    // After a mutation the object is in its typed form; so is an object the
                    // apiserver sends, and one sent otherwise is compared in that form too,
                    // so that the patch holds only what the policies changed.
                    let typed_sent;
                    let sent = if mutated.typed {
                        typed_sent = admission_policy::typed_form_of(&request.kind, object)
                            .unwrap_or(std::borrow::Cow::Borrowed(object));
                        &*typed_sent
                    } else {
                        object
                    };
                    let patched = mutated.object;
                    if !mutated.failed && &patched != sent {
                        decision.patch = Some(crate::patch::json_patch::diff(sent, &patched));
                        decision.patched_object = Some(patched);
                    }
                } else if editor.is_changed() {
                    let (operations, patched) = editor.finish();
                    decision.patch = Some(operations);
                    decision.patched_object = Some(patched);
                }
            }
        }
        Ok(decision)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn request(group: &str, version: &str, kind: &str, object_version: &str) -> AdmissionRequest {
        serde_json::from_value(json!({
            "uid": "u",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": "things"},
            "operation": "CREATE",
            "object": {"apiVersion": object_version, "kind": kind, "metadata": {"name": "x"}},
        }))
        .unwrap()
    }

    fn pod_request(pod: Value) -> AdmissionRequest {
        serde_json::from_value(json!({
            "uid": "u",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "object": pod,
        }))
        .unwrap()
    }

    /// A plain Pod with `metadata`, `spec` and `container` (its one container) merged into
    /// its metadata, spec and container.
    fn pod_with(metadata: Value, spec: Value, container: Value) -> Value {
        let mut pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "annotations": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        });
        let merge = |target: &mut Value, extra: Value| {
            for (key, value) in extra.as_object().unwrap() {
                target[key] = value.clone();
            }
        };
        merge(&mut pod["metadata"], metadata);
        merge(&mut pod["spec"], spec);
        merge(&mut pod["spec"]["containers"][0], container);
        pod
    }

    #[test]
    fn a_wrong_type_in_a_field_pod_security_reads_is_refused() {
        let none = || json!({});
        for (metadata, spec, container, field) in [
            (
                json!({"annotations": []}),
                none(),
                none(),
                "ObjectMeta.metadata.annotations",
            ),
            (
                json!({"annotations": {"a": 5}}),
                none(),
                none(),
                "ObjectMeta.metadata.annotations",
            ),
            (
                none(),
                json!({"hostNetwork": "true"}),
                none(),
                "PodSpec.spec.hostNetwork",
            ),
            (
                none(),
                json!({"hostPID": 1}),
                none(),
                "PodSpec.spec.hostPID",
            ),
            (
                none(),
                json!({"hostIPC": "yes"}),
                none(),
                "PodSpec.spec.hostIPC",
            ),
            (
                none(),
                json!({"hostUsers": "false"}),
                none(),
                "PodSpec.spec.hostUsers",
            ),
            (
                none(),
                json!({"os": {"name": 5}}),
                none(),
                "PodOS.spec.os.name",
            ),
            (
                none(),
                json!({"runtimeClassName": 5}),
                none(),
                "PodSpec.spec.runtimeClassName",
            ),
            (
                none(),
                json!({"securityContext": {"runAsNonRoot": "true"}}),
                none(),
                "PodSecurityContext.spec.securityContext.runAsNonRoot",
            ),
            (
                none(),
                json!({"securityContext": {"sysctls": {"a": "b"}}}),
                none(),
                "PodSecurityContext.spec.securityContext.sysctls",
            ),
            (
                none(),
                json!({"volumes": [{"name": "v", "hostPath": "/"}]}),
                none(),
                "Volume.spec.volumes.VolumeSource.hostPath",
            ),
            (
                none(),
                json!({"volumes": {"v": {}}}),
                none(),
                "PodSpec.spec.volumes",
            ),
            (
                none(),
                json!({"initContainers": {}}),
                none(),
                "PodSpec.spec.initContainers",
            ),
            (
                none(),
                json!({"ephemeralContainers": [{"image": 5}]}),
                none(),
                "EphemeralContainer.spec.ephemeralContainers.EphemeralContainerCommon.image",
            ),
            (
                none(),
                none(),
                json!({"name": 5}),
                "Container.spec.containers.name",
            ),
            (
                none(),
                none(),
                json!({"image": ["nginx"]}),
                "Container.spec.containers.image",
            ),
            (
                none(),
                none(),
                json!({"securityContext": {"privileged": "no"}}),
                "SecurityContext.spec.containers.securityContext.privileged",
            ),
            (
                none(),
                none(),
                json!({"securityContext": {"capabilities": {"add": "ALL"}}}),
                "Capabilities.spec.containers.securityContext.capabilities.add",
            ),
            (
                none(),
                none(),
                json!({"securityContext": {"runAsUser": "0"}}),
                "SecurityContext.spec.containers.securityContext.runAsUser",
            ),
            (
                none(),
                none(),
                json!({"securityContext": {"seccompProfile": {"type": 1}}}),
                "SeccompProfile.spec.containers.securityContext.seccompProfile.type",
            ),
            (
                none(),
                none(),
                json!({"ports": [{"hostPort": "80"}]}),
                "ContainerPort.spec.containers.ports.hostPort",
            ),
            (
                none(),
                none(),
                json!({"livenessProbe": {"httpGet": {"host": 5}}}),
                "HTTPGetAction.spec.containers.livenessProbe.ProbeHandler.httpGet.host",
            ),
            (
                none(),
                none(),
                json!({"lifecycle": {"preStop": {"tcpSocket": {"host": true}}}}),
                "TCPSocketAction.spec.containers.lifecycle.preStop.tcpSocket.host",
            ),
        ] {
            let pod = pod_with(metadata, spec, container);
            let error = check_object_shape(&pod_request(pod.clone()), true)
                .expect_err("refused")
                .to_string();
            assert!(
                error.starts_with(
                    "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal "
                ) && error.contains(&format!(" into Go struct field {field} of type ")),
                "{pod}: {error}"
            );
            assert!(check_object_shape(&pod_request(pod), false).is_ok());
        }
    }

    #[test]
    fn a_wrong_type_where_pod_security_reads_nothing_is_not_looked_for() {
        let none = || json!({});
        for (metadata, spec, container) in [
            (json!({"labels": []}), none(), none()),
            (json!({"creationTimestamp": "yesterday"}), none(), none()),
            (
                none(),
                json!({"terminationGracePeriodSeconds": "30"}),
                none(),
            ),
            (none(), json!({"tolerations": {}}), none()),
            (
                none(),
                json!({"volumes": [{"name": "v", "configMap": {"items": "x"}}]}),
                none(),
            ),
            (none(), none(), json!({"env": {"A": "b"}})),
            (
                none(),
                none(),
                json!({"resources": {"limits": {"cpu": "lots"}}}),
            ),
            (none(), none(), json!({"ports": [{"containerPort": "80"}]})),
            (
                none(),
                none(),
                json!({"livenessProbe": {"periodSeconds": "10"}}),
            ),
            (
                none(),
                none(),
                json!({"livenessProbe": {"httpGet": {"port": true}}}),
            ),
        ] {
            let pod = pod_with(metadata, spec, container);
            let object = pod_request(pod.clone());
            assert!(
                crate::kubernetes::schema::decode::check_object(
                    &object.kind,
                    object.object.as_ref().unwrap().json()
                )
                .is_err(),
                "{pod}"
            );
            assert!(check_object_shape(&object, true).is_ok(), "{pod}");
        }
    }

    #[test]
    fn an_object_must_be_the_group_version_the_request_names() {
        for (group, version, object_version, matches) in [
            ("", "v1", "v1", true),
            ("", "v1", "v2", false),
            ("", "v1", "/v1", false),
            ("apps", "v1", "apps/v1", true),
            ("apps", "v1", "apps/v2", false),
            ("apps", "v1", "v1", false),
            ("apps", "v1", "apps", false),
            ("apps", "v1", "apps/", false),
            ("apps", "v1", "appsx/v1", false),
            ("apps", "v1", "apps/v1/x", false),
        ] {
            let request = request(group, version, "Thing", object_version);
            let result = check_object_shape(&request, false);
            assert_eq!(
                result.is_ok(),
                matches,
                "{group}/{version} vs {object_version}"
            );
            if let Err(error) = result {
                let expected_request = if group.is_empty() {
                    format!("{version} Thing")
                } else {
                    format!("{group}/{version} Thing")
                };
                assert!(
                    matches!(&error, EvalError::KindMismatch { object, request }
                        if *object == format!("{object_version} Thing") && *request == expected_request),
                    "{error:?}"
                );
            }
        }
    }
}
