//! A `PodSecurityConfiguration` compiled: levels and versions parsed (empty ones take
//! upstream's defaults) and exemptions checked as upstream's `ValidatePodSecurityConfiguration`
//! checks them, each error naming its field with upstream's message.

use std::collections::HashSet;
use std::fmt;

use super::admission::{INVALID_LEVEL, INVALID_VERSION, NamespacePolicy, PodSecurityAdmission};
use super::text::go_quote;
use super::{Level, LevelVersion, Version};
use crate::kubernetes::names;
use crate::policy::PodSecurityConfiguration;

/// An error in a `PodSecurityConfiguration`, at a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The field path, e.g. `defaults.enforce-version`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

fn invalid(field: impl Into<String>, value: &str, detail: &str) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: format!("Invalid value: {}: {detail}", go_quote(value)),
    }
}

/// A level from the configuration; empty is `privileged` (upstream's defaulting).
fn config_level(field: &str, value: &str) -> Result<Level, ConfigError> {
    if value.is_empty() {
        return Ok(Level::Privileged);
    }
    value
        .parse()
        .map_err(|_| invalid(field, value, INVALID_LEVEL))
}

/// A version from the configuration; empty is `latest` (upstream's defaulting).
fn config_version(field: &str, value: &str) -> Result<Version, ConfigError> {
    if value.is_empty() {
        return Ok(Version::Latest);
    }
    value
        .parse()
        .map_err(|_| invalid(field, value, INVALID_VERSION))
}

fn username_errors(value: &str) -> Vec<String> {
    if value.is_empty() {
        vec!["username must not be empty".to_owned()]
    } else {
        Vec::new()
    }
}

/// An exemption list as a set: each entry valid and not repeated.
fn exemption_set(
    field: &str,
    values: &[String],
    errors_of: fn(&str) -> Vec<String>,
) -> Result<HashSet<String>, ConfigError> {
    let mut set = HashSet::with_capacity(values.len());
    for (index, value) in values.iter().enumerate() {
        let errors = errors_of(value);
        if !errors.is_empty() {
            return Err(invalid(
                format!("{field}[{index}]"),
                value,
                &errors.join(", "),
            ));
        }
        if !set.insert(value.clone()) {
            return Err(ConfigError {
                field: format!("{field}[{index}]"),
                message: format!("Duplicate value: {}", go_quote(value)),
            });
        }
    }
    Ok(set)
}

impl PodSecurityAdmission {
    /// Compiles a configuration. Levels and versions are parsed (empty ones take upstream's
    /// defaults, `privileged` and `latest`) and exemptions validated as upstream's
    /// `ValidatePodSecurityConfiguration` does; the first error names its field, e.g.
    /// `defaults.enforce-version` or `exemptions.namespaces[2]`, with upstream's message.
    pub fn new(config: &PodSecurityConfiguration) -> Result<Self, ConfigError> {
        let d = &config.defaults;
        // Upstream's validation order: enforce, warn, audit.
        let enforce = LevelVersion::new(
            config_level("defaults.enforce", &d.enforce)?,
            config_version("defaults.enforce-version", &d.enforce_version)?,
        );
        let warn = LevelVersion::new(
            config_level("defaults.warn", &d.warn)?,
            config_version("defaults.warn-version", &d.warn_version)?,
        );
        let audit = LevelVersion::new(
            config_level("defaults.audit", &d.audit)?,
            config_version("defaults.audit-version", &d.audit_version)?,
        );
        let exemptions = &config.exemptions;
        // Which checks run at each level and version is resolved now, not by the first request.
        super::registry::resolve_all();
        Ok(PodSecurityAdmission {
            defaults: NamespacePolicy {
                enforce,
                audit,
                warn,
            },
            exempt_namespaces: exemption_set(
                "exemptions.namespaces",
                &exemptions.namespaces,
                names::dns1123_label_errors,
            )?,
            exempt_runtime_classes: exemption_set(
                "exemptions.runtimeClasses",
                &exemptions.runtime_classes,
                names::dns1123_subdomain_errors,
            )?,
            exempt_usernames: exemption_set(
                "exemptions.usernames",
                &exemptions.usernames,
                username_errors,
            )?,
        })
    }
}
