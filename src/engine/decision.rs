use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::Action;
use crate::admission::AdmissionResponse;
use crate::patch::PatchOperation;

/// One broken rule: which policy and rule, where in the object, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The policy's name.
    pub policy: String,
    /// The rule's name within the policy.
    pub rule: String,
    /// Field path in the object, e.g. `spec.containers[0].securityContext.privileged`.
    pub path: String,
    /// Why it is refused.
    pub message: String,
    /// How the violation is worded in the denial message.
    #[serde(skip)]
    pub form: ViolationForm,
}

/// How a [`Violation`] is worded in the denial message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ViolationForm {
    /// A native rule's: `[policy/rule] path: message`, joined to the others by `; `.
    #[default]
    Rule,
    /// An admission policy's (ValidatingAdmissionPolicy, MutatingAdmissionPolicy): its
    /// message is the apiserver's whole denial text, and only the first such violation is
    /// answered, as the apiserver reports only its first denied decision.
    AdmissionPolicy,
    /// A Gatekeeper constraint's: `[constraint] msg` as its message, joined to the next
    /// Gatekeeper violation by a new line, as Gatekeeper's webhook joins them.
    Gatekeeper,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.form == ViolationForm::Gatekeeper {
            // Already `[constraint] msg`.
            return f.write_str(&self.message);
        }
        write!(f, "[{}/{}] ", self.policy, self.rule)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// The outcome of evaluating one request: data, not an error. Two decisions are equal when
/// they decide alike: the per-policy outcomes and timings (telemetry) are not compared.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Decision {
    /// Violations of rules that deny; the request is allowed when there are none.
    pub violations: Vec<Violation>,
    /// Warnings for the client.
    pub warnings: Vec<String>,
    /// Audit annotations, keyed by policy.
    pub audit_annotations: BTreeMap<String, String>,
    /// The JSON Patch of the defaults applied, if any.
    pub patch: Option<Vec<PatchOperation>>,
    /// The object with the patch applied, if any.
    #[serde(skip)]
    pub patched_object: Option<Value>,
    /// The status of the denial, when the rule behind the first violation names one (a
    /// ValidatingAdmissionPolicy validation's `reason`); 403 Forbidden otherwise.
    #[serde(skip)]
    pub denial_status: Option<DenialStatus>,
    /// What each policy's evaluation gave, for per-policy metrics.
    #[serde(skip)]
    pub outcomes: Vec<PolicyOutcome>,
    /// How long each policy that matched took.
    #[serde(skip)]
    pub timings: Vec<(Arc<str>, Duration)>,
}

impl PartialEq for Decision {
    fn eq(&self, other: &Self) -> bool {
        self.violations == other.violations
            && self.warnings == other.warnings
            && self.audit_annotations == other.audit_annotations
            && self.patch == other.patch
            && self.patched_object == other.patched_object
            && self.denial_status == other.denial_status
    }
}

/// One policy evaluation's result under one action: what
/// `portcullis_policy_evaluations_total` counts. Every value comes from a policy document or
/// is one of a few fixed words, so the metric's cardinality is bounded by the policies.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyOutcome {
    /// `ValidatingAdmissionPolicy`, `MutatingAdmissionPolicy` or `Policy`.
    pub kind: &'static str,
    /// The policy's name.
    pub policy: Arc<str>,
    /// The binding's name; none for native policies.
    pub binding: Option<Arc<str>>,
    /// `Deny`, `Warn` or `Audit` (a binding's validationActions, a native policy's action), or
    /// `Mutate`.
    pub action: &'static str,
    /// `pass`, `fail` (a validation was false: under `Warn` or `Audit`, a would-be denial) or
    /// `error` (an expression or the binding's params could not be evaluated).
    pub result: &'static str,
}

/// The HTTP status code and reason a denial is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenialStatus {
    /// The code, as the apiserver maps the reason (401, 403, 413 or 422 for a policy's
    /// denial; another when the request fails with an error, such as 500).
    pub code: u16,
    /// The reason: `Unauthorized`, `Forbidden`, `RequestEntityTooLarge` or `Invalid` for a
    /// policy's denial; for an error, its Status reason (`InternalError`, `NotFound`, the
    /// empty `Unknown` …).
    pub reason: &'static str,
}

/// The reasons of apimachinery's `metav1.StatusReason`, for statuses read from the API.
const STATUS_REASONS: [&str; 19] = [
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

impl DenialStatus {
    /// The status of an error the API answered with `code` and `reason` (a reason apimachinery
    /// does not define is `Unknown`, the empty reason).
    pub fn of_api(code: u16, reason: &str) -> Self {
        DenialStatus {
            code,
            reason: STATUS_REASONS
                .into_iter()
                .find(|known| *known == reason)
                .unwrap_or(""),
        }
    }

    /// The status for a ValidatingAdmissionPolicy validation's `reason`, as the apiserver
    /// maps it: no reason is `Invalid` (422), and so is a reason it does not know (its API
    /// refuses those when the policy is created).
    pub fn for_policy_reason(reason: Option<&str>) -> Self {
        let (code, reason) = match reason {
            Some("Forbidden") => (403, "Forbidden"),
            Some("Unauthorized") => (401, "Unauthorized"),
            Some("RequestEntityTooLarge") => (413, "RequestEntityTooLarge"),
            _ => (422, "Invalid"),
        };
        DenialStatus { code, reason }
    }
}

/// The apiserver truncates each warning to 256 characters; keep ours within that.
const WARNING_LIMIT: usize = 256;

fn warning_text(violation: &Violation) -> String {
    let text = violation.to_string();
    if text.chars().count() <= WARNING_LIMIT {
        return text;
    }
    let mut short: String = text.chars().take(WARNING_LIMIT - 1).collect();
    short.push('…');
    short
}

/// An audit annotation key as a webhook must return it. The apiserver records each key of a
/// webhook's answer as `<webhook name>/<key>` and drops any that is not then a qualified name,
/// so a key must be a qualified name's name part: at most 63 letters, digits, `-`, `_` and
/// `.`, starting and ending with a letter or digit. A `/` (an in-tree key's prefix) becomes
/// `.`, any other character `-`.
pub fn audit_annotation_key(key: &str) -> String {
    let key: String = key
        .chars()
        .map(|c| match c {
            c if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') => c,
            '/' => '.',
            _ => '-',
        })
        .take(63)
        .collect();
    key.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

impl Decision {
    /// Routes violations by the action of the rule that found them.
    pub fn record(&mut self, action: Action, violations: impl Iterator<Item = Violation>) {
        for violation in violations {
            match action {
                Action::Deny => self.violations.push(violation),
                Action::Warn => self.warn(warning_text(&violation)),
                Action::Audit => {
                    let entry = self
                        .audit_annotations
                        .entry(audit_annotation_key(&violation.policy))
                        .or_default();
                    if !entry.is_empty() {
                        entry.push_str("; ");
                    }
                    entry.push_str(&format!(
                        "[{}] {}: {}",
                        violation.rule, violation.path, violation.message
                    ));
                }
            }
        }
    }

    /// Adds a warning, unless the same text is already there: the apiserver's warning
    /// recorder keeps one of identical warnings in a response.
    pub fn warn(&mut self, text: String) {
        if !self.warnings.contains(&text) {
            self.warnings.push(text);
        }
    }

    /// Fails the whole request with `status` and `message` alone, as the apiserver answers an
    /// error that ends its admission chain (such as a failed read of the request's namespace
    /// while it dispatches admission policies): what was decided before is not answered.
    pub fn fail_request(&mut self, policy: &str, status: DenialStatus, message: String) {
        self.violations = vec![Violation {
            policy: policy.to_owned(),
            rule: String::new(),
            path: String::new(),
            message,
            form: ViolationForm::AdmissionPolicy,
        }];
        self.denial_status = Some(status);
    }

    /// Whether the request is admitted.
    pub fn allowed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The denial message: every violation, in order, separated by `; `, except that of the
    /// admission policies' violations only the first is given, in the apiserver's words.
    pub fn denial_message(&self) -> String {
        let mut message = String::new();
        let mut admission_policy_reported = false;
        let mut previous = None;
        for violation in &self.violations {
            if violation.form == ViolationForm::AdmissionPolicy
                && std::mem::replace(&mut admission_policy_reported, true)
            {
                continue;
            }
            if !message.is_empty() {
                let gatekeeper = ViolationForm::Gatekeeper;
                message.push_str(
                    if previous == Some(gatekeeper) && violation.form == gatekeeper {
                        "\n"
                    } else {
                        "; "
                    },
                );
            }
            match violation.form {
                ViolationForm::Rule => message.push_str(&violation.to_string()),
                ViolationForm::AdmissionPolicy | ViolationForm::Gatekeeper => {
                    message.push_str(&violation.message);
                }
            }
            previous = Some(violation.form);
        }
        message
    }

    /// The AdmissionResponse for this decision.
    pub fn to_response(&self, uid: &str) -> AdmissionResponse {
        let mut response = AdmissionResponse::allow(uid);
        if !self.allowed() {
            let (code, reason) = match &self.denial_status {
                Some(status) => (status.code, status.reason),
                None => (403, "Forbidden"),
            };
            response = response.deny(code, reason, self.denial_message());
        }
        if let Some(patch) = &self.patch {
            // A Vec of plain structs always serializes.
            response = response.with_patch(serde_json::to_vec(patch).unwrap_or_default());
        }
        response.warnings = self.warnings.clone();
        response.audit_annotations = self.audit_annotations.clone();
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn violation(policy: &str, message: &str) -> Violation {
        Violation {
            policy: policy.into(),
            rule: "r".into(),
            path: "spec".into(),
            message: message.into(),
            form: ViolationForm::Rule,
        }
    }

    #[test]
    fn actions_route_violations() {
        let mut decision = Decision::default();
        decision.record(Action::Warn, [violation("p", &"x".repeat(400))].into_iter());
        decision.record(
            Action::Audit,
            [
                violation("Team Policy!", "a"),
                violation("Team Policy!", "b"),
            ]
            .into_iter(),
        );
        assert!(decision.allowed());
        assert_eq!(decision.warnings[0].chars().count(), 256);
        assert!(decision.warnings[0].ends_with('…'));
        assert_eq!(
            decision.audit_annotations["Team-Policy"],
            "[r] spec: a; [r] spec: b"
        );
        decision.record(Action::Deny, [violation("p", "no")].into_iter());
        let response = decision.to_response("u");
        assert!(!response.allowed);
        assert_eq!(response.status.unwrap().message, "[p/r] spec: no");
        assert_eq!(response.warnings.len(), 1);
        assert_eq!(response.audit_annotations.len(), 1);
    }

    #[test]
    fn admission_policy_denials_are_answered_as_the_apiserver_does() {
        let admission = |message: &str| Violation {
            form: ViolationForm::AdmissionPolicy,
            path: String::new(),
            ..violation("vap", message)
        };
        let mut decision = Decision::default();
        decision.record(
            Action::Deny,
            [
                admission("ValidatingAdmissionPolicy 'vap' with binding 'b' denied request: one"),
                admission("ValidatingAdmissionPolicy 'vap' with binding 'b' denied request: two"),
                violation("p", "no"),
            ]
            .into_iter(),
        );
        assert_eq!(
            decision.denial_message(),
            "ValidatingAdmissionPolicy 'vap' with binding 'b' denied request: one; [p/r] spec: no"
        );
        assert_eq!(decision.violations.len(), 3);
    }
}
