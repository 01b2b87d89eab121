use super::admission_policy::{AdmissionPolicies, AdmissionPolicyDocument};
use super::gatekeeper::Gatekeeper;
use super::pod_security::PodSecurityAdmission;
use super::rules::CompiledPatterns;
use super::{CompiledPolicy, Engine};
use std::path::PathBuf;

use crate::policy::{
    PolicyDocument, PolicyError, SourcedDocument, read_documents, unsupported_document,
};

impl Engine {
    /// Reads every policy document under `paths` (files or folders) and compiles them into one
    /// engine. An empty set of documents is valid: the engine allows everything unchanged.
    pub fn load(paths: &[PathBuf]) -> Result<Engine, PolicyError> {
        Engine::compile(&read_documents(paths)?)
    }

    /// Compiles policy documents into an engine: everything that can be checked or prepared
    /// (regexes, selectors, quantities, paths) is done here, once. Policies are evaluated in
    /// document order. Admission policies (`admissionregistration.k8s.io`) are compiled with
    /// their bindings and parameter objects; a parameter object no policy's `paramKind` names
    /// is refused.
    pub fn compile(documents: &[SourcedDocument]) -> Result<Engine, PolicyError> {
        let mut engine = Engine::empty();
        let mut names = std::collections::BTreeMap::new();
        let mut admission = Vec::new();
        let mut params = Vec::new();
        let mut custom_schemas = Vec::new();
        let mut gatekeeper_documents = Vec::new();
        let mut patterns = CompiledPatterns::default();
        for document in documents {
            match &document.document {
                PolicyDocument::Policy(policy) => {
                    if let Some(first) =
                        names.insert(policy.metadata.name.clone(), document.source.clone())
                    {
                        return Err(PolicyError::at(
                            &document.source,
                            "metadata.name",
                            format!(
                                "policy {:?} is also defined in {first}",
                                policy.metadata.name
                            ),
                        ));
                    }
                    engine = engine.with_policy(CompiledPolicy::compile(
                        policy,
                        &document.source,
                        &mut patterns,
                    )?);
                }
                PolicyDocument::PodSecurity(config) => {
                    let admission = PodSecurityAdmission::new(config)
                        .map_err(|e| PolicyError::at(&document.source, e.field, e.message))?;
                    engine = engine.with_pod_security(admission);
                }
                PolicyDocument::AdmissionPolicy(policy) => {
                    admission.push((&document.source, policy.as_ref()));
                }
                PolicyDocument::CustomResourceDefinition(crd) => {
                    let schemas = crate::kubernetes::schema::crd::schemas_from_crd(crd)
                        .map_err(|e| PolicyError::at(&document.source, e.path, e.message))?;
                    let plural = crd
                        .pointer("/spec/names/plural")
                        .and_then(|p| p.as_str())
                        .unwrap_or_default();
                    custom_schemas.extend(schemas.into_iter().map(|s| (plural.to_owned(), s)));
                }
                PolicyDocument::Parameter(object) => {
                    params.push((&document.source, object.as_ref()));
                }
                PolicyDocument::Gatekeeper(gatekeeper) => {
                    gatekeeper_documents.push((&document.source, gatekeeper.as_ref()));
                }
            }
        }
        let param_kinds: Vec<(&str, &str)> = admission
            .iter()
            .filter_map(|(_, document)| match document {
                AdmissionPolicyDocument::ValidatingPolicy(d) => d.spec.common().param_kind,
                AdmissionPolicyDocument::MutatingPolicy(d) => d.spec.common().param_kind,
                _ => None,
            })
            .map(|kind| (kind.api_version.as_str(), kind.kind.as_str()))
            .collect();
        for (source, object) in &params {
            let field = |name: &str| object.get(name).and_then(|v| v.as_str()).unwrap_or("");
            let (api_version, kind) = (field("apiVersion"), field("kind"));
            if !param_kinds.contains(&(api_version, kind)) {
                return Err(unsupported_document(source, api_version, kind));
            }
        }
        if !admission.is_empty() {
            engine.admission_policies =
                AdmissionPolicies::compile(&admission, &params, custom_schemas)?;
        }
        if !gatekeeper_documents.is_empty() {
            engine.gatekeeper = Gatekeeper::compile(&gatekeeper_documents)?;
        }
        Ok(engine)
    }
}
