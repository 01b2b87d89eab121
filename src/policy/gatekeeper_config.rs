//! OPA Gatekeeper's `config.gatekeeper.sh/v1alpha1` `Config` (Gatekeeper v3's
//! `apis/config/v1alpha1/config_types.go`): namespaces excluded per Gatekeeper process
//! (`spec.match`) and the kinds synced into `data.inventory` (`spec.sync.syncOnly`).
//! `spec.validation` (request traces) and `spec.readiness` (readiness statistics) are read and
//! ignored; any other field is refused.

use serde::Deserialize;
use serde_json::Value;

use super::document::{DocumentSource, PolicyError, from_document};
use super::gatekeeper::Metadata;

/// The API group of Config.
pub const CONFIG_GROUP: &str = "config.gatekeeper.sh";
/// The only version of Config.
pub const CONFIG_API_VERSION: &str = "config.gatekeeper.sh/v1alpha1";
/// The only name Gatekeeper's config controller reads (`pkg/keys`: `config` in Gatekeeper's
/// namespace); it ignores Configs of any other name.
pub const CONFIG_NAME: &str = "config";
/// The processes a `spec.match` entry may name (`pkg/controller/config/process`).
pub const PROCESSES: [&str; 5] = ["audit", "webhook", "mutation-webhook", "sync", "*"];

/// A `config.gatekeeper.sh/v1alpha1` Config.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatekeeperConfig {
    /// `config.gatekeeper.sh/v1alpha1`.
    pub api_version: String,
    /// `Config`.
    pub kind: String,
    /// Metadata: the name must be `config`.
    #[serde(default)]
    pub metadata: Metadata,
    /// The configuration.
    #[serde(default)]
    pub spec: ConfigSpec,
    /// Ignored: the status of an exported Config.
    #[serde(default)]
    pub status: Option<Value>,
}

/// `spec` of a Config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigSpec {
    /// The kinds replicated into `data.inventory`.
    #[serde(default)]
    pub sync: SyncSpec,
    /// Ignored: request traces (`traces`), a debugging aid of Gatekeeper's webhook.
    #[serde(default)]
    pub validation: Option<Value>,
    /// Namespaces excluded from Gatekeeper's processes.
    #[serde(default, rename = "match")]
    pub match_: Vec<ConfigMatch>,
    /// Ignored: readiness statistics (`statsEnabled`).
    #[serde(default)]
    pub readiness: Option<Value>,
}

/// `spec.sync` of a Config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyncSpec {
    /// The kinds synced; none: nothing.
    #[serde(default)]
    pub sync_only: Vec<SyncOnlyEntry>,
}

/// One entry of `spec.sync.syncOnly`: a group, version and kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyncOnlyEntry {
    /// The API group (`""`: the core group).
    #[serde(default)]
    pub group: String,
    /// The version.
    #[serde(default)]
    pub version: String,
    /// The kind.
    #[serde(default)]
    pub kind: String,
}

impl SyncOnlyEntry {
    /// The kind's `apiVersion`: `group/version`, or `version` in the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// One entry of `spec.match` of a Config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigMatch {
    /// The processes the namespaces are excluded from: `audit`, `webhook`,
    /// `mutation-webhook`, `sync`, or `*` for all.
    #[serde(default)]
    pub processes: Vec<String>,
    /// The namespaces excluded: names, or globs with a leading and/or trailing `*`.
    #[serde(default)]
    pub excluded_namespaces: Vec<String>,
}

/// Reads a document of [`CONFIG_GROUP`]: a Config of version v1alpha1, named `config`.
pub fn recognise(source: &DocumentSource, value: Value) -> Result<GatekeeperConfig, PolicyError> {
    super::gatekeeper::check_type(source, &value, CONFIG_GROUP, &["v1alpha1"], Some("Config"))?;
    let config: GatekeeperConfig = from_document(source, value)?;
    if config.metadata.name != CONFIG_NAME {
        return Err(PolicyError::at(
            source,
            "metadata.name",
            format!(
                "Gatekeeper reads only the Config named {CONFIG_NAME:?} and ignores others; this one is named {:?}",
                config.metadata.name
            ),
        ));
    }
    for (index, entry) in config.spec.match_.iter().enumerate() {
        for (at, process) in entry.processes.iter().enumerate() {
            if !PROCESSES.contains(&process.as_str()) {
                let supported: Vec<String> = PROCESSES.iter().map(|p| format!("{p:?}")).collect();
                return Err(PolicyError::at(
                    source,
                    format!("spec.match[{index}].processes[{at}]"),
                    format!(
                        "Unsupported value: {process:?}: supported values: {}",
                        supported.join(", ")
                    ),
                ));
            }
        }
    }
    for (index, entry) in config.spec.sync.sync_only.iter().enumerate() {
        for (field, value) in [("version", &entry.version), ("kind", &entry.kind)] {
            if value.is_empty() {
                return Err(PolicyError::at(
                    source,
                    format!("spec.sync.syncOnly[{index}].{field}"),
                    "Required value: a synced kind needs its version and kind",
                ));
            }
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;

    fn source() -> DocumentSource {
        DocumentSource {
            file: PathBuf::from("config.yaml"),
            index: 0,
        }
    }

    fn config(spec: Value) -> Value {
        json!({
            "apiVersion": "config.gatekeeper.sh/v1alpha1",
            "kind": "Config",
            "metadata": {"name": "config", "namespace": "gatekeeper-system"},
            "spec": spec,
        })
    }

    #[test]
    fn a_full_config_is_read() {
        let config = recognise(
            &source(),
            config(json!({
                "match": [
                    {"excludedNamespaces": ["kube-*", "*-system"], "processes": ["*"]},
                    {"excludedNamespaces": ["audit-excluded"], "processes": ["audit", "webhook"]},
                ],
                "sync": {"syncOnly": [
                    {"group": "", "version": "v1", "kind": "Namespace"},
                    {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
                ]},
                "validation": {"traces": [{"user": "someone", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "dump": "All"}]},
                "readiness": {"statsEnabled": true},
            })),
        )
        .expect("reads");
        assert_eq!(config.spec.match_.len(), 2);
        assert_eq!(
            config.spec.match_[0].excluded_namespaces,
            ["kube-*", "*-system"]
        );
        assert_eq!(config.spec.sync.sync_only[0].api_version(), "v1");
        assert_eq!(
            config.spec.sync.sync_only[1].api_version(),
            "networking.k8s.io/v1"
        );
    }

    #[test]
    fn an_empty_config_is_read() {
        let config = recognise(&source(), config(json!({}))).expect("reads");
        assert!(config.spec.match_.is_empty());
        assert!(config.spec.sync.sync_only.is_empty());
    }

    #[test]
    fn unknown_fields_are_refused() {
        let error = recognise(
            &source(),
            config(json!({"match": [{"excludedNamespace": ["a"], "processes": ["*"]}]})),
        )
        .expect_err("a typo");
        assert_eq!(
            error.field.as_deref(),
            Some("spec.match[0].excludedNamespace")
        );
        assert!(error.message.contains("excludedNamespace"), "{error}");
    }

    #[test]
    fn unknown_processes_are_refused() {
        let error = recognise(
            &source(),
            config(json!({"match": [{"excludedNamespaces": ["a"], "processes": ["webhooks"]}]})),
        )
        .expect_err("not a process");
        assert_eq!(error.field.as_deref(), Some("spec.match[0].processes[0]"));
        assert_eq!(
            error.message,
            "Unsupported value: \"webhooks\": supported values: \"audit\", \"webhook\", \
             \"mutation-webhook\", \"sync\", \"*\""
        );
    }

    #[test]
    fn a_config_of_another_name_is_refused() {
        let mut value = config(json!({}));
        value["metadata"]["name"] = json!("other");
        let error = recognise(&source(), value).expect_err("ignored by Gatekeeper");
        assert_eq!(error.field.as_deref(), Some("metadata.name"));
    }

    #[test]
    fn sync_entries_need_a_version_and_kind() {
        let error = recognise(
            &source(),
            config(json!({"sync": {"syncOnly": [{"group": "apps", "kind": "Deployment"}]}})),
        )
        .expect_err("no version");
        assert_eq!(
            error.field.as_deref(),
            Some("spec.sync.syncOnly[0].version")
        );
    }

    #[test]
    fn other_versions_and_kinds_are_refused() {
        let mut value = config(json!({}));
        value["apiVersion"] = json!("config.gatekeeper.sh/v1");
        let error = recognise(&source(), value).expect_err("no such version");
        assert_eq!(error.field.as_deref(), Some("apiVersion"));
        let mut value = config(json!({}));
        value["kind"] = json!("Settings");
        let error = recognise(&source(), value).expect_err("no such kind");
        assert_eq!(error.field.as_deref(), Some("kind"));
    }
}
