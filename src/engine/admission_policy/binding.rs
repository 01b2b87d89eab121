//! Bindings, and the one dispatch both policy kinds share: matchConstraints, each matching
//! binding, its parameter objects.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value as Json;

use super::params::{ParamLookup, ParamStore};
use super::policy_core::PolicyCore;
use super::resource_match::ResourceMatcher;
use super::scope::Scope;
use super::variables::Variables;
use crate::admission::AdmissionRequest;
use crate::engine::cel_input::{CelInput, CelInputCell, CelObject};
use crate::engine::{NamespaceLookup, ReadFailure};
use crate::policy::PolicyError;
use crate::policy::admission_policy::{
    MatchResources, ParamKind, ParamRef, ParameterNotFoundAction,
};

/// A binding, compiled.
pub(super) struct BindingCore {
    pub(super) name: Arc<str>,
    pub(super) param_ref: Option<ParamRef>,
    pub(super) matcher: Option<ResourceMatcher>,
}

impl BindingCore {
    /// A binding's matcher and parameter reference (validated by
    /// [`super::field_validation::FieldErrors::binding`]).
    pub(super) fn compile(
        name: &str,
        param_ref: &Option<ParamRef>,
        match_resources: &Option<MatchResources>,
    ) -> Result<Self, PolicyError> {
        Ok(BindingCore {
            name: Arc::from(name),
            param_ref: param_ref.clone(),
            matcher: match_resources.as_ref().map(ResourceMatcher::new),
        })
    }

    pub(super) fn matches(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> bool {
        self.matcher
            .as_ref()
            .is_none_or(|matcher| matcher.matches(request, namespaces))
    }

    /// [`BindingCore::matches`], or the failure to read the namespace labels its
    /// `namespaceSelector` needs ([`ResourceMatcher::matches_unless_unreadable`]).
    fn matches_unless_unreadable(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> Result<bool, ReadFailure> {
        self.matcher.as_ref().map_or(Ok(true), |matcher| {
            matcher.matches_unless_unreadable(request, namespaces)
        })
    }

    /// The parameter objects to evaluate with: `None` without `paramKind` or `paramRef` (one
    /// evaluation, with `params` null), otherwise the objects `paramRef` finds (in the
    /// cluster when there is one, else in the policy folders); an error is a configuration
    /// error of the binding.
    pub(super) fn params(
        &self,
        policy: &PolicyCore,
        sources: ParamSources<'_>,
        request: &AdmissionRequest,
    ) -> Result<Option<Vec<Arc<Json>>>, String> {
        let Some(kind) = &policy.param_kind else {
            return Ok(None);
        };
        // As the apiserver: a binding without paramRef evaluates once with `params` null.
        let Some(param_ref) = &self.param_ref else {
            return Ok(None);
        };
        let found = match sources.cluster {
            Some(cluster) => cluster.find(kind, param_ref, request.namespace.as_deref())?,
            None => sources.files.find(kind, param_ref, request)?,
        };
        if found.is_empty()
            && param_ref.parameter_not_found_action == Some(ParameterNotFoundAction::Deny)
        {
            return Err(
                "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
            );
        }
        Ok(Some(found))
    }
}

/// Where parameter objects come from: the cluster when there is one, else the policy folders.
#[derive(Clone, Copy)]
pub(super) struct ParamSources<'a> {
    pub(super) files: &'a ParamStore,
    pub(super) cluster: Option<&'a dyn ParamLookup>,
    /// Whether an object without `apiVersion` and `kind` (a typed object from the cluster)
    /// gets the paramKind's: the apiserver does so for ValidatingAdmissionPolicies only.
    pub(super) fill_type_meta: bool,
    /// Whether the request's namespace is got for every matching binding whose params were
    /// found, even none (ValidatingAdmissionPolicies), rather than once there is something to
    /// evaluate (MutatingAdmissionPolicies): where a failure to read it fails the request.
    pub(super) namespace_per_binding: bool,
}

/// Why [`PolicyCore::dispatch`] visited no binding of a policy whose matchConstraints match.
#[derive(Debug)]
pub(super) enum Undispatched {
    /// The policy cannot be configured (the apiserver's "failed to configure policy" error:
    /// its paramKind's resource is unknown, or the namespace labels of its matchConstraints
    /// could not be read), answered through its failurePolicy.
    Policy(String),
    /// The request's namespace, which every evaluation of a namespaced request is given as
    /// `namespaceObject`, could not be read: the apiserver fails the whole request with the
    /// read's error, whatever the failurePolicy.
    NamespaceUnreadable(ReadFailure),
}

/// The words of the apiserver's `NewInternalError` around the failure of a namespace read.
fn internal_error(failure: &ReadFailure) -> String {
    format!("Internal error occurred: {}", failure.message)
}

/// The failure to read the namespace of `request`, which the apiserver gets for its
/// policies' `namespaceObject` (none for a cluster-scoped request or a Namespace itself).
fn namespace_object_failure(
    request: &AdmissionRequest,
    namespaces: &dyn NamespaceLookup,
) -> Option<ReadFailure> {
    let kind = &request.kind;
    if kind.group.is_empty() && kind.version == "v1" && kind.kind == "Namespace" {
        return None;
    }
    let namespace = request.namespace.as_deref().filter(|n| !n.is_empty())?;
    namespaces.read_failure(namespace)
}

/// `param` with the paramKind's `apiVersion` and `kind` when it has neither (copied then).
fn with_type_meta(param: Arc<Json>, kind: &ParamKind) -> Arc<Json> {
    if param.get("apiVersion").is_some() || param.get("kind").is_some() {
        return param;
    }
    let mut filled = (*param).clone();
    if let Some(map) = filled.as_object_mut() {
        map.insert("apiVersion".into(), Json::String(kind.api_version.clone()));
        map.insert("kind".into(), Json::String(kind.kind.clone()));
    }
    Arc::new(filled)
}

/// A binding as both policy kinds keep it.
pub(super) trait Bound {
    fn binding(&self) -> &BindingCore;
}

impl Bound for BindingCore {
    fn binding(&self) -> &BindingCore {
        self
    }
}

/// One evaluation of a policy: a matching binding with one of its parameter objects.
pub(super) struct Evaluation<'a, 'r> {
    pub(super) input: &'a CelInput<'r>,
    pub(super) param: Option<&'a Json>,
    pub(super) variables: &'a Variables,
}

impl<'a> Evaluation<'a, '_> {
    /// The scope of expressions on `object` (the object as sent, or as mutated so far).
    pub(super) fn scope<'s>(&'s self, object: Option<CelObject<'s>>) -> Scope<'s>
    where
        'a: 's,
    {
        Scope::new(self.input, object, self.param, self.variables, true)
    }

    /// The scope of a ValidatingAdmissionPolicy's messageExpressions and auditAnnotations:
    /// as [`Evaluation::scope`], with `authorizer` unbound and variables evaluated afresh, as
    /// the apiserver evaluates them.
    pub(super) fn scope_without_authorizer<'s>(&'s self, object: Option<CelObject<'s>>) -> Scope<'s>
    where
        'a: 's,
    {
        Scope::new(self.input, object, self.param, self.variables, false)
    }
}

impl PolicyCore {
    /// Whether [`PolicyCore::dispatch`] with these bindings may visit a binding for
    /// `request`, or give the policy's configuration error, judged from the request's
    /// envelope and the labels of its namespace: the matchConstraints may match it, and so
    /// may some binding's matchResources (any binding, for a policy with a paramKind, whose
    /// configuration error comes before the bindings are matched).
    pub(super) fn may_match<B: Bound>(
        &self,
        bindings: &[B],
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
    ) -> bool {
        !bindings.is_empty()
            && self.constraints.may_match(request, namespaces)
            && (self.param_kind.is_some()
                || bindings.iter().any(|bound| {
                    bound
                        .binding()
                        .matcher
                        .as_ref()
                        .is_none_or(|matcher| matcher.may_match(request, namespaces))
                }))
    }

    /// The paramKind and each paramRef by name of the bindings [`PolicyCore::dispatch`] would
    /// visit for `request`, added to `found`: the objects the request is decided with.
    pub(super) fn params_by_name<'a, B: Bound>(
        &'a self,
        bindings: &'a [B],
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        found: &mut Vec<(&'a ParamKind, &'a ParamRef)>,
    ) {
        let Some(kind) = &self.param_kind else {
            return;
        };
        if bindings.is_empty() || !self.constraints.matches(request, namespaces) {
            return;
        }
        for bound in bindings {
            let binding = bound.binding();
            if let Some(param_ref) = &binding.param_ref
                && param_ref
                    .name
                    .as_deref()
                    .is_some_and(|name| !name.is_empty())
                && binding.matches(request, namespaces)
            {
                found.push((kind, param_ref));
            }
        }
    }

    /// The binding dispatch both policy kinds share. When the policy's matchConstraints match
    /// `request`, each binding whose matchResources match is visited once per parameter object
    /// its paramRef finds, or once with the error when they cannot be found (or its
    /// namespace labels could not be read). Returns when the policy began, when it and a
    /// binding matched (`None` otherwise: such a policy evaluated nothing, and a policy whose
    /// constraints do not match reads no clock), or why no binding was visited
    /// ([`Undispatched`]). The CEL input is built on the first visit and kept for the request.
    pub(super) fn dispatch<'a, 'r, B: Bound>(
        &'a self,
        bindings: &'a [B],
        params: ParamSources<'_>,
        request: &'r AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        cel: &'a CelInputCell<'r>,
        mut visit: impl FnMut(&'a B, Result<Evaluation<'_, 'r>, String>),
    ) -> Result<Option<Instant>, Undispatched> {
        if bindings.is_empty() {
            return Ok(None);
        }
        match self
            .constraints
            .matches_unless_unreadable(request, namespaces)
        {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(failure) => {
                return Err(Undispatched::Policy(format!(
                    "failed to configure policy: {}",
                    internal_error(&failure)
                )));
            }
        }
        let started = Instant::now();
        if let (Some(kind), Some(cluster)) = (&self.param_kind, params.cluster)
            && let Some(error) = cluster.kind_error(kind)
        {
            return Err(Undispatched::Policy(format!(
                "failed to configure policy: {error}"
            )));
        }
        let mut bound_any = false;
        for bound in bindings {
            let binding = bound.binding();
            match binding.matches_unless_unreadable(request, namespaces) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(failure) => {
                    bound_any = true;
                    let error = internal_error(&failure);
                    visit(bound, Err(format!("failed to configure binding: {error}")));
                    continue;
                }
            }
            bound_any = true;
            let found = match binding.params(self, params, request) {
                Ok(found) => found,
                Err(error) => {
                    visit(bound, Err(format!("failed to configure binding: {error}")));
                    continue;
                }
            };
            if (params.namespace_per_binding || found.as_ref().is_none_or(|f| !f.is_empty()))
                && let Some(failure) = namespace_object_failure(request, namespaces)
            {
                return Err(Undispatched::NamespaceUnreadable(failure));
            }
            let input = cel.get(request);
            let Some(found) = found else {
                let evaluation = Evaluation {
                    input,
                    param: None,
                    variables: &self.variables,
                };
                visit(bound, Ok(evaluation));
                continue;
            };
            for param in found {
                let param = match &self.param_kind {
                    Some(kind) if params.fill_type_meta => with_type_meta(param, kind),
                    _ => param,
                };
                let evaluation = Evaluation {
                    input,
                    param: Some(&param),
                    variables: &self.variables,
                };
                visit(bound, Ok(evaluation));
            }
        }
        Ok(bound_any.then_some(started))
    }
}
