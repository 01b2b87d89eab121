//! RBAC for the cluster's parameter watches (see [`crate::cluster::params`]): exactly `get`,
//! `list` and `watch` on each param kind's resource, as narrow as the watch: a Role in the one
//! namespace every binding names, `resourceNames` when every binding names the same object
//! (the watch lists with a `metadata.name` field selector, which RBAC authorizes by name), a
//! ClusterRole otherwise. Printed by `portcullis webhook-config` with the webhook
//! configurations; nothing when no policy has a paramKind.

use serde_json::{Value, json};

use crate::cluster::params::WatchScope;
use crate::engine::Engine;
use crate::webhook_config::{WebhookOptions, WebhookTarget};

/// The Roles, ClusterRole and their bindings Portcullis needs to watch the param kinds of
/// `engine`'s policies, bound to the ServiceAccount named `options.name` in Portcullis's
/// namespace.
pub fn params_rbac(engine: &Engine, options: &WebhookOptions) -> Vec<Value> {
    let namespace = match &options.target {
        WebhookTarget::Service { namespace, .. } => namespace.clone(),
        WebhookTarget::Url(_) => options.own_namespace.clone(),
    };
    let subject = json!([{"kind": "ServiceAccount", "name": options.name, "namespace": namespace}]);
    let role_name = format!("{}-params-reader", options.name);
    let mut cluster_rules = Vec::new();
    let mut namespaced: Vec<(String, Vec<Value>)> = Vec::new();
    for need in engine.param_needs() {
        let scope = WatchScope::of(&need.param_refs);
        if !scope.objects_needed {
            continue;
        }
        let group = need
            .kind
            .api_version
            .split_once('/')
            .map_or("", |(group, _)| group);
        let mut rule = json!({
            "apiGroups": [group],
            "resources": [need.resource],
            "verbs": ["get", "list", "watch"],
        });
        if let Some(name) = &scope.name {
            rule["resourceNames"] = json!([name]);
        }
        match scope.namespace {
            Some(namespace) => match namespaced.iter_mut().find(|(n, _)| *n == namespace) {
                Some((_, rules)) => rules.push(rule),
                None => namespaced.push((namespace, vec![rule])),
            },
            None => cluster_rules.push(rule),
        }
    }
    let labels = json!({"app.kubernetes.io/name": "portcullis"});
    let mut documents = Vec::new();
    if !cluster_rules.is_empty() {
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role_name, "labels": labels},
            "rules": cluster_rules,
        }));
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role_name, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
            "subjects": subject,
        }));
    }
    for (namespace, rules) in namespaced {
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": role_name, "namespace": namespace, "labels": labels},
            "rules": rules,
        }));
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": role_name, "namespace": namespace, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name},
            "subjects": subject,
        }));
    }
    documents
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

    fn engine(bindings: &str) -> Engine {
        let policy = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [secrets]}
  validations:
    - expression: "params.data.x == 'y'"
"#;
        let documents = crate::policy::documents_from_str(
            Path::new("p.yaml"),
            &format!("{policy}---\n{bindings}"),
        )
        .unwrap();
        Engine::compile(&documents).unwrap()
    }

    fn binding(name: &str, param_ref: &str) -> String {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
             metadata: {{name: {name}}}\nspec:\n  policyName: p\n  validationActions: [Deny]\n  \
             paramRef: {param_ref}\n---\n"
        )
    }

    #[test]
    fn no_param_kind_needs_no_rbac() {
        assert!(params_rbac(&Engine::builtin(), &options()).is_empty());
    }

    #[test]
    fn one_named_object_in_one_namespace_is_a_role_with_its_name() {
        let engine = engine(&binding(
            "b",
            "{name: limits, namespace: ops, parameterNotFoundAction: Deny}",
        ));
        let documents = params_rbac(&engine, &options());
        assert_eq!(documents.len(), 2);
        assert_eq!(documents[0]["kind"], "Role");
        assert_eq!(documents[0]["metadata"]["namespace"], "ops");
        assert_eq!(
            documents[0]["rules"],
            json!([{"apiGroups": [""], "resources": ["configmaps"],
                    "verbs": ["get", "list", "watch"], "resourceNames": ["limits"]}])
        );
        assert_eq!(documents[1]["kind"], "RoleBinding");
        assert_eq!(
            documents[1]["subjects"],
            json!([{"kind": "ServiceAccount", "name": "portcullis", "namespace": "portcullis"}])
        );
    }

    #[test]
    fn the_request_namespace_needs_a_cluster_role() {
        let bindings = binding("a", "{name: limits, parameterNotFoundAction: Deny}")
            + &binding(
                "b",
                "{selector: {matchLabels: {x: y}}, parameterNotFoundAction: Allow}",
            );
        let documents = params_rbac(&engine(&bindings), &options());
        assert_eq!(documents[0]["kind"], "ClusterRole");
        assert_eq!(
            documents[0]["rules"],
            json!([{"apiGroups": [""], "resources": ["configmaps"],
                    "verbs": ["get", "list", "watch"]}])
        );
        assert_eq!(documents[1]["kind"], "ClusterRoleBinding");
    }
}
