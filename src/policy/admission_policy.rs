//! The `admissionregistration.k8s.io` documents, as the apiserver reads them: Validating- and
//! MutatingAdmissionPolicy and their bindings, in `v1`, `v1beta1` and `v1alpha1` (the shapes
//! are the same where Portcullis reads them). Unknown fields are errors, as a strict
//! `kubectl apply` would make them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{DocumentSource, PolicyError, from_document};
pub use crate::kubernetes::vocabulary::{FailurePolicy, LabelSelector};

/// `metadata` of a policy or binding: only the name matters; the rest is accepted.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// The object's name.
    pub name: String,
    /// Labels (unused).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations (unused).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// A whole document: `apiVersion`, `kind`, `metadata`, `spec`; `status` is ignored.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Document<S> {
    /// `admissionregistration.k8s.io/v1` (or `v1beta1`, `v1alpha1`).
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// Metadata.
    pub metadata: ObjectMeta,
    /// The spec.
    pub spec: S,
    /// Written by the apiserver; ignored.
    #[serde(default, skip_serializing)]
    pub status: Option<serde_json::Value>,
}

/// `Exact` or `Equivalent` (the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
pub enum MatchPolicy {
    /// Only the resource as requested.
    Exact,
    /// Also the same resource requested through another group or version.
    #[default]
    Equivalent,
}

/// `paramKind`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamKind {
    /// e.g. `v1` or `rules.example.com/v1`.
    pub api_version: String,
    /// e.g. `ConfigMap`.
    pub kind: String,
}

/// `Allow` or `Deny`, when no parameter object is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum ParameterNotFoundAction {
    /// The binding is skipped.
    Allow,
    /// The request is denied (subject to failurePolicy).
    Deny,
}

/// `paramRef` of a binding.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamRef {
    /// One parameter object by name.
    #[serde(default)]
    pub name: Option<String>,
    /// Its namespace; default the request's namespace for namespaced parameter kinds.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Every parameter object with these labels (each evaluated).
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    /// What to do when none is found.
    #[serde(default)]
    pub parameter_not_found_action: Option<ParameterNotFoundAction>,
}

/// A `rules` entry: `NamedRuleWithOperations`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamedRule {
    /// Object names (empty: all).
    #[serde(default)]
    pub resource_names: Vec<String>,
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`.
    #[serde(default)]
    pub operations: Vec<String>,
    /// API groups (`""` core, `*` any).
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// API versions (`*` any).
    #[serde(default)]
    pub api_versions: Vec<String>,
    /// Resources: `pods`, `pods/status`, `*`, `*/*`, `pods/*`, `*/scale`.
    #[serde(default)]
    pub resources: Vec<String>,
    /// `Cluster`, `Namespaced` or `*` (the default).
    #[serde(default)]
    pub scope: Option<String>,
}

/// `matchConstraints` of a policy, `matchResources` of a binding.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchResources {
    /// Labels of the request's namespace (default: every namespace).
    #[serde(default)]
    pub namespace_selector: Option<LabelSelector>,
    /// Labels of the object, old or new (default: every object).
    #[serde(default)]
    pub object_selector: Option<LabelSelector>,
    /// Requests matched.
    #[serde(default)]
    pub resource_rules: Vec<NamedRule>,
    /// Requests never matched.
    #[serde(default)]
    pub exclude_resource_rules: Vec<NamedRule>,
    /// `Exact` or `Equivalent`.
    #[serde(default)]
    pub match_policy: Option<MatchPolicy>,
}

/// A named CEL expression: `matchConditions` and `variables` entries.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamedExpression {
    /// The name.
    pub name: String,
    /// The CEL expression.
    pub expression: String,
}

/// A `validations` entry.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Validation {
    /// Must evaluate to true.
    pub expression: String,
    /// The message when it does not.
    #[serde(default)]
    pub message: Option<String>,
    /// A CEL expression for the message.
    #[serde(default)]
    pub message_expression: Option<String>,
    /// The status reason of a denial (default `Invalid`).
    #[serde(default)]
    pub reason: Option<String>,
}

/// An `auditAnnotations` entry.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditAnnotation {
    /// The key, published as `<policy>/<key>`.
    pub key: String,
    /// A CEL expression yielding a string or null.
    pub value_expression: String,
}

/// The spec of a ValidatingAdmissionPolicy.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidatingPolicySpec {
    /// The kind of parameter objects.
    #[serde(default)]
    pub param_kind: Option<ParamKind>,
    /// Which requests the policy can apply to.
    #[serde(default)]
    pub match_constraints: Option<MatchResources>,
    /// The checks.
    #[serde(default)]
    pub validations: Vec<Validation>,
    /// What errors do.
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
    /// Audit annotations.
    #[serde(default)]
    pub audit_annotations: Vec<AuditAnnotation>,
    /// Preconditions.
    #[serde(default)]
    pub match_conditions: Vec<NamedExpression>,
    /// Named values, available as `variables.<name>`.
    #[serde(default)]
    pub variables: Vec<NamedExpression>,
}

/// `Deny`, `Warn` or `Audit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum ValidationAction {
    /// Refuse.
    Deny,
    /// Warn the client.
    Warn,
    /// Record in the audit event.
    Audit,
}

impl ValidationAction {
    /// The action as documents spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ValidationAction::Deny => "Deny",
            ValidationAction::Warn => "Warn",
            ValidationAction::Audit => "Audit",
        }
    }
}

/// The spec of a ValidatingAdmissionPolicyBinding.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidatingBindingSpec {
    /// The policy bound.
    pub policy_name: String,
    /// Where its parameters come from.
    #[serde(default)]
    pub param_ref: Option<ParamRef>,
    /// Narrows the requests (default: all that the policy matches).
    #[serde(default)]
    pub match_resources: Option<MatchResources>,
    /// What failures do.
    #[serde(default)]
    pub validation_actions: Vec<ValidationAction>,
}

/// `JSONPatch` or `ApplyConfiguration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum PatchType {
    /// The expression yields a list of `JSONPatch{op, path, value}`.
    #[serde(rename = "JSONPatch")]
    JsonPatch,
    /// The expression yields an `Object{…}` merged into the object.
    ApplyConfiguration,
}

/// `{expression}` of a mutation.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MutationExpression {
    /// The CEL expression.
    pub expression: String,
}

/// A `mutations` entry.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mutation {
    /// Which of the two fields below is used.
    pub patch_type: PatchType,
    /// For `ApplyConfiguration`.
    #[serde(default)]
    pub apply_configuration: Option<MutationExpression>,
    /// For `JSONPatch`.
    #[serde(default)]
    pub json_patch: Option<MutationExpression>,
}

/// `Never` (the default) or `IfNeeded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
pub enum ReinvocationPolicy {
    /// Run once.
    #[default]
    Never,
    /// Run again when a later mutation changed the object.
    IfNeeded,
}

/// The spec of a MutatingAdmissionPolicy.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MutatingPolicySpec {
    /// The kind of parameter objects.
    #[serde(default)]
    pub param_kind: Option<ParamKind>,
    /// Which requests the policy can apply to.
    #[serde(default)]
    pub match_constraints: Option<MatchResources>,
    /// Named values, available as `variables.<name>`.
    #[serde(default)]
    pub variables: Vec<NamedExpression>,
    /// The mutations, applied in order.
    #[serde(default)]
    pub mutations: Vec<Mutation>,
    /// What errors do.
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
    /// Preconditions.
    #[serde(default)]
    pub match_conditions: Vec<NamedExpression>,
    /// Whether to run again after later mutations.
    #[serde(default)]
    pub reinvocation_policy: Option<ReinvocationPolicy>,
}

/// The spec of a MutatingAdmissionPolicyBinding.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MutatingBindingSpec {
    /// The policy bound.
    pub policy_name: String,
    /// Where its parameters come from.
    #[serde(default)]
    pub param_ref: Option<ParamRef>,
    /// Narrows the requests.
    #[serde(default)]
    pub match_resources: Option<MatchResources>,
}

/// A recognised `admissionregistration.k8s.io` document.
#[derive(Debug, Clone, PartialEq)]
pub enum AdmissionPolicyDocument {
    /// ValidatingAdmissionPolicy.
    ValidatingPolicy(Document<ValidatingPolicySpec>),
    /// ValidatingAdmissionPolicyBinding.
    ValidatingBinding(Document<ValidatingBindingSpec>),
    /// MutatingAdmissionPolicy.
    MutatingPolicy(Document<MutatingPolicySpec>),
    /// MutatingAdmissionPolicyBinding.
    MutatingBinding(Document<MutatingBindingSpec>),
}

/// The API versions read, for every kind.
pub const API_VERSIONS: [&str; 3] = [
    "admissionregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1beta1",
    "admissionregistration.k8s.io/v1alpha1",
];

/// The kinds read.
pub const KINDS: [&str; 4] = [
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
];

/// The fields both policy kinds share, borrowed from either spec (serde's `flatten` would
/// lose `deny_unknown_fields`, so each spec keeps its own fields and lends them here).
#[derive(Debug, Clone, Copy)]
pub struct PolicyCommon<'a> {
    /// `paramKind`.
    pub param_kind: Option<&'a ParamKind>,
    /// `matchConstraints`.
    pub match_constraints: Option<&'a MatchResources>,
    /// `failurePolicy`.
    pub failure_policy: Option<FailurePolicy>,
    /// `matchConditions`.
    pub match_conditions: &'a [NamedExpression],
    /// `variables`.
    pub variables: &'a [NamedExpression],
}

impl ValidatingPolicySpec {
    /// The fields a MutatingAdmissionPolicy has too.
    pub fn common(&self) -> PolicyCommon<'_> {
        PolicyCommon {
            param_kind: self.param_kind.as_ref(),
            match_constraints: self.match_constraints.as_ref(),
            failure_policy: self.failure_policy,
            match_conditions: &self.match_conditions,
            variables: &self.variables,
        }
    }
}

impl MutatingPolicySpec {
    /// The fields a ValidatingAdmissionPolicy has too.
    pub fn common(&self) -> PolicyCommon<'_> {
        PolicyCommon {
            param_kind: self.param_kind.as_ref(),
            match_constraints: self.match_constraints.as_ref(),
            failure_policy: self.failure_policy,
            match_conditions: &self.match_conditions,
            variables: &self.variables,
        }
    }
}

/// The API group of the documents read here.
pub const GROUP: &str = "admissionregistration.k8s.io";

/// Recognises an `admissionregistration.k8s.io` document. Any other kind or version in the
/// group is an error, so that a typo cannot silently become a parameter object.
pub fn recognise(
    source: &DocumentSource,
    value: Value,
) -> Result<AdmissionPolicyDocument, PolicyError> {
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if !API_VERSIONS.contains(&api_version.as_str()) {
        return Err(PolicyError::at(
            source,
            "apiVersion",
            format!(
                "unsupported apiVersion {api_version}; supported: {}",
                API_VERSIONS.join(", ")
            ),
        ));
    }
    let document = match kind.as_str() {
        "ValidatingAdmissionPolicy" => {
            AdmissionPolicyDocument::ValidatingPolicy(from_document(source, value)?)
        }
        "ValidatingAdmissionPolicyBinding" => {
            AdmissionPolicyDocument::ValidatingBinding(from_document(source, value)?)
        }
        "MutatingAdmissionPolicy" => {
            AdmissionPolicyDocument::MutatingPolicy(from_document(source, value)?)
        }
        "MutatingAdmissionPolicyBinding" => {
            AdmissionPolicyDocument::MutatingBinding(from_document(source, value)?)
        }
        _ => {
            return Err(PolicyError::at(
                source,
                "kind",
                format!(
                    "unsupported document {api_version} {kind}; supported kinds in {GROUP}: {}",
                    KINDS.join(", ")
                ),
            ));
        }
    };
    Ok(document)
}
