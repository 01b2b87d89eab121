use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::admission::ReviewError;

/// An HTTP-level failure: the request could not be read as an AdmissionReview, so no
/// AdmissionResponse can be sent. Answered as a JSON `Status` object with the matching code.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Only POST is served on the webhook paths.
    #[error("method not allowed: send POST")]
    MethodNotAllowed,
    /// The body is not declared as JSON.
    #[error("unsupported content type {0:?}: send Content-Type: application/json")]
    UnsupportedMediaType(String),
    /// The body is over `--max-body-bytes`.
    #[error("request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The bodies already held left no room for this one until the request deadline.
    #[error(
        "the request bodies held in memory left no room for this one until the request deadline (--max-buffered-body-bytes)"
    )]
    BodiesBuffered,
    /// Over HTTP/2, the bodies already held left no room for a frame of this one; the stream
    /// is refused at once, since one left unread would hold back the connection's others.
    #[error(
        "the request bodies held in memory leave no room for this one (--max-buffered-body-bytes); over HTTP/2 it is refused at once rather than left unread"
    )]
    BodiesBufferedNow,
    /// The body did not arrive before the request deadline.
    #[error("request body did not arrive before the request deadline")]
    RequestTimeout,
    /// The body could not be read.
    #[error("cannot read request body: {0}")]
    BodyRead(String),
    /// The body is not an AdmissionReview request.
    #[error(transparent)]
    InvalidReview(#[from] ReviewError),
    /// No such path.
    #[error("no such endpoint {0:?}: use POST /validate or POST /mutate")]
    NotFound(String),
    /// A handler panicked outside policy evaluation.
    #[error("internal error while handling the request")]
    Panicked,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusBody<'a> {
    api_version: &'static str,
    kind: &'static str,
    status: &'static str,
    message: String,
    reason: &'a str,
    code: u16,
}

impl ApiError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::BodiesBuffered | ApiError::BodiesBufferedNow => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::BodyRead(_) | ApiError::InvalidReview(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Panicked => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            ApiError::MethodNotAllowed => "MethodNotAllowed",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::PayloadTooLarge { .. } => "RequestEntityTooLarge",
            ApiError::RequestTimeout => "Timeout",
            ApiError::BodiesBuffered | ApiError::BodiesBufferedNow => "ServiceUnavailable",
            ApiError::BodyRead(_) | ApiError::InvalidReview(_) => "BadRequest",
            ApiError::NotFound(_) => "NotFound",
            ApiError::Panicked => "InternalError",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        // The message can quote the body (serde names values it could not read): log the
        // reason class only.
        tracing::warn!(
            code = status.as_u16(),
            reason = self.reason(),
            "request rejected"
        );
        let body = StatusBody {
            api_version: "v1",
            kind: "Status",
            status: "Failure",
            message: self.to_string(),
            reason: self.reason(),
            code: status.as_u16(),
        };
        let mut response = (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::to_vec(&body).unwrap_or_default(),
        )
            .into_response();
        if matches!(self, ApiError::MethodNotAllowed) {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        response
    }
}
