//! Pod Security Admission as a policy document: the upstream `PodSecurityConfiguration`
//! format, namespace label overrides, exemptions, and enforce / warn / audit.
//!
//! [`PodSecurityAdmission`] does for one request what upstream's admission library
//! (`k8s.io/pod-security-admission` v0.37.2, `admission/admission.go` and `api/helpers.go`)
//! does, on top of the checks of [`check_pod`]:
//!
//! - **Namespaces** (CREATE, UPDATE): the `pod-security.kubernetes.io/*` labels must be valid;
//!   invalid ones are refused with upstream's `Namespace "…" is invalid: …` message (on UPDATE
//!   only when they are newly invalid, as upstream). Exempt namespaces that set a policy get
//!   upstream's "is exempt from Pod Security" warning.
//! - **Pods** (resource `pods`; subresources other than upstream's ignored ones, so
//!   `ephemeralcontainers` is evaluated and `status`, `exec` … are not): the enforce level
//!   refuses, the audit level records an audit annotation, the warn level warns. An UPDATE is
//!   evaluated only when upstream's `isSignificantPodUpdate` says so (container lists or
//!   images changed, ephemeral containers added).
//! - **Workload resources with a pod template** (PodTemplate, ReplicationController,
//!   Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob; no subresource): never
//!   refused, only warned about and audited, on the template's metadata and spec.
//!
//! DELETE and CONNECT, and every other resource, are left alone.
//!
//! # Audit annotations
//!
//! Upstream's in-tree plugin records `pod-security.kubernetes.io/<key>`. A webhook's
//! `auditAnnotations` are prefixed by the apiserver with the webhook's name and a `/`, so a key
//! must not contain `/` itself; the keys here are upstream's with `pod-security-` in front:
//!
//! | upstream (in-tree)                            | here                               |
//! |-----------------------------------------------|------------------------------------|
//! | `pod-security.kubernetes.io/enforce-policy`   | [`ENFORCE_POLICY_ANNOTATION`]      |
//! | `pod-security.kubernetes.io/audit-violations` | [`AUDIT_VIOLATIONS_ANNOTATION`]    |
//! | `pod-security.kubernetes.io/exempt`           | [`EXEMPT_ANNOTATION`]              |
//! | `pod-security.kubernetes.io/error`            | [`ERROR_ANNOTATION`]               |
//!
//! The values are upstream's.
//!
//! # Not reproduced
//!
//! - When a Namespace UPDATE tightens the enforce level, upstream lists the namespace's pods and
//!   warns about those that would violate it. There is no pod lister here, so that warning is
//!   not given (the exempt-namespace warning on that path is).
//! - Upstream refuses a Pod request it cannot decode, or whose namespace does not exist. Here
//!   the apiserver has decoded the object already, an unknown namespace (the lookup answers
//!   `None`) is evaluated with the defaults, and a pod subresource that upstream does not
//!   ignore but whose kind is not `Pod` is left alone rather than refused. A namespace whose
//!   read failed ([`NamespaceLookup::read_failure`]) is answered as upstream answers it: a Pod
//!   is refused with a 500 InternalError, a workload admitted; both carry the `error` audit
//!   annotation.

use std::collections::HashSet;
use std::fmt::{self, Write as _};
use std::sync::Arc;

use super::pod::{PodJson, str_field};
use super::templates::{
    TemplateAt, at, extract_template, is_significant_pod_update, workload_template,
};
use super::text::go_quote;
use super::{CheckFailure, Level, LevelVersion, Version, check_pod, violation_message};
use crate::admission::{AdmissionRequest, Operation};
use crate::admission::{JsonRead, JsonRef, RequestObject};
use crate::engine::{
    Decision, DenialStatus, Labels, NamespaceLookup, PolicyOutcome, ReadFailure, ResourceRule,
    Violation, ViolationForm,
};

// ---------------------------------------------------------------------------------------------
// Labels, annotations and messages
// ---------------------------------------------------------------------------------------------

/// Namespace label: the level refused.
pub const ENFORCE_LEVEL_LABEL: &str = "pod-security.kubernetes.io/enforce";
/// Namespace label: the version of the level refused.
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
/// Namespace label: the level audited.
pub const AUDIT_LEVEL_LABEL: &str = "pod-security.kubernetes.io/audit";
/// Namespace label: the version of the level audited.
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
/// Namespace label: the level warned about.
pub const WARN_LEVEL_LABEL: &str = "pod-security.kubernetes.io/warn";
/// Namespace label: the version of the level warned about.
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// Audit annotation (upstream `enforce-policy`): the enforced `level:version` of an evaluated
/// pod, `privileged:latest` when the namespace is privileged in every mode.
pub const ENFORCE_POLICY_ANNOTATION: &str = "pod-security-enforce-policy";
/// Audit annotation (upstream `audit-violations`): `would violate PodSecurity "…": …`.
pub const AUDIT_VIOLATIONS_ANNOTATION: &str = "pod-security-audit-violations";
/// Audit annotation (upstream `exempt`): why a request was not evaluated, `namespace`, `user`
/// or `runtimeClass`.
pub const EXEMPT_ANNOTATION: &str = "pod-security-exempt";
/// Audit annotation (upstream `error`): `Failed to parse policy: …` when namespace labels are
/// invalid (the request is evaluated with upstream's fallbacks).
pub const ERROR_ANNOTATION: &str = "pod-security-error";

/// The policy name of the violations this module reports.
const POLICY: &str = "pod-security";

/// Upstream's `ParseLevel` error.
pub(super) const INVALID_LEVEL: &str = "must be one of privileged, baseline, restricted";
/// Upstream's `ParseVersion` error.
pub(super) const INVALID_VERSION: &str = "must be \"latest\" or \"v1.x\"";

/// Pod subresources upstream never evaluates; any other is expected to carry a Pod.
const IGNORED_POD_SUBRESOURCES: [&str; 8] = [
    "exec",
    "attach",
    "binding",
    "eviction",
    "log",
    "portforward",
    "proxy",
    "status",
];

/// The effective policy of a namespace: a level and version for each mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NamespacePolicy {
    /// Refused.
    pub enforce: LevelVersion,
    /// Recorded in an audit annotation.
    pub audit: LevelVersion,
    /// Warned about.
    pub warn: LevelVersion,
}

/// What upstream's `ValidatePodController` decides of a workload from its namespace and
/// requester, before reading the object.
enum ControllerPolicy {
    /// Exempt, by `namespace` or `user`: only the exemption is recorded.
    Exempt(&'static str),
    /// Warn and audit are both privileged: nothing is checked or recorded.
    Unchecked,
    /// The namespace could not be read: upstream admits, with the error annotated.
    Unreadable(ReadFailure),
    /// The pod template is checked against the policy (with its label errors).
    Checked(NamespacePolicy, Vec<LabelError>),
}

/// The subresource the client asked for, which upstream reads.
fn requested_subresource(request: &AdmissionRequest) -> &str {
    request
        .request_sub_resource
        .as_deref()
        .or(request.sub_resource.as_deref())
        .unwrap_or("")
}

impl NamespacePolicy {
    /// Every mode is privileged: nothing to check.
    pub fn fully_privileged(&self) -> bool {
        self.enforce.level == Level::Privileged
            && self.audit.level == Level::Privileged
            && self.warn.level == Level::Privileged
    }

    /// Upstream's `NamespacePolicy.Equivalent`: each mode is privileged in both, or equal.
    pub fn equivalent(&self, other: &NamespacePolicy) -> bool {
        let same = |a: LevelVersion, b: LevelVersion| {
            (a.level == Level::Privileged && b.level == Level::Privileged) || a == b
        };
        same(self.enforce, other.enforce)
            && same(self.audit, other.audit)
            && same(self.warn, other.warn)
    }
}

/// An invalid Pod Security namespace label: upstream's `field.Invalid` on
/// `metadata.labels[<label>]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelError {
    /// The label, e.g. `pod-security.kubernetes.io/enforce`.
    pub label: &'static str,
    /// Its value.
    pub value: String,
    /// What a value must be, e.g. `must be one of privileged, baseline, restricted`.
    pub detail: &'static str,
}

impl fmt::Display for LabelError {
    /// `metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "x": must be …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "metadata.labels[{}]: Invalid value: {}: {}",
            self.label,
            go_quote(&self.value),
            self.detail
        )
    }
}

/// Go's `ErrorList.ToAggregate().Error()`: repeated messages dropped, one message as it is,
/// several in brackets separated by `, `.
fn aggregate(errors: &[LabelError]) -> String {
    let mut messages: Vec<String> = Vec::with_capacity(errors.len());
    for error in errors {
        let message = error.to_string();
        if !messages.contains(&message) {
            messages.push(message);
        }
    }
    match messages.len() {
        1 => messages.swap_remove(0),
        _ => format!("[{}]", messages.join(", ")),
    }
}

/// `would violate PodSecurity "…": …`: the audit and warning text, from the denial text.
fn would_violate_message(level_version: LevelVersion, failures: &[CheckFailure]) -> String {
    let message = violation_message(level_version, failures);
    match message.strip_prefix("violates ") {
        Some(rest) => format!("would violate {rest}"),
        None => message,
    }
}

// ---------------------------------------------------------------------------------------------
// The admission controller
// ---------------------------------------------------------------------------------------------

/// Pod Security Admission compiled from a [`PodSecurityConfiguration`]: the default policy
/// parsed and the exemptions as sets, so a request is only evaluated. See the module
/// documentation for what it does to which requests.
#[derive(Debug, Clone)]
pub struct PodSecurityAdmission {
    pub(super) defaults: NamespacePolicy,
    pub(super) exempt_usernames: HashSet<String>,
    pub(super) exempt_namespaces: HashSet<String>,
    pub(super) exempt_runtime_classes: HashSet<String>,
}

/// The labels of a Namespace object, read as Go decodes them (`null` values are `""`).
fn object_label<'a, J: JsonRead<'a>>(object: J, key: &str) -> Option<&'a str> {
    at(object, &["metadata", "labels", key]).map(|value| value.as_str().unwrap_or(""))
}

/// Counts a Pod that fails Pod Security under one mode (enforce as `Deny`, `Audit`, `Warn`)
/// for `portcullis_policy_evaluations_total`: policy `pod-security`, the mode's level as the
/// binding (`restricted:latest`), so that audit and warn failures are would-be denials. Passes
/// are not counted, so that a compliant Pod costs no allocation.
fn record_outcome(
    decision: &mut Decision,
    action: &'static str,
    level: LevelVersion,
    failures: &[CheckFailure],
) {
    if failures.is_empty() {
        return;
    }
    decision.outcomes.push(PolicyOutcome {
        kind: "PodSecurity",
        policy: Arc::from(POLICY),
        binding: Some(Arc::from(level.to_string())),
        action,
        result: "fail",
    });
}

fn annotate(decision: &mut Decision, key: &str, value: String) {
    decision.audit_annotations.insert(key.to_owned(), value);
}

impl PodSecurityAdmission {
    /// The default policy, for namespaces without Pod Security labels.
    pub fn defaults(&self) -> NamespacePolicy {
        self.defaults
    }

    /// What a webhook must register, as upstream's webhook configuration does: CREATE and
    /// UPDATE of `namespaces`, `pods`, `pods/ephemeralcontainers` and the workload resources
    /// with pod templates, `v1` of each group. (Upstream splits them into a failing-closed
    /// webhook for namespaces and pods and a failing-open one for the workloads.)
    pub fn resource_rules(&self) -> Vec<ResourceRule> {
        let rule = |group: &str, resources: &[&str]| ResourceRule {
            api_groups: vec![group.to_owned()],
            api_versions: vec!["v1".to_owned()],
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
            operations: vec![Operation::Create, Operation::Update],
        };
        vec![
            rule(
                "",
                &[
                    "namespaces",
                    "pods",
                    "pods/ephemeralcontainers",
                    "podtemplates",
                    "replicationcontrollers",
                ],
            ),
            rule(
                "apps",
                &["daemonsets", "deployments", "replicasets", "statefulsets"],
            ),
            rule("batch", &["cronjobs", "jobs"]),
        ]
    }

    /// The effective policy of a namespace with `labels` (`None`: unknown, the defaults), and
    /// the labels that are invalid: upstream's `PolicyToEvaluate`. A policy is always given:
    /// an invalid enforce level is `restricted` (failing closed), an invalid audit or warn
    /// level `privileged` (failing open), an invalid version `latest`. A valid enforce label
    /// stricter than the warn level raises the warn level (and, unless a warn version is set,
    /// its version) to it, when no warn label is set.
    pub fn policy_for(&self, labels: Option<&Labels>) -> (NamespacePolicy, Vec<LabelError>) {
        self.resolve_policy(|key| labels?.get(key).map(String::as_str))
    }

    fn resolve_policy<'a>(
        &self,
        label: impl Fn(&str) -> Option<&'a str>,
    ) -> (NamespacePolicy, Vec<LabelError>) {
        let mut policy = self.defaults;
        let mut errors = Vec::new();
        let level = |key: &'static str, on_error: Level, errors: &mut Vec<LabelError>| {
            let value = label(key)?;
            Some(value.parse::<Level>().unwrap_or_else(|_| {
                errors.push(LabelError {
                    label: key,
                    value: value.to_owned(),
                    detail: INVALID_LEVEL,
                });
                on_error
            }))
        };
        let enforce_level = level(ENFORCE_LEVEL_LABEL, Level::Restricted, &mut errors);
        let has_enforce_level = enforce_level.is_some() && errors.is_empty();
        if let Some(level) = enforce_level {
            policy.enforce.level = level;
        }
        let version = |key: &'static str, errors: &mut Vec<LabelError>| {
            let value = label(key)?;
            Some(value.parse::<Version>().unwrap_or_else(|_| {
                errors.push(LabelError {
                    label: key,
                    value: value.to_owned(),
                    detail: INVALID_VERSION,
                });
                Version::Latest
            }))
        };
        if let Some(version) = version(ENFORCE_VERSION_LABEL, &mut errors) {
            policy.enforce.version = version;
        }
        if let Some(level) = level(AUDIT_LEVEL_LABEL, Level::Privileged, &mut errors) {
            policy.audit.level = level;
        }
        if let Some(version) = version(AUDIT_VERSION_LABEL, &mut errors) {
            policy.audit.version = version;
        }
        let warn_level = level(WARN_LEVEL_LABEL, Level::Privileged, &mut errors);
        if let Some(level) = warn_level {
            policy.warn.level = level;
        }
        let warn_version = version(WARN_VERSION_LABEL, &mut errors);
        if let Some(version) = warn_version {
            policy.warn.version = version;
        }
        if warn_level.is_none() && has_enforce_level && policy.enforce.level > policy.warn.level {
            policy.warn.level = policy.enforce.level;
            if warn_version.is_none() {
                policy.warn.version = policy.enforce.version;
            }
        }
        (policy, errors)
    }

    fn exempt_namespace(&self, namespace: &str) -> bool {
        !namespace.is_empty() && self.exempt_namespaces.contains(namespace)
    }

    fn exempt_user(&self, username: &str) -> bool {
        !username.is_empty() && self.exempt_usernames.contains(username)
    }

    fn exempt_runtime_class<'a, J: JsonRead<'a>>(&self, pod_spec: Option<J>) -> bool {
        let runtime_class = pod_spec.map_or("", |spec| str_field(spec, "runtimeClassName"));
        !runtime_class.is_empty() && self.exempt_runtime_classes.contains(runtime_class)
    }

    /// Evaluates one request and adds what it finds to `decision`: a violation (policy
    /// `pod-security`, rule `enforce`, message upstream's `violates PodSecurity "…": …`) when
    /// the enforce level refuses a pod, upstream's `would violate PodSecurity "…": …` as a
    /// warning and as the [`AUDIT_VIOLATIONS_ANNOTATION`], and upstream's other audit
    /// annotations. Namespace labels come from `namespaces`; a namespace it does not know gets
    /// the defaults.
    pub fn evaluate(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        decision: &mut Decision,
    ) {
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return;
        }
        let subresource = requested_subresource(request);
        let resource = &request.resource;
        match (resource.group.as_str(), resource.resource.as_str()) {
            ("", "namespaces") => self.validate_namespace(request, subresource, decision),
            ("", "pods") => self.validate_pod(request, subresource, namespaces, decision),
            (group, name) => {
                if let Some(template) = workload_template(group, name) {
                    self.validate_pod_controller(
                        request,
                        subresource,
                        template,
                        namespaces,
                        decision,
                    );
                }
            }
        }
    }

    /// Whether [`PodSecurityAdmission::evaluate`] may record anything for `request`, judged
    /// from its envelope and the labels of its namespace from `namespaces` (the same lookup
    /// `evaluate` is given): CREATE and UPDATE of a Namespace, of a Pod (not through the
    /// subresources upstream ignores), and of a workload with a pod template, unless its
    /// namespace's warn and audit levels are both privileged.
    pub fn wants(&self, request: &AdmissionRequest, namespaces: &dyn NamespaceLookup) -> bool {
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return false;
        }
        let subresource = requested_subresource(request);
        let resource = &request.resource;
        match (resource.group.as_str(), resource.resource.as_str()) {
            ("", "namespaces") => subresource.is_empty(),
            ("", "pods") => {
                !IGNORED_POD_SUBRESOURCES.contains(&subresource)
                    && request.kind.group.is_empty()
                    && request.kind.kind == "Pod"
            }
            (group, name) => {
                workload_template(group, name).is_some()
                    && subresource.is_empty()
                    && !matches!(
                        self.controller_policy(request, namespaces),
                        ControllerPolicy::Unchecked
                    )
            }
        }
    }

    /// Whether [`PodSecurityAdmission::evaluate`] may read the request's `oldObject`: on
    /// UPDATE of a Pod (whether the update is one that needs checking) or a Namespace (the
    /// labels it had). Workload resources are checked on their new template alone.
    pub fn reads_old_object(request: &AdmissionRequest) -> bool {
        request.operation == Operation::Update
            && request.resource.group.is_empty()
            && matches!(request.resource.resource.as_str(), "namespaces" | "pods")
    }

    /// Upstream's `ValidateNamespace`, without the check of existing pods (there is no pod
    /// lister): refuses invalid Pod Security labels, and warns when an exempt namespace sets a
    /// policy.
    fn validate_namespace(
        &self,
        request: &AdmissionRequest,
        subresource: &str,
        decision: &mut Decision,
    ) {
        if !subresource.is_empty() {
            return;
        }
        let Some(namespace) = request.object.as_ref().map(RequestObject::json) else {
            return;
        };
        let (policy, errors) = self.resolve_policy(|key| object_label(namespace, key));
        let refuse = |decision: &mut Decision| {
            let kind = &request.kind;
            let group_kind = if kind.group.is_empty() {
                kind.kind.clone()
            } else {
                format!("{}.{}", kind.kind, kind.group)
            };
            decision.violations.push(Violation {
                policy: POLICY.into(),
                rule: "namespace-labels".into(),
                path: String::new(),
                message: format!(
                    "{group_kind} {} is invalid: {}",
                    go_quote(request.name.as_deref().unwrap_or("")),
                    aggregate(&errors)
                ),
                form: ViolationForm::Rule,
            });
        };
        let exempt = self.exempt_namespace(request.namespace.as_deref().unwrap_or(""));
        match request.operation {
            Operation::Create => {
                if !errors.is_empty() {
                    refuse(decision);
                    return;
                }
            }
            Operation::Update => {
                let old = request.old_object.as_ref().map(RequestObject::json);
                let (old_policy, old_errors) = self.resolve_policy(|key| object_label(old?, key));
                // Labels that were already invalid in the same way may stay.
                if !errors.is_empty() && (old_errors.is_empty() || errors != old_errors) {
                    refuse(decision);
                    return;
                }
                let (new, old) = (policy.enforce, old_policy.enforce);
                if new == old
                    || new.level == Level::Privileged
                    || (new.version == old.version && new.level <= old.level)
                {
                    return;
                }
                // Upstream now warns about existing pods that violate the new enforce level,
                // unless the namespace is exempt; without a pod lister only the exempt case is
                // reproduced.
            }
            _ => return,
        }
        if exempt && let Some(warning) = self.exempt_namespace_warning(namespace, &policy) {
            decision.warn(warning);
        }
    }

    /// Upstream's `exemptNamespaceWarning`: the non-privileged modes the labels set, when the
    /// policy is not privileged and not equivalent to the defaults.
    fn exempt_namespace_warning(
        &self,
        namespace: JsonRef<'_>,
        policy: &NamespacePolicy,
    ) -> Option<String> {
        if policy.fully_privileged() || policy.equivalent(&self.defaults) {
            return None;
        }
        let has = |key| object_label(namespace, key).is_some();
        let mut modes = Vec::new();
        for (name, level_version, level_label, version_label) in [
            (
                "enforce",
                policy.enforce,
                ENFORCE_LEVEL_LABEL,
                ENFORCE_VERSION_LABEL,
            ),
            (
                "audit",
                policy.audit,
                AUDIT_LEVEL_LABEL,
                AUDIT_VERSION_LABEL,
            ),
            ("warn", policy.warn, WARN_LEVEL_LABEL, WARN_VERSION_LABEL),
        ] {
            if level_version.level != Level::Privileged && (has(level_label) || has(version_label))
            {
                modes.push(format!("{name}={level_version}"));
            }
        }
        let name = at(namespace, &["metadata", "name"])
            .and_then(JsonRead::as_str)
            .unwrap_or("");
        Some(format!(
            "namespace {} is exempt from Pod Security, and the policy ({}) will be ignored",
            go_quote(name),
            modes.join(", ")
        ))
    }

    /// Upstream's `ValidatePod`.
    fn validate_pod(
        &self,
        request: &AdmissionRequest,
        subresource: &str,
        namespaces: &dyn NamespaceLookup,
        decision: &mut Decision,
    ) {
        if IGNORED_POD_SUBRESOURCES.contains(&subresource) {
            return;
        }
        // Upstream decodes any other subresource as a Pod and refuses what does not decode;
        // here what is not a Pod is left alone.
        if !(request.kind.group.is_empty() && request.kind.kind == "Pod") {
            return;
        }
        let namespace = request.namespace.as_deref().unwrap_or("");
        if self.exempt_namespace(namespace) {
            annotate(decision, EXEMPT_ANNOTATION, "namespace".into());
            return;
        }
        if self.exempt_user(&request.user_info.username) {
            annotate(decision, EXEMPT_ANNOTATION, "user".into());
            return;
        }
        if let Some(failure) = namespaces.read_failure(namespace) {
            // Upstream's errorResponse: refused with an internal error that names the
            // namespace, and the read's error in the `error` audit annotation.
            let status = format!(
                "Internal error occurred: failed to lookup namespace {}",
                go_quote(namespace)
            );
            annotate(
                decision,
                ERROR_ANNOTATION,
                format!("{status}: {}", failure.message),
            );
            if decision.violations.is_empty() {
                decision.denial_status = Some(DenialStatus {
                    code: 500,
                    reason: "InternalError",
                });
            }
            decision.violations.push(Violation {
                policy: POLICY.into(),
                rule: "enforce".into(),
                path: String::new(),
                message: status,
                form: ViolationForm::Rule,
            });
            return;
        }
        let labels = namespaces.labels_ref(namespace);
        let (policy, errors) = self.resolve_policy(|key| labels.as_ref()?.get(key));
        if errors.is_empty() && policy.fully_privileged() {
            annotate(
                decision,
                ENFORCE_POLICY_ANNOTATION,
                "privileged:latest".into(),
            );
            return;
        }
        let Some(pod) = request.object.as_ref() else {
            return;
        };
        let old_pod = request
            .old_object
            .as_ref()
            .filter(|_| request.operation == Operation::Update);
        // Read from the views where both objects are held in one, else from the trees.
        match (pod.json(), old_pod.map(RequestObject::json)) {
            (JsonRef::View(pod), None) => {
                self.validate_pod_object(&policy, &errors, pod, None, decision);
            }
            (JsonRef::View(pod), Some(JsonRef::View(old_pod))) => {
                self.validate_pod_object(&policy, &errors, pod, Some(old_pod), decision);
            }
            _ => {
                let old_pod = old_pod.map(|old_pod| old_pod.tree());
                self.validate_pod_object(&policy, &errors, pod.tree(), old_pod, decision);
            }
        }
    }

    /// The end of upstream's `ValidatePod`: a significant change to `pod` (from `old_pod` on
    /// an UPDATE) is evaluated, enforce level included.
    fn validate_pod_object<'a, J: PodJson<'a>>(
        &self,
        policy: &NamespacePolicy,
        errors: &[LabelError],
        pod: J,
        old_pod: Option<J>,
        decision: &mut Decision,
    ) {
        if let Some(old_pod) = old_pod
            && !is_significant_pod_update(pod, old_pod)
        {
            return;
        }
        let (metadata, spec) = (pod.get("metadata"), pod.get("spec"));
        self.evaluate_pod(policy, errors, metadata, spec, true, decision);
    }

    /// Upstream's `ValidatePodController`: warn and audit only.
    fn validate_pod_controller(
        &self,
        request: &AdmissionRequest,
        subresource: &str,
        template: TemplateAt,
        namespaces: &dyn NamespaceLookup,
        decision: &mut Decision,
    ) {
        if !subresource.is_empty() {
            return;
        }
        let (policy, errors) = match self.controller_policy(request, namespaces) {
            ControllerPolicy::Exempt(why) => {
                annotate(decision, EXEMPT_ANNOTATION, why.into());
                return;
            }
            ControllerPolicy::Unchecked => return,
            ControllerPolicy::Unreadable(failure) => {
                let namespace = request.namespace.as_deref().unwrap_or("");
                annotate(
                    decision,
                    ERROR_ANNOTATION,
                    format!(
                        "failed to lookup namespace {}: {}",
                        go_quote(namespace),
                        failure.message
                    ),
                );
                return;
            }
            ControllerPolicy::Checked(policy, errors) => (policy, errors),
        };
        match request.object.as_ref().map(RequestObject::json) {
            Some(JsonRef::View(object)) => {
                if let Some((metadata, spec)) = extract_template(object, template) {
                    self.evaluate_pod(&policy, &errors, metadata, spec, false, decision);
                }
            }
            Some(JsonRef::Tree(object)) => {
                if let Some((metadata, spec)) = extract_template(object, template) {
                    self.evaluate_pod(&policy, &errors, metadata, spec, false, decision);
                }
            }
            None => {}
        }
    }

    /// What upstream's `ValidatePodController` decides before it reads the object.
    fn controller_policy(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> ControllerPolicy {
        let namespace = request.namespace.as_deref().unwrap_or("");
        if self.exempt_namespace(namespace) {
            return ControllerPolicy::Exempt("namespace");
        }
        if self.exempt_user(&request.user_info.username) {
            return ControllerPolicy::Exempt("user");
        }
        if let Some(failure) = namespaces.read_failure(namespace) {
            return ControllerPolicy::Unreadable(failure);
        }
        let labels = namespaces.labels_ref(namespace);
        let (policy, errors) = self.resolve_policy(|key| labels.as_ref()?.get(key));
        if errors.is_empty()
            && policy.warn.level == Level::Privileged
            && policy.audit.level == Level::Privileged
        {
            return ControllerPolicy::Unchecked;
        }
        ControllerPolicy::Checked(policy, errors)
    }

    /// Upstream's `EvaluatePod`: the enforce level only when `enforce`; each level and version
    /// checked once however many modes share it; no warning on a request being refused.
    #[allow(clippy::too_many_arguments)]
    fn evaluate_pod<'a, J: PodJson<'a>>(
        &self,
        policy: &NamespacePolicy,
        errors: &[LabelError],
        metadata: Option<J>,
        spec: Option<J>,
        enforce: bool,
        decision: &mut Decision,
    ) {
        if self.exempt_runtime_class(spec) {
            annotate(decision, EXEMPT_ANNOTATION, "runtimeClass".into());
            return;
        }
        if !errors.is_empty() {
            annotate(
                decision,
                ERROR_ANNOTATION,
                format!("Failed to parse policy: {}", aggregate(errors)),
            );
        }
        let mut refused = false;
        let enforced = enforce.then(|| {
            // One allocation: `restricted:v1.NNN` fits.
            let mut value = String::with_capacity(24);
            let _ = write!(value, "{}", policy.enforce);
            annotate(decision, ENFORCE_POLICY_ANNOTATION, value);
            check_pod(policy.enforce, metadata, spec)
        });
        if let Some(failures) = enforced.as_deref() {
            record_outcome(decision, "Deny", policy.enforce, failures);
        }
        if let Some(failures) = enforced.as_deref().filter(|f| !f.is_empty()) {
            decision.violations.push(Violation {
                policy: POLICY.into(),
                rule: "enforce".into(),
                path: String::new(),
                message: violation_message(policy.enforce, failures),
                form: ViolationForm::Rule,
            });
            refused = true;
        }

        let audited_owned;
        let audited: &[CheckFailure] = match &enforced {
            Some(failures) if policy.audit == policy.enforce => failures,
            _ => {
                audited_owned = check_pod(policy.audit, metadata, spec);
                &audited_owned
            }
        };
        record_outcome(decision, "Audit", policy.audit, audited);
        if !audited.is_empty() {
            annotate(
                decision,
                AUDIT_VIOLATIONS_ANNOTATION,
                would_violate_message(policy.audit, audited),
            );
        }

        if refused {
            return;
        }
        let warned_owned;
        let warned: &[CheckFailure] = match &enforced {
            Some(failures) if policy.warn == policy.enforce => failures,
            _ if policy.warn == policy.audit => audited,
            _ => {
                warned_owned = check_pod(policy.warn, metadata, spec);
                &warned_owned
            }
        };
        record_outcome(decision, "Warn", policy.warn, warned);
        if !warned.is_empty() {
            decision
                .warnings
                .push(would_violate_message(policy.warn, warned));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::ObjectView;
    use crate::engine::pod_security::ConfigError;

    fn view(value: &Value) -> ObjectView {
        ObjectView::parse(&value.to_string()).unwrap()
    }

    fn lv(text: &str) -> LevelVersion {
        text.parse().unwrap()
    }

    fn config(value: Value) -> Result<PodSecurityAdmission, ConfigError> {
        let mut document = json!({
            "apiVersion": "pod-security.admission.config.k8s.io/v1",
            "kind": "PodSecurityConfiguration",
        });
        document
            .as_object_mut()
            .unwrap()
            .extend(value.as_object().unwrap().clone());
        // Shape errors are the document layer's; they name the field the same way.
        let config = serde_path_to_error::deserialize(&document).map_err(|e| ConfigError {
            field: e.path().to_string(),
            message: e.into_inner().to_string(),
        })?;
        PodSecurityAdmission::new(&config)
    }

    fn admission(defaults: Value) -> PodSecurityAdmission {
        config(json!({ "defaults": defaults })).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn defaults_are_privileged_latest() {
        let admission = config(json!({})).unwrap();
        let all = lv("privileged:latest");
        assert_eq!(
            admission.defaults(),
            NamespacePolicy {
                enforce: all,
                audit: all,
                warn: all
            }
        );
        // Empty strings take the defaults too, as upstream's defaulting does.
        let admission = admission_with_empty_strings();
        assert!(admission.defaults().fully_privileged());
    }

    fn admission_with_empty_strings() -> PodSecurityAdmission {
        admission(json!({"enforce": "", "enforce-version": "", "warn": "", "audit-version": ""}))
    }

    #[test]
    fn configuration_errors_name_the_field() {
        let cases = [
            (
                json!({"defaults": {"enforce": "baslein"}}),
                "defaults.enforce",
                "Invalid value: \"baslein\": must be one of privileged, baseline, restricted",
            ),
            (
                json!({"defaults": {"enforce-version": "v.122"}}),
                "defaults.enforce-version",
                "Invalid value: \"v.122\": must be \"latest\" or \"v1.x\"",
            ),
            (
                json!({"defaults": {"audit": "lorum", "warn-version": "1.2"}}),
                "defaults.warn-version",
                "Invalid value: \"1.2\": must be \"latest\" or \"v1.x\"",
            ),
            (
                json!({"defaults": {"audit-version": "ipsum"}}),
                "defaults.audit-version",
                "Invalid value: \"ipsum\": must be \"latest\" or \"v1.x\"",
            ),
            (
                json!({"exemptions": {"namespaces": ["ok", "Kube_System"]}}),
                "exemptions.namespaces[1]",
                "Invalid value: \"Kube_System\": a lowercase RFC 1123 label must consist of \
                 lower case alphanumeric characters or '-', and must start and end with an \
                 alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for \
                 validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            ),
            (
                json!({"exemptions": {"namespaces": ["a.b"]}}),
                "exemptions.namespaces[0]",
                "Invalid value: \"a.b\": must not contain dots",
            ),
            (
                json!({"exemptions": {"namespaces": ["x".repeat(64)]}}),
                "exemptions.namespaces[0]",
                "must be no more than 63 characters",
            ),
            (
                json!({"exemptions": {"namespaces": ["a", "a"]}}),
                "exemptions.namespaces[1]",
                "Duplicate value: \"a\"",
            ),
            (
                json!({"exemptions": {"runtimeClasses": ["gvisor", "Kata"]}}),
                "exemptions.runtimeClasses[1]",
                "Invalid value: \"Kata\": a lowercase RFC 1123 subdomain",
            ),
            (
                json!({"exemptions": {"runtimeClasses": ["kata.io", "kata.io"]}}),
                "exemptions.runtimeClasses[1]",
                "Duplicate value: \"kata.io\"",
            ),
            (
                json!({"exemptions": {"usernames": [""]}}),
                "exemptions.usernames[0]",
                "Invalid value: \"\": username must not be empty",
            ),
            (
                json!({"defaults": {"enforce": 3}}),
                "defaults.enforce",
                "invalid type",
            ),
        ];
        for (value, field, message) in cases {
            let error = config(value.clone()).unwrap_err();
            assert_eq!(error.field, field, "{value}");
            assert!(
                error.message.starts_with(message) || error.message.contains(message),
                "{value}: {}",
                error.message
            );
            assert_eq!(error.to_string(), format!("{field}: {}", error.message));
        }
        assert!(
            config(json!({"exemptions": {
                "namespaces": ["kube-system", "0-a"],
                "runtimeClasses": ["kata.containers.io"],
                "usernames": ["system:serviceaccount:kube-system:replicaset-controller"],
            }}))
            .is_ok()
        );
    }

    #[test]
    fn namespace_labels_override_the_defaults() {
        let admission = admission(json!({"enforce": "baseline", "warn": "baseline"}));
        let policy = |pairs: &[(&str, &str)]| admission.policy_for(Some(&labels(pairs)));
        let p = |enforce: &str, audit: &str, warn: &str| NamespacePolicy {
            enforce: lv(enforce),
            audit: lv(audit),
            warn: lv(warn),
        };
        let defaults = p("baseline:latest", "privileged:latest", "baseline:latest");
        assert_eq!(admission.policy_for(None), (defaults, vec![]));
        assert_eq!(policy(&[("team", "a")]), (defaults, vec![]));
        // A stricter enforce level raises warn, with enforce's version.
        assert_eq!(
            policy(&[
                (ENFORCE_LEVEL_LABEL, "restricted"),
                (ENFORCE_VERSION_LABEL, "v1.30")
            ]),
            (
                p("restricted:v1.30", "privileged:latest", "restricted:v1.30"),
                vec![]
            )
        );
        // ... but not its version when warn's is set, and not at all when warn's level is.
        assert_eq!(
            policy(&[
                (ENFORCE_LEVEL_LABEL, "restricted"),
                (ENFORCE_VERSION_LABEL, "v1.30"),
                (WARN_VERSION_LABEL, "v1.20")
            ])
            .0
            .warn,
            lv("restricted:v1.20")
        );
        assert_eq!(
            policy(&[
                (ENFORCE_LEVEL_LABEL, "restricted"),
                (WARN_LEVEL_LABEL, "privileged")
            ])
            .0
            .warn,
            lv("privileged:latest")
        );
        // Lowering enforce leaves warn alone.
        assert_eq!(
            policy(&[(ENFORCE_LEVEL_LABEL, "privileged")]).0,
            p("privileged:latest", "privileged:latest", "baseline:latest")
        );
        assert_eq!(
            policy(&[
                (AUDIT_LEVEL_LABEL, "restricted"),
                (AUDIT_VERSION_LABEL, "v1.25")
            ])
            .0,
            p("baseline:latest", "restricted:v1.25", "baseline:latest")
        );
    }

    #[test]
    fn invalid_labels_fail_closed_for_enforce_and_open_for_the_others() {
        let admission = admission(json!({"warn": "baseline", "warn-version": "v1.20"}));
        let (policy, errors) = admission.policy_for(Some(&labels(&[
            (ENFORCE_LEVEL_LABEL, "strict"),
            (ENFORCE_VERSION_LABEL, "1.25"),
            (AUDIT_LEVEL_LABEL, "Restricted"),
            (WARN_LEVEL_LABEL, "all"),
        ])));
        assert_eq!(policy.enforce, lv("restricted:latest"));
        assert_eq!(policy.audit, lv("privileged:latest"));
        assert_eq!(policy.warn, lv("privileged:v1.20"));
        assert_eq!(
            aggregate(&errors),
            "[metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": \
             must be one of privileged, baseline, restricted, \
             metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: \
             \"1.25\": must be \"latest\" or \"v1.x\", \
             metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: \"Restricted\": \
             must be one of privileged, baseline, restricted, \
             metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: \"all\": must be \
             one of privileged, baseline, restricted]"
        );
        // An invalid enforce level does not raise warn.
        let (policy, errors) =
            admission.policy_for(Some(&labels(&[(ENFORCE_LEVEL_LABEL, "x\"y")])));
        assert_eq!(policy.warn, lv("baseline:v1.20"));
        assert_eq!(
            aggregate(&errors),
            "metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"x\\\"y\": \
             must be one of privileged, baseline, restricted"
        );
    }

    #[test]
    fn aggregate_drops_repeated_messages() {
        let error = LabelError {
            label: WARN_LEVEL_LABEL,
            value: "x".into(),
            detail: INVALID_LEVEL,
        };
        assert_eq!(
            aggregate(&[error.clone(), error.clone()]),
            error.to_string()
        );
    }

    #[test]
    fn significant_pod_updates() {
        // Read as trees and as views alike.
        let significant = |pod: &Value, old: &Value| {
            let answer = is_significant_pod_update(pod, old);
            let (pod_view, old_view) = (view(pod), view(old));
            assert_eq!(
                is_significant_pod_update(pod_view.root(), old_view.root()),
                answer,
                "{pod} after {old}"
            );
            answer
        };
        let pod = |spec: Value| json!({"metadata": {"labels": {"a": "1"}}, "spec": spec});
        let base = json!({
            "initContainers": [{"name": "i", "image": "init:1"}],
            "containers": [{"name": "c", "image": "app:1"}],
            "ephemeralContainers": [{"name": "e", "image": "debug:1"}],
        });
        let old = pod(base.clone());
        let changed = |edit: &dyn Fn(&mut Value)| {
            let mut spec = base.clone();
            edit(&mut spec);
            significant(&pod(spec), &old)
        };
        assert!(!changed(&|_| {}));
        assert!(!significant(
            &json!({"metadata": {"labels": {"a": "2"}}, "spec": base}),
            &old
        ));
        assert!(!changed(
            &|s| s["containers"][0]["securityContext"] = json!({"privileged": true})
        ));
        assert!(!changed(&|s| s["ephemeralContainers"] = json!([])));
        assert!(changed(&|s| s["containers"][0]["image"] = json!("app:2")));
        assert!(changed(
            &|s| s["initContainers"][0]["image"] = json!("init:2")
        ));
        assert!(changed(&|s| s["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "d"}))));
        assert!(changed(&|s| s["initContainers"] = json!(null)));
        assert!(changed(
            &|s| s["ephemeralContainers"][0]["image"] = json!("debug:2")
        ));
        assert!(changed(&|s| s["ephemeralContainers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "f", "image": "debug:1"}))));
        assert!(!significant(&json!({}), &json!({"spec": null})));
    }

    #[test]
    fn templates_are_found_where_upstream_looks() {
        let spec = json!({"template": {"metadata": {"labels": {"a": "b"}}, "spec": {"x": 1}}});
        let deployment = json!({ "spec": spec });
        let (metadata, pod_spec) = extract_template(&deployment, TemplateAt::Spec).unwrap();
        assert_eq!(metadata, Some(&json!({"labels": {"a": "b"}})));
        assert_eq!(pod_spec, Some(&json!({"x": 1})));
        let cron = json!({"spec": {"jobTemplate": {"spec": spec}}});
        assert_eq!(
            extract_template(&cron, TemplateAt::CronJob).unwrap().1,
            Some(&json!({"x": 1}))
        );
        assert_eq!(
            extract_template(&spec, TemplateAt::Template).unwrap().1,
            Some(&json!({"x": 1}))
        );
        // Value types in Go: a missing template is an empty one ...
        assert_eq!(
            extract_template(&json!({}), TemplateAt::Spec),
            Some((None, None))
        );
        // ... except ReplicationController's, a pointer.
        assert_eq!(
            extract_template(&json!({"spec": {}}), TemplateAt::ReplicationController),
            None
        );
        assert_eq!(
            workload_template("apps", "deployments"),
            Some(TemplateAt::Spec)
        );
        assert_eq!(workload_template("", "deployments"), None);
        assert_eq!(
            workload_template("batch", "cronjobs"),
            Some(TemplateAt::CronJob)
        );
    }

    #[test]
    fn exempt_namespace_warning_names_the_modes_set() {
        let admission = admission(json!({"enforce": "baseline"}));
        let namespace = |labels: Value| json!({"metadata": {"name": "ops", "labels": labels}});
        let warning = |labels: Value| {
            let namespace = namespace(labels);
            let (policy, _) = admission.resolve_policy(|key| object_label(&namespace, key));
            let view = ObjectView::parse(&namespace.to_string()).unwrap();
            let warning = admission.exempt_namespace_warning(JsonRef::Tree(&namespace), &policy);
            assert_eq!(
                admission.exempt_namespace_warning(view.root().into(), &policy),
                warning
            );
            warning
        };
        assert_eq!(warning(json!({})), None);
        assert_eq!(warning(json!({ENFORCE_LEVEL_LABEL: "privileged"})), None);
        assert_eq!(
            warning(json!({ENFORCE_LEVEL_LABEL: "baseline", WARN_LEVEL_LABEL: "privileged"})),
            None
        );
        // The label raises warn to baseline, so the policy differs from the defaults.
        assert_eq!(
            warning(json!({ENFORCE_LEVEL_LABEL: "baseline"})).as_deref(),
            Some(
                "namespace \"ops\" is exempt from Pod Security, and the policy \
                 (enforce=baseline:latest) will be ignored"
            )
        );
        assert_eq!(
            warning(json!({
                ENFORCE_LEVEL_LABEL: "restricted",
                AUDIT_VERSION_LABEL: "v1.30",
                WARN_VERSION_LABEL: "v1.30",
            }))
            .as_deref(),
            Some(
                "namespace \"ops\" is exempt from Pod Security, and the policy \
                 (enforce=restricted:latest, warn=restricted:v1.30) will be ignored"
            )
        );
        // Upstream prints modes only when a label sets them, even if the policy differs.
        assert_eq!(
            warning(json!({ENFORCE_VERSION_LABEL: "v1.30"})).as_deref(),
            Some(
                "namespace \"ops\" is exempt from Pod Security, and the policy \
                 (enforce=baseline:v1.30) will be ignored"
            )
        );
    }

    #[test]
    fn resource_rules_match_upstreams_webhooks() {
        let rules = admission(json!({})).resource_rules();
        let listed: Vec<String> = rules
            .iter()
            .flat_map(|rule| {
                rule.resources
                    .iter()
                    .map(move |r| format!("{}/{r}", rule.api_groups[0]))
            })
            .collect();
        assert_eq!(
            listed,
            [
                "/namespaces",
                "/pods",
                "/pods/ephemeralcontainers",
                "/podtemplates",
                "/replicationcontrollers",
                "apps/daemonsets",
                "apps/deployments",
                "apps/replicasets",
                "apps/statefulsets",
                "batch/cronjobs",
                "batch/jobs",
            ]
        );
        for rule in &rules {
            assert_eq!(rule.api_versions, ["v1"]);
            assert_eq!(rule.operations, [Operation::Create, Operation::Update]);
        }
    }

    #[test]
    fn caches_and_skips_like_upstream() {
        // Enforce and audit share a level: one refusal, one audit annotation, no warning.
        let admission = admission(json!({
            "enforce": "baseline", "audit": "baseline", "warn": "restricted",
        }));
        let spec = json!({"hostPID": true, "containers": [{"name": "a"}]});
        let mut decision = Decision::default();
        admission.evaluate_pod(
            &admission.defaults(),
            &[],
            None,
            Some(&spec),
            true,
            &mut decision,
        );
        assert_eq!(decision.violations.len(), 1);
        assert!(decision.warnings.is_empty());
        assert_eq!(
            decision.audit_annotations[AUDIT_VIOLATIONS_ANNOTATION],
            "would violate PodSecurity \"baseline:latest\": host namespaces (hostPID=true)"
        );
        assert_eq!(
            decision.audit_annotations[ENFORCE_POLICY_ANNOTATION],
            "baseline:latest"
        );
        // Without enforcing, the warning is given, at its own level.
        let mut decision = Decision::default();
        admission.evaluate_pod(
            &admission.defaults(),
            &[],
            None,
            Some(&spec),
            false,
            &mut decision,
        );
        assert!(decision.violations.is_empty());
        assert!(
            !decision
                .audit_annotations
                .contains_key(ENFORCE_POLICY_ANNOTATION)
        );
        assert_eq!(decision.warnings.len(), 1);
        assert!(
            decision.warnings[0].starts_with(
                "would violate PodSecurity \"restricted:latest\": host namespaces (hostPID=true), \
                 allowPrivilegeEscalation != false"
            ),
            "{}",
            decision.warnings[0]
        );
    }
}
