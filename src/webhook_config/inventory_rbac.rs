//! RBAC for the watches of the kinds a Gatekeeper Config syncs into `data.inventory` (see
//! [`crate::cluster::inventory`]): `list` and `watch` on each kind's resource, cluster-wide,
//! in a ClusterRole bound to Portcullis's ServiceAccount. Printed by `portcullis
//! webhook-config` with the webhook configurations; nothing without synced kinds.
//!
//! The resource is the kind's plural as Kubernetes forms it for built-in kinds; a custom
//! resource with an irregular plural needs its rule edited.

use serde_json::{Value, json};

use crate::engine::Engine;
use crate::webhook_config::{WebhookOptions, WebhookTarget};

/// The ClusterRole and ClusterRoleBinding Portcullis needs to watch the kinds `engine`'s
/// Gatekeeper Config syncs, bound to the ServiceAccount named `options.name` in Portcullis's
/// namespace.
pub fn inventory_rbac(engine: &Engine, options: &WebhookOptions) -> Vec<Value> {
    let settings = engine.gatekeeper_sync();
    if settings.kinds.is_empty() {
        return Vec::new();
    }
    let namespace = match &options.target {
        WebhookTarget::Service { namespace, .. } => namespace.clone(),
        WebhookTarget::Url(_) => options.own_namespace.clone(),
    };
    let role_name = format!("{}-inventory-reader", options.name);
    let labels = json!({"app.kubernetes.io/name": "portcullis"});
    let rules: Vec<Value> = settings
        .kinds
        .iter()
        .map(|entry| {
            json!({
                "apiGroups": [entry.group],
                "resources": [crate::kubernetes::names::resource_for_kind(&entry.kind)],
                "verbs": ["list", "watch"],
            })
        })
        .collect();
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role_name, "labels": labels},
            "rules": rules,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role_name, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": options.name, "namespace": namespace}],
        }),
    ]
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::webhook_config::FailurePolicy;

    fn options() -> WebhookOptions {
        WebhookOptions {
            target: WebhookTarget::parse_service("portcullis/portcullis").unwrap(),
            ca_bundle_pem: None,
            failure_policy: FailurePolicy::Fail,
            timeout_seconds: 5,
            name: "portcullis".into(),
            own_namespace: "portcullis".into(),
        }
    }

    #[test]
    fn no_config_needs_no_rbac() {
        assert!(inventory_rbac(&Engine::builtin(), &options()).is_empty());
    }

    #[test]
    fn each_synced_kind_is_listed_and_watched_cluster_wide() {
        let config = r#"
apiVersion: config.gatekeeper.sh/v1alpha1
kind: Config
metadata: {name: config}
spec:
  sync:
    syncOnly:
      - {group: "", version: v1, kind: Namespace}
      - {group: networking.k8s.io, version: v1, kind: Ingress}
"#;
        let documents = crate::policy::documents_from_str(Path::new("c.yaml"), config).unwrap();
        let engine = Engine::compile(&documents).unwrap();
        let documents = inventory_rbac(&engine, &options());
        assert_eq!(documents.len(), 2);
        assert_eq!(documents[0]["kind"], "ClusterRole");
        assert_eq!(
            documents[0]["rules"],
            json!([
                {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
                {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["list", "watch"]},
            ])
        );
        assert_eq!(documents[1]["kind"], "ClusterRoleBinding");
        assert_eq!(
            documents[1]["roleRef"]["name"],
            "portcullis-inventory-reader"
        );
        assert_eq!(
            documents[1]["subjects"],
            json!([{"kind": "ServiceAccount", "name": "portcullis", "namespace": "portcullis"}])
        );
    }
}
