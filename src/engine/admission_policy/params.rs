//! Parameter objects, found by a binding's `paramRef` as the apiserver finds them in its cache:
//! documents of the policy folders that are not policies (ConfigMaps, custom resources …), or,
//! when `serve` has a cluster, the objects of a [`ParamLookup`] (the cluster's watch caches).

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::admission::AdmissionRequest;
use crate::engine::FetchFuture;
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

/// Parameter objects from somewhere other than the policy folders (the cluster). When the
/// evaluation has one, it is the only source of parameter objects.
pub trait ParamLookup: Send + Sync {
    /// Why the policy with `kind` cannot be configured (the apiserver's "failed to configure
    /// policy" errors: the kind's resource does not exist), or `None`.
    fn kind_error(&self, kind: &ParamKind) -> Option<String>;

    /// The objects `param_ref` selects among those of `kind` for a request in
    /// `request_namespace` (by name, or every one matching the selector), or the binding's
    /// configuration error. `parameterNotFoundAction` is applied by the caller.
    fn find(
        &self,
        kind: &ParamKind,
        param_ref: &ParamRef,
        request_namespace: Option<&str>,
    ) -> Result<Vec<Arc<Value>>, String>;

    /// Whether `param_ref`, by name, names an object of `kind` the lookup does not hold but
    /// could read ([`ParamLookup::fetch`]). By default, false.
    fn fetches(
        &self,
        _kind: &ParamKind,
        _param_ref: &ParamRef,
        _request_namespace: Option<&str>,
    ) -> bool {
        false
    }

    /// Reads the object `param_ref` names by name, giving up at `deadline`; afterwards
    /// [`ParamLookup::find`] answers with it (or, when there is none, as before, for a while).
    /// By default, nothing to do.
    fn fetch<'a>(
        &'a self,
        _kind: &'a ParamKind,
        _param_ref: &'a ParamRef,
        _request_namespace: Option<&'a str>,
        _deadline: Instant,
    ) -> FetchFuture<'a> {
        Box::pin(std::future::ready(()))
    }
}

/// The namespace `param_ref` looks in for a kind that is (or is not) `namespaced`: its own
/// namespace, else the request's for a namespaced kind; `None` for a cluster-scoped kind.
/// Errors are the apiserver's.
pub fn param_namespace<'a>(
    namespaced: bool,
    param_ref: &'a ParamRef,
    request_namespace: Option<&'a str>,
) -> Result<Option<&'a str>, String> {
    let own = param_ref.namespace.as_deref().filter(|n| !n.is_empty());
    if !namespaced {
        return match own {
            Some(_) => Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
            ),
            None => Ok(None),
        };
    }
    match own.or(request_namespace.filter(|n| !n.is_empty())) {
        Some(namespace) => Ok(Some(namespace)),
        None => Err(
            "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                .into(),
        ),
    }
}

/// Whether `object`'s labels satisfy `param_ref`'s selector (none: everything matches).
pub fn selector_matches(param_ref: &ParamRef, object: &Value) -> bool {
    let Some(selector) = &param_ref.selector else {
        return true;
    };
    let labels = object.pointer("/metadata/labels");
    SelectorMatcher::selects(selector, &|key| {
        labels.and_then(|l| l.get(key)).and_then(Value::as_str)
    })
}

/// Every parameter candidate of the policy folders, in document order.
#[derive(Debug, Default, Clone)]
pub struct ParamStore {
    objects: Vec<Arc<Value>>,
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
            objects: objects
                .iter()
                .map(|(_, v)| Arc::new((*v).clone()))
                .collect(),
        }
    }

    fn of_kind<'s>(&'s self, kind: &ParamKind) -> impl Iterator<Item = &'s Arc<Value>> + 's {
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
    ) -> Result<Vec<Arc<Value>>, String> {
        // A kind none of whose documents names a namespace is namespaced too when the paramRef
        // names one: the folders cannot tell.
        let namespaced = self.namespaced(kind)
            || param_ref
                .namespace
                .as_deref()
                .is_some_and(|n| !n.is_empty());
        let namespace = param_namespace(namespaced, param_ref, request.namespace.as_deref())?;
        let in_namespace = |object: &Value| match namespace {
            None => true,
            Some(namespace) => {
                let own = field(object, "/metadata/namespace");
                let own = if own.is_empty() { "default" } else { own };
                own == namespace
            }
        };
        Ok(self
            .of_kind(kind)
            .filter(|object| in_namespace(object))
            .filter(|object| match &param_ref.name {
                Some(name) => field(object, "/metadata/name") == name,
                None => selector_matches(param_ref, object),
            })
            .take(if param_ref.name.is_some() {
                1
            } else {
                usize::MAX
            })
            .cloned()
            .collect())
    }
}
