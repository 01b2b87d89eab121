//! The exclusions of the webhook configurations that `portcullis webhook-config` generates,
//! applied to a scan: what admission would never send to Portcullis is not judged.
//!
//! The exclusions are read back from the generated configuration itself
//! ([`crate::webhook_config::webhook_configurations`]), not restated: its `namespaceSelector`
//! is matched against namespace labels as the apiserver matches it, its `objectSelector`
//! against the object's labels, and its `matchConditions` are compiled and evaluated as CEL on
//! the request, so a change to the generator changes the scan with it. What the chart adds to
//! the installed webhooks (`webhooks.excludedNamespaces`, `webhooks.objectSelector`) comes in
//! through [`WebhookExclusions::excluding`] and [`WebhookExclusions::selecting_objects`].

use serde_json::Value;

use crate::admission::AdmissionRequest;
use crate::engine::NamespaceLookup;
use crate::engine::matching::SelectorMatcher;
use crate::expressions::{Activation, Expression};
use crate::kubernetes::vocabulary::LabelSelector;
use crate::webhook_config::{WebhookOptions, WebhookTarget, webhook_configurations};

/// Why the exclusions could not be read from a generated configuration (a defect of the
/// generator, reported rather than ignored).
#[derive(Debug, thiserror::Error)]
pub enum ExclusionError {
    /// The `namespaceSelector` or `objectSelector` is not a LabelSelector.
    #[error("webhook {webhook}: {field}: {message}")]
    Selector {
        /// The webhook's name.
        webhook: String,
        /// `namespaceSelector` or `objectSelector`.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A `matchConditions` expression does not compile.
    #[error("webhook {webhook}: matchConditions {name:?}: {message}")]
    Condition {
        /// The webhook's name.
        webhook: String,
        /// The condition's name.
        name: String,
        /// The compiler's message.
        message: String,
    },
    /// The webhooks of the two configurations exclude different things, so no single filter
    /// says what admission would judge.
    #[error("the validating and mutating webhooks have different exclusions")]
    Diverging,
}

/// Why admission would not send a request to the webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exclusion {
    /// The namespace (or, for a Namespace, the object itself) does not match the
    /// `namespaceSelector`.
    Namespace(String),
    /// Neither the object's labels nor, on UPDATE, the old object's match the
    /// `objectSelector`.
    Object,
    /// A `matchConditions` entry is false.
    Condition(String),
}

/// The `namespaceSelector`, `objectSelector` and `matchConditions` of the generated webhooks.
pub struct WebhookExclusions {
    selector: LabelSelector,
    object_selector: LabelSelector,
    conditions: Vec<(String, Expression)>,
}

impl std::fmt::Debug for WebhookExclusions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookExclusions")
            .field("selector", &self.selector)
            .field("object_selector", &self.object_selector)
            .field(
                "conditions",
                &self.conditions.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The label every namespace carries with its own name.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

impl WebhookExclusions {
    /// The exclusions `webhook-config` generates for `engine` with Portcullis in
    /// `own_namespace` (the `--namespace` of `webhook-config`, the Service's namespace of
    /// `--service`). `None` when the engine registers no webhook at all.
    pub fn generated(
        engine: &crate::engine::Engine,
        own_namespace: &str,
    ) -> Result<Option<Self>, ExclusionError> {
        let options = WebhookOptions {
            target: WebhookTarget::Service {
                namespace: own_namespace.to_owned(),
                name: "portcullis".to_owned(),
                port: 443,
            },
            ca_bundle_pem: None,
            failure_policy: crate::webhook_config::FailurePolicy::Fail,
            timeout_seconds: 5,
            name: "portcullis".to_owned(),
            own_namespace: own_namespace.to_owned(),
        };
        let mut exclusions: Option<([Value; 3], Self)> = None;
        for configuration in webhook_configurations(engine, &options) {
            for webhook in configuration["webhooks"].as_array().into_iter().flatten() {
                let excluding = ["namespaceSelector", "objectSelector", "matchConditions"]
                    .map(|field| webhook[field].clone());
                match &exclusions {
                    Some((seen, _)) if *seen != excluding => {
                        return Err(ExclusionError::Diverging);
                    }
                    Some(_) => {}
                    None => exclusions = Some((excluding, Self::from_webhook(webhook)?)),
                }
            }
        }
        Ok(exclusions.map(|(_, parsed)| parsed))
    }

    /// The exclusions of one webhook of a configuration (`namespaceSelector`,
    /// `objectSelector`, `matchConditions`; any may be absent).
    pub fn from_webhook(webhook: &Value) -> Result<Self, ExclusionError> {
        let name = webhook["name"].as_str().unwrap_or("").to_owned();
        let selector_at = |field: &'static str| match webhook.get(field) {
            None | Some(Value::Null) => Ok(LabelSelector::default()),
            Some(value) => serde_json::from_value::<LabelSelector>(value.clone())
                .map_err(|e| e.to_string())
                .and_then(|selector| match selector.requirement_error() {
                    Some((at, message)) => Err(format!("{at}: {message}")),
                    None => Ok(selector),
                })
                .map_err(|message| ExclusionError::Selector {
                    webhook: name.clone(),
                    field,
                    message,
                }),
        };
        let selector = selector_at("namespaceSelector")?;
        let object_selector = selector_at("objectSelector")?;
        let mut conditions = Vec::new();
        for condition in webhook["matchConditions"].as_array().into_iter().flatten() {
            let condition_name = condition["name"].as_str().unwrap_or("").to_owned();
            let source = condition["expression"].as_str().unwrap_or("");
            let expression = Expression::compile(source, false).map_err(|message| {
                ExclusionError::Condition {
                    webhook: name.clone(),
                    name: condition_name.clone(),
                    message,
                }
            })?;
            conditions.push((condition_name, expression));
        }
        Ok(WebhookExclusions {
            selector,
            object_selector,
            conditions,
        })
    }

    /// The same exclusions with `selector` as the `objectSelector` (the chart's
    /// `webhooks.objectSelector`, set on the installed webhooks; `webhook-config` generates
    /// none).
    #[must_use]
    pub fn selecting_objects(mut self, selector: LabelSelector) -> Self {
        self.object_selector = selector;
        self
    }

    /// The same exclusions with `namespaces` excluded too (by name, as the chart's
    /// `webhooks.excludedNamespaces` adds them to the selector).
    #[must_use]
    pub fn excluding(mut self, namespaces: &[String]) -> Self {
        if !namespaces.is_empty() {
            self.selector.match_expressions.push(
                crate::kubernetes::vocabulary::LabelSelectorRequirement {
                    key: NAME_LABEL.to_owned(),
                    operator: "NotIn".to_owned(),
                    values: namespaces.to_vec(),
                },
            );
        }
        self
    }

    /// Whether the namespace `name` is excluded by the selector alone: lets a scan skip a
    /// namespace's objects without building their requests.
    pub fn excludes_namespace(&self, name: &str, namespaces: &dyn NamespaceLookup) -> bool {
        let labels = namespaces.labels_ref(name);
        !SelectorMatcher::selects(&self.selector, &|key| match &labels {
            Some(labels) => labels.get(key),
            None => (key == NAME_LABEL).then_some(name),
        })
    }

    /// Why admission would not send `request` to the webhook, or `None` when it would.
    ///
    /// As the apiserver's namespace matcher: a namespaced request is matched by its
    /// namespace's labels; a Namespace by its own labels; other cluster-scoped requests
    /// always match. Then every match condition must be true; a condition that fails to
    /// evaluate does not exclude (with `failurePolicy: Fail` the apiserver would refuse the
    /// request rather than skip the webhook), and is returned for the caller to report.
    pub fn exclusion(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> Result<Option<Exclusion>, String> {
        let kind = &request.kind;
        let is_namespace = kind.group.is_empty() && kind.kind == "Namespace";
        if is_namespace {
            let object = request.object.as_deref().or(request.old_object.as_deref());
            let own = |key: &str| -> Option<&str> {
                if key == NAME_LABEL {
                    return request.name.as_deref();
                }
                object?.pointer("/metadata/labels")?.get(key)?.as_str()
            };
            if !SelectorMatcher::new(&self.selector).matches(&own) {
                return Ok(Some(Exclusion::Namespace(
                    request.name.clone().unwrap_or_default(),
                )));
            }
        } else if let Some(namespace) = request.namespace.as_deref().filter(|n| !n.is_empty())
            && self.excludes_namespace(namespace, namespaces)
        {
            return Ok(Some(Exclusion::Namespace(namespace.to_owned())));
        }
        if !SelectorMatcher::selects_objects(&self.object_selector, request, |object| {
            object.pointer("/metadata/labels")
        }) {
            return Ok(Some(Exclusion::Object));
        }
        if self.conditions.is_empty() {
            return Ok(None);
        }
        let request_json = request.attributes_json();
        let mut activation = Activation::new().request(&request_json);
        if let Some(object) = &request.object {
            activation = activation.object(object);
        }
        if let Some(old_object) = &request.old_object {
            activation = activation.old_object(old_object);
        }
        for (name, expression) in &self.conditions {
            if !expression.evaluate_bool(&activation)? {
                return Ok(Some(Exclusion::Condition(name.clone())));
            }
        }
        Ok(None)
    }

    /// A server-side field selector that leaves out the namespaces the selector excludes by
    /// name (`kubernetes.io/metadata.name NotIn [...]`, as `webhook-config` generates it), so
    /// that their objects are not even listed. Objects listed are still matched in full.
    pub fn field_selector(&self) -> Option<String> {
        let names: Vec<&str> = self
            .selector
            .match_expressions
            .iter()
            .filter(|r| r.key == NAME_LABEL && r.operator == "NotIn")
            .flat_map(|r| r.values.iter().map(String::as_str))
            .collect();
        (!names.is_empty()).then(|| {
            names
                .iter()
                .map(|name| format!("metadata.namespace!={name}"))
                .collect::<Vec<_>>()
                .join(",")
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::Operation;
    use crate::engine::{Engine, StaticNamespaces};
    use crate::offline::Manifest;
    use crate::offline::input::Source;

    fn request(object: Value) -> AdmissionRequest {
        let source = Source {
            file: "t".into(),
            index: 0,
            item: None,
        };
        Manifest::from_object(&source, object)
            .unwrap()
            .request(Operation::Create, "u".into())
    }

    fn pod(namespace: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p", "namespace": namespace},
               "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    }

    #[test]
    fn the_generated_exclusions_leave_out_system_and_own_namespaces() {
        let exclusions = WebhookExclusions::generated(&Engine::builtin(), "security")
            .unwrap()
            .unwrap();
        let namespaces = StaticNamespaces::default();
        for excluded in ["kube-system", "kube-node-lease", "security"] {
            assert_eq!(
                exclusions.exclusion(&request(pod(excluded)), &namespaces),
                Ok(Some(Exclusion::Namespace(excluded.into())))
            );
        }
        assert_eq!(
            exclusions.exclusion(&request(pod("team-a")), &namespaces),
            Ok(None)
        );
        let more = WebhookExclusions::generated(&Engine::builtin(), "security")
            .unwrap()
            .unwrap()
            .excluding(&["team-a".to_owned()]);
        assert_eq!(
            more.exclusion(&request(pod("team-a")), &namespaces),
            Ok(Some(Exclusion::Namespace("team-a".into())))
        );
        assert!(
            more.field_selector()
                .unwrap()
                .ends_with(",metadata.namespace!=team-a")
        );
        assert_eq!(
            exclusions.field_selector().as_deref(),
            Some(
                "metadata.namespace!=kube-system,metadata.namespace!=kube-node-lease,\
                 metadata.namespace!=security"
            )
        );
    }

    #[test]
    fn a_namespace_is_matched_by_its_own_labels() {
        let exclusions = WebhookExclusions::generated(&Engine::builtin(), "portcullis")
            .unwrap()
            .unwrap();
        let namespaces = StaticNamespaces::default();
        let system = json!({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": "kube-system"}});
        assert_eq!(
            exclusions.exclusion(&request(system), &namespaces),
            Ok(Some(Exclusion::Namespace("kube-system".into())))
        );
        let team = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}});
        assert_eq!(exclusions.exclusion(&request(team), &namespaces), Ok(None));
    }

    #[test]
    fn match_conditions_are_evaluated_on_the_request() {
        let webhook = json!({
            "name": "validate.portcullis.dev",
            "matchConditions": crate::webhook_config::MATCH_CONDITIONS
                .iter()
                .map(|(name, expression)| json!({"name": name, "expression": expression}))
                .collect::<Vec<_>>(),
        });
        let exclusions = WebhookExclusions::from_webhook(&webhook).unwrap();
        let namespaces = StaticNamespaces::default();
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                           "metadata": {"name": "l", "namespace": "team"}});
        let mut lease_request = request(lease);
        lease_request.resource.resource = "leases".into();
        assert_eq!(
            exclusions.exclusion(&lease_request, &namespaces),
            Ok(Some(Exclusion::Condition(
                "portcullis-exclude-leases".into()
            )))
        );
        let mut by_controller = request(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "team"}}));
        by_controller.user_info.username = "system:serviceaccount:kube-system:deployer".into();
        assert_eq!(
            exclusions.exclusion(&by_controller, &namespaces),
            Ok(Some(Exclusion::Condition(
                "portcullis-exclude-kube-system-controllers-except-pods".into()
            )))
        );
        assert_eq!(
            exclusions.exclusion(&request(pod("team")), &namespaces),
            Ok(None)
        );
    }

    #[test]
    fn namespace_labels_come_from_the_lookup() {
        let webhook = json!({"name": "w", "namespaceSelector": {"matchLabels": {"audit": "on"}}});
        let exclusions = WebhookExclusions::from_webhook(&webhook).unwrap();
        let mut namespaces = StaticNamespaces::default();
        namespaces.insert(
            "on",
            crate::engine::Labels::from([("audit".to_owned(), "on".to_owned())]),
        );
        assert!(!exclusions.excludes_namespace("on", &namespaces));
        assert!(exclusions.excludes_namespace("off", &namespaces));
        assert_eq!(exclusions.field_selector(), None);
        let cluster_scoped = request(json!({"apiVersion": "v1", "kind": "PersistentVolume",
                                            "metadata": {"name": "pv"}}));
        assert_eq!(exclusions.exclusion(&cluster_scoped, &namespaces), Ok(None));
    }

    #[test]
    fn a_bad_selector_is_an_error() {
        let webhook = json!({"name": "w", "namespaceSelector": {"matchLables": {}}});
        let error = WebhookExclusions::from_webhook(&webhook).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("webhook w: namespaceSelector:"),
            "{error}"
        );
        let webhook = json!({"name": "w", "objectSelector": {"matchExpressions": [
            {"key": "skip", "operator": "Exists", "values": ["x"]}]}});
        let error = WebhookExclusions::from_webhook(&webhook).unwrap_err();
        assert_eq!(
            error.to_string(),
            "webhook w: objectSelector: matchExpressions[0]: Exists and DoesNotExist take no values"
        );
    }

    #[test]
    fn the_object_selector_looks_at_the_new_or_the_old_objects_labels() {
        let opt_out = serde_json::from_value::<LabelSelector>(json!({"matchExpressions": [
            {"key": "audit-skip", "operator": "DoesNotExist"}]}))
        .unwrap();
        let namespaces = StaticNamespaces::default();
        let from_webhook = WebhookExclusions::from_webhook(&json!({"name": "w",
            "objectSelector": {"matchExpressions": [
                {"key": "audit-skip", "operator": "DoesNotExist"}]}}))
        .unwrap();
        let from_flag = WebhookExclusions::from_webhook(&json!({"name": "w"}))
            .unwrap()
            .selecting_objects(opt_out);
        let mut skipped = pod("team");
        skipped["metadata"]["labels"] = json!({"audit-skip": "yes"});
        for exclusions in [&from_webhook, &from_flag] {
            assert_eq!(
                exclusions.exclusion(&request(pod("team")), &namespaces),
                Ok(None)
            );
            assert_eq!(
                exclusions.exclusion(&request(skipped.clone()), &namespaces),
                Ok(Some(Exclusion::Object))
            );
            // On UPDATE either object may match.
            let mut update = request(skipped.clone());
            update.operation = Operation::Update;
            update.old_object = Some(pod("team").into());
            assert_eq!(exclusions.exclusion(&update, &namespaces), Ok(None));
        }
        // Without a selector every object is selected, labels or not.
        let none = WebhookExclusions::from_webhook(&json!({"name": "w"})).unwrap();
        assert_eq!(none.exclusion(&request(skipped), &namespaces), Ok(None));
    }
}
