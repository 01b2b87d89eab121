use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{Version, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{ApiError, AppState, permits_by};
use crate::admission::{
    AdmissionRequest, ObjectForm, ParsedReview, WantedObjects, parse_review_as,
    parse_review_unless_wanted,
};

/// A POSTed AdmissionReview body, read but not yet parsed, with the deadline for answering it.
///
/// Rejections are [`ApiError`]s: 415 unless the body is declared `application/json`, 413 over
/// the body limit (by Content-Length before reading, or while reading), 503 when the bodies
/// already held leave no room for it (`--max-buffered-body-bytes`: over HTTP/1.x until the
/// deadline, over HTTP/2 when a frame arrives), 408 when the body does not arrive before the
/// deadline.
#[derive(Debug)]
pub struct RawReviewBody {
    /// The body.
    pub bytes: Bytes,
    /// When the answer is due: `--request-timeout` from arrival, or sooner when the apiserver
    /// says so with `?timeout=`.
    pub deadline: Instant,
    /// The body's share of `--max-buffered-body-bytes`, given back when this is dropped.
    _buffered: Option<BufferedShare>,
}

/// A share of `--max-buffered-body-bytes`, counted in `portcullis_buffered_body_bytes` while
/// it is held.
#[derive(Debug)]
struct BufferedShare {
    permit: OwnedSemaphorePermit,
    shown: Gauge,
}

impl BufferedShare {
    fn new(permit: OwnedSemaphorePermit, shown: &Gauge) -> Self {
        shown.inc_by(i64::try_from(permit.num_permits()).unwrap_or(i64::MAX));
        BufferedShare {
            permit,
            shown: shown.clone(),
        }
    }

    fn add(&mut self, permit: OwnedSemaphorePermit) {
        self.shown
            .inc_by(i64::try_from(permit.num_permits()).unwrap_or(i64::MAX));
        self.permit.merge(permit);
    }
}

impl Drop for BufferedShare {
    fn drop(&mut self) {
        self.shown
            .dec_by(i64::try_from(self.permit.num_permits()).unwrap_or(i64::MAX));
    }
}

impl RawReviewBody {
    /// Parses the body, decoding the objects `wants` asks for from the request's envelope
    /// ([`parse_review_for`]); 400 when it is not an AdmissionReview request.
    pub fn parse(
        &self,
        wants: &dyn Fn(&AdmissionRequest) -> WantedObjects,
        form: ObjectForm,
    ) -> Result<AdmissionReviewBody, ApiError> {
        let review = parse_review_as(&self.bytes, wants, form)?;
        Ok(self.parsed(review))
    }

    /// Parses the body as [`RawReviewBody::parse`] does when `wants` asks for neither
    /// object; `None`, having read only the envelope, when it asks for one
    /// ([`parse_review_unless_wanted`]).
    pub fn parse_unless_wanted(
        &self,
        wants: &dyn Fn(&AdmissionRequest) -> WantedObjects,
    ) -> Result<Option<AdmissionReviewBody>, ApiError> {
        let review = parse_review_unless_wanted(&self.bytes, wants)?;
        Ok(review.map(|review| self.parsed(review)))
    }

    fn parsed(&self, review: ParsedReview) -> AdmissionReviewBody {
        AdmissionReviewBody {
            review,
            deadline: self.deadline,
            size: self.bytes.len(),
        }
    }
}

/// A POSTed AdmissionReview request, parsed, with the deadline for answering it.
#[derive(Debug)]
pub struct AdmissionReviewBody {
    /// The parsed review.
    pub review: ParsedReview,
    /// When the answer is due: `--request-timeout` from arrival, or sooner when the apiserver
    /// says so with `?timeout=`.
    pub deadline: Instant,
    /// The body's length in bytes.
    pub size: usize,
}

fn is_json(content_type: &str) -> bool {
    let media_type = content_type.split(';').next().unwrap_or("").trim();
    media_type.eq_ignore_ascii_case("application/json")
}

/// The apiserver calls webhooks with `?timeout=10s` (the configured `timeoutSeconds`).
fn apiserver_timeout(query: Option<&str>) -> Option<Duration> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("timeout="))
        .and_then(|value| humantime::parse_duration(value).ok())
}

/// Takes `share` bytes of `--max-buffered-body-bytes`, waiting for them until `deadline`.
async fn take_buffered_share(
    state: &AppState,
    share: usize,
    deadline: Instant,
) -> Result<BufferedShare, ApiError> {
    let share = u32::try_from(share).unwrap_or(u32::MAX);
    let permit = permits_by(&state.body_budget, share, deadline)
        .await
        .ok_or(ApiError::BodiesBuffered)?;
    Ok(BufferedShare::new(
        permit,
        &state.metrics.buffered_body_bytes,
    ))
}

impl FromRequest<Arc<AppState>> for RawReviewBody {
    type Rejection = ApiError;

    async fn from_request(
        request: Request,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let arrived = Instant::now();
        let headers = request.headers();
        let content_type = match headers.get(header::CONTENT_TYPE) {
            Some(value) => value.to_str().unwrap_or("<not text>"),
            None => "",
        };
        if !is_json(content_type) {
            return Err(ApiError::UnsupportedMediaType(content_type.to_owned()));
        }
        let limit = state.settings.max_body_bytes;
        let declared_length = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        if declared_length.is_some_and(|length| length > limit as u64) {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        let mut timeout = state.settings.request_timeout;
        if let Some(asked) = apiserver_timeout(request.uri().query()) {
            timeout = timeout.min(asked);
        }
        let deadline = arrived + timeout;
        let budget_cap = state
            .settings
            .max_buffered_body_bytes
            .clamp(1, Semaphore::MAX_PERMITS);
        // Over HTTP/1.x, room for the body among those held is taken before it is read: a
        // request that finds none leaves its body in the connection, where TCP holds back the
        // sender. Over HTTP/2 a stream left unread keeps its data in the connection's
        // flow-control window, which would hold back the streams that have room: there each
        // frame takes its room as it arrives, and a stream that finds none is refused at once.
        let over_http2 = request.version() == Version::HTTP_2;
        let buffered = if over_http2 {
            None
        } else {
            let share = declared_length
                .map_or(limit, |length| usize::try_from(length).unwrap_or(limit))
                .min(budget_cap);
            Some(take_buffered_share(state, share, deadline).await?)
        };
        let body = Limited::new(request.into_body(), limit);
        let read = async {
            if over_http2 {
                read_taking_room(body, state, budget_cap, limit).await
            } else {
                let collected = body.collect().await.map_err(|e| read_error(e, limit))?;
                Ok((collected.to_bytes(), buffered))
            }
        };
        let (bytes, buffered) = match tokio::time::timeout_at(deadline.into(), read).await {
            Err(_) => return Err(ApiError::RequestTimeout),
            Ok(result) => result?,
        };
        Ok(RawReviewBody {
            bytes,
            deadline,
            _buffered: buffered,
        })
    }
}

fn read_error(error: axum::BoxError, limit: usize) -> ApiError {
    if error.downcast_ref::<LengthLimitError>().is_some() {
        ApiError::PayloadTooLarge { limit }
    } else {
        ApiError::BodyRead(error.to_string())
    }
}

/// Reads an HTTP/2 body frame by frame, taking each frame's bytes of `state.body_budget` as
/// it arrives, without waiting; a body that has taken `cap` takes no more, so one larger than
/// the whole budget is read when it is alone. [`ApiError::BodiesBufferedNow`] when a frame
/// finds no room.
async fn read_taking_room(
    mut body: Limited<axum::body::Body>,
    state: &AppState,
    cap: usize,
    limit: usize,
) -> Result<(Bytes, Option<BufferedShare>), ApiError> {
    let mut held: Option<BufferedShare> = None;
    let mut taken = 0usize;
    let mut chunks: Vec<Bytes> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| read_error(e, limit))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let share = data.len().min(cap - taken);
        if share > 0 {
            let share = u32::try_from(share).map_err(|_| ApiError::BodiesBufferedNow)?;
            let permit = state
                .body_budget
                .clone()
                .try_acquire_many_owned(share)
                .map_err(|_| ApiError::BodiesBufferedNow)?;
            taken += share as usize;
            match &mut held {
                Some(held) => held.add(permit),
                None => {
                    held = Some(BufferedShare::new(
                        permit,
                        &state.metrics.buffered_body_bytes,
                    ))
                }
            }
        }
        chunks.push(data);
    }
    let bytes = if chunks.len() == 1 {
        chunks.pop().unwrap_or_default()
    } else {
        Bytes::from(chunks.concat())
    };
    Ok((bytes, held))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_media_types() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(!is_json("application/yaml"));
        assert!(!is_json(""));
    }

    #[test]
    fn reads_the_apiserver_timeout() {
        assert_eq!(
            apiserver_timeout(Some("timeout=10s")),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            apiserver_timeout(Some("a=b&timeout=500ms")),
            Some(Duration::from_millis(500))
        );
        assert_eq!(apiserver_timeout(Some("timeout=soon")), None);
        assert_eq!(apiserver_timeout(None), None);
    }
}
