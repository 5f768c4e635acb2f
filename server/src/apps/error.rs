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
    /// The Connection is removed, but not every MCP session it had is known to be closed
    /// (an owner that did not answer, a close that failed); the message names them by ID
    /// and error ID. Removing it again waits for them again.
    #[error("{0}")]
    CleanupPending(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::cluster::directory::DirectoryError> for AppError {
    fn from(err: crate::cluster::directory::DirectoryError) -> Self {
        match err {
            crate::cluster::directory::DirectoryError::Store(err) => AppError::Store(err),
            other => AppError::CleanupPending(format!(
                "the connection's sessions could not be closed: {other}"
            )),
        }
    }
}
