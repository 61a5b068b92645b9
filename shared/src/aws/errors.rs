//! Turns SDK failures into [`CloudError`]s by AWS error code, so that the broker can answer
//! "not found", "throttled" or "denied" without knowing the SDK's per-operation error types.
//! A [`Fault`] keeps AWS's code and message for the caller; the SDK's own account of a failure
//! without a code (`DisplayErrorContext`: endpoints, addresses, raw responses) goes only to its
//! `cause`, for the log.

use aws_sdk_iam::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_iam::operation::RequestId;
use chrono::{DateTime, Utc};

use super::{CloudError, Fault};

const NOT_FOUND: &[&str] = &["NoSuchEntity", "NoSuchEntityException"];
const LIMIT_EXCEEDED: &[&str] = &["LimitExceeded", "LimitExceededException"];
const THROTTLED: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "SlowDown",
    "PriorRequestNotComplete",
];
const DENIED: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "InvalidClientTokenId",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "MissingAuthenticationToken",
    "UnrecognizedClientException",
    "ExpiredToken",
    "ExpiredTokenException",
    "RegionDisabledException",
];
/// Failures on AWS's side: the request may be fine, and the caller learns nothing from them.
const UNAVAILABLE: &[&str] = &[
    "ServiceFailure",
    "ServiceFailureException",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "InternalFailure",
    "InternalError",
    "InternalServerError",
    "RequestTimeout",
    "RequestTimeoutException",
    "IDPCommunicationError",
];
const INVALID: &[&str] = &[
    "ValidationError",
    "ValidationException",
    "InvalidInput",
    "InvalidParameterValue",
    "InvalidParameterCombination",
    "MissingParameter",
    "MalformedPolicyDocument",
    "PackedPolicyTooLarge",
    "PolicyNotAttachable",
];

/// Classifies the failure of an SDK call, named by its `operation` (e.g. `iam:GetUser`).
pub(super) trait OrCloudError<T> {
    fn or_cloud(self, operation: &str) -> Result<T, CloudError>;
}

impl<T, E> OrCloudError<T> for Result<T, SdkError<E>>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    fn or_cloud(self, operation: &str) -> Result<T, CloudError> {
        self.map_err(|err| classify(operation, err))
    }
}

fn classify<E>(operation: &str, err: SdkError<E>) -> CloudError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    // The query protocol (IAM, STS) carries the request id in the error document, others in a header.
    let request_id = err.meta().request_id().or_else(|| RequestId::request_id(&err)).map(str::to_owned);
    let status = err.raw_response().map(|raw| raw.status().as_u16());
    let Some(code) = err.code() else {
        let what = match (&err, status) {
            (SdkError::TimeoutError(_), _) => "AWS did not answer in time".to_owned(),
            (SdkError::DispatchFailure(failure), _) if failure.is_timeout() => "AWS did not answer in time".to_owned(),
            (SdkError::DispatchFailure(_), _) => "AWS could not be reached".to_owned(),
            (_, Some(status)) => format!("an answer (HTTP {status}) that holds no AWS error"),
            _ => "the request could not be sent".to_owned(),
        };
        let cause = DisplayErrorContext(&err).to_string();
        return CloudError::Other(Fault::unanswered(operation, &what, cause, request_id));
    };
    let fault = |on_aws_side| Fault::answered(operation, code, err.message(), request_id.clone(), on_aws_side);
    let is = |codes: &[&str]| codes.contains(&code);
    if is(NOT_FOUND) {
        CloudError::NotFound(fault(false))
    } else if is(LIMIT_EXCEEDED) {
        CloudError::LimitExceeded(fault(false))
    } else if is(THROTTLED) {
        CloudError::Throttled(fault(true))
    } else if is(DENIED) {
        CloudError::Denied(fault(false))
    } else if is(INVALID) {
        CloudError::Invalid(fault(false))
    } else {
        // A conflict (`EntityAlreadyExists`, `DeleteConflict`) or a code not listed: the HTTP
        // status says whose fault it is.
        CloudError::Other(fault(is(UNAVAILABLE) || status.is_some_and(|status| status >= 500)))
    }
}

/// A response that lacks a part AWS always sends.
pub(super) fn incomplete(operation: &str, part: &str) -> CloudError {
    let cause = format!("the response carries no {part}");
    CloudError::Other(Fault::unanswered(operation, "an incomplete answer", cause, None))
}

/// Treats an entity already gone as done (or as having nothing left), for idempotent deletion.
pub(super) fn unless_gone<T: Default>(result: Result<T, CloudError>) -> Result<T, CloudError> {
    match result {
        Err(CloudError::NotFound(_)) => Ok(T::default()),
        other => other,
    }
}

/// An SDK timestamp as a chrono one; `None` if out of chrono's range.
pub(super) fn timestamp(time: &aws_sdk_iam::primitives::DateTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(time.secs(), time.subsec_nanos())
}

#[cfg(test)]
mod tests {
    use aws_sdk_iam::config::http::HttpResponse;
    use aws_sdk_iam::error::{ConnectorError, ErrorMetadata};
    use aws_sdk_iam::operation::put_user_policy::PutUserPolicyError;

    use super::*;

    fn answered(status: u16, code: &str) -> SdkError<PutUserPolicyError> {
        let meta = ErrorMetadata::builder()
            .code(code)
            .message(format!("the service's {code}"))
            .custom("aws_request_id", "req-1")
            .build();
        let raw = HttpResponse::new(status.try_into().expect("a status"), "<ErrorResponse/>".into());
        SdkError::service_error(PutUserPolicyError::generic(meta), raw)
    }

    #[test]
    fn each_code_has_its_kind_and_side() {
        let cases = [
            (400, "AccessDenied", "Denied", false),
            (403, "InvalidClientTokenId", "Denied", false),
            (404, "NoSuchEntity", "NotFound", false),
            (400, "MalformedPolicyDocument", "Invalid", false),
            (409, "EntityAlreadyExists", "Other", false),
            (409, "DeleteConflict", "Other", false),
            (409, "LimitExceeded", "LimitExceeded", false),
            (400, "ValidationError", "Invalid", false),
            (400, "InvalidInput", "Invalid", false),
            (400, "SomethingNew", "Other", false),
            (400, "Throttling", "Throttled", true),
            (500, "ServiceFailure", "Other", true),
            (503, "ServiceUnavailable", "Other", true),
            (500, "SomethingBroke", "Other", true),
        ];
        for (status, code, expected, on_aws_side) in cases {
            let err = classify("iam:PutUserPolicy", answered(status, code));
            assert_eq!((err.kind(), err.is_on_aws_side()), (expected, on_aws_side), "{code}");
            assert_eq!(err.to_string(), format!("iam:PutUserPolicy: {code}: the service's {code}"));
            assert_eq!(err.fault().code(), Some(code));
            assert_eq!(err.fault().request_id(), Some("req-1"));
            assert_eq!(err.fault().cause(), None);
        }
    }

    #[test]
    fn a_failure_without_a_code_is_on_aws_side_and_keeps_the_sdks_account_for_the_log() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connect to 10.9.8.7:443 refused");
        let cases: [(SdkError<PutUserPolicyError>, &str); 3] = [
            (SdkError::dispatch_failure(ConnectorError::io(io.into())), "AWS could not be reached"),
            (SdkError::timeout_error("operation timeout (all attempts including retries) occurred"), "in time"),
            (
                SdkError::response_error(
                    "unexpected body",
                    HttpResponse::new(502.try_into().expect("a status"), "<html>proxy at 10.9.8.7</html>".into()),
                ),
                "HTTP 502",
            ),
        ];
        for (err, what) in cases {
            let err = classify("sts:GetSessionToken", err);
            assert!(matches!(err, CloudError::Other(_)) && err.is_on_aws_side(), "{err:?}");
            let summary = err.to_string();
            assert!(summary.starts_with("sts:GetSessionToken: ") && summary.contains(what), "{summary}");
            assert!(!summary.contains("10.9.8.7") && !summary.contains('{'), "{summary}");
            assert!(err.fault().cause().is_some_and(|cause| !cause.is_empty()), "{err:?}");
        }
    }
}
