//! AdmissionReview envelopes as the kube-apiserver sends them (`admission.k8s.io/v1` and
//! `v1beta1`), and the responses Portcullis sends back in the version it was asked in.
//!
//! The types are our own rather than kube-core's: the request keeps `object` and `oldObject`
//! as plain JSON for the engine, parse errors name the field that was wrong, and the response
//! encodes `patch` as base64 as the apiserver requires (kube-core 5 writes an array of bytes,
//! kube-rs#1781).

mod envelope;
mod object;
pub mod object_view;
mod request;
mod response;

pub use object::{ObjectForm, RequestObject};
pub use object_view::{JsonKind, JsonRead, JsonRef, Node, ObjectView, unique_members};
pub use request::{
    AdmissionRequest, GroupVersionKind, GroupVersionResource, Operation, ParsedReview, ReviewError,
    ReviewVersion, UserInfo, WantedObjects, parse_review, parse_review_as, parse_review_for,
    parse_review_unless_wanted,
};
pub use response::{AdmissionResponse, ResponseStatus, encode_review};
