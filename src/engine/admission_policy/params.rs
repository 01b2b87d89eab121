//! Parameter objects: documents of the policy folders that are not policies (ConfigMaps, custom
//! resources …), found by a binding's `paramRef` as the apiserver finds them in its cache.

use serde_json::Value;

use crate::admission::AdmissionRequest;
use crate::engine::matching::SelectorMatcher;
use crate::policy::DocumentSource;
use crate::policy::admission_policy::{ParamKind, ParamRef};

/// Kinds of the core group that are namespaced; other kinds are namespaced when one of their
/// objects in the policy folders names a namespace.
const NAMESPACED_CORE_KINDS: [&str; 6] = [
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "LimitRange",
    "ResourceQuota",
    "PodTemplate",
];

/// Every parameter candidate, in document order.
#[derive(Debug, Default, Clone)]
pub struct ParamStore {
    objects: Vec<Value>,
}

fn field<'v>(object: &'v Value, pointer: &str) -> &'v str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl ParamStore {
    /// The store of `objects`.
    pub fn new(objects: &[(&DocumentSource, &Value)]) -> Self {
        ParamStore {
            objects: objects.iter().map(|(_, v)| (*v).clone()).collect(),
        }
    }

    fn of_kind<'s>(&'s self, kind: &ParamKind) -> impl Iterator<Item = &'s Value> + 's {
        let (api_version, kind) = (kind.api_version.clone(), kind.kind.clone());
        self.objects.iter().filter(move |object| {
            field(object, "/apiVersion") == api_version && field(object, "/kind") == kind
        })
    }

    fn namespaced(&self, kind: &ParamKind) -> bool {
        (kind.api_version == "v1" && NAMESPACED_CORE_KINDS.contains(&kind.kind.as_str()))
            || self
                .of_kind(kind)
                .any(|object| !field(object, "/metadata/namespace").is_empty())
    }

    /// The objects `param_ref` selects for `request`: by name, or every one matching the
    /// selector, in the namespace of the paramRef, else the request's namespace when the kind
    /// is namespaced. A namespaced object without a namespace is in `default`.
    pub fn find(
        &self,
        kind: &ParamKind,
        param_ref: &ParamRef,
        request: &AdmissionRequest,
    ) -> Result<Vec<&Value>, String> {
        let namespaced = self.namespaced(kind);
        let namespace = match param_ref.namespace.as_deref().filter(|n| !n.is_empty()) {
            Some(namespace) => Some(namespace),
            None if namespaced => {
                let Some(namespace) = request.namespace.as_deref().filter(|n| !n.is_empty()) else {
                    return Err(
                        "cannot use namespaced paramRef in policy binding that matches \
                                cluster-scoped resources"
                            .into(),
                    );
                };
                Some(namespace)
            }
            None => None,
        };
        let in_namespace = |object: &Value| match namespace {
            None => true,
            Some(namespace) => {
                let own = field(object, "/metadata/namespace");
                let own = if own.is_empty() && namespaced {
                    "default"
                } else {
                    own
                };
                own == namespace
            }
        };
        if let Some(name) = &param_ref.name {
            return Ok(self
                .of_kind(kind)
                .filter(|object| field(object, "/metadata/name") == name && in_namespace(object))
                .take(1)
                .collect());
        }
        let selector = param_ref
            .selector
            .as_ref()
            .map(SelectorMatcher::new)
            .unwrap_or_else(|| SelectorMatcher::new(&Default::default()));
        Ok(self
            .of_kind(kind)
            .filter(|object| in_namespace(object))
            .filter(|object| {
                let labels = object.pointer("/metadata/labels");
                selector.matches(&|key| {
                    labels
                        .and_then(|l| l.get(key))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
            })
            .collect())
    }
}
