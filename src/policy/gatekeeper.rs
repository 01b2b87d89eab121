//! OPA Gatekeeper's documents, read unchanged: `templates.gatekeeper.sh` ConstraintTemplates
//! and `constraints.gatekeeper.sh` Constraints (whose kind is a template's
//! `spec.crd.spec.names.kind`). Fields are Gatekeeper v3's (`apis/templates/v1`,
//! `pkg/mutation/match`); what Portcullis does not read is refused at load, except metadata
//! and status, which exported objects carry.

use serde::Deserialize;
use serde_json::Value;

use super::document::{DocumentSource, PolicyError, from_document};
use crate::kubernetes::vocabulary::LabelSelector;

/// The API group of ConstraintTemplates.
pub const TEMPLATES_GROUP: &str = "templates.gatekeeper.sh";
/// The API group of Constraints.
pub const CONSTRAINTS_GROUP: &str = "constraints.gatekeeper.sh";
/// The target of admission templates; the only one Portcullis runs.
pub const ADMISSION_TARGET: &str = "admission.k8s.gatekeeper.sh";
/// The versions of ConstraintTemplates read.
pub const TEMPLATE_VERSIONS: [&str; 3] = ["v1", "v1beta1", "v1alpha1"];
/// The versions of Constraints read.
pub const CONSTRAINT_VERSIONS: [&str; 3] = ["v1beta1", "v1", "v1alpha1"];

/// The part of `metadata` read: the name; labels, annotations and the rest are allowed and
/// ignored.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Metadata {
    /// `metadata.name`.
    #[serde(default)]
    pub name: String,
}

/// A `templates.gatekeeper.sh` ConstraintTemplate.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConstraintTemplate {
    /// `templates.gatekeeper.sh/v1` (or v1beta1, v1alpha1).
    pub api_version: String,
    /// `ConstraintTemplate`.
    pub kind: String,
    /// Metadata; the name must be the constraint kind in lower case.
    #[serde(default)]
    pub metadata: Metadata,
    /// The template.
    pub spec: TemplateSpec,
    /// Ignored: the status of an exported template.
    #[serde(default)]
    pub status: Option<Value>,
}

/// `spec` of a ConstraintTemplate.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TemplateSpec {
    /// The constraint kind it makes and its parameters' schema.
    pub crd: TemplateCrd,
    /// The code, per target.
    #[serde(default)]
    pub targets: Vec<Target>,
}

/// `spec.crd` of a ConstraintTemplate.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TemplateCrd {
    /// `spec.crd.spec`.
    pub spec: TemplateCrdSpec,
}

/// `spec.crd.spec` of a ConstraintTemplate.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TemplateCrdSpec {
    /// The constraint kind.
    pub names: Names,
    /// The schema of the constraints' `spec.parameters`.
    #[serde(default)]
    pub validation: Option<Validation>,
}

/// `spec.crd.spec.names`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Names {
    /// The kind of the constraints.
    pub kind: String,
    /// Short names (read, unused).
    #[serde(default)]
    pub short_names: Vec<String>,
}

/// `spec.crd.spec.validation`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Validation {
    /// The schema of `spec.parameters`.
    #[serde(default, rename = "openAPIV3Schema")]
    pub open_api_v3_schema: Option<Value>,
    /// Whether the schema is the legacy, non-structural kind.
    #[serde(default)]
    pub legacy_schema: Option<bool>,
}

/// One entry of `spec.targets`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Target {
    /// The target: [`ADMISSION_TARGET`].
    pub target: String,
    /// The Rego of the template: a module that produces `violation[{"msg": …}]`.
    #[serde(default)]
    pub rego: Option<String>,
    /// More Rego modules, under `data.lib`.
    #[serde(default)]
    pub libs: Vec<String>,
    /// The code per engine (`Rego`, `K8sNativeValidation`), Gatekeeper 3.15 and later.
    #[serde(default)]
    pub code: Vec<Code>,
    /// Operations the template applies to (Gatekeeper 3.17 and later; read, unused).
    #[serde(default)]
    pub operations: Vec<String>,
}

/// One entry of `spec.targets[].code`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Code {
    /// `Rego` or `K8sNativeValidation`.
    pub engine: String,
    /// The engine's source: for `Rego`, `{rego, libs}`.
    pub source: Value,
}

/// The Rego source of a `code` entry of engine `Rego`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegoSource {
    /// The module.
    pub rego: String,
    /// More modules, under `data.lib`.
    #[serde(default)]
    pub libs: Vec<String>,
    /// The Rego syntax: `v1`, or v0 (default).
    #[serde(default)]
    pub version: Option<String>,
}

/// The source of a `code` entry of engine `K8sNativeValidation` (Gatekeeper's
/// `pkg/drivers/k8scel/schema.Source`): a ValidatingAdmissionPolicy's validations,
/// matchConditions, variables and failurePolicy.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelSource {
    /// The validations; each false one is a violation.
    #[serde(default)]
    pub validations: Vec<CelValidation>,
    /// `Fail` (default) or `Ignore`: whether an evaluation error is a violation.
    #[serde(default)]
    pub failure_policy: Option<String>,
    /// Conditions every one of which must hold for the validations to run (Gatekeeper's
    /// field is `matchCondition`, singular).
    #[serde(default, rename = "matchCondition")]
    pub match_conditions: Vec<CelNamedExpression>,
    /// Variables, after Gatekeeper's `params` and `anyObject`.
    #[serde(default)]
    pub variables: Vec<CelNamedExpression>,
    /// Whether Gatekeeper generates a ValidatingAdmissionPolicy from the template (read,
    /// unused: Portcullis evaluates the template itself).
    #[serde(default, rename = "generateVAP")]
    pub generate_vap: Option<bool>,
}

/// One entry of a CEL source's `validations`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelValidation {
    /// A CEL expression that must be true.
    #[serde(default)]
    pub expression: String,
    /// The violation's message.
    #[serde(default)]
    pub message: Option<String>,
    /// A CEL expression for the violation's message.
    #[serde(default)]
    pub message_expression: Option<String>,
}

/// A named CEL expression: a match condition or a variable.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelNamedExpression {
    /// The name.
    #[serde(default)]
    pub name: String,
    /// The expression.
    #[serde(default)]
    pub expression: String,
}

/// A `constraints.gatekeeper.sh` Constraint: its kind is a template's constraint kind.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Constraint {
    /// `constraints.gatekeeper.sh/v1beta1` (or v1, v1alpha1).
    pub api_version: String,
    /// The template's constraint kind.
    pub kind: String,
    /// Metadata: the name words every violation, `[name] msg`.
    #[serde(default)]
    pub metadata: Metadata,
    /// The constraint.
    #[serde(default)]
    pub spec: ConstraintSpec,
    /// Ignored: the status of an exported constraint.
    #[serde(default)]
    pub status: Option<Value>,
    /// The whole document, as CEL templates see it (`params`).
    #[serde(skip)]
    pub document: Value,
}

/// `spec` of a Constraint.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConstraintSpec {
    /// Which objects it applies to; none: every object.
    #[serde(default, rename = "match")]
    pub match_: Option<Match>,
    /// The template's parameters, checked against its schema.
    #[serde(default)]
    pub parameters: Option<Value>,
    /// `deny` (default), `dryrun`, `warn` or `scoped`.
    #[serde(default)]
    pub enforcement_action: Option<String>,
    /// With `enforcementAction: scoped`, the actions per enforcement point.
    #[serde(default)]
    pub scoped_enforcement_actions: Vec<ScopedEnforcementAction>,
}

/// One entry of `spec.scopedEnforcementActions`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScopedEnforcementAction {
    /// `deny`, `dryrun` or `warn`.
    pub action: String,
    /// Where it applies: `validation.gatekeeper.sh` (the webhook), `audit.gatekeeper.sh`,
    /// `gator.gatekeeper.sh`, or `*`.
    #[serde(default)]
    pub enforcement_points: Vec<EnforcementPoint>,
}

/// One enforcement point of a scoped enforcement action.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnforcementPoint {
    /// The point's name.
    pub name: String,
}

/// `spec.match` of a Constraint (Gatekeeper's `pkg/mutation/match.Match`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Match {
    /// Groups and kinds; none: every kind.
    #[serde(default)]
    pub kinds: Vec<Kinds>,
    /// `*` (default), `Cluster` or `Namespaced`.
    #[serde(default)]
    pub scope: Option<String>,
    /// Namespaces matched (a trailing `*` is a prefix, a leading `*` a suffix); none: all.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Namespaces not matched, the same globs.
    #[serde(default)]
    pub excluded_namespaces: Vec<String>,
    /// The object's labels (on UPDATE, the old object's count too).
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    /// The labels of the object's namespace (of a Namespace, its own).
    #[serde(default)]
    pub namespace_selector: Option<LabelSelector>,
    /// The object's name; a trailing or leading `*` is a glob.
    #[serde(default)]
    pub name: Option<String>,
    /// `All` (default), `Original` or `Generated` (expansion; only `Original` objects arrive
    /// at admission).
    #[serde(default)]
    pub source: Option<String>,
}

/// One entry of `spec.match.kinds`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Kinds {
    /// API groups; `*` any; none: any.
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// Kinds; `*` any; none: any.
    #[serde(default)]
    pub kinds: Vec<String>,
}

/// A Gatekeeper document.
#[derive(Debug, Clone)]
pub enum GatekeeperDocument {
    /// A ConstraintTemplate.
    Template(Box<ConstraintTemplate>),
    /// A Constraint, with the whole document (its parameters are checked against the
    /// template's schema when the engine compiles it).
    Constraint(Box<Constraint>),
    /// The `config.gatekeeper.sh` Config: namespaces excluded per process, kinds synced
    /// into `data.inventory` (at most one per policy set).
    Config(Box<super::gatekeeper_config::GatekeeperConfig>),
    /// An `expansion.gatekeeper.sh` ExpansionTemplate: constraints also review the object a
    /// workload generates.
    Expansion(Box<super::gatekeeper_expansion::ExpansionTemplate>),
}

/// Checks a Gatekeeper document's `apiVersion` (`group` with one of `versions`) and, when
/// given, its `kind`: errors name the field and what is supported
/// (`unsupported apiVersion x; supported: group/v1, v1beta1`).
pub(crate) fn check_type(
    source: &DocumentSource,
    value: &Value,
    group: &str,
    versions: &[&str],
    kind: Option<&str>,
) -> Result<(), PolicyError> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or("");
    let api_version = text("apiVersion");
    let version = api_version
        .split_once('/')
        .filter(|(g, _)| *g == group)
        .map_or("", |(_, v)| v);
    if !versions.contains(&version) {
        return Err(PolicyError::at(
            source,
            "apiVersion",
            format!(
                "unsupported apiVersion {api_version}; supported: {group}/{}",
                versions.join(", ")
            ),
        ));
    }
    match kind {
        Some(wanted) if text("kind") != wanted => Err(PolicyError::at(
            source,
            "kind",
            format!(
                "unsupported document {api_version} {}; supported kinds in {group}: {wanted}",
                text("kind")
            ),
        )),
        _ => Ok(()),
    }
}

/// Reads a document of [`TEMPLATES_GROUP`] or [`CONSTRAINTS_GROUP`].
pub fn recognise(
    source: &DocumentSource,
    group: &str,
    value: Value,
) -> Result<GatekeeperDocument, PolicyError> {
    if group == TEMPLATES_GROUP {
        check_type(
            source,
            &value,
            TEMPLATES_GROUP,
            &TEMPLATE_VERSIONS,
            Some("ConstraintTemplate"),
        )?;
        let template: ConstraintTemplate = from_document(source, value)?;
        return Ok(GatekeeperDocument::Template(Box::new(template)));
    }
    check_type(
        source,
        &value,
        CONSTRAINTS_GROUP,
        &CONSTRAINT_VERSIONS,
        None,
    )?;
    let mut constraint: Constraint = from_document(source, value.clone())?;
    constraint.document = value;
    if constraint.metadata.name.is_empty() {
        return Err(PolicyError::at(source, "metadata.name", "Required value"));
    }
    Ok(GatekeeperDocument::Constraint(Box::new(constraint)))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;

    #[test]
    fn an_unknown_version_or_kind_names_what_is_supported() {
        let source = DocumentSource {
            file: PathBuf::from("gk.yaml"),
            index: 0,
        };
        let error = |value: Value| recognise(&source, TEMPLATES_GROUP, value).unwrap_err();
        let wrong_version = error(json!({
            "apiVersion": "templates.gatekeeper.sh/v2", "kind": "ConstraintTemplate",
        }));
        assert_eq!(wrong_version.field.as_deref(), Some("apiVersion"));
        assert_eq!(
            wrong_version.message,
            "unsupported apiVersion templates.gatekeeper.sh/v2; supported: \
             templates.gatekeeper.sh/v1, v1beta1, v1alpha1"
        );
        let wrong_kind = error(json!({
            "apiVersion": "templates.gatekeeper.sh/v1", "kind": "Template",
        }));
        assert_eq!(wrong_kind.field.as_deref(), Some("kind"));
        assert_eq!(
            wrong_kind.message,
            "unsupported document templates.gatekeeper.sh/v1 Template; supported kinds in \
             templates.gatekeeper.sh: ConstraintTemplate"
        );
        let constraint = recognise(
            &source,
            CONSTRAINTS_GROUP,
            json!({"apiVersion": "constraints.gatekeeper.sh/v2", "kind": "K8sAnything"}),
        )
        .unwrap_err();
        assert_eq!(
            constraint.message,
            "unsupported apiVersion constraints.gatekeeper.sh/v2; supported: \
             constraints.gatekeeper.sh/v1beta1, v1, v1alpha1"
        );
    }
}
