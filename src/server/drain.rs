use axum::extract::{Request, State};
use axum::http::{HeaderValue, Version, header};
use axum::middleware::Next;
use axum::response::Response;

use super::AppState;

/// While the server drains, HTTP/1.x answers carry `Connection: close`: the client reads its
/// answer and opens a new connection for the next request, instead of writing it to a
/// keep-alive connection the server is about to close unread. HTTP/2 clients learn of the
/// drain from GOAWAY, which tells them exactly which streams were served.
pub(super) async fn close_when_draining(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let http1 = request.version() < Version::HTTP_2;
    let mut response = next.run(request).await;
    if http1 && state.readiness.is_draining() {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
