use std::collections::HashMap;

use crate::admission::JsonRead;
use regex::Regex;

use super::{Finding, View};

/// The regexes of one policy set's compile, by pattern: a pattern that several rules share is
/// compiled once (each compile builds a full DFA, about half a million instructions) and its
/// program is shared by the rules.
#[derive(Default)]
pub struct CompiledPatterns {
    by_pattern: HashMap<String, Regex>,
}

impl CompiledPatterns {
    /// The compiled `pattern`, from an earlier rule when one had it.
    pub fn compile(&mut self, pattern: &str) -> Result<Regex, regex::Error> {
        if let Some(regex) = self.by_pattern.get(pattern) {
            return Ok(regex.clone());
        }
        let regex = Regex::new(pattern)?;
        self.by_pattern.insert(pattern.to_owned(), regex.clone());
        Ok(regex)
    }
}

/// `requiredLabels` / `requiredAnnotations`: keys that must be present, with an optional regex
/// the value must match (anchored as written; use `^…$` for a whole-value match).
#[derive(Debug)]
pub struct RequiredMetadataRule {
    field: &'static str,
    entries: Vec<(String, Option<Regex>)>,
}

impl RequiredMetadataRule {
    /// `field` is `labels` or `annotations`; regexes compile here, once per pattern of the
    /// policy set (`patterns`).
    pub fn new(
        field: &'static str,
        entries: &std::collections::BTreeMap<String, Option<String>>,
        patterns: &mut CompiledPatterns,
    ) -> Result<Self, (String, String)> {
        let mut compiled = Vec::new();
        for (key, pattern) in entries {
            let regex = match pattern.as_deref().filter(|p| !p.is_empty()) {
                Some(pattern) => Some(
                    patterns
                        .compile(pattern)
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
    pub fn check<'a, J: JsonRead<'a>>(&self, view: &View<J>, findings: &mut Vec<Finding>) {
        let values = view.root.get("metadata").and_then(|m| m.get(self.field));
        let noun = if self.field == "labels" {
            "label"
        } else {
            "annotation"
        };
        for (key, regex) in &self.entries {
            let path = || format!("{}metadata.{}[{key:?}]", view.display, self.field);
            match values.and_then(|v| v.get(key)).and_then(JsonRead::as_str) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_rules_share_is_compiled_once_and_a_bad_one_is_refused() {
        let mut patterns = CompiledPatterns::default();
        let entries = |pattern: &str| {
            std::collections::BTreeMap::from([("team".to_owned(), Some(pattern.to_owned()))])
        };
        let first = RequiredMetadataRule::new("labels", &entries("^[a-z]+$"), &mut patterns);
        let second = RequiredMetadataRule::new("labels", &entries("^[a-z]+$"), &mut patterns);
        let other = RequiredMetadataRule::new("labels", &entries("^x$"), &mut patterns);
        assert!(first.is_ok() && second.is_ok() && other.is_ok());
        assert_eq!(patterns.by_pattern.len(), 2);
        let second = second.unwrap();
        let regex = second.entries[0].1.as_ref().unwrap();
        assert!(regex.is_match("payments") && !regex.is_match("Payments"));

        let (key, message) =
            RequiredMetadataRule::new("labels", &entries("(unclosed"), &mut patterns).unwrap_err();
        assert_eq!(key, "team");
        assert!(
            message.starts_with("invalid regex \"(unclosed\": "),
            "{message}"
        );
        assert_eq!(patterns.by_pattern.len(), 2);
    }
}
