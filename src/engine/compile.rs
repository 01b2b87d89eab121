use super::pod_security::PodSecurityAdmission;
use super::{CompiledPolicy, Engine};
use crate::policy::{PolicyDocument, PolicyError, SourcedDocument};

impl Engine {
    /// Compiles policy documents into an engine: everything that can be checked or prepared
    /// (regexes, selectors, quantities, paths) is done here, once. Policies are evaluated in
    /// document order.
    pub fn compile(documents: &[SourcedDocument]) -> Result<Engine, PolicyError> {
        let mut engine = Engine::empty();
        let mut names = std::collections::BTreeMap::new();
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
                    engine = engine.with_policy(CompiledPolicy::compile(policy, &document.source)?);
                }
                PolicyDocument::PodSecurity(config) => {
                    let admission = PodSecurityAdmission::new(config)
                        .map_err(|e| PolicyError::at(&document.source, e.field, e.message))?;
                    engine = engine.with_pod_security(admission);
                }
            }
        }
        Ok(engine)
    }
}
