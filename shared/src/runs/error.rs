//! The runs family's errors, mapped to JSON:API errors in one place.

use axum::response::{IntoResponse, Response};

use crate::accounts::AccountsError;
use crate::api::{ApiError, Field};
use crate::blobs::BlobError;
use crate::errors::Kind;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    /// Finding the workspace or its variables: their errors as accounts gives them.
    #[error(transparent)]
    Workspace(#[from] AccountsError),
    /// Missing, or not for the caller to see: the two are indistinguishable on purpose.
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Forbidden(String),
    #[error("{detail}")]
    Invalid { field: Field, detail: String },
    /// The run's status forbids the action (HCP answers 409).
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    TooLarge(String),
    #[error("The link's signature is invalid or has expired.")]
    BadLink,
    /// The job token's job is no longer the run's (it ended, or its lease was lost).
    #[error("{0}")]
    JobOver(String),
    #[error("no link signing key is configured (HANGAR_LINK_KEY_SECRET_ARN)")]
    NoLinkKey,
    /// A run about to apply no longer holds its workspace's lock (it was forced open).
    #[error("the run no longer holds its workspace's lock")]
    LockLost,
    /// A service the request needs (the identity key) failed; the cause is logged.
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Blob(#[from] BlobError),
}

impl RunsError {
    pub fn invalid(field: Field, detail: impl Into<String>) -> Self {
        RunsError::Invalid { field, detail: detail.into() }
    }

    pub fn kind(&self) -> Kind {
        match self {
            RunsError::Workspace(e) => e.kind(),
            RunsError::NotFound => Kind::NotFound,
            RunsError::Forbidden(_) | RunsError::BadLink => Kind::Forbidden,
            RunsError::Invalid { .. } => Kind::Invalid,
            RunsError::Conflict(_) | RunsError::LockLost => Kind::Conflict,
            // Distinct from a conflict, which an agent retries: its job is over (HTTP 410).
            RunsError::JobOver(_) => Kind::Gone,
            RunsError::TooLarge(_) => Kind::TooLarge,
            RunsError::Unavailable(_) => Kind::Unavailable,
            RunsError::Store(e) => e.kind(),
            RunsError::Blob(_) | RunsError::NoLinkKey => Kind::Internal,
        }
    }
}

impl From<RunsError> for ApiError {
    fn from(e: RunsError) -> Self {
        match e {
            RunsError::Workspace(e) => e.into(),
            RunsError::Forbidden(detail) => ApiError::forbidden(detail),
            RunsError::BadLink => ApiError::forbidden(e.to_string()),
            RunsError::Invalid { field, detail } => ApiError::invalid(field.pointer(), detail),
            RunsError::TooLarge(detail) => ApiError::new(Kind::TooLarge, "payload too large", detail),
            other => ApiError::of(other.kind(), other.to_string()),
        }
    }
}

impl IntoResponse for RunsError {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

pub type Result<T, E = RunsError> = std::result::Result<T, E>;
