//! The accounts family's errors, mapped to JSON:API errors in one place.

use axum::response::{IntoResponse, Response};

use crate::api::ApiError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AccountsError {
    /// Missing, or not visible to the caller: the two are indistinguishable on purpose.
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Forbidden(String),
    /// A rule about one member of the request body was broken.
    #[error("{detail}")]
    Invalid { pointer: String, detail: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AccountsError {
    pub fn invalid(pointer: &str, detail: impl Into<String>) -> Self {
        AccountsError::Invalid { pointer: pointer.to_owned(), detail: detail.into() }
    }

    /// The name at `pointer` belongs to another resource already.
    pub fn taken(pointer: &str) -> Self {
        Self::invalid(pointer, "has already been taken")
    }
}

/// A workspace's agent pool that cannot be used is a problem with the workspace request.
impl From<crate::agents::AgentsError> for AccountsError {
    fn from(e: crate::agents::AgentsError) -> Self {
        use crate::agents::AgentsError as E;
        match e {
            E::Invalid { pointer, detail } => AccountsError::Invalid { pointer, detail },
            E::Store(e) => AccountsError::Store(e),
            other => AccountsError::invalid("/data/relationships/agent-pool", other.to_string()),
        }
    }
}

impl From<AccountsError> for ApiError {
    fn from(e: AccountsError) -> Self {
        match e {
            AccountsError::NotFound => ApiError::not_found(),
            AccountsError::Forbidden(detail) => ApiError::forbidden(detail),
            AccountsError::Invalid { pointer, detail } => ApiError::invalid(pointer, detail),
            AccountsError::Store(e) => ApiError::from(e),
        }
    }
}

impl IntoResponse for AccountsError {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

pub type Result<T, E = AccountsError> = std::result::Result<T, E>;
