//! Words that policy documents and the engine share: what a rule's violations do, what an
//! error does, and label selectors. Both [`crate::policy`] (documents) and
//! [`crate::engine`] (compiled rules) import this module; it imports neither.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a native rule's violations do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub enum Action {
    /// Refuse the request (403) and list the violation in the message.
    Deny,
    /// Admit it with a warning per violation (kubectl prints `Warning: …`).
    Warn,
    /// Admit it and record the violations in the audit annotation of the policy.
    Audit,
}

impl Action {
    /// The action as documents spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "Deny",
            Action::Warn => "Warn",
            Action::Audit => "Audit",
        }
    }
}

/// The apiserver's `failurePolicy`: what an error does, in an admission policy or in the
/// webhook configuration Portcullis is registered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, clap::ValueEnum)]
pub enum FailurePolicy {
    /// An error refuses the request (the default).
    #[default]
    #[value(name = "Fail")]
    Fail,
    /// An error is ignored: the request is admitted as if the rule were absent.
    #[value(name = "Ignore")]
    Ignore,
}

impl FailurePolicy {
    /// The name as the apiserver's API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// A Kubernetes LabelSelector.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Labels that must equal these values.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// Expressions that must all hold.
    #[serde(default)]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

impl LabelSelector {
    /// The first `matchExpressions` entry whose operator and values do not go together: its
    /// field (`matchExpressions[0]`, or `matchExpressions[0].operator` for an unknown
    /// operator) and what is wrong.
    pub fn requirement_error(&self) -> Option<(String, String)> {
        self.match_expressions
            .iter()
            .enumerate()
            .find_map(|(i, requirement)| {
                let field = format!("matchExpressions[{i}]");
                match (requirement.operator.as_str(), requirement.values.is_empty()) {
                    ("In" | "NotIn", false) | ("Exists" | "DoesNotExist", true) => None,
                    ("In" | "NotIn", true) => Some((field, "In and NotIn need values".into())),
                    ("Exists" | "DoesNotExist", false) => {
                        Some((field, "Exists and DoesNotExist take no values".into()))
                    }
                    (other, _) => Some((
                        format!("{field}.operator"),
                        format!(
                            "unknown operator {other:?}: use In, NotIn, Exists or DoesNotExist"
                        ),
                    )),
                }
            })
    }
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Values for `In` and `NotIn`.
    #[serde(default)]
    pub values: Vec<String>,
}
