//! The one error of the plain use cases (Bots, the tool registry, budgets, provider settings,
//! accounts): what a caller did wrong, said in words for the answer, and a storage failure
//! kept typed to the boundary that seals it. A capability with failures of its own keeps its
//! own error (Chats, Memories, Vaults, Executions, ...).

use crate::identity::AccessError;
use crate::store::StoreError;

/// Why a use case refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// No such record for this caller (one it may not see is not found either).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// Bad input: the message says what.
    #[error("{0}")]
    Invalid(String),
    /// The caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// The record changed or is in a state that does not take this.
    #[error("{0}")]
    Conflict(String),
    /// Too many requests of this kind are open; try again later.
    #[error("{0}")]
    RateLimited(String),
    /// The credential is not (or no longer) valid.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// A failure of this server; the full cause is sealed at the boundary, never shown.
    #[error("{0}")]
    Internal(String),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<AccessError> for ServiceError {
    fn from(err: AccessError) -> Self {
        Self::Forbidden(err.to_string())
    }
}

impl From<crate::sealed::SealError> for ServiceError {
    fn from(err: crate::sealed::SealError) -> Self {
        Self::Internal(format!("a value could not be sealed: {err}"))
    }
}

impl From<crate::vaults::VaultError> for ServiceError {
    fn from(err: crate::vaults::VaultError) -> Self {
        use crate::vaults::VaultError;
        match err {
            VaultError::Invalid(message) => Self::Invalid(message),
            VaultError::Forbidden(err) => err.into(),
            VaultError::NotAllowed(message) => Self::Forbidden(message.into()),
            VaultError::NotFound(what) => Self::NotFound(what),
            VaultError::Seal => Self::Internal("a vault value could not be sealed".into()),
            VaultError::Store(err) => Self::Store(err),
        }
    }
}

impl From<crate::engine::EngineError> for ServiceError {
    fn from(err: crate::engine::EngineError) -> Self {
        match err {
            crate::engine::EngineError::Store(err) => Self::Store(err),
            other => Self::Internal(other.to_string()),
        }
    }
}
