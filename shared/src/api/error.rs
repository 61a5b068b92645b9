//! JSON:API error objects: `{"errors": [{"status", "title", "detail", "source"}]}`.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::JSONAPI;
use crate::errors::Kind;

/// One error, rendered as a JSON:API error document. Families map their own error types into
/// this in one place each, by the error's [`Kind`]; 5xx details are generic and the cause is
/// logged instead.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub kind: Kind,
    pub title: &'static str,
    pub detail: String,
    /// `source.pointer` (a JSON pointer into the request body) or `source.parameter`.
    pub source: Option<(&'static str, String)>,
}

impl ApiError {
    pub fn new(kind: Kind, title: &'static str, detail: impl Into<String>) -> Self {
        Self { kind, title, detail: detail.into(), source: None }
    }

    /// An error of `kind` with its usual title; a server fault's `detail` goes to the log and the
    /// caller reads a generic text.
    pub fn of(kind: Kind, detail: impl Into<String> + std::fmt::Display) -> Self {
        match kind {
            Kind::NotFound => Self::not_found(),
            Kind::Unavailable => Self::unavailable(),
            kind if kind.is_server_fault() => Self::internal(detail),
            kind => Self::new(kind, title(kind), detail),
        }
    }

    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }

    pub fn not_found() -> Self {
        Self::new(
            Kind::NotFound,
            "not found",
            "The requested resource was not found, or you are not authorized to access it.",
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(Kind::Unauthorized, "unauthorized", "A valid API token is required in the Authorization header.")
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(Kind::Forbidden, "forbidden", detail)
    }

    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(Kind::BadRequest, "bad request", detail)
    }

    /// A 422 about one member of the request body.
    pub fn invalid(pointer: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { source: Some(("pointer", pointer.into())), ..Self::new(Kind::Invalid, "invalid attribute", detail) }
    }

    /// A 422 about one query parameter.
    pub fn invalid_parameter(parameter: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            source: Some(("parameter", parameter.into())),
            ..Self::new(Kind::Invalid, "invalid query parameter", detail)
        }
    }

    pub fn method_not_allowed() -> Self {
        Self::new(Kind::MethodNotAllowed, "method not allowed", "This resource does not support that method.")
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(Kind::Conflict, "conflict", detail)
    }

    /// A 503: the store is busy, and `Retry-After` says when to try again.
    pub fn unavailable() -> Self {
        Self::new(Kind::Unavailable, "service unavailable", "The store is busy; retry shortly.")
    }

    /// A 500 whose body says nothing about the cause; the cause goes to the log.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(Kind::Internal, "internal server error", "The server could not complete the request.")
    }

    pub fn to_json(&self) -> Value {
        let mut error = json!({
            "status": self.status().as_str(),
            "title": self.title,
            "detail": self.detail,
        });
        if let Some((kind, location)) = &self.source {
            error["source"] = json!({ *kind: location });
        }
        json!({ "errors": [error] })
    }
}

/// A JSON:API error title: the status's reason in lower case.
fn title(kind: Kind) -> &'static str {
    match kind {
        Kind::NotFound => "not found",
        Kind::Unauthorized => "unauthorized",
        Kind::Forbidden => "forbidden",
        Kind::Invalid => "invalid attribute",
        Kind::BadRequest => "bad request",
        Kind::Conflict => "conflict",
        Kind::PreconditionFailed => "precondition failed",
        Kind::Gone => "gone",
        Kind::MethodNotAllowed => "method not allowed",
        Kind::TooLarge => "payload too large",
        Kind::Refused(StatusCode::UNSUPPORTED_MEDIA_TYPE) => "unsupported media type",
        Kind::Refused(StatusCode::UNPROCESSABLE_ENTITY) => "unprocessable entity",
        Kind::Refused(StatusCode::REQUEST_TIMEOUT) => "request timeout",
        Kind::Refused(StatusCode::LENGTH_REQUIRED) => "length required",
        Kind::Refused(_) => "request refused",
        Kind::Unavailable => "service unavailable",
        Kind::Upstream | Kind::Internal => "internal server error",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response =
            (self.status(), [(header::CONTENT_TYPE, JSONAPI)], self.to_json().to_string()).into_response();
        response.headers_mut().extend(self.kind.headers());
        response
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
        ApiError::of(e.kind(), e.to_string())
    }
}
