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
    #[error("internal error: {0}")]
    Internal(String),
    /// One of axum's refusals (a body too large, …) that no other variant names.
    #[error("{1}")]
    Refused(StatusCode, String),
}

impl ProtocolError {
    fn status(&self) -> StatusCode {
        match self {
            ProtocolError::Unauthorized => StatusCode::UNAUTHORIZED,
            ProtocolError::NotFound => StatusCode::NOT_FOUND,
            ProtocolError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ProtocolError::Revoked(_) => StatusCode::GONE,
            ProtocolError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ProtocolError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            ProtocolError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ProtocolError::Refused(status, _) => *status,
        }
    }

    /// One of axum's refusals, in the protocol's format (see `api::refusal`).
    pub fn refused(refusal: Refusal) -> Self {
        match refusal.status {
            StatusCode::NOT_FOUND => ProtocolError::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => ProtocolError::MethodNotAllowed,
            StatusCode::BAD_REQUEST => ProtocolError::BadRequest(refusal.detail),
            status if status.is_server_error() => ProtocolError::Internal(refusal.detail),
            status => ProtocolError::Refused(status, refusal.detail),
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
        (self.status(), [(header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

impl From<StoreError> for ProtocolError {
    fn from(e: StoreError) -> Self {
        ProtocolError::Internal(e.to_string())
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

/// An organization the caller may not read is as missing as one that does not exist.
impl From<AccountsError> for ProtocolError {
    fn from(e: AccountsError) -> Self {
        match e {
            AccountsError::NotFound | AccountsError::Forbidden(_) | AccountsError::Invalid { .. } => {
                ProtocolError::NotFound
            }
            other => ProtocolError::Internal(other.to_string()),
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
        match e {
            RegistryError::NotFound
            | RegistryError::CurationDisabled
            | RegistryError::Forbidden(_)
            | RegistryError::Unauthorized => ProtocolError::NotFound,
            RegistryError::Invalid { detail, .. } => ProtocolError::BadRequest(detail),
            other => ProtocolError::Internal(other.to_string()),
        }
    }
}

/// The bearer-token rejection of the shared extractor, in this family's format.
impl From<ApiError> for ProtocolError {
    fn from(e: ApiError) -> Self {
        match e.status {
            StatusCode::UNAUTHORIZED => ProtocolError::Unauthorized,
            StatusCode::NOT_FOUND => ProtocolError::NotFound,
            status if status.is_client_error() => ProtocolError::BadRequest(e.detail),
            _ => ProtocolError::Internal(e.detail),
        }
    }
}

pub type Result<T, E = ProtocolError> = std::result::Result<T, E>;
