//! The agent family's errors, mapped to JSON:API errors in one place. As the spec says, a
//! caller who may not do something gets the same 404 as for a missing pool or agent.

use crate::accounts::AccountsError;
use crate::api::{ApiError, Field};
use crate::errors::Kind;
use crate::names::NameError;
use crate::seal::SealError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AgentsError {
    #[error("not found")]
    NotFound,
    #[error("{detail}")]
    Invalid { field: Field, detail: String },
    #[error("{detail}")]
    InvalidParameter { parameter: String, detail: String },
    /// The agent is in a state that forbids the request (delete of a live agent).
    #[error("{0}")]
    PreconditionFailed(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Seal(#[from] SealError),
}

impl AgentsError {
    pub fn invalid(field: Field, detail: impl Into<String>) -> Self {
        AgentsError::Invalid { field, detail: detail.into() }
    }

    /// The name in `field` breaks the name rule.
    pub fn name(field: Field, e: NameError) -> Self {
        Self::invalid(field, e.to_string())
    }
}

impl AgentsError {
    pub fn kind(&self) -> Kind {
        match self {
            AgentsError::NotFound => Kind::NotFound,
            AgentsError::Invalid { .. } | AgentsError::InvalidParameter { .. } => Kind::Invalid,
            AgentsError::PreconditionFailed(_) => Kind::PreconditionFailed,
            AgentsError::Conflict(_) => Kind::Conflict,
            AgentsError::Store(e) => e.kind(),
            AgentsError::Seal(_) => Kind::Internal,
        }
    }
}

/// What the caller may not do in an organization is as missing as a pool that is not there
/// ([`AccountsError::concealed`]).
impl From<AccountsError> for AgentsError {
    fn from(e: AccountsError) -> Self {
        match e.concealed() {
            AccountsError::Invalid { field, detail } => AgentsError::Invalid { field, detail },
            AccountsError::Conflict(detail) => AgentsError::Conflict(detail),
            AccountsError::Store(e) => AgentsError::Store(e),
            AccountsError::Seal(e) => AgentsError::Seal(e),
            AccountsError::NotFound | AccountsError::Forbidden(_) => AgentsError::NotFound,
        }
    }
}

impl From<AgentsError> for ApiError {
    fn from(e: AgentsError) -> Self {
        match e {
            AgentsError::Invalid { field, detail } => ApiError::invalid(field.pointer(), detail),
            AgentsError::InvalidParameter { parameter, detail } => ApiError::invalid_parameter(parameter, detail),
            other => ApiError::of(other.kind(), other.to_string()),
        }
    }
}

pub type Result<T, E = AgentsError> = std::result::Result<T, E>;
