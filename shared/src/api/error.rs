//! JSON:API error objects: `{"errors": [{"status", "title", "detail", "source"}]}`.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::JSONAPI;

/// One error, rendered as a JSON:API error document. Families map their own error types into
/// this in one place each; 5xx details are generic and the cause is logged instead.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub title: &'static str,
    pub detail: String,
    /// `source.pointer` (a JSON pointer into the request body) or `source.parameter`.
    pub source: Option<(&'static str, String)>,
}

impl ApiError {
    pub fn new(status: StatusCode, title: &'static str, detail: impl Into<String>) -> Self {
        Self { status, title, detail: detail.into(), source: None }
    }

    pub fn not_found() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not found",
            "The requested resource was not found, or you are not authorized to access it.",
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "A valid API token is required in the Authorization header.",
        )
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", detail)
    }

    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad request", detail)
    }

    /// A 422 about one member of the request body.
    pub fn invalid(pointer: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            source: Some(("pointer", pointer.into())),
            ..Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid attribute", detail)
        }
    }

    /// A 422 about one query parameter.
    pub fn invalid_parameter(parameter: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            source: Some(("parameter", parameter.into())),
            ..Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid query parameter", detail)
        }
    }

    pub fn method_not_allowed() -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed", "This resource does not support that method.")
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", detail)
    }

    /// A 500 whose body says nothing about the cause; the cause goes to the log.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal server error",
            "The server could not complete the request.",
        )
    }

    pub fn to_json(&self) -> Value {
        let mut error = json!({
            "status": self.status.as_str(),
            "title": self.title,
            "detail": self.detail,
        });
        if let Some((kind, location)) = &self.source {
            error["source"] = json!({ *kind: location });
        }
        json!({ "errors": [error] })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, [(header::CONTENT_TYPE, JSONAPI)], self.to_json().to_string()).into_response()
    }
}

/// A secret that cannot be sealed or unsealed (a KMS outage, a damaged key file) is a server
/// fault whatever the family: a generic 500, the cause in the log.
impl From<crate::seal::SealError> for ApiError {
    fn from(e: crate::seal::SealError) -> Self {
        ApiError::internal(format_args!("sealer: {e}"))
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        match e {
            crate::store::StoreError::InvalidCursor => ApiError::bad_request("invalid page cursor"),
            crate::store::StoreError::Throttled => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "service unavailable",
                "The store is busy; retry shortly.",
            ),
            other => ApiError::internal(other),
        }
    }
}
