//! The broker's errors, in Vault's format (`{"errors": ["…"]}`, `application/json`), mapped to
//! HTTP in one place: 400 invalid request, 403 permission denied, 404 missing, 405 wrong
//! method, 409 a write that lost to another, 413 a body over the limit, 500 internal (cause
//! logged, body generic), 502 when AWS throttles or fails, 503 (with `Retry-After`) when the
//! store is busy. Each error's [`Kind`] is decided here; Vault's format only renders it.
//!
//! AWS's errors map as Vault's AWS engine maps them: the request's fault (denied, not found,
//! malformed, a conflict, a quota) is a 400 with AWS's code and the service's message; AWS's side
//! or the way to it (throttling, a service failure, no answer) is a 502 with a generic message,
//! the cause logged with AWS's request id (and the request's own, from the span it runs in).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::aws::CloudError;
use crate::errors::Kind;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("{0}")]
    Invalid(String),
    #[error("permission denied")]
    PermissionDenied,
    /// A 403 with Vault's own message for it (`bad token`).
    #[error("{0}")]
    Forbidden(String),
    /// Vault answers a missing path or record with an empty error list.
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    NotFoundWithReason(String),
    #[error("unsupported operation")]
    MethodNotAllowed,
    /// Another request changed, or is changing, what this one writes: try again.
    #[error("{0}")]
    Conflict(String),
    /// The request body is larger than the broker takes.
    #[error("the request body is larger than {0} bytes")]
    TooLarge(usize),
    /// A 502 whose message the caller should see (IAM failed earlier in a revocation).
    #[error("{0}")]
    Upstream(String),
    /// The store is busy: a 503 with `Retry-After`.
    #[error("the store is busy; retry shortly")]
    Unavailable,
    /// A call to AWS failed on AWS's side or on the way to it: a 502 with a generic message.
    /// Displays the cause, for logs.
    #[error("{}", cloud_cause(.0))]
    Cloud(CloudError),
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

    pub fn kind(&self) -> Kind {
        match self {
            BrokerError::Invalid(_) => Kind::Invalid,
            BrokerError::PermissionDenied | BrokerError::Forbidden(_) => Kind::Forbidden,
            BrokerError::NotFound | BrokerError::NotFoundWithReason(_) => Kind::NotFound,
            BrokerError::MethodNotAllowed => Kind::MethodNotAllowed,
            BrokerError::Conflict(_) => Kind::Conflict,
            BrokerError::TooLarge(_) => Kind::TooLarge,
            BrokerError::Upstream(_) | BrokerError::Cloud(_) => Kind::Upstream,
            BrokerError::Unavailable => Kind::Unavailable,
            BrokerError::Internal(_) | BrokerError::Failed(_) => Kind::Internal,
        }
    }

    /// The HTTP status the error answers with: Vault answers a request that breaks a rule with
    /// a 400, where JSON:API's is a 422.
    pub fn status(&self) -> StatusCode {
        match self.kind() {
            Kind::Invalid => StatusCode::BAD_REQUEST,
            kind => kind.status(),
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
            BrokerError::Cloud(e) => {
                let fault = e.fault();
                tracing::error!(
                    operation = fault.operation(),
                    code = fault.code(),
                    aws_request_id = fault.request_id(),
                    error = %cloud_cause(e),
                    "AWS call failed"
                );
                vec![cloud_message(e).to_owned()]
            }
            other => vec![other.to_string()],
        };
        let body = json!({ "errors": errors }).to_string();
        let mut response = (self.status(), [(header::CONTENT_TYPE, "application/json")], body).into_response();
        response.headers_mut().extend(self.kind().headers());
        response
    }
}

impl From<StoreError> for BrokerError {
    fn from(e: StoreError) -> Self {
        match e {
            e if e.kind() == Kind::Unavailable => BrokerError::Unavailable,
            other => BrokerError::Internal(other.to_string()),
        }
    }
}

impl From<CloudError> for BrokerError {
    fn from(e: CloudError) -> Self {
        if e.is_on_aws_side() {
            BrokerError::Cloud(e)
        } else {
            // The operation, AWS's code and the service's message: never the SDK's debug output.
            BrokerError::Invalid(e.to_string())
        }
    }
}

/// The body of a 502 from AWS: what happened, in general terms.
fn cloud_message(e: &CloudError) -> &'static str {
    match e {
        CloudError::Throttled(_) => "AWS rate-limited the request; retry later",
        _ => "the request to AWS failed; the server log has the cause",
    }
}

/// Everything the log may hold about a failed AWS call.
fn cloud_cause(e: &CloudError) -> String {
    match e.fault().cause() {
        Some(cause) => format!("{e} ({cause})"),
        None => e.to_string(),
    }
}

impl From<crate::seal::SealError> for BrokerError {
    fn from(e: crate::seal::SealError) -> Self {
        BrokerError::Internal(e.to_string())
    }
}

pub type Result<T, E = BrokerError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::Fault;

    async fn answer(e: impl Into<BrokerError>) -> (u16, Vec<String>) {
        let response = e.into().into_response();
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("a body");
        let body: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        (status, serde_json::from_value(body["errors"].clone()).expect("a list of messages"))
    }

    fn answered(code: &str, on_aws_side: bool) -> Fault {
        let message = format!("the service's {code} at arn:aws:iam::123456789012:user/ci");
        Fault::answered("iam:CreateUser", code, Some(&message), Some("req-1".into()), on_aws_side)
    }

    #[tokio::test]
    async fn the_requests_faults_are_400s_with_the_aws_code_and_message() {
        let cases = [
            CloudError::Denied(answered("AccessDenied", false)),
            CloudError::Denied(answered("InvalidClientTokenId", false)),
            CloudError::NotFound(answered("NoSuchEntity", false)),
            CloudError::Invalid(answered("MalformedPolicyDocument", false)),
            CloudError::Other(answered("EntityAlreadyExists", false)),
            CloudError::Other(answered("DeleteConflict", false)),
            CloudError::LimitExceeded(answered("LimitExceeded", false)),
            CloudError::Invalid(answered("ValidationError", false)),
            CloudError::Invalid(answered("InvalidInput", false)),
        ];
        for e in cases {
            let code = e.fault().code().expect("a code").to_owned();
            let (status, errors) = answer(e).await;
            assert_eq!(status, 400, "{code}");
            assert_eq!(
                errors,
                [format!("iam:CreateUser: {code}: the service's {code} at arn:aws:iam::123456789012:user/ci")]
            );
        }
    }

    #[tokio::test]
    async fn aws_side_failures_are_502s_with_a_generic_message() {
        let cause = "dispatch failure: io error: tcp connect error: 10.9.8.7:443 (DispatchFailure { .. })";
        let cases = [
            (CloudError::Throttled(answered("Throttling", true)), "AWS rate-limited the request; retry later"),
            (
                CloudError::Other(answered("ServiceFailure", true)),
                "the request to AWS failed; the server log has the cause",
            ),
            (
                CloudError::Other(answered("ServiceUnavailable", true)),
                "the request to AWS failed; the server log has the cause",
            ),
            (
                CloudError::Other(Fault::unanswered("iam:CreateUser", "AWS could not be reached", cause.into(), None)),
                "the request to AWS failed; the server log has the cause",
            ),
        ];
        for (e, message) in cases {
            let shown = e.to_string();
            let logged = BrokerError::from(CloudError::Other(e.fault().clone())).to_string();
            assert!(logged.contains(&shown), "the log keeps the cause: {logged}");
            assert_eq!(answer(e).await, (502, vec![message.to_owned()]), "{shown}");
        }
        let logged = BrokerError::from(CloudError::Other(Fault::unanswered("x", "y", cause.into(), None)));
        assert!(logged.to_string().contains("10.9.8.7"), "the cause is for the log: {logged}");
    }
}
