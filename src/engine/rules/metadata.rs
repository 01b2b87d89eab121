use regex::Regex;
use serde_json::Value;

use super::{Finding, View};

/// `requiredLabels` / `requiredAnnotations`: keys that must be present, with an optional regex
/// the value must match (anchored as written; use `^…$` for a whole-value match).
#[derive(Debug)]
pub struct RequiredMetadataRule {
    field: &'static str,
    entries: Vec<(String, Option<Regex>)>,
}

impl RequiredMetadataRule {
    /// `field` is `labels` or `annotations`; regexes compile here, once.
    pub fn new(
        field: &'static str,
        entries: &std::collections::BTreeMap<String, Option<String>>,
    ) -> Result<Self, (String, String)> {
        let mut compiled = Vec::new();
        for (key, pattern) in entries {
            let regex = match pattern.as_deref().filter(|p| !p.is_empty()) {
                Some(pattern) => Some(
                    Regex::new(pattern)
                        .map_err(|e| (key.clone(), format!("invalid regex {pattern:?}: {e}")))?,
                ),
                None => None,
            };
            compiled.push((key.clone(), regex));
        }
        Ok(RequiredMetadataRule {
            field,
            entries: compiled,
        })
    }

    /// Reports each missing key and each value that does not match.
    pub fn check(&self, view: &View<'_>, findings: &mut Vec<Finding>) {
        let values = view.root.get("metadata").and_then(|m| m.get(self.field));
        let noun = if self.field == "labels" {
            "label"
        } else {
            "annotation"
        };
        for (key, regex) in &self.entries {
            let path = || format!("{}metadata.{}[{key:?}]", view.display, self.field);
            match values.and_then(|v| v.get(key)).and_then(Value::as_str) {
                None => findings.push((path(), format!("{noun} {key:?} is required"))),
                Some(value) => {
                    if let Some(regex) = regex
                        && !regex.is_match(value)
                    {
                        findings.push((
                            path(),
                            format!("{noun} {key:?} must match {}", regex.as_str()),
                        ));
                    }
                }
            }
        }
    }
}
