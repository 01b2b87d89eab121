//! Portcullis's own `Policy` kind (`portcullis.dev/v1alpha1`). See docs/policies.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{DocumentSource, PolicyError};
use crate::admission::Operation;
pub use crate::kubernetes::vocabulary::{Action, LabelSelector, LabelSelectorRequirement};

/// A native policy document.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    /// `portcullis.dev/v1alpha1`.
    pub api_version: String,
    /// `Policy`.
    pub kind: String,
    /// Name (used in messages, warnings and audit annotations).
    pub metadata: PolicyMetadata,
    /// What the policy matches, validates and defaults.
    pub spec: PolicySpec,
}

/// Metadata of a policy.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyMetadata {
    /// The policy's name.
    pub name: String,
    /// Free-form labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Free-form annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// The policy proper.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    /// What violations of the validation rules do (default `Deny`).
    #[serde(default = "deny")]
    pub action: Action,
    /// Which requests the policy applies to.
    #[serde(rename = "match")]
    pub match_: MatchSpec,
    /// Whether a policy matching Pods also applies to the pod templates of workloads
    /// (default true).
    #[serde(default = "yes")]
    pub pod_templates: bool,
    /// Validation rules, all evaluated.
    #[serde(default)]
    pub validate: Vec<ValidationSpec>,
    /// Defaulting rules, applied in order.
    #[serde(default)]
    pub defaults: Vec<DefaultingSpec>,
}

fn deny() -> Action {
    Action::Deny
}

fn yes() -> bool {
    true
}

fn create_update() -> Vec<Operation> {
    vec![Operation::Create, Operation::Update]
}

/// The match block.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchSpec {
    /// Resources matched (any of them).
    pub resources: Vec<ResourceMatch>,
    /// Operations matched (default CREATE and UPDATE).
    #[serde(default = "create_update")]
    pub operations: Vec<Operation>,
    /// Namespaces by glob (namespaced requests only).
    #[serde(default)]
    pub namespaces: NamespaceFilter,
    /// Labels of the object (either the old or the new object on UPDATE).
    #[serde(default)]
    pub object_selector: Option<LabelSelector>,
    /// Labels of the request's namespace.
    #[serde(default)]
    pub namespace_selector: Option<LabelSelector>,
    /// Requesters the policy never applies to.
    #[serde(default)]
    pub exclude: SubjectExclusions,
}

/// One resource entry of a match block.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceMatch {
    /// API group (`""` core, `*` any).
    #[serde(default)]
    pub group: String,
    /// API versions (default any).
    #[serde(default = "any")]
    pub versions: Vec<String>,
    /// Kinds, e.g. `Pod` (`*` any).
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Resources, e.g. `pods` (`*` any).
    #[serde(default)]
    pub resources: Vec<String>,
    /// Subresources also matched (default none: only the main resource; `*` any).
    #[serde(default)]
    pub subresources: Vec<String>,
}

fn any() -> Vec<String> {
    vec!["*".into()]
}

/// Namespace globs (`*` matches any run of characters).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceFilter {
    /// When not empty, only these namespaces.
    #[serde(default)]
    pub include: Vec<String>,
    /// Never these namespaces.
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// Requesters excluded from a policy.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubjectExclusions {
    /// User names, exactly.
    #[serde(default)]
    pub users: Vec<String>,
    /// Groups, exactly.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Service accounts as `NAMESPACE/NAME`; either part may be a glob.
    #[serde(default)]
    pub service_accounts: Vec<String>,
}

/// One validation rule: a name and exactly one rule family.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidationSpec {
    /// The rule's name, unique in the policy.
    pub name: String,
    /// Replaces the rule's own message for each violation.
    #[serde(default)]
    pub message: Option<String>,
    /// Labels the object must carry; a value, when given, is a regex the label must match.
    #[serde(default)]
    pub required_labels: Option<BTreeMap<String, Option<String>>>,
    /// Annotations the object must carry, as `requiredLabels`.
    #[serde(default)]
    pub required_annotations: Option<BTreeMap<String, Option<String>>>,
    /// Image rules for every container.
    #[serde(default)]
    pub images: Option<ImageRules>,
    /// Resource requests and limits of every container.
    #[serde(default)]
    pub resources: Option<ResourceRules>,
    /// Probes every container must have.
    #[serde(default)]
    pub probes: Option<ProbeRules>,
    /// Host namespaces, ports and paths.
    #[serde(default)]
    pub host: Option<HostRules>,
    /// A CEL expression that must be true (see docs/admission-policies.md).
    #[serde(default)]
    pub cel: Option<CelValidation>,
}

/// The `cel` rule family of a validation: as a ValidatingAdmissionPolicy's `validations` entry,
/// without params or variables.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelValidation {
    /// Must evaluate to true; sees `object`, `oldObject`, `request` and `namespaceObject`.
    pub expression: String,
    /// A CEL expression for the message (a string); falls back to the rule's `message`, then
    /// to `failed expression: <expression>`.
    #[serde(default)]
    pub message_expression: Option<String>,
}

/// The `cel` defaulting rule: an expression yielding a list of `JSONPatch{op: "add", path,
/// value}`, each applied only where the path is missing, like every default.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelDefault {
    /// The CEL expression.
    pub expression: String,
}

/// The `images` rule family.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageRules {
    /// When not empty, images must come from one of these registries (host, host:port or
    /// host/path prefix, e.g. `registry.example.com/team`). `docker.io` is implied for
    /// images without a registry.
    #[serde(default)]
    pub allowed_registries: Vec<String>,
    /// Refuse `:latest` and untagged images (unless pinned by digest).
    #[serde(default)]
    pub forbid_latest: bool,
    /// Require `@sha256:` digests.
    #[serde(default)]
    pub require_digest: bool,
}

/// The `resources` rule family.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceRules {
    /// Resource names every container must request, e.g. `[cpu, memory]`.
    #[serde(default)]
    pub require_requests: Vec<String>,
    /// Resource names every container must limit.
    #[serde(default)]
    pub require_limits: Vec<String>,
    /// Highest allowed limit per resource, as a quantity (`2`, `500m`, `4Gi`).
    #[serde(default)]
    pub max_limits: BTreeMap<String, String>,
    /// Highest allowed request per resource.
    #[serde(default)]
    pub max_requests: BTreeMap<String, String>,
    /// Lowest allowed request per resource.
    #[serde(default)]
    pub min_requests: BTreeMap<String, String>,
}

/// The `probes` rule family.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProbeRules {
    /// `liveness`, `readiness`, `startup`: required on every (non-init) container.
    pub require: Vec<String>,
}

/// The `host` rule family.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostRules {
    /// Refuse `hostNetwork`, `hostPID`, `hostIPC`.
    #[serde(default)]
    pub forbid_namespaces: bool,
    /// Refuse `hostPort` on container ports.
    #[serde(default)]
    pub forbid_ports: bool,
    /// Refuse `hostPath` volumes, except under `allowedHostPaths`.
    #[serde(default)]
    pub forbid_host_path: bool,
    /// Path prefixes allowed for `hostPath` when `forbidHostPath` is set.
    #[serde(default)]
    pub allowed_host_paths: Vec<String>,
}

/// One defaulting rule: a name and exactly one of `set`, `labels`, `annotations`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultingSpec {
    /// The rule's name.
    pub name: String,
    /// Set a value at a field path where it is missing.
    #[serde(default)]
    pub set: Option<SetDefault>,
    /// Labels added where missing.
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations added where missing.
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Values computed by CEL, added where missing.
    #[serde(default)]
    pub cel: Option<CelDefault>,
}

/// `set`: a path with `[*]` wildcards over lists, and the value written where it is missing.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SetDefault {
    /// e.g. `spec.containers[*].imagePullPolicy`, `metadata.labels["example.com/team"]`.
    pub path: String,
    /// Any JSON/YAML value.
    pub value: Value,
}

const API_VERSION: &str = "portcullis.dev/v1alpha1";

impl Policy {
    /// Checks what serde cannot: names, one family per rule, known operators and values.
    pub fn validate(&self, source: &DocumentSource) -> Result<(), PolicyError> {
        let error = |field: String, message: String| Err(PolicyError::at(source, field, message));
        if self.api_version != API_VERSION || self.kind != "Policy" {
            return error(
                "apiVersion".into(),
                format!("expected {API_VERSION} Policy"),
            );
        }
        if self.metadata.name.is_empty() {
            return error("metadata.name".into(), "must not be empty".into());
        }
        let spec = &self.spec;
        if spec.match_.resources.is_empty() {
            return error(
                "spec.match.resources".into(),
                "name at least one resource".into(),
            );
        }
        for (i, resource) in spec.match_.resources.iter().enumerate() {
            if resource.kinds.is_empty() && resource.resources.is_empty() {
                return error(
                    format!("spec.match.resources[{i}]"),
                    "name kinds or resources".into(),
                );
            }
        }
        if spec.match_.operations.is_empty() {
            return error(
                "spec.match.operations".into(),
                "name at least one operation".into(),
            );
        }
        for (name, selector) in [
            ("objectSelector", &spec.match_.object_selector),
            ("namespaceSelector", &spec.match_.namespace_selector),
        ] {
            let Some(selector) = selector else { continue };
            if let Some((field, message)) = selector.requirement_error() {
                return error(format!("spec.match.{name}.{field}"), message);
            }
        }
        for (i, account) in spec.match_.exclude.service_accounts.iter().enumerate() {
            if account
                .split_once('/')
                .is_none_or(|(ns, name)| ns.is_empty() || name.is_empty())
            {
                return error(
                    format!("spec.match.exclude.serviceAccounts[{i}]"),
                    format!("expected NAMESPACE/NAME, got {account:?}"),
                );
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, rule) in spec.validate.iter().enumerate() {
            let field = format!("spec.validate[{i}]");
            if rule.name.is_empty() || !names.insert(rule.name.as_str()) {
                return error(
                    format!("{field}.name"),
                    "must be non-empty and unique".into(),
                );
            }
            let families = [
                rule.required_labels.is_some(),
                rule.required_annotations.is_some(),
                rule.images.is_some(),
                rule.resources.is_some(),
                rule.probes.is_some(),
                rule.host.is_some(),
                rule.cel.is_some(),
            ];
            if families.iter().filter(|set| **set).count() != 1 {
                return error(
                    field,
                    "set exactly one of requiredLabels, requiredAnnotations, images, resources, \
                     probes, host, cel"
                        .into(),
                );
            }
            if let Some(probes) = &rule.probes {
                for (j, probe) in probes.require.iter().enumerate() {
                    if !matches!(probe.as_str(), "liveness" | "readiness" | "startup") {
                        return error(
                            format!("{field}.probes.require[{j}]"),
                            format!("unknown probe {probe:?}: use liveness, readiness or startup"),
                        );
                    }
                }
            }
        }
        names.clear();
        for (i, rule) in spec.defaults.iter().enumerate() {
            let field = format!("spec.defaults[{i}]");
            if rule.name.is_empty() || !names.insert(rule.name.as_str()) {
                return error(
                    format!("{field}.name"),
                    "must be non-empty and unique".into(),
                );
            }
            let families = [
                rule.set.is_some(),
                rule.labels.is_some(),
                rule.annotations.is_some(),
                rule.cel.is_some(),
            ];
            if families.iter().filter(|set| **set).count() != 1 {
                return error(
                    field,
                    "set exactly one of set, labels, annotations, cel".into(),
                );
            }
        }
        Ok(())
    }
}
