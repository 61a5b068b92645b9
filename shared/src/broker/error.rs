//! The broker's errors, in Vault's format (`{"errors": ["…"]}`, `application/json`), mapped to
//! HTTP in one place: 400 invalid request, 403 permission denied, 404 missing, 405 wrong
//! method, 500 internal (cause logged, body generic), 502 when AWS throttles or fails.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("{0}")]
    Invalid(String),
    #[error("permission denied")]
    PermissionDenied,
    /// Vault answers a missing path or record with an empty error list.
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    NotFoundWithReason(String),
    #[error("unsupported operation")]
    MethodNotAllowed,
    #[error("{0}")]
    Upstream(String),
    /// A 500 whose message the caller should see (e.g. a generated username over its limit).
    #[error("{0}")]
    Failed(String),
    #[error("{0}")]
    Internal(String),
}

impl BrokerError {
    pub fn invalid(message: impl Into<String>) -> Self {
        BrokerError::Invalid(message.into())
    }

    fn status(&self) -> StatusCode {
        match self {
            BrokerError::Invalid(_) => StatusCode::BAD_REQUEST,
            BrokerError::PermissionDenied => StatusCode::FORBIDDEN,
            BrokerError::NotFound | BrokerError::NotFoundWithReason(_) => StatusCode::NOT_FOUND,
            BrokerError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            BrokerError::Upstream(_) => StatusCode::BAD_GATEWAY,
            BrokerError::Internal(_) | BrokerError::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for BrokerError {
    fn into_response(self) -> Response {
        let errors: Vec<String> = match &self {
            BrokerError::NotFound => Vec::new(),
            BrokerError::Internal(cause) => {
                tracing::error!(error = %cause, "internal error");
                vec!["internal error".to_owned()]
            }
            other => vec![other.to_string()],
        };
        let body = json!({ "errors": errors }).to_string();
        (self.status(), [(header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

impl From<StoreError> for BrokerError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Throttled => BrokerError::Upstream("the store is busy; retry shortly".into()),
            other => BrokerError::Internal(other.to_string()),
        }
    }
}

impl From<crate::aws::CloudError> for BrokerError {
    fn from(e: crate::aws::CloudError) -> Self {
        use crate::aws::CloudError as C;
        match e {
            C::Throttled(message) => BrokerError::Upstream(format!("AWS throttled the request: {message}")),
            C::Invalid(message) | C::LimitExceeded(message) | C::NotFound(message) => BrokerError::Invalid(message),
            C::Denied(message) => BrokerError::Upstream(format!("AWS refused the request: {message}")),
            C::Other(message) => BrokerError::Upstream(format!("AWS request failed: {message}")),
        }
    }
}

impl From<crate::seal::SealError> for BrokerError {
    fn from(e: crate::seal::SealError) -> Self {
        BrokerError::Internal(e.to_string())
    }
}

pub type Result<T, E = BrokerError> = std::result::Result<T, E>;
