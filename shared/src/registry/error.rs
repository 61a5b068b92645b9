//! The registry family's errors, mapped to JSON:API errors in one place. As the spec says,
//! a caller who may not do something gets the same 404 as for a missing module.

use crate::accounts::AccountsError;
use crate::api::{ApiError, Field};
use crate::errors::Kind;
use crate::seal::SealError;
use crate::store::StoreError;
use crate::vcs::VcsError;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("not found")]
    NotFound,
    /// Public module curation is off on this edition.
    #[error("public module curation is disabled")]
    CurationDisabled,
    /// The request is well-formed but not allowed on this module (e.g. a version of a public one).
    #[error("{0}")]
    Forbidden(String),
    #[error("{detail}")]
    Invalid { field: Field, detail: String },
    #[error("{0}")]
    Conflict(String),
    /// A webhook delivery whose signature does not verify.
    #[error("the delivery's signature does not verify")]
    Unauthorized,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("blob store: {0}")]
    Blobs(#[from] crate::blobs::BlobError),
    /// A stored secret could not be sealed or unsealed: KMS or the key file failed, which is
    /// the server's problem, not a conflict with the request.
    #[error("seal: {0}")]
    Seal(#[from] SealError),
    /// The repository's provider failed or answered something unusable. Callers that can tell
    /// the user something better (a missing commit, an unreadable repository) match first.
    #[error("VCS provider: {0}")]
    Vcs(#[from] VcsError),
    /// Work handed to a blocking thread panicked or was cancelled.
    #[error("background task: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl RegistryError {
    pub fn invalid(field: Field, detail: impl Into<String>) -> Self {
        RegistryError::Invalid { field, detail: detail.into() }
    }

    pub fn kind(&self) -> Kind {
        match self {
            RegistryError::NotFound => Kind::NotFound,
            RegistryError::CurationDisabled | RegistryError::Forbidden(_) => Kind::Forbidden,
            RegistryError::Invalid { .. } => Kind::Invalid,
            RegistryError::Conflict(_) => Kind::Conflict,
            RegistryError::Unauthorized => Kind::Unauthorized,
            RegistryError::Store(e) => e.kind(),
            RegistryError::Blobs(_) | RegistryError::Seal(_) | RegistryError::Task(_) => Kind::Internal,
            // A provider's failure is logged as Hangar's: the caller cannot act on it.
            RegistryError::Vcs(_) => Kind::Internal,
        }
    }
}

/// What the caller may not do in an organization is as missing as a module that is not there
/// ([`AccountsError::concealed`]).
impl From<AccountsError> for RegistryError {
    fn from(e: AccountsError) -> Self {
        match e.concealed() {
            AccountsError::Invalid { field, detail } => RegistryError::Invalid { field, detail },
            AccountsError::Conflict(detail) => RegistryError::Conflict(detail),
            AccountsError::Store(e) => RegistryError::Store(e),
            AccountsError::Seal(e) => RegistryError::Seal(e),
            AccountsError::NotFound | AccountsError::Forbidden(_) => RegistryError::NotFound,
        }
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::Invalid { field, detail } => ApiError::invalid(field.pointer(), detail),
            RegistryError::Unauthorized => {
                ApiError::new(Kind::Unauthorized, "unauthorized", "The delivery's signature does not verify.")
            }
            other => ApiError::of(other.kind(), other.to_string()),
        }
    }
}

pub type Result<T, E = RegistryError> = std::result::Result<T, E>;
