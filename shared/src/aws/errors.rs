//! Turns SDK failures into [`CloudError`]s by AWS error code, so that the broker can answer
//! "not found", "throttled" or "denied" without knowing the SDK's per-operation error types.

use aws_sdk_iam::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use chrono::{DateTime, Utc};

use super::CloudError;

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
    let Some(code) = err.code() else {
        return CloudError::Other(format!("{operation}: {}", DisplayErrorContext(&err)));
    };
    let message = match err.message() {
        Some(message) => format!("{operation}: {code}: {message}"),
        None => format!("{operation}: {code}"),
    };
    let is = |codes: &[&str]| codes.contains(&code);
    if is(NOT_FOUND) {
        CloudError::NotFound(message)
    } else if is(LIMIT_EXCEEDED) {
        CloudError::LimitExceeded(message)
    } else if is(THROTTLED) {
        CloudError::Throttled(message)
    } else if is(DENIED) {
        CloudError::Denied(message)
    } else if is(INVALID) {
        CloudError::Invalid(message)
    } else {
        CloudError::Other(message)
    }
}

/// A response that lacks a part AWS always sends.
pub(super) fn incomplete(operation: &str, part: &str) -> CloudError {
    CloudError::Other(format!("{operation}: the response carries no {part}"))
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
