//! Errors of the registry protocol, in its own format (`{"errors": ["…"]}`, as the public
//! registry answers), mapped to HTTP in one place.

use axum::extract::rejection::PathRejection;
use axum::http::header::InvalidHeaderValue;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::accounts::AccountsError;
use crate::api::refusal::Refusal;
use crate::api::ApiError;
use crate::blobs::BlobError;
use crate::errors::Kind;
use crate::registry::RegistryError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("no valid token: send `Authorization: Bearer <token>`")]
    Unauthorized,
    /// Missing, or not visible to the caller.
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    BadRequest(String),
    /// A revoked version: no longer offered to new consumers (410, and why).
    #[error("{0}")]
    Revoked(String),
    #[error("method not allowed")]
    MethodNotAllowed,
    /// The upstream public registry failed, timed out, or answered something unusable.
    #[error("{0}")]
    BadGateway(String),
    /// The store is busy: a 503 with `Retry-After`.
    #[error("the store is busy; retry shortly")]
    Unavailable,
    #[error("internal error: {0}")]
    Internal(String),
    /// One of axum's refusals (a body too large, …) that no other variant names.
    #[error("{1}")]
    Refused(StatusCode, String),
}

impl ProtocolError {
    fn kind(&self) -> Kind {
        match self {
            ProtocolError::Unauthorized => Kind::Unauthorized,
            ProtocolError::NotFound => Kind::NotFound,
            ProtocolError::BadRequest(_) => Kind::BadRequest,
            ProtocolError::Revoked(_) => Kind::Gone,
            ProtocolError::MethodNotAllowed => Kind::MethodNotAllowed,
            ProtocolError::BadGateway(_) => Kind::Upstream,
            ProtocolError::Unavailable => Kind::Unavailable,
            ProtocolError::Internal(_) => Kind::Internal,
            ProtocolError::Refused(status, _) => Kind::Refused(*status),
        }
    }

    /// One of axum's refusals, in the protocol's format (see `api::refusal`).
    pub fn refused(refusal: Refusal) -> Self {
        Self::of(Kind::of_refusal(refusal.status), refusal.detail)
    }

    /// The protocol's error for a failure of `kind` met elsewhere (the shared extractors, the
    /// families' domain functions): what the caller may not see, or names wrongly, is missing;
    /// a rule broken is the request's fault.
    fn of(kind: Kind, detail: String) -> Self {
        match kind {
            Kind::Unauthorized => ProtocolError::Unauthorized,
            Kind::NotFound | Kind::Forbidden => ProtocolError::NotFound,
            Kind::MethodNotAllowed => ProtocolError::MethodNotAllowed,
            Kind::Invalid | Kind::BadRequest => ProtocolError::BadRequest(detail),
            Kind::Unavailable => ProtocolError::Unavailable,
            kind if kind.is_server_fault() => ProtocolError::Internal(detail),
            kind => ProtocolError::Refused(kind.status(), detail),
        }
    }
}

impl IntoResponse for ProtocolError {
    fn into_response(self) -> Response {
        let message = match &self {
            ProtocolError::Internal(cause) => {
                tracing::error!(error = %cause, "internal error");
                "internal error".to_owned()
            }
            other => other.to_string(),
        };
        let body = json!({ "errors": [message] }).to_string();
        let kind = self.kind();
        let mut response = (kind.status(), [(header::CONTENT_TYPE, "application/json")], body).into_response();
        response.headers_mut().extend(kind.headers());
        response
    }
}

impl From<StoreError> for ProtocolError {
    fn from(e: StoreError) -> Self {
        Self::of(e.kind(), e.to_string())
    }
}

impl From<BlobError> for ProtocolError {
    fn from(e: BlobError) -> Self {
        ProtocolError::Internal(e.to_string())
    }
}

/// A header value built from a link or a path that a client could not be sent.
impl From<InvalidHeaderValue> for ProtocolError {
    fn from(e: InvalidHeaderValue) -> Self {
        ProtocolError::Internal(e.to_string())
    }
}

/// An organization the caller may not read, or whose name breaks the name rule, is as missing
/// as one that does not exist.
impl From<AccountsError> for ProtocolError {
    fn from(e: AccountsError) -> Self {
        match e.kind() {
            Kind::Invalid => ProtocolError::NotFound,
            kind => Self::of(kind, e.to_string()),
        }
    }
}

/// A path whose segments do not parse names no module.
impl From<PathRejection> for ProtocolError {
    fn from(_: PathRejection) -> Self {
        ProtocolError::NotFound
    }
}

impl From<RegistryError> for ProtocolError {
    fn from(e: RegistryError) -> Self {
        Self::of(e.kind(), e.to_string())
    }
}

/// The bearer-token rejection of the shared extractor, in this family's format.
impl From<ApiError> for ProtocolError {
    fn from(e: ApiError) -> Self {
        Self::of(e.kind, e.detail)
    }
}

pub type Result<T, E = ProtocolError> = std::result::Result<T, E>;
