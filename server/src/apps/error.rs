//! What the App use cases answer when they cannot do what was asked.

use crate::store::StoreError;

/// An App use case that failed.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// No such App or Connection for this caller.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The input is not valid.
    #[error("{0}")]
    Invalid(String),
    /// It conflicts with what exists (a taken name, a removed or unready Connection).
    #[error("{0}")]
    Conflict(String),
    /// The App's MCP server could not be used; the message says why (without secrets).
    #[error("{0}")]
    Upstream(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}
