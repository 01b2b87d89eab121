use super::Engine;
use crate::policy::{PolicyDocument, PolicyError, SourcedDocument};

impl Engine {
    /// Compiles policy documents into an engine: everything that can be checked or prepared
    /// (regexes, selectors, quantities, paths) is done here, once.
    pub fn compile(documents: &[SourcedDocument]) -> Result<Engine, PolicyError> {
        let engine = Engine::empty();
        if let Some(document) = documents.first() {
            let (PolicyDocument::PodSecurity(_) | PolicyDocument::Policy(_)) = &document.document;
            return Err(PolicyError::at(
                &document.source,
                "",
                "compiling this kind is being implemented",
            ));
        }
        Ok(engine)
    }
}
