//! Kubernetes admission policies from the policy folders: `admissionregistration.k8s.io`
//! ValidatingAdmissionPolicy and MutatingAdmissionPolicy with their bindings, evaluated with
//! the apiserver's semantics (see docs/admission-policies.md), and the parameter objects
//! their bindings refer to.
//!
//! Everything is compiled when policies load: expressions, selectors, matchers; a binding
//! naming a policy no document defines, or an expression that does not compile, is a load
//! error naming the file, the document and the expression.

pub mod apply_configuration;
mod binding;
mod field_validation;
mod mutating;
mod params;
pub(crate) mod policy_core;
mod resource_match;
pub(crate) mod scope;
mod type_checking;
pub(crate) mod validating;
pub(crate) mod variables;

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::admission::{AdmissionRequest, GroupVersionKind};
use crate::engine::cel_input::CelInputCell;
use crate::engine::{Decision, Endpoint, NamespaceLookup, ResourceRule};
use crate::kubernetes::schema::Schema;
use crate::policy::admission_policy::{ParamKind, ParamRef};
use crate::policy::{DocumentSource, PolicyError};
use binding::Bound;

pub use crate::policy::AdmissionPolicyDocument;
pub use mutating::{MutatedObject, typed_form, typed_form_of};
pub use params::{ParamLookup, ParamStore, param_namespace, selector_matches};
pub use type_checking::ExpressionWarning;

// ---------------------------------------------------------------------------------------------
// The compiled set.

/// Every admission policy and binding of the policy folders, compiled, with the parameter
/// objects.
#[derive(Default)]
pub struct AdmissionPolicies {
    validating: Vec<validating::ValidatingPolicy>,
    mutating: Vec<mutating::MutatingPolicy>,
    params: ParamStore,
    /// Schemas of custom resources, with their plurals, from the CustomResourceDefinitions
    /// among the policies.
    custom_schemas: Vec<(String, Schema)>,
    /// Type-checking warnings of each ValidatingAdmissionPolicy, by name.
    type_checking: BTreeMap<String, Vec<ExpressionWarning>>,
}

impl std::fmt::Debug for AdmissionPolicies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionPolicies")
            .field("validating", &self.validating.len())
            .field("mutating", &self.mutating.len())
            .finish()
    }
}

impl AdmissionPolicies {
    /// Compiles the documents (in document order) with their parameter objects.
    pub fn compile(
        documents: &[(&DocumentSource, &AdmissionPolicyDocument)],
        params: &[(&DocumentSource, &Json)],
        custom_schemas: Vec<(String, Schema)>,
    ) -> Result<Self, PolicyError> {
        let mut validating: Vec<validating::ValidatingPolicy> = Vec::new();
        let mut mutating: Vec<mutating::MutatingPolicy> = Vec::new();
        let mut seen: BTreeMap<(&str, &str), &DocumentSource> = BTreeMap::new();
        let mut bindings = Vec::new();
        let mut type_checking = BTreeMap::new();
        let index = type_checking::SchemaIndex {
            custom: &custom_schemas,
        };
        for (source, document) in documents {
            let (kind, name) = match document {
                AdmissionPolicyDocument::ValidatingPolicy(d) => {
                    validating.push(validating::ValidatingPolicy::compile(source, d)?);
                    type_checking.insert(
                        d.metadata.name.clone(),
                        type_checking::check_policy(d, &index),
                    );
                    ("ValidatingAdmissionPolicy", d.metadata.name.as_str())
                }
                AdmissionPolicyDocument::MutatingPolicy(d) => {
                    mutating.push(mutating::MutatingPolicy::compile(source, d)?);
                    ("MutatingAdmissionPolicy", d.metadata.name.as_str())
                }
                AdmissionPolicyDocument::ValidatingBinding(d) => {
                    bindings.push((*source, *document));
                    ("ValidatingAdmissionPolicyBinding", d.metadata.name.as_str())
                }
                AdmissionPolicyDocument::MutatingBinding(d) => {
                    bindings.push((*source, *document));
                    ("MutatingAdmissionPolicyBinding", d.metadata.name.as_str())
                }
            };
            if let Some(first) = seen.insert((kind, name), source) {
                return Err(PolicyError::at(
                    source,
                    "metadata.name",
                    format!("{kind} {name:?} is also defined in {first}"),
                ));
            }
        }
        for (source, document) in bindings {
            match document {
                AdmissionPolicyDocument::ValidatingBinding(d) => {
                    let Some(policy) = validating
                        .iter_mut()
                        .find(|p| *p.core.name == *d.spec.policy_name)
                    else {
                        return Err(unknown_policy(
                            source,
                            "ValidatingAdmissionPolicy",
                            &d.spec.policy_name,
                        ));
                    };
                    policy.bind(source, d)?;
                }
                AdmissionPolicyDocument::MutatingBinding(d) => {
                    let Some(policy) = mutating
                        .iter_mut()
                        .find(|p| *p.core.name == *d.spec.policy_name)
                    else {
                        return Err(unknown_policy(
                            source,
                            "MutatingAdmissionPolicy",
                            &d.spec.policy_name,
                        ));
                    };
                    policy.bind(source, d)?;
                }
                _ => {}
            }
        }
        Ok(AdmissionPolicies {
            validating,
            mutating,
            params: ParamStore::new(params),
            custom_schemas,
            type_checking,
        })
    }

    /// The schema of `kind`: a built-in kind's, or a custom resource's from a
    /// CustomResourceDefinition among the policies.
    pub fn schema(&self, kind: &GroupVersionKind) -> Option<Schema> {
        crate::kubernetes::schema::builtin(kind).or_else(|| {
            self.custom_schemas
                .iter()
                .find(|(_, s)| s.gvk() == kind)
                .map(|(_, s)| s.clone())
        })
    }

    /// The type-checking warnings of every ValidatingAdmissionPolicy, by policy name (an empty
    /// list where everything type-checks).
    pub fn type_checking(&self) -> &BTreeMap<String, Vec<ExpressionWarning>> {
        &self.type_checking
    }

    /// Whether there is nothing to evaluate.
    pub fn is_empty(&self) -> bool {
        self.validating.is_empty() && self.mutating.is_empty()
    }

    /// Whether some MutatingAdmissionPolicy is bound.
    pub fn mutates(&self) -> bool {
        self.mutating.iter().any(|p| !p.bindings.is_empty())
    }

    /// Bound policies (each counts as one rule per validation or mutation).
    pub fn rule_count(&self) -> usize {
        self.validating
            .iter()
            .map(validating::ValidatingPolicy::rule_count)
            .sum::<usize>()
            + self
                .mutating
                .iter()
                .map(mutating::MutatingPolicy::rule_count)
                .sum::<usize>()
    }

    /// What the webhook must register for `endpoint`: the `matchConstraints` of bound
    /// policies.
    pub fn webhook_rules(&self, endpoint: Endpoint) -> Vec<ResourceRule> {
        match endpoint {
            Endpoint::Validate => self
                .validating
                .iter()
                .filter(|p| !p.bindings.is_empty())
                .flat_map(|p| p.core.constraints.resource_rules())
                .collect(),
            Endpoint::Mutate => self
                .mutating
                .iter()
                .filter(|p| !p.bindings.is_empty())
                .flat_map(|p| p.core.constraints.resource_rules())
                .collect(),
        }
    }

    /// What the cluster must watch for parameters: each paramKind of a bound policy with the
    /// paramRefs of its bindings (`None` for a binding without one).
    pub fn param_needs(&self) -> Vec<ParamNeed> {
        let mut needs: Vec<ParamNeed> = Vec::new();
        let policies = self
            .validating
            .iter()
            .map(|p| {
                (
                    &p.core,
                    p.bindings
                        .iter()
                        .map(binding::Bound::binding)
                        .collect::<Vec<_>>(),
                )
            })
            .chain(
                self.mutating
                    .iter()
                    .map(|p| (&p.core, p.bindings.iter().collect::<Vec<_>>())),
            );
        for (core, bindings) in policies {
            let Some(kind) = &core.param_kind else {
                continue;
            };
            if bindings.is_empty() {
                continue;
            }
            let refs = bindings.iter().map(|b| b.param_ref.clone());
            match needs.iter_mut().find(|need| need.kind == *kind) {
                Some(need) => need.param_refs.extend(refs),
                None => needs.push(ParamNeed {
                    kind: kind.clone(),
                    resource: self.resource_of(kind),
                    param_refs: refs.collect(),
                }),
            }
        }
        needs
    }

    /// The resource `kind` is most likely served as: the plural of a CustomResourceDefinition
    /// among the policies, else the built-in naming rule.
    fn resource_of(&self, kind: &ParamKind) -> String {
        let (group, version) = kind
            .api_version
            .split_once('/')
            .unwrap_or(("", &kind.api_version));
        self.custom_schemas
            .iter()
            .find(|(_, schema)| {
                let gvk = schema.gvk();
                gvk.group == group && gvk.version == version && gvk.kind == kind.kind
            })
            .map(|(plural, _)| plural.clone())
            .unwrap_or_else(|| crate::kubernetes::names::resource_for_kind(&kind.kind))
    }

    /// Runs the ValidatingAdmissionPolicies.
    pub fn validate<'r>(
        &self,
        request: &'r AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        cluster_params: Option<&dyn ParamLookup>,
        cel: &CelInputCell<'r>,
        decision: &mut Decision,
    ) {
        validating::validate(self, request, namespaces, cluster_params, cel, decision);
    }

    /// Whether some policy's expression uses `authorizer`.
    pub fn uses_authorizer(&self) -> bool {
        self.validating.iter().any(|p| p.core.uses_authorizer)
            || self.mutating.iter().any(|p| p.core.uses_authorizer)
    }

    /// Whether a policy that runs on `endpoint` for this request's resource and operation
    /// nests comprehensions (the namespace and object selectors are not consulted).
    pub fn may_run_long(&self, request: &AdmissionRequest, endpoint: Endpoint) -> bool {
        match endpoint {
            Endpoint::Validate => self
                .validating
                .iter()
                .any(|policy| policy.core.may_run_long(request)),
            Endpoint::Mutate => self
                .mutating
                .iter()
                .any(|policy| policy.core.may_run_long(request)),
        }
    }

    /// Whether a bound policy that runs on `endpoint` may match the request, from its
    /// envelope and the labels of its namespace ([`ResourceMatcher::may_match`] of the
    /// policy's matchConstraints and of some binding's matchResources; object selectors and
    /// match conditions are not consulted): true for every request a policy runs on with the
    /// same `namespaces`.
    pub fn wants(
        &self,
        request: &AdmissionRequest,
        endpoint: Endpoint,
        namespaces: &dyn NamespaceLookup,
    ) -> bool {
        match endpoint {
            Endpoint::Validate => self
                .validating
                .iter()
                .any(|policy| policy.core.may_match(&policy.bindings, request, namespaces)),
            Endpoint::Mutate => self
                .mutating
                .iter()
                .any(|policy| policy.core.may_match(&policy.bindings, request, namespaces)),
        }
    }

    /// The paramKind and paramRef of each parameter object by name that the policies running
    /// on `endpoint` would read for `request` (a policy matching it, a binding matching it
    /// whose paramRef names an object).
    pub fn params_by_name(
        &self,
        request: &AdmissionRequest,
        endpoint: Endpoint,
        namespaces: &dyn NamespaceLookup,
    ) -> Vec<(&ParamKind, &ParamRef)> {
        let mut found = Vec::new();
        match endpoint {
            Endpoint::Validate => {
                for policy in &self.validating {
                    policy
                        .core
                        .params_by_name(&policy.bindings, request, namespaces, &mut found);
                }
            }
            Endpoint::Mutate => {
                for policy in &self.mutating {
                    policy
                        .core
                        .params_by_name(&policy.bindings, request, namespaces, &mut found);
                }
            }
        }
        found
    }

    /// Whether a bound policy that runs on `endpoint` and matches the request's resource and
    /// operation may read its `oldObject` (see [`crate::engine::Engine::wanted_objects`]).
    pub fn reads_old_object(&self, request: &AdmissionRequest, endpoint: Endpoint) -> bool {
        match endpoint {
            Endpoint::Validate => self.validating.iter().any(|policy| {
                !policy.bindings.is_empty()
                    && policy
                        .core
                        .reads_old_object(request, policy.bindings.iter().map(Bound::binding))
            }),
            Endpoint::Mutate => self.mutating.iter().any(|policy| {
                !policy.bindings.is_empty()
                    && policy
                        .core
                        .reads_old_object(request, policy.bindings.iter().map(Bound::binding))
            }),
        }
    }

    /// Runs the MutatingAdmissionPolicies on `object` (the object as edited so far) and
    /// returns the mutated object; errors under `failurePolicy: Fail` deny in `decision`.
    pub fn mutate<'r>(
        &self,
        request: &'r AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        cluster_params: Option<&dyn ParamLookup>,
        cel: &CelInputCell<'r>,
        object: Json,
        decision: &mut Decision,
    ) -> MutatedObject {
        mutating::mutate(
            self,
            request,
            namespaces,
            cluster_params,
            cel,
            object,
            decision,
        )
    }
}

/// A paramKind that bound policies use, with their bindings' paramRefs.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamNeed {
    /// The kind.
    pub kind: ParamKind,
    /// The resource it is served as, as far as the policy folders tell (for RBAC; the server
    /// asks discovery).
    pub resource: String,
    /// The paramRef of each binding of a policy with this kind (`None`: the binding has none).
    pub param_refs: Vec<Option<ParamRef>>,
}

fn unknown_policy(source: &DocumentSource, kind: &str, name: &str) -> PolicyError {
    PolicyError::at(
        source,
        "spec.policyName",
        format!("no {kind} named {name:?} is defined in the policy folders"),
    )
}
