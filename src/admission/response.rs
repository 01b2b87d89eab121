use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Serialize, Serializer};

use super::ReviewVersion;

/// The `response` of an AdmissionReview.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// The request's uid, echoed.
    pub uid: String,
    /// Whether the request is admitted.
    pub allowed: bool,
    /// Why not, when it is not (or a note when it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ResponseStatus>,
    /// A JSON Patch document (serialized JSON), sent base64-encoded.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_base64"
    )]
    pub patch: Option<Vec<u8>>,
    /// `JSONPatch` whenever `patch` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    /// Warnings shown to the client (kubectl prints them as `Warning: …`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Annotations recorded in the apiserver's audit log.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub audit_annotations: BTreeMap<String, String>,
}

/// The `status` of a response: a subset of metav1.Status.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponseStatus {
    /// HTTP-like code: 403 for a policy denial (a ValidatingAdmissionPolicy's: from its
    /// validation's reason, 422 by default), 500 for an evaluation failure.
    pub code: u16,
    /// A machine-readable reason (`Forbidden`, `Invalid`, `InternalError`).
    pub reason: &'static str,
    /// The human-readable message kubectl prints after `denied the request:`.
    pub message: String,
}

fn serialize_base64<S: Serializer>(patch: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
    match patch {
        Some(bytes) => s.serialize_str(&BASE64.encode(bytes)),
        None => s.serialize_none(),
    }
}

impl AdmissionResponse {
    /// Admits the request with nothing else to say.
    pub fn allow(uid: impl Into<String>) -> Self {
        AdmissionResponse {
            uid: uid.into(),
            allowed: true,
            status: None,
            patch: None,
            patch_type: None,
            warnings: Vec::new(),
            audit_annotations: BTreeMap::new(),
        }
    }

    /// Refuses the request with a code, reason and message.
    #[must_use]
    pub fn deny(mut self, code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        self.allowed = false;
        self.status = Some(ResponseStatus {
            code,
            reason,
            message: message.into(),
        });
        self
    }

    /// Attaches a serialized JSON Patch.
    #[must_use]
    pub fn with_patch(mut self, patch_json: Vec<u8>) -> Self {
        self.patch = Some(patch_json);
        self.patch_type = Some("JSONPatch");
        self
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseEnvelope<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: &'a AdmissionResponse,
}

/// Serializes a response as an AdmissionReview of the given version.
pub fn encode_review(version: ReviewVersion, response: &AdmissionResponse) -> Vec<u8> {
    let envelope = ResponseEnvelope {
        api_version: version.api_version(),
        kind: "AdmissionReview",
        response,
    };
    // Serializing plain structs of strings, bools and maps into a Vec cannot fail.
    serde_json::to_vec(&envelope).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patch_is_base64_on_the_wire() {
        let patch = br#"[{"op":"add","path":"/a","value":1}]"#.to_vec();
        let response = AdmissionResponse::allow("u").with_patch(patch.clone());
        let wire: serde_json::Value =
            serde_json::from_slice(&encode_review(ReviewVersion::V1, &response)).unwrap();
        let encoded = wire["response"]["patch"]
            .as_str()
            .expect("patch is a string");
        assert_eq!(BASE64.decode(encoded).unwrap(), patch);
        assert_eq!(wire["response"]["patchType"], "JSONPatch");
    }

    #[test]
    fn allow_carries_only_what_is_set() {
        let wire: serde_json::Value = serde_json::from_slice(&encode_review(
            ReviewVersion::V1Beta1,
            &AdmissionResponse::allow("u"),
        ))
        .unwrap();
        assert_eq!(
            wire,
            json!({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview",
                   "response":{"uid":"u","allowed":true}})
        );
    }
}
