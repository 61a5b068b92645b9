//! What kind of failure an error is, decided once where the error is made (each error type's
//! `kind()`), so that every wire format (JSON:API, the registry protocol, Vault's, the console)
//! only renders it: the same failure answers the same status in every family.
//!
//! The one rule every format shares beyond the status: a failure of kind [`Kind::Unavailable`]
//! (the store throttled the request) says when to try again, in a `Retry-After` header.

use axum::http::{header, HeaderName, HeaderValue, StatusCode};

/// The classes of failure, by what the caller can do about them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Missing, or not visible to the caller: the two answer alike on purpose.
    NotFound,
    /// No valid credentials.
    Unauthorized,
    /// The caller is known and may see the resource, but may not do this.
    Forbidden,
    /// The request breaks a rule about its input.
    Invalid,
    /// A request that names a resource the wrong way (a bad cursor, a malformed path): a 400.
    BadRequest,
    /// The request conflicts with the resource's state or with a concurrent write.
    Conflict,
    /// The resource is in a state that forbids the request (HCP's 412).
    PreconditionFailed,
    /// Withdrawn on purpose (a revoked module version).
    Gone,
    MethodNotAllowed,
    /// The request body is larger than the route takes.
    TooLarge,
    /// A refusal of the HTTP layer (axum's extractors) with a status no other kind names.
    Refused(StatusCode),
    /// Hangar's own dependency is busy (the store throttled the request): retry shortly.
    Unavailable,
    /// A service Hangar calls (AWS, a VCS provider, the public registry) failed or did not
    /// answer.
    Upstream,
    /// Hangar's own fault; the cause goes to the log, never to the caller.
    Internal,
}

/// How long a caller told [`Kind::Unavailable`] waits before it retries, in seconds.
pub const RETRY_AFTER_SECONDS: u32 = 1;

impl Kind {
    pub fn status(self) -> StatusCode {
        match self {
            Kind::NotFound => StatusCode::NOT_FOUND,
            Kind::Unauthorized => StatusCode::UNAUTHORIZED,
            Kind::Forbidden => StatusCode::FORBIDDEN,
            Kind::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
            Kind::BadRequest => StatusCode::BAD_REQUEST,
            Kind::Conflict => StatusCode::CONFLICT,
            Kind::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            Kind::Gone => StatusCode::GONE,
            Kind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Kind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Kind::Refused(status) => status,
            Kind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Kind::Upstream => StatusCode::BAD_GATEWAY,
            Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Whether the failure is Hangar's or its dependencies' (a 5xx), not the request's.
    pub fn is_server_fault(self) -> bool {
        self.status().is_server_error()
    }

    /// The headers every format adds for this kind: `Retry-After` on [`Kind::Unavailable`].
    pub fn headers(self) -> Option<(HeaderName, HeaderValue)> {
        (self == Kind::Unavailable).then(|| (header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS)))
    }

    /// The kind of one of axum's refusals, by the status it came with.
    pub fn of_refusal(status: StatusCode) -> Kind {
        match status {
            StatusCode::NOT_FOUND => Kind::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => Kind::MethodNotAllowed,
            StatusCode::BAD_REQUEST => Kind::BadRequest,
            StatusCode::PAYLOAD_TOO_LARGE => Kind::TooLarge,
            StatusCode::SERVICE_UNAVAILABLE => Kind::Unavailable,
            status if status.is_server_error() => Kind::Internal,
            status => Kind::Refused(status),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unavailable_answer_says_when_to_retry() {
        assert_eq!(Kind::Unavailable.headers(), Some((header::RETRY_AFTER, HeaderValue::from_static("1"))));
        for kind in [Kind::Internal, Kind::Upstream, Kind::NotFound, Kind::Conflict] {
            assert_eq!(kind.headers(), None, "{kind:?}");
        }
    }

    #[test]
    fn a_refusal_keeps_its_status() {
        for status in [400, 404, 405, 413, 415, 422, 500, 503] {
            let status = StatusCode::from_u16(status).expect("a status");
            assert_eq!(Kind::of_refusal(status).status(), status);
        }
    }
}
