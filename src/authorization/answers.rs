//! Answers given ahead of time, for `check` and `test`: allow everything, deny everything,
//! or a table of rules (`--authorizer allow|deny|FILE`, a PolicyTest's `authorizer`).

use std::path::Path;

use serde::Deserialize;

use super::{AccessQuestion, AccessReviewer};
use crate::expressions::AuthorizationDecision;

/// What a rule (or the table's default) answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    /// `allowed()` is true.
    Allow,
    /// `allowed()` is false.
    #[default]
    Deny,
    /// `allowed()` is false and `errored()` true, as when the authorizer could not decide.
    Error,
}

/// One rule: every field given must match the question; the first rule that matches
/// answers. A rule with `path` matches only `authorizer.path(...)` checks; one with any of
/// `apiGroup`, `resource`, `subresource`, `namespace`, `name` only resource checks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerRule {
    /// The user asked about: the requesting user's name, or
    /// `system:serviceaccount:<ns>:<name>` for `serviceAccount(ns, name)`.
    pub user: Option<String>,
    /// A group the user is in.
    pub group: Option<String>,
    /// The verb given to `check`.
    pub verb: Option<String>,
    /// The API group (`""` for the core group).
    pub api_group: Option<String>,
    /// The resource.
    pub resource: Option<String>,
    /// The subresource (`""` for none).
    pub subresource: Option<String>,
    /// The namespace (`""` for cluster-scoped checks).
    pub namespace: Option<String>,
    /// The object name (`""` for all).
    pub name: Option<String>,
    /// The non-resource path.
    pub path: Option<String>,
    /// The answer.
    pub decision: Answer,
    /// What `reason()` returns.
    #[serde(default)]
    pub reason: String,
    /// What `error()` returns, for `decision: error` (`authorizer error` when not given).
    pub error: Option<String>,
}

impl AnswerRule {
    fn matches(&self, question: &AccessQuestion) -> bool {
        let check = &question.check;
        let is =
            |wanted: &Option<String>, value: &str| wanted.as_deref().is_none_or(|w| w == value);
        let resource_fields = [
            &self.api_group,
            &self.resource,
            &self.subresource,
            &self.namespace,
            &self.name,
        ];
        let kind_matches = if check.path.is_empty() {
            self.path.is_none()
        } else {
            resource_fields.iter().all(|field| field.is_none())
        };
        kind_matches
            && is(&self.user, &question.subject.user)
            && self
                .group
                .as_ref()
                .is_none_or(|group| question.subject.groups.contains(group))
            && is(&self.verb, &check.verb)
            && is(&self.api_group, &check.group)
            && is(&self.resource, &check.resource)
            && is(&self.subresource, &check.subresource)
            && is(&self.namespace, &check.namespace)
            && is(&self.name, &check.name)
            && is(&self.path, &check.path)
    }

    fn decision(&self) -> AuthorizationDecision {
        decision(self.decision, &self.reason, self.error.as_deref())
    }
}

fn decision(answer: Answer, reason: &str, error: Option<&str>) -> AuthorizationDecision {
    AuthorizationDecision {
        allowed: answer == Answer::Allow,
        reason: reason.to_owned(),
        error: match answer {
            Answer::Error => error.unwrap_or("authorizer error").to_owned(),
            Answer::Allow | Answer::Deny => String::new(),
        },
    }
}

/// A table of answers: the first matching rule answers, `default` when none does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "serde_json::Value")]
pub struct AnswerTable {
    /// The answer when no rule matches (`deny` when not given).
    pub default: Answer,
    /// The rules, in order.
    pub rules: Vec<AnswerRule>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TableFields {
    #[serde(default)]
    default: Answer,
    #[serde(default)]
    rules: Vec<AnswerRule>,
}

/// `allow`, `deny`, or a mapping with `default` and `rules`.
impl TryFrom<serde_json::Value> for AnswerTable {
    type Error = String;

    fn try_from(value: serde_json::Value) -> Result<Self, String> {
        let table = match value {
            serde_json::Value::String(word) => match word.as_str() {
                "allow" => AnswerTable::all(Answer::Allow),
                "deny" => AnswerTable::all(Answer::Deny),
                other => {
                    return Err(format!(
                        "{other:?}: must be allow, deny, or a mapping with default and rules"
                    ));
                }
            },
            value => {
                let fields: TableFields = serde_path_to_error::deserialize(value)
                    .map_err(|error| format!("{}: {}", error.path(), error.inner()))?;
                AnswerTable {
                    default: fields.default,
                    rules: fields.rules,
                }
            }
        };
        if table.default == Answer::Error {
            return Err("default: must be allow or deny".into());
        }
        if let Some(i) = table
            .rules
            .iter()
            .position(|rule| rule.error.is_some() && rule.decision != Answer::Error)
        {
            return Err(format!("rules[{i}]: error is only for decision: error"));
        }
        Ok(table)
    }
}

/// Why `--authorizer` or a table file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AnswerTableError {
    /// The file could not be read.
    #[error("cannot read authorizer answers {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a table of answers.
    #[error("authorizer answers {path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
}

impl AnswerTable {
    /// The same answer to every question.
    pub fn all(answer: Answer) -> Self {
        AnswerTable {
            default: answer,
            rules: Vec::new(),
        }
    }

    /// The value of `--authorizer`: `allow`, `deny`, or the path of a YAML table.
    pub fn from_flag(value: &str) -> Result<Self, AnswerTableError> {
        match value {
            "allow" => Ok(AnswerTable::all(Answer::Allow)),
            "deny" => Ok(AnswerTable::all(Answer::Deny)),
            path => AnswerTable::read(Path::new(path)),
        }
    }

    /// Reads a YAML table of answers.
    pub fn read(path: &Path) -> Result<Self, AnswerTableError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| AnswerTableError::Read {
            path: shown.clone(),
            source,
        })?;
        serde_norway::from_str(&text).map_err(|error| AnswerTableError::Invalid {
            path: shown,
            message: error.to_string(),
        })
    }
}

impl AccessReviewer for AnswerTable {
    fn review(&self, question: &AccessQuestion) -> Result<AuthorizationDecision, String> {
        Ok(
            match self.rules.iter().find(|rule| rule.matches(question)) {
                Some(rule) => rule.decision(),
                None => decision(self.default, "", None),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authorization::Subject;
    use crate::expressions::AuthorizationCheck;

    const TABLE: &str = r#"
default: deny
rules:
  - user: alice
    verb: update
    apiGroup: apps
    resource: deployments
    namespace: team-a
    decision: allow
    reason: alice edits team-a
  - group: auditors
    path: /metrics
    decision: allow
  - resource: secrets
    decision: error
    error: webhook authorizer unreachable
"#;

    fn question(user: &str, groups: &[&str], check: AuthorizationCheck) -> AccessQuestion {
        AccessQuestion {
            subject: Subject {
                user: user.into(),
                groups: groups.iter().map(|g| (*g).to_owned()).collect(),
                ..Subject::default()
            },
            check,
        }
    }

    fn deployments(namespace: &str, verb: &str) -> AuthorizationCheck {
        AuthorizationCheck {
            group: "apps".into(),
            resource: "deployments".into(),
            namespace: namespace.into(),
            verb: verb.into(),
            ..AuthorizationCheck::default()
        }
    }

    #[test]
    fn the_first_matching_rule_answers() {
        let table: AnswerTable = serde_norway::from_str(TABLE).unwrap();
        let answer = |q: &AccessQuestion| table.review(q).unwrap();
        let alice = answer(&question("alice", &[], deployments("team-a", "update")));
        assert_eq!(
            alice,
            AuthorizationDecision {
                allowed: true,
                reason: "alice edits team-a".into(),
                error: String::new(),
            }
        );
        assert!(!answer(&question("alice", &[], deployments("team-b", "update"))).allowed);
        assert!(!answer(&question("bob", &[], deployments("team-a", "update"))).allowed);
        let metrics = AuthorizationCheck {
            path: "/metrics".into(),
            verb: "get".into(),
            ..AuthorizationCheck::default()
        };
        assert!(answer(&question("carol", &["auditors"], metrics.clone())).allowed);
        assert!(!answer(&question("carol", &["dev"], metrics)).allowed);
        let secrets = AuthorizationCheck {
            resource: "secrets".into(),
            verb: "get".into(),
            ..AuthorizationCheck::default()
        };
        let errored = answer(&question("carol", &[], secrets));
        assert!(!errored.allowed);
        assert_eq!(errored.error, "webhook authorizer unreachable");
        // A path rule does not answer resource checks and the other way round.
        let path_only: AnswerTable =
            serde_norway::from_str("rules: [{path: /x, decision: allow}]").unwrap();
        assert!(
            !path_only
                .review(&question("a", &[], deployments("x", "get")))
                .unwrap()
                .allowed
        );
    }

    #[test]
    fn words_and_bad_tables() {
        for (text, allowed) in [("allow", true), ("deny", false)] {
            let table: AnswerTable = serde_norway::from_str(text).unwrap();
            let decision = table
                .review(&question("x", &[], deployments("y", "get")))
                .unwrap();
            assert_eq!(decision.allowed, allowed);
            assert_eq!(AnswerTable::from_flag(text).unwrap(), table);
        }
        for (text, expected) in [
            ("rules: [{decision: allow, colour: red}]", "colour"),
            ("rules: [{decision: maybe}]", "maybe"),
            ("default: error", "default"),
            ("error", "error"),
            ("rules: [{decision: allow, error: x}]", "error is only for"),
        ] {
            let error = serde_norway::from_str::<AnswerTable>(text)
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
        let missing = AnswerTable::from_flag("/nonexistent/answers.yaml").unwrap_err();
        assert!(missing.to_string().contains("cannot read"), "{missing}");
    }
}
