//! Pod Security Admission as a policy document: the upstream `PodSecurityConfiguration`
//! format, namespace label overrides, exemptions, and enforce / warn / audit.

use serde::Deserialize;
use serde_json::Value;

/// An error in a `PodSecurityConfiguration`, at a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The field path, e.g. `defaults.enforce-version`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// `pod-security.admission.config.k8s.io/v1` `PodSecurityConfiguration`, as the apiserver's
/// admission configuration file takes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodSecurityConfiguration {
    /// `pod-security.admission.config.k8s.io/v1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// `PodSecurityConfiguration`.
    pub kind: String,
    /// Levels and versions used where namespace labels do not say otherwise.
    #[serde(default)]
    pub defaults: PodSecurityDefaults,
    /// Requests never evaluated.
    #[serde(default)]
    pub exemptions: PodSecurityExemptions,
}

/// The `defaults` block: level and version per mode (`privileged` and `latest` when unset).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodSecurityDefaults {
    /// Level refused.
    #[serde(default = "privileged")]
    pub enforce: String,
    /// Version of the enforced level.
    #[serde(rename = "enforce-version", default = "latest")]
    pub enforce_version: String,
    /// Level recorded in audit annotations.
    #[serde(default = "privileged")]
    pub audit: String,
    /// Version of the audited level.
    #[serde(rename = "audit-version", default = "latest")]
    pub audit_version: String,
    /// Level warned about.
    #[serde(default = "privileged")]
    pub warn: String,
    /// Version of the warned level.
    #[serde(rename = "warn-version", default = "latest")]
    pub warn_version: String,
}

impl Default for PodSecurityDefaults {
    fn default() -> Self {
        PodSecurityDefaults {
            enforce: privileged(),
            enforce_version: latest(),
            audit: privileged(),
            audit_version: latest(),
            warn: privileged(),
            warn_version: latest(),
        }
    }
}

fn privileged() -> String {
    "privileged".into()
}

fn latest() -> String {
    "latest".into()
}

/// The `exemptions` block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodSecurityExemptions {
    /// Requesting user names never evaluated.
    #[serde(default)]
    pub usernames: Vec<String>,
    /// Pods with these `runtimeClassName`s never evaluated.
    #[serde(rename = "runtimeClasses", default)]
    pub runtime_classes: Vec<String>,
    /// Namespaces never evaluated.
    #[serde(default)]
    pub namespaces: Vec<String>,
}

impl PodSecurityConfiguration {
    /// Parses and validates a document (levels and versions must parse).
    pub fn from_value(value: &Value) -> Result<Self, ConfigError> {
        let config: PodSecurityConfiguration =
            serde_path_to_error::deserialize(value).map_err(|e| ConfigError {
                field: match e.path().to_string() {
                    root if root == "." => String::new(),
                    path => path,
                },
                message: e.into_inner().to_string(),
            })?;
        Ok(config)
    }
}
