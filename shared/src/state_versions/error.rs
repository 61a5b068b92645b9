//! The state-versions family's errors, mapped to JSON:API errors in one place.

use axum::response::{IntoResponse, Response};

use crate::accounts::AccountsError;
use crate::api::{ApiError, Field};
use crate::blobs::BlobError;
use crate::errors::Kind;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Finding the workspace: its errors as accounts gives them.
    #[error(transparent)]
    Workspace(#[from] AccountsError),
    /// Missing, or not for the caller to see: the two are indistinguishable on purpose.
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Forbidden(String),
    #[error("{detail}")]
    Invalid { field: Field, detail: String },
    /// The workspace's state forbids the write (not locked by the caller, an older serial, …).
    #[error("{0}")]
    Conflict(String),
    #[error("The state is {size} bytes, over this Hangar's limit of {limit} bytes (HANGAR_MAX_STATE_BYTES).")]
    TooLarge { size: u64, limit: u64 },
    #[error("The link's signature is invalid or has expired.")]
    BadLink,
    /// No key signs links in this process (a deployed function not given one).
    #[error("no link signing key is configured (HANGAR_LINK_KEY_SECRET_ARN)")]
    NoLinkKey,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Blob(#[from] BlobError),
}

impl StateError {
    pub fn invalid(field: Field, detail: impl Into<String>) -> Self {
        StateError::Invalid { field, detail: detail.into() }
    }

    pub fn kind(&self) -> Kind {
        match self {
            StateError::Workspace(e) => e.kind(),
            StateError::NotFound => Kind::NotFound,
            StateError::Forbidden(_) | StateError::BadLink => Kind::Forbidden,
            StateError::Invalid { .. } => Kind::Invalid,
            StateError::Conflict(_) => Kind::Conflict,
            StateError::TooLarge { .. } => Kind::TooLarge,
            StateError::Store(e) => e.kind(),
            StateError::Blob(_) | StateError::NoLinkKey => Kind::Internal,
        }
    }
}

impl From<StateError> for ApiError {
    fn from(e: StateError) -> Self {
        match e {
            StateError::Workspace(e) => e.into(),
            StateError::Forbidden(detail) => ApiError::forbidden(detail),
            StateError::BadLink => ApiError::forbidden(e.to_string()),
            StateError::Invalid { field, detail } => ApiError::invalid(field.pointer(), detail),
            StateError::TooLarge { .. } => ApiError::new(Kind::TooLarge, "payload too large", e.to_string()),
            other => ApiError::of(other.kind(), other.to_string()),
        }
    }
}

impl IntoResponse for StateError {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

pub type Result<T, E = StateError> = std::result::Result<T, E>;
