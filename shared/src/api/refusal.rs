//! axum's own refusals, in a family's error format. An extractor's rejection (a path segment that
//! is not UTF-8, a body that is not JSON or is too large) and a route's 405 come from axum as
//! bare text, or no body at all; each family wraps its routes with [`render_refusals`] and its
//! renderer, so that every answer under its paths is in its own format.

use axum::body::to_bytes;
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use crate::errors::Kind;

/// The longest refusal text kept: axum's are one line.
const MAX_TEXT: usize = 4096;

/// What axum refused a request with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    /// axum's text, or the status's reason when it sent none.
    pub detail: String,
}

/// Whether a response is one of axum's refusals: an error status with a plain-text body or none
/// (every family's own errors carry their JSON media type).
fn is_bare(response: &Response) -> bool {
    let status = response.status();
    let plain = match response.headers().get(header::CONTENT_TYPE) {
        None => true,
        Some(kind) => kind.to_str().is_ok_and(|kind| kind.starts_with("text/plain")),
    };
    (status.is_client_error() || status.is_server_error()) && plain
}

/// Runs the request and renders a bare refusal with `render`, keeping its `Allow` header.
pub async fn render_refusals<E: IntoResponse>(request: Request, next: Next, render: fn(Refusal) -> E) -> Response {
    let response = next.run(request).await;
    if !is_bare(&response) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = to_bytes(body, MAX_TEXT).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_owned();
    let detail = if text.is_empty() { parts.status.canonical_reason().unwrap_or("error").to_owned() } else { text };
    let mut rendered = render(Refusal { status: parts.status, detail }).into_response();
    if let Some(allow) = parts.headers.get(header::ALLOW) {
        rendered.headers_mut().insert(header::ALLOW, allow.clone());
    }
    rendered
}

/// The JSON:API families' renderer (`/api/v2`, the agent gateway, the upload links).
pub fn json_api(refusal: Refusal) -> ApiError {
    match Kind::of_refusal(refusal.status) {
        Kind::MethodNotAllowed => ApiError::method_not_allowed(),
        kind => ApiError::of(kind, refusal.detail),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::HeaderValue;
    use axum::routing::get;
    use axum::Router;
    use tower::ServiceExt;

    use super::*;

    async fn answer(router: Router, method: &str, uri: &str) -> (StatusCode, String, Option<String>, String) {
        let request = Request::builder().method(method).uri(uri).body(Body::empty()).unwrap();
        let response = router.oneshot(request).await.unwrap();
        let header = |name| response.headers().get(name).map(|v: &HeaderValue| v.to_str().unwrap().to_owned());
        let (kind, allow) = (header(header::CONTENT_TYPE).unwrap_or_default(), header(header::ALLOW));
        let status = response.status();
        let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, kind, allow, String::from_utf8(body.to_vec()).unwrap())
    }

    fn router() -> Router {
        let path = |axum::extract::Path(id): axum::extract::Path<String>| async move { id };
        Router::new()
            .route("/things/{id}", get(path))
            .layer(axum::middleware::from_fn(|request, next| render_refusals(request, next, json_api)))
    }

    #[tokio::test]
    async fn axums_refusals_are_rendered_and_answers_pass_unchanged() {
        let (status, kind, _, body) = answer(router(), "GET", "/things/%FF").await;
        assert_eq!((status, kind.as_str()), (StatusCode::BAD_REQUEST, super::super::JSONAPI));
        assert!(body.contains("UTF-8"), "axum's reason is kept: {body}");
        let (status, kind, allow, _) = answer(router(), "DELETE", "/things/a").await;
        assert_eq!(
            (status, kind.as_str(), allow.as_deref()),
            (StatusCode::METHOD_NOT_ALLOWED, super::super::JSONAPI, Some("GET,HEAD"))
        );
        let (status, kind, _, body) = answer(router(), "GET", "/things/a").await;
        assert_eq!((status, kind.as_str(), body.as_str()), (StatusCode::OK, "text/plain; charset=utf-8", "a"));
    }
}
