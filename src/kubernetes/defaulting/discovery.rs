//! `discovery.k8s.io/v1`: EndpointSlices.

use serde_json::json;

use super::fields::{Object, default_value, items};

/// Each port gets `name: ""` and `protocol: TCP` when unset; each endpoint shows its
/// `conditions` (a struct value the typed object always shows).
pub(super) fn endpoint_slice(object: &mut Object) {
    for endpoint in items(object, "endpoints") {
        default_value(endpoint, "conditions", || json!({}));
    }
    for port in items(object, "ports") {
        default_value(port, "name", || json!(""));
        default_value(port, "protocol", || json!("TCP"));
    }
}
