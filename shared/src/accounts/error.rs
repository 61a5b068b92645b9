//! The accounts family's errors, mapped to JSON:API errors in one place.

use axum::response::{IntoResponse, Response};

use crate::api::{ApiError, Field};
use crate::errors::Kind;
use crate::names::NameError;
use crate::seal::SealError;
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
    Invalid { field: Field, detail: String },
    /// The resource's state forbids the request (a workspace locked already, or by another).
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Seal(#[from] SealError),
}

impl AccountsError {
    pub fn invalid(field: Field, detail: impl Into<String>) -> Self {
        AccountsError::Invalid { field, detail: detail.into() }
    }

    /// The name in `field` belongs to another resource already.
    pub fn taken(field: Field) -> Self {
        Self::invalid(field, "has already been taken")
    }

    /// The name in `field` breaks the name rule.
    pub fn name(field: Field, e: NameError) -> Self {
        Self::invalid(field, e.to_string())
    }

    pub fn kind(&self) -> Kind {
        match self {
            AccountsError::NotFound => Kind::NotFound,
            AccountsError::Forbidden(_) => Kind::Forbidden,
            AccountsError::Invalid { .. } => Kind::Invalid,
            AccountsError::Conflict(_) => Kind::Conflict,
            AccountsError::Store(e) => e.kind(),
            AccountsError::Seal(_) => Kind::Internal,
        }
    }

    /// The error as the families that hide what a caller may not touch answer it (the registry,
    /// agent pools, VCS connections): lacking a permission in an organization is as missing as
    /// the organization. The one place that rule is decided.
    pub fn concealed(self) -> Self {
        match self {
            AccountsError::Forbidden(_) => AccountsError::NotFound,
            other => other,
        }
    }
}

/// A workspace's agent pool that cannot be used is a problem with the workspace request.
impl From<crate::agents::pool::PoolError> for AccountsError {
    fn from(e: crate::agents::pool::PoolError) -> Self {
        use crate::agents::pool::PoolError;
        match e {
            PoolError::NotUsable(detail) => AccountsError::invalid(Field::RelationshipId("agent-pool"), detail),
            PoolError::Store(e) => AccountsError::Store(e),
        }
    }
}

impl From<AccountsError> for ApiError {
    fn from(e: AccountsError) -> Self {
        match e {
            AccountsError::Forbidden(detail) => ApiError::forbidden(detail),
            AccountsError::Invalid { field, detail } => ApiError::invalid(field.pointer(), detail),
            other => ApiError::of(other.kind(), other.to_string()),
        }
    }
}

impl IntoResponse for AccountsError {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

pub type Result<T, E = AccountsError> = std::result::Result<T, E>;
