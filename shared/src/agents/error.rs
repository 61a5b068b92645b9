//! The agent family's errors, mapped to JSON:API errors in one place. As the spec says, a
//! caller who may not do something gets the same 404 as for a missing pool or agent.

use axum::http::StatusCode;

use crate::accounts::AccountsError;
use crate::api::ApiError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AgentsError {
    #[error("not found")]
    NotFound,
    #[error("{detail}")]
    Invalid { pointer: String, detail: String },
    #[error("{detail}")]
    InvalidParameter { parameter: String, detail: String },
    /// The agent is in a state that forbids the request (delete of a live agent).
    #[error("{0}")]
    PreconditionFailed(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AgentsError {
    pub fn invalid(pointer: &str, detail: impl Into<String>) -> Self {
        AgentsError::Invalid { pointer: pointer.to_owned(), detail: detail.into() }
    }
}

impl From<AccountsError> for AgentsError {
    fn from(e: AccountsError) -> Self {
        match e {
            AccountsError::NotFound | AccountsError::Forbidden(_) => AgentsError::NotFound,
            AccountsError::Invalid { pointer, detail } => AgentsError::Invalid { pointer, detail },
            AccountsError::Store(e) => AgentsError::Store(e),
        }
    }
}

impl From<AgentsError> for ApiError {
    fn from(e: AgentsError) -> Self {
        match e {
            AgentsError::NotFound => ApiError::not_found(),
            AgentsError::Invalid { pointer, detail } => ApiError::invalid(pointer, detail),
            AgentsError::InvalidParameter { parameter, detail } => ApiError::invalid_parameter(parameter, detail),
            AgentsError::PreconditionFailed(detail) => {
                ApiError::new(StatusCode::PRECONDITION_FAILED, "precondition failed", detail)
            }
            AgentsError::Conflict(detail) => ApiError::conflict(detail),
            AgentsError::Store(e) => ApiError::from(e),
        }
    }
}

pub type Result<T, E = AgentsError> = std::result::Result<T, E>;
