//! The base URL links are built on.

use axum::extract::FromRequestParts;
use axum::http::{header, request::Parts};

use super::ApiError;
use crate::state::AppState;

/// `HANGAR_PUBLIC_URL` when set, else the request's own scheme (`X-Forwarded-Proto`, as API
/// Gateway sends it) and host.
#[derive(Debug, Clone)]
pub struct BaseUrl(pub String);

impl FromRequestParts<AppState> for BaseUrl {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(url) = &state.config.public_url {
            return Ok(BaseUrl(url.clone()));
        }
        let header = |name| parts.headers.get(name).and_then(|v: &header::HeaderValue| v.to_str().ok());
        let host = header(header::HOST).or_else(|| parts.uri.authority().map(|a| a.as_str())).unwrap_or("localhost");
        let scheme = header(header::HeaderName::from_static("x-forwarded-proto")).unwrap_or("http");
        Ok(BaseUrl(format!("{scheme}://{host}")))
    }
}
