//! Validating and Mutating webhook configurations for a policy set: `rules` derived from what
//! the policies act on (nothing broader) and lockout-safe exclusions that are always on.

pub mod inventory_rbac;
pub mod params_rbac;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use crate::engine::{Endpoint, Engine, ResourceRule};
pub use crate::kubernetes::vocabulary::FailurePolicy;

/// Where the apiserver reaches the webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookTarget {
    /// A base URL such as `https://127.0.0.1:8443`; `/validate` and `/mutate` are appended.
    Url(String),
    /// An in-cluster Service.
    Service {
        /// Its namespace (also Portcullis's own namespace, excluded from admission).
        namespace: String,
        /// Its name.
        name: String,
        /// Its port.
        port: u16,
    },
}

impl WebhookTarget {
    /// Parses `NAMESPACE/NAME[:PORT]` (port 443 by default).
    pub fn parse_service(value: &str) -> Result<Self, String> {
        let (namespace, rest) = value
            .split_once('/')
            .ok_or_else(|| format!("expected NAMESPACE/NAME[:PORT], got {value:?}"))?;
        let (name, port) = match rest.split_once(':') {
            Some((name, port)) => (
                name,
                port.parse::<u16>()
                    .map_err(|_| format!("invalid port {port:?} in {value:?}"))?,
            ),
            None => (rest, 443),
        };
        if namespace.is_empty() || name.is_empty() {
            return Err(format!("expected NAMESPACE/NAME[:PORT], got {value:?}"));
        }
        Ok(WebhookTarget::Service {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            port,
        })
    }
}

/// Options for [`webhook_configurations`].
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    /// Where the webhook is.
    pub target: WebhookTarget,
    /// PEM CA bundle that signs the serving certificate; `None` leaves `caBundle` out for a
    /// CA injector or an overlay to fill.
    pub ca_bundle_pem: Option<Vec<u8>>,
    /// Failure policy for both webhooks.
    pub failure_policy: FailurePolicy,
    /// `timeoutSeconds` (1–30).
    pub timeout_seconds: u8,
    /// Name of both configurations; webhooks are `validate.<name>.portcullis.dev` and
    /// `mutate.<name>.portcullis.dev`, or `validate.portcullis.dev` when the name is
    /// `portcullis`.
    pub name: String,
    /// Portcullis's own namespace, excluded like kube-system (for `Url` targets; a Service
    /// target's namespace is used otherwise).
    pub own_namespace: String,
}

/// Namespaces never sent to the webhook: the control plane's and Portcullis's own.
pub const EXCLUDED_NAMESPACES: [&str; 2] = ["kube-system", "kube-node-lease"];

/// `matchConditions` that let through the requests a cluster needs to heal itself even when
/// Portcullis is down and `failurePolicy` is `Fail`. They only matter when policies match
/// these resources; they cost the apiserver one CEL evaluation each.
pub const MATCH_CONDITIONS: [(&str, &str); 5] = [
    (
        "portcullis-exclude-leases",
        "!(request.resource.group == 'coordination.k8s.io' && request.resource.resource == 'leases')",
    ),
    (
        "portcullis-exclude-nodes",
        "!(request.resource.group == '' && request.resource.resource == 'nodes')",
    ),
    (
        "portcullis-exclude-events",
        "!(request.resource.group in ['', 'events.k8s.io'] && request.resource.resource == 'events')",
    ),
    (
        "portcullis-exclude-auth-reviews",
        "!(request.resource.group in ['authentication.k8s.io', 'authorization.k8s.io'])",
    ),
    (
        "portcullis-exclude-kube-system-controllers-except-pods",
        "!(request.userInfo.username.startsWith('system:serviceaccount:kube-system:') && !(request.resource.group == '' && request.resource.resource == 'pods'))",
    ),
];

fn webhook_name(endpoint: Endpoint, name: &str) -> String {
    if name == "portcullis" {
        format!("{}.portcullis.dev", endpoint.name())
    } else {
        format!("{}.{name}.portcullis.dev", endpoint.name())
    }
}

fn rules_json(rules: &[ResourceRule]) -> Value {
    Value::Array(
        rules
            .iter()
            .map(|rule| {
                json!({
                    "apiGroups": rule.api_groups,
                    "apiVersions": rule.api_versions,
                    "resources": rule.resources,
                    "operations": rule.operations,
                    "scope": "*",
                })
            })
            .collect(),
    )
}

fn webhook(engine: &Engine, endpoint: Endpoint, options: &WebhookOptions) -> Option<Value> {
    let rules = engine.webhook_rules(endpoint);
    if rules.is_empty() {
        return None;
    }
    let path = format!("/{}", endpoint.name());
    let (client_config, own_namespace) = match &options.target {
        WebhookTarget::Url(base) => (
            json!({"url": format!("{}{path}", base.trim_end_matches('/'))}),
            options.own_namespace.clone(),
        ),
        WebhookTarget::Service {
            namespace,
            name,
            port,
        } => (
            json!({"service": {"namespace": namespace, "name": name, "port": port, "path": path}}),
            namespace.clone(),
        ),
    };
    let mut client_config = client_config;
    if let Some(pem) = &options.ca_bundle_pem {
        client_config["caBundle"] = json!(BASE64.encode(pem));
    }
    let mut excluded: Vec<String> = EXCLUDED_NAMESPACES
        .iter()
        .map(|n| (*n).to_owned())
        .collect();
    if !excluded.contains(&own_namespace) {
        excluded.push(own_namespace);
    }
    let conditions: Vec<Value> = MATCH_CONDITIONS
        .iter()
        .map(|(name, expression)| json!({"name": name, "expression": expression}))
        .collect();
    let mut webhook = json!({
        "name": webhook_name(endpoint, &options.name),
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": options.failure_policy.as_str(),
        "timeoutSeconds": options.timeout_seconds,
        "matchPolicy": "Equivalent",
        "clientConfig": client_config,
        "rules": rules_json(&rules),
        "namespaceSelector": {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": excluded,
        }]},
        "matchConditions": conditions,
    });
    if endpoint == Endpoint::Mutate {
        webhook["reinvocationPolicy"] = json!("IfNeeded");
    }
    let kind = match endpoint {
        Endpoint::Validate => "ValidatingWebhookConfiguration",
        Endpoint::Mutate => "MutatingWebhookConfiguration",
    };
    Some(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {
            "name": options.name,
            "labels": {"app.kubernetes.io/name": "portcullis"},
        },
        "webhooks": [webhook],
    }))
}

/// The Validating and Mutating webhook configurations for `engine`'s rules; one is left out
/// when the engine has no rule for its endpoint.
pub fn webhook_configurations(engine: &Engine, options: &WebhookOptions) -> Vec<Value> {
    [Endpoint::Validate, Endpoint::Mutate]
        .into_iter()
        .filter_map(|endpoint| webhook(engine, endpoint, options))
        .collect()
}

/// Serializes configurations as a multi-document YAML stream.
pub fn to_yaml_documents(documents: &[Value]) -> Result<String, serde_norway::Error> {
    let mut out = String::new();
    for document in documents {
        out.push_str("---\n");
        out.push_str(&serde_norway::to_string(document)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(target: WebhookTarget) -> WebhookOptions {
        WebhookOptions {
            target,
            ca_bundle_pem: Some(b"-----BEGIN CERTIFICATE-----\n".to_vec()),
            failure_policy: FailurePolicy::Fail,
            timeout_seconds: 5,
            name: "portcullis".into(),
            own_namespace: "portcullis".into(),
        }
    }

    #[test]
    fn builtin_rules_register_only_pod_bearing_resources() {
        let target = WebhookTarget::parse_service("security/portcullis:8443").unwrap();
        let configs = webhook_configurations(&Engine::builtin(), &options(target));
        assert_eq!(configs.len(), 2);
        let validating = &configs[0]["webhooks"][0];
        assert_eq!(validating["name"], "validate.portcullis.dev");
        assert_eq!(
            validating["clientConfig"]["service"],
            json!({"namespace": "security", "name": "portcullis", "port": 8443, "path": "/validate"})
        );
        assert_eq!(
            validating["namespaceSelector"]["matchExpressions"][0]["values"],
            json!(["kube-system", "kube-node-lease", "security"])
        );
        let resources: Vec<&str> = validating["rules"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["resources"].as_array().unwrap())
            .map(|r| r.as_str().unwrap())
            .collect();
        // Native policies register every version; Pod Security registers v1 like upstream's
        // webhook (namespaces, for invalid pod-security labels, and ephemeral containers).
        assert_eq!(
            resources,
            [
                "pods",
                "podtemplates",
                "replicationcontrollers",
                "namespaces",
                "pods/ephemeralcontainers",
                "daemonsets",
                "deployments",
                "replicasets",
                "statefulsets",
                "cronjobs",
                "jobs"
            ]
        );
        let mutating = &configs[1]["webhooks"][0];
        assert_eq!(mutating["reinvocationPolicy"], "IfNeeded");
        assert_eq!(mutating["sideEffects"], "None");
        assert_eq!(mutating["matchPolicy"], "Equivalent");
    }

    #[test]
    fn url_targets_and_names() {
        let mut options = options(WebhookTarget::Url("https://127.0.0.1:9443/".into()));
        options.name = "e2e".into();
        let configs = webhook_configurations(&Engine::builtin(), &options);
        let webhook = &configs[1]["webhooks"][0];
        assert_eq!(
            webhook["clientConfig"]["url"],
            "https://127.0.0.1:9443/mutate"
        );
        assert_eq!(webhook["name"], "mutate.e2e.portcullis.dev");
        assert_eq!(configs[1]["metadata"]["name"], "e2e");
    }

    #[test]
    fn empty_engine_registers_nothing() {
        let options = options(WebhookTarget::Url("https://x".into()));
        assert!(webhook_configurations(&Engine::empty(), &options).is_empty());
    }

    #[test]
    fn service_parsing() {
        assert!(WebhookTarget::parse_service("nope").is_err());
        assert!(WebhookTarget::parse_service("a/b:http").is_err());
        assert!(WebhookTarget::parse_service("/b").is_err());
    }
}
