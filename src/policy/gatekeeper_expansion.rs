//! Gatekeeper's `expansion.gatekeeper.sh` ExpansionTemplate, read unchanged: a workload kind
//! (`applyTo`) whose object holds the object it generates (`templateSource`, e.g.
//! `spec.template` of a Deployment), which constraints then also review as that kind
//! (`generatedGVK`). Fields are Gatekeeper v3's (`apis/expansion/unversioned`); what
//! `ValidateTemplate` (`pkg/expansion/system.go`) refuses is refused here, naming the field.

use serde::Deserialize;
use serde_json::Value;

use super::document::{DocumentSource, PolicyError, from_document};
use super::gatekeeper::Metadata;

/// The API group of ExpansionTemplates.
pub const EXPANSION_GROUP: &str = "expansion.gatekeeper.sh";
/// The versions read.
pub const EXPANSION_VERSIONS: [&str; 2] = ["v1beta1", "v1alpha1"];

/// An `expansion.gatekeeper.sh` ExpansionTemplate.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpansionTemplate {
    /// `expansion.gatekeeper.sh/v1beta1` (or v1alpha1).
    pub api_version: String,
    /// `ExpansionTemplate`.
    pub kind: String,
    /// Metadata: the name prefixes the messages of the generated object's violations
    /// (`[Implied by <name>]`).
    #[serde(default)]
    pub metadata: Metadata,
    /// The template.
    #[serde(default)]
    pub spec: ExpansionSpec,
    /// Ignored: the status of an exported template.
    #[serde(default)]
    pub status: Option<Value>,
}

/// `spec` of an ExpansionTemplate.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpansionSpec {
    /// The kinds of the objects expanded (every group, version and kind of an entry combined).
    #[serde(default)]
    pub apply_to: Vec<ApplyTo>,
    /// The dotted path of the generated object in the expanded one (`spec.template`).
    #[serde(default)]
    pub template_source: String,
    /// The kind of the generated object.
    #[serde(default, rename = "generatedGVK")]
    pub generated_gvk: GeneratedGvk,
    /// The enforcement action of the generated object's violations; empty: each constraint's.
    #[serde(default)]
    pub enforcement_action: String,
}

/// One `spec.applyTo` entry (`pkg/mutation/match.ApplyTo`): exact names, no wildcards.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApplyTo {
    /// API groups (`""` is the core group; `apps`).
    #[serde(default)]
    pub groups: Vec<String>,
    /// Kinds.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Versions.
    #[serde(default)]
    pub versions: Vec<String>,
}

impl ApplyTo {
    /// Whether the entry names this group, version and kind.
    pub fn matches(&self, group: &str, version: &str, kind: &str) -> bool {
        self.groups.iter().any(|g| g == group)
            && self.versions.iter().any(|v| v == version)
            && self.kinds.iter().any(|k| k == kind)
    }
}

/// `spec.generatedGVK`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GeneratedGvk {
    /// The API group (`""` for Pods).
    #[serde(default)]
    pub group: String,
    /// The version.
    #[serde(default)]
    pub version: String,
    /// The kind.
    #[serde(default)]
    pub kind: String,
}

/// Reads a document of [`EXPANSION_GROUP`], with `ValidateTemplate`'s checks: a name under 64
/// characters, a source, a generated kind, `applyTo`, and no `applyTo` entry naming the
/// generated kind itself.
pub fn recognise(source: &DocumentSource, value: Value) -> Result<ExpansionTemplate, PolicyError> {
    super::gatekeeper::check_type(
        source,
        &value,
        EXPANSION_GROUP,
        &EXPANSION_VERSIONS,
        Some("ExpansionTemplate"),
    )?;
    let template: ExpansionTemplate = from_document(source, value)?;
    let name = &template.metadata.name;
    let spec = &template.spec;
    let refuse = |field: &str, message: String| Err(PolicyError::at(source, field, message));
    if name.is_empty() {
        return refuse(
            "metadata.name",
            "ExpansionTemplate has empty name field".into(),
        );
    }
    if name.len() >= 64 {
        return refuse(
            "metadata.name",
            "ExpansionTemplate name must be less than 64 characters".into(),
        );
    }
    if spec.template_source.is_empty() {
        return refuse(
            "spec.templateSource",
            format!("ExpansionTemplate {name} has empty source field"),
        );
    }
    if spec.generated_gvk == GeneratedGvk::default() {
        return refuse(
            "spec.generatedGVK",
            format!("ExpansionTemplate {name} has empty generatedGVK field"),
        );
    }
    if spec.apply_to.is_empty() {
        return refuse(
            "spec.applyTo",
            format!("ExpansionTemplate {name} must specify ApplyTo"),
        );
    }
    let generated = &spec.generated_gvk;
    for (index, entry) in spec.apply_to.iter().enumerate() {
        if entry.matches(&generated.group, &generated.version, &generated.kind) {
            return refuse(
                &format!("spec.applyTo[{index}]"),
                format!(
                    "ExpansionTemplate {name} generates GVK {}/{}, Kind={}, but also applies to that same GVK",
                    generated.group, generated.version, generated.kind
                ),
            );
        }
    }
    if !matches!(
        spec.enforcement_action.as_str(),
        "" | "deny" | "dryrun" | "warn"
    ) {
        return refuse(
            "spec.enforcementAction",
            format!(
                "Unsupported value: {:?}: supported values: \"deny\", \"dryrun\", \"warn\" (or none: each constraint's)",
                spec.enforcement_action
            ),
        );
    }
    Ok(template)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;

    fn source() -> DocumentSource {
        DocumentSource {
            file: PathBuf::from("expansion.yaml"),
            index: 0,
        }
    }

    fn template(spec: Value) -> Value {
        json!({
            "apiVersion": "expansion.gatekeeper.sh/v1beta1",
            "kind": "ExpansionTemplate",
            "metadata": {"name": "expand-deployments"},
            "spec": spec,
        })
    }

    fn deployments() -> Value {
        json!({
            "applyTo": [{"groups": ["apps"], "kinds": ["Deployment"], "versions": ["v1"]}],
            "templateSource": "spec.template",
            "generatedGVK": {"kind": "Pod", "group": "", "version": "v1"},
        })
    }

    #[test]
    fn a_template_is_read() {
        let read = recognise(&source(), template(deployments())).unwrap();
        assert_eq!(read.spec.template_source, "spec.template");
        assert!(read.spec.apply_to[0].matches("apps", "v1", "Deployment"));
        assert!(!read.spec.apply_to[0].matches("apps", "v1beta1", "Deployment"));
        assert_eq!(read.spec.generated_gvk.kind, "Pod");
    }

    #[test]
    fn what_gatekeeper_refuses_is_refused_naming_the_field() {
        let cases = [
            ("templateSource", json!(""), "spec.templateSource"),
            ("generatedGVK", json!({}), "spec.generatedGVK"),
            ("applyTo", json!([]), "spec.applyTo"),
            (
                "applyTo",
                json!([{"groups": [""], "kinds": ["Pod"], "versions": ["v1"]}]),
                "spec.applyTo[0]",
            ),
            (
                "enforcementAction",
                json!("block"),
                "spec.enforcementAction",
            ),
            (
                "templateSourse",
                json!("spec.template"),
                "spec.templateSourse",
            ),
        ];
        for (field, value, expected) in cases {
            let mut spec = deployments();
            spec[field] = value;
            let error = recognise(&source(), template(spec)).expect_err(field);
            assert_eq!(error.field.as_deref(), Some(expected), "{error}");
        }
        let mut long = template(deployments());
        long["metadata"]["name"] = json!("x".repeat(64));
        let error = recognise(&source(), long).expect_err("a long name");
        assert_eq!(
            error.message,
            "ExpansionTemplate name must be less than 64 characters"
        );
        let mut other = template(deployments());
        other["apiVersion"] = json!("expansion.gatekeeper.sh/v1");
        assert!(recognise(&source(), other).is_err());
    }
}
