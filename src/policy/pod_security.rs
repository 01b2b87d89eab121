//! `pod-security.admission.config.k8s.io/v1` `PodSecurityConfiguration`: the document the
//! apiserver's admission configuration file takes for Pod Security Admission. Levels, versions
//! and exemptions are checked when the engine compiles it
//! (`engine::pod_security::PodSecurityAdmission::new`), as upstream's
//! `ValidatePodSecurityConfiguration` does.

use serde::Deserialize;

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

/// The `defaults` block: level and version per mode (`privileged` and `latest` when unset or
/// empty, as upstream defaults them).
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
