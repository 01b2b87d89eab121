use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use serde_json::Value;

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
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}/{}] {}: {}",
            self.policy, self.rule, self.path, self.message
        )
    }
}

/// The outcome of evaluating one request: data, not an error.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
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
}

impl Decision {
    /// Whether the request is admitted.
    pub fn allowed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The denial message: every violation, in order, separated by `; `.
    pub fn denial_message(&self) -> String {
        let mut message = String::new();
        for (i, violation) in self.violations.iter().enumerate() {
            if i > 0 {
                message.push_str("; ");
            }
            message.push_str(&violation.to_string());
        }
        message
    }

    /// The AdmissionResponse for this decision.
    pub fn to_response(&self, uid: &str) -> AdmissionResponse {
        let mut response = AdmissionResponse::allow(uid);
        if !self.allowed() {
            response = response.deny(403, "Forbidden", self.denial_message());
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
