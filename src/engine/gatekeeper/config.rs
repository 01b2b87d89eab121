//! Gatekeeper's `Config`, compiled: the namespaces each Gatekeeper process skips
//! (`pkg/controller/config/process` `Excluder`) and the kinds synced into `data.inventory`.
//!
//! - `webhook`: the validating webhook (`serve`) admits a request in an excluded namespace
//!   without evaluating any constraint (`pkg/webhook/policy.go`: "Namespace is set to be
//!   ignored by Gatekeeper config").
//! - `audit`: `audit` does not review objects in excluded namespaces.
//! - `sync`: objects in excluded namespaces are left out of `data.inventory`.
//! - `mutation-webhook`: read; Portcullis runs no Gatekeeper mutation.
//!
//! The namespace judged is the object's, or for a Namespace (core group) its own name; a
//! cluster-scoped object's is `""`, which only a glob such as `*` matches. `gator` does not
//! read a Config, so `check` and `test` ([`EnforcementPoint::Gator`]) ignore it.

use super::EnforcementPoint;
use super::matching::{Wildcard, wildcard};
use crate::admission::object_view::JsonRead;
use crate::admission::{AdmissionRequest, Operation};
use crate::engine::Engine;
use crate::policy::gatekeeper::GatekeeperDocument;
use crate::policy::gatekeeper_config::{GatekeeperConfig, SyncOnlyEntry};
use crate::policy::{DocumentSource, PolicyError};

/// A Gatekeeper process a Config's `spec.match` excludes namespaces from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    /// `audit`.
    Audit,
    /// `webhook`: the validating webhook.
    Webhook,
    /// `mutation-webhook` (Portcullis runs no Gatekeeper mutation).
    Mutation,
    /// `sync`: replication into `data.inventory`.
    Sync,
}

impl Process {
    const ALL: [Process; 4] = [
        Process::Audit,
        Process::Webhook,
        Process::Mutation,
        Process::Sync,
    ];

    fn index(self) -> usize {
        self as usize
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "audit" => Some(Process::Audit),
            "webhook" => Some(Process::Webhook),
            "mutation-webhook" => Some(Process::Mutation),
            "sync" => Some(Process::Sync),
            _ => None,
        }
    }

    /// The process that reviews requests at `point`; none for `gator` (`check`, `test`),
    /// which does not read a Config.
    fn at(point: EnforcementPoint) -> Option<Self> {
        match point {
            EnforcementPoint::Webhook => Some(Process::Webhook),
            EnforcementPoint::Audit => Some(Process::Audit),
            EnforcementPoint::Gator => None,
        }
    }
}

/// The policy set's Config, compiled.
#[derive(Debug, Default)]
pub(crate) struct CompiledConfig {
    /// Excluded namespaces, per [`Process`] (by [`Process::index`]).
    excluded: [Vec<Wildcard>; 4],
    /// `spec.sync.syncOnly`, sorted, without repeats.
    sync_only: Vec<SyncOnlyEntry>,
}

impl CompiledConfig {
    /// The Config among `documents`, compiled; the default (nothing excluded, nothing synced)
    /// without one. A second Config is an error naming both.
    pub(crate) fn compile(
        documents: &[(&DocumentSource, &GatekeeperDocument)],
    ) -> Result<Self, PolicyError> {
        let mut found: Option<(&DocumentSource, &GatekeeperConfig)> = None;
        for (source, document) in documents {
            let GatekeeperDocument::Config(config) = document else {
                continue;
            };
            if let Some((first, _)) = found {
                return Err(PolicyError::at(
                    source,
                    "",
                    format!(
                        "a policy set holds at most one Gatekeeper Config; another is in {first}"
                    ),
                ));
            }
            found = Some((source, config));
        }
        let Some((source, config)) = found else {
            return Ok(CompiledConfig::default());
        };
        let mut compiled = CompiledConfig::default();
        for (index, entry) in config.spec.match_.iter().enumerate() {
            let mut globs = Vec::new();
            for (at, namespace) in entry.excluded_namespaces.iter().enumerate() {
                let field = format!("spec.match[{index}].excludedNamespaces[{at}]");
                globs.push(
                    wildcard(field, namespace)
                        .map_err(|(field, message)| PolicyError::at(source, field, message))?,
                );
            }
            for process in &entry.processes {
                let processes = match Process::parse(process) {
                    Some(process) => vec![process],
                    // `*`; the document checked the names already.
                    None => Process::ALL.to_vec(),
                };
                for process in processes {
                    let excluded = &mut compiled.excluded[process.index()];
                    for glob in &globs {
                        if !excluded.contains(glob) {
                            excluded.push(glob.clone());
                        }
                    }
                }
            }
        }
        compiled.sync_only = config.spec.sync.sync_only.clone();
        compiled.sync_only.sort();
        compiled.sync_only.dedup();
        Ok(compiled)
    }

    /// Whether `namespace` is excluded from `process` (`Excluder.IsNamespaceExcluded`, given
    /// the namespace already chosen by [`judged_namespace`]).
    pub(crate) fn excludes(&self, process: Process, namespace: &str) -> bool {
        self.excluded[process.index()]
            .iter()
            .any(|glob| glob.matches(namespace))
    }

    /// Whether constraints skip `request` at `point`: its namespace is excluded from the
    /// point's process.
    pub(crate) fn skips(&self, request: &AdmissionRequest, point: EnforcementPoint) -> bool {
        let Some(process) = Process::at(point) else {
            return false;
        };
        if self.excluded[process.index()].is_empty() {
            return false;
        }
        judged_namespace(request).is_some_and(|namespace| self.excludes(process, namespace))
    }

    /// Whether constraints skip `request` at the webhook, judged from its envelope: its
    /// namespace is excluded from `webhook` and it is not a Namespace's (judged by the
    /// object's own name). For a request with an object of its kind, this is
    /// [`CompiledConfig::skips`] at [`EnforcementPoint::Webhook`].
    pub(crate) fn webhook_skips_envelope(&self, request: &AdmissionRequest) -> bool {
        let kind = &request.kind;
        if self.excluded[Process::Webhook.index()].is_empty()
            || (kind.group.is_empty() && kind.version == "v1" && kind.kind == "Namespace")
        {
            return false;
        }
        self.excludes(Process::Webhook, request.namespace.as_deref().unwrap_or(""))
    }
}

/// The namespace the excluder judges a request by, as Gatekeeper's webhook finds it
/// (`skipExcludedNamespace`): the object (`oldObject` on DELETE) with the request's
/// namespace; a Namespace's own name. None when there is no object to read (Gatekeeper logs
/// the error and reviews the request).
fn judged_namespace(request: &AdmissionRequest) -> Option<&str> {
    let object = if request.operation == Operation::Delete {
        request.old_object.as_ref()
    } else {
        request.object.as_ref()
    }?
    .json();
    let text = |field: &str| object.get(field).and_then(JsonRead::as_str);
    if text("kind") == Some("Namespace") && text("apiVersion") == Some("v1") {
        let name = object.get("metadata").and_then(|m| m.get("name"));
        return Some(name.and_then(JsonRead::as_str).unwrap_or(""));
    }
    Some(request.namespace.as_deref().unwrap_or(""))
}

/// What `data.inventory` is made of: the kinds a Config syncs and the namespaces it excludes
/// from `sync`. Equal settings make the same inventory from the same objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncSettings {
    /// `spec.sync.syncOnly`, sorted, without repeats; none: no inventory is kept.
    pub kinds: Vec<SyncOnlyEntry>,
    /// The namespaces excluded from `sync`.
    excluded: Vec<Wildcard>,
}

impl SyncSettings {
    /// Whether `object` (with its `apiVersion` and `kind`) is left out of `data.inventory`:
    /// its namespace, or a Namespace's own name, is excluded from `sync` (the cache manager's
    /// `AddObject`).
    pub fn excludes(&self, object: &serde_json::Value) -> bool {
        if self.excluded.is_empty() {
            return false;
        }
        let text = |pointer: &str| object.pointer(pointer).and_then(serde_json::Value::as_str);
        let namespace = if text("/kind") == Some("Namespace") && text("/apiVersion") == Some("v1") {
            text("/metadata/name")
        } else {
            text("/metadata/namespace")
        };
        let namespace = namespace.unwrap_or("");
        self.excluded.iter().any(|glob| glob.matches(namespace))
    }
}

impl Engine {
    /// What Gatekeeper's `data.inventory` is made of under the policy set's Config: the kinds
    /// it syncs and the namespaces it excludes from `sync`; no kinds without a Config.
    pub fn gatekeeper_sync(&self) -> SyncSettings {
        let config = &self.gatekeeper.config;
        SyncSettings {
            kinds: config.sync_only.clone(),
            excluded: config.excluded[Process::Sync.index()].clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::{Value, json};

    use super::*;

    fn source(index: usize) -> DocumentSource {
        DocumentSource {
            file: PathBuf::from("config.yaml"),
            index,
        }
    }

    fn document(spec: Value) -> GatekeeperDocument {
        let config = crate::policy::gatekeeper_config::recognise(
            &source(0),
            json!({"apiVersion": "config.gatekeeper.sh/v1alpha1", "kind": "Config",
                   "metadata": {"name": "config"}, "spec": spec}),
        )
        .expect("a Config");
        GatekeeperDocument::Config(Box::new(config))
    }

    fn compile(spec: Value) -> CompiledConfig {
        let document = document(spec);
        CompiledConfig::compile(&[(&source(0), &document)]).expect("compiles")
    }

    fn request(operation: Operation, namespace: Option<&str>, object: Value) -> AdmissionRequest {
        let mut request: AdmissionRequest = serde_json::from_value(json!({
            "uid": "u",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "operation": "CREATE",
            "userInfo": {},
        }))
        .expect("a request");
        request.operation = operation;
        request.namespace = namespace.map(ToOwned::to_owned);
        if operation == Operation::Delete {
            request.old_object = Some(object.into());
        } else {
            request.object = Some(object.into());
        }
        request
    }

    fn config_map(namespace: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "namespace": namespace}})
    }

    #[test]
    fn globs_match_as_gatekeeper_wildcards() {
        let config = compile(json!({"match": [
            {"excludedNamespaces": ["kube-*", "*-system", "*mid*", "exact"], "processes": ["webhook"]},
        ]}));
        for (namespace, excluded) in [
            ("kube-public", true),
            ("gatekeeper-system", true),
            ("a-mid-b", true),
            ("exact", true),
            ("exactly", false),
            ("default", false),
            ("", false),
        ] {
            assert_eq!(
                config.excludes(Process::Webhook, namespace),
                excluded,
                "{namespace:?}"
            );
            assert!(!config.excludes(Process::Audit, namespace));
        }
    }

    #[test]
    fn a_star_process_excludes_from_every_process() {
        let config = compile(json!({"match": [
            {"excludedNamespaces": ["kube-system"], "processes": ["*"]},
            {"excludedNamespaces": ["audited-not"], "processes": ["audit"]},
        ]}));
        for process in Process::ALL {
            assert!(config.excludes(process, "kube-system"), "{process:?}");
        }
        assert!(config.excludes(Process::Audit, "audited-not"));
        assert!(!config.excludes(Process::Webhook, "audited-not"));
        assert!(!config.excludes(Process::Sync, "audited-not"));
    }

    #[test]
    fn requests_are_judged_by_their_object_namespace() {
        let config = compile(json!({"match": [
            {"excludedNamespaces": ["skipped"], "processes": ["webhook", "audit"]},
        ]}));
        let create = request(Operation::Create, Some("skipped"), config_map("skipped"));
        assert!(config.skips(&create, EnforcementPoint::Webhook));
        assert!(config.skips(&create, EnforcementPoint::Audit));
        // gator does not read a Config.
        assert!(!config.skips(&create, EnforcementPoint::Gator));
        let elsewhere = request(Operation::Create, Some("other"), config_map("other"));
        assert!(!config.skips(&elsewhere, EnforcementPoint::Webhook));
        let delete = request(Operation::Delete, Some("skipped"), config_map("skipped"));
        assert!(config.skips(&delete, EnforcementPoint::Webhook));
        // A DELETE without oldObject cannot be read: Gatekeeper reviews it.
        let mut unreadable = delete.clone();
        unreadable.old_object = None;
        assert!(!config.skips(&unreadable, EnforcementPoint::Webhook));
    }

    #[test]
    fn a_namespace_is_judged_by_its_own_name() {
        let config = compile(json!({"match": [
            {"excludedNamespaces": ["skipped"], "processes": ["webhook"]},
        ]}));
        let namespace = |name: &str| {
            let mut request = request(
                Operation::Create,
                None,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
            );
            request.kind.kind = "Namespace".into();
            request
        };
        assert!(config.skips(&namespace("skipped"), EnforcementPoint::Webhook));
        assert!(!config.skips(&namespace("kept"), EnforcementPoint::Webhook));
    }

    #[test]
    fn cluster_scoped_objects_are_excluded_only_by_globs_matching_the_empty_namespace() {
        let cluster_role = json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                                  "kind": "ClusterRole", "metadata": {"name": "r"}});
        let named = compile(json!({"match": [
            {"excludedNamespaces": ["kube-system"], "processes": ["webhook"]},
        ]}));
        assert!(!named.skips(
            &request(Operation::Create, None, cluster_role.clone()),
            EnforcementPoint::Webhook
        ));
        let everything = compile(json!({"match": [
            {"excludedNamespaces": ["*"], "processes": ["webhook"]},
        ]}));
        assert!(everything.skips(
            &request(Operation::Create, None, cluster_role),
            EnforcementPoint::Webhook
        ));
    }

    #[test]
    fn sync_exclusions_leave_objects_out_of_the_inventory() {
        let config = compile(json!({"match": [
            {"excludedNamespaces": ["kube-*"], "processes": ["sync"]},
        ]}));
        let settings = SyncSettings {
            kinds: Vec::new(),
            excluded: config.excluded[Process::Sync.index()].clone(),
        };
        assert!(settings.excludes(&config_map("kube-system")));
        assert!(!settings.excludes(&config_map("default")));
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": "kube-public"}});
        assert!(settings.excludes(&namespace));
    }

    #[test]
    fn sync_kinds_are_sorted_without_repeats() {
        let config = compile(json!({"sync": {"syncOnly": [
            {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
            {"group": "", "version": "v1", "kind": "ConfigMap"},
            {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
        ]}}));
        let kinds: Vec<String> = config
            .sync_only
            .iter()
            .map(|k| format!("{} {}", k.api_version(), k.kind))
            .collect();
        assert_eq!(kinds, ["v1 ConfigMap", "networking.k8s.io/v1 Ingress"]);
    }

    #[test]
    fn a_second_config_is_an_error_naming_both() {
        let first = document(json!({}));
        let second = document(json!({}));
        let second_source = DocumentSource {
            file: PathBuf::from("other.yaml"),
            index: 2,
        };
        let error = CompiledConfig::compile(&[(&source(0), &first), (&second_source, &second)])
            .expect_err("two Configs");
        assert_eq!(
            error.to_string(),
            "other.yaml (document 2): a policy set holds at most one Gatekeeper Config; \
             another is in config.yaml (document 0)"
        );
    }

    #[test]
    fn invalid_globs_are_refused() {
        let document = document(json!({"match": [
            {"excludedNamespaces": ["Kube_System"], "processes": ["*"]},
        ]}));
        let error = CompiledConfig::compile(&[(&source(0), &document)]).expect_err("not a glob");
        assert_eq!(
            error.field.as_deref(),
            Some("spec.match[0].excludedNamespaces[0]")
        );
    }

    /// A template denying every ConfigMap, its constraint, a native policy denying
    /// ConfigMaps without a `team` label, and a Config excluding `skipped` from `webhook` and
    /// `not-audited` from `audit`.
    const POLICIES: &str = r#"
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {name: k8sdenyall}
spec:
  crd: {spec: {names: {kind: K8sDenyAll}}}
  targets:
    - target: admission.k8s.gatekeeper.sh
      rego: |
        package k8sdenyall
        violation[{"msg": "denied"}] { true }
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sDenyAll
metadata: {name: deny-all}
spec:
  match: {kinds: [{apiGroups: [""], kinds: ["ConfigMap"]}]}
---
apiVersion: portcullis.dev/v1alpha1
kind: Policy
metadata: {name: team-label}
spec:
  action: Deny
  match: {resources: [{kinds: [ConfigMap]}]}
  validate:
    - name: team
      requiredLabels: {team: ".+"}
---
apiVersion: config.gatekeeper.sh/v1alpha1
kind: Config
metadata: {name: config, namespace: gatekeeper-system}
spec:
  match:
    - excludedNamespaces: ["skipped"]
      processes: ["webhook"]
    - excludedNamespaces: ["not-audited"]
      processes: ["audit"]
"#;

    fn violations(engine: &Engine, namespace: &str, point: EnforcementPoint) -> Vec<String> {
        let request = request(Operation::Create, Some(namespace), config_map(namespace));
        let context = crate::engine::EvalContext::new(crate::engine::Endpoint::Validate)
            .at_enforcement_point(point);
        let decision = engine.evaluate(&request, &context).expect("evaluates");
        let mut policies: Vec<String> = decision
            .violations
            .iter()
            .map(|v| v.policy.clone())
            .collect();
        policies.sort();
        policies
    }

    #[test]
    fn exclusions_skip_only_gatekeeper_constraints_at_their_process() {
        let documents =
            crate::policy::documents_from_str(std::path::Path::new("policies.yaml"), POLICIES)
                .expect("documents");
        let engine = Engine::compile(&documents).expect("compiles");
        let both = ["K8sDenyAll/deny-all", "team-label"];
        assert_eq!(
            violations(&engine, "default", EnforcementPoint::Webhook),
            both
        );
        assert_eq!(
            violations(&engine, "skipped", EnforcementPoint::Webhook),
            ["team-label"]
        );
        assert_eq!(
            violations(&engine, "skipped", EnforcementPoint::Audit),
            both
        );
        assert_eq!(
            violations(&engine, "not-audited", EnforcementPoint::Audit),
            ["team-label"]
        );
        assert_eq!(
            violations(&engine, "not-audited", EnforcementPoint::Webhook),
            both
        );
        // gator (`check`, `test`) does not read a Config.
        assert_eq!(
            violations(&engine, "skipped", EnforcementPoint::Gator),
            both
        );
        assert_eq!(
            violations(&engine, "not-audited", EnforcementPoint::Gator),
            both
        );
        assert_eq!(engine.gatekeeper_sync(), SyncSettings::default());
    }
}
