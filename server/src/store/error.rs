//! Storage errors.

use openbot_schema::ExecutionId;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or failed; the operation may succeed later.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// A newer owner holds the execution: this write was refused and nothing changed.
    #[error("execution {0} has a newer owner")]
    Fenced(ExecutionId),
    /// The command key was used before with other input.
    #[error("command key `{0}` was used for other input")]
    CommandKeyConflict(String),
    /// The execution does not exist.
    #[error("execution {0} was not found")]
    NotFound(ExecutionId),
    /// The admission gate is closed (or does not exist): nothing new is admitted.
    #[error("admission is closed")]
    AdmissionClosed,
    /// The execution has ended and takes no more changes.
    #[error("execution {0} has ended")]
    Ended(ExecutionId),
    /// The request does not exist.
    #[error("request {0} was not found")]
    RequestNotFound(uuid::Uuid),
    /// The request was already decided, or expired.
    #[error("request {0} is no longer pending")]
    RequestClosed(uuid::Uuid),
    /// The execution does not wait in `outcome_unknown` for a decision on that call: it waits
    /// for another call, or for none (it was decided already). Nothing was written.
    #[error("execution {0} does not wait for a decision on that call")]
    NotWaiting(ExecutionId),
    /// An ancestor of the execution is paused: it cannot be resumed on its own.
    #[error("a parent of execution {0} is paused")]
    ParentPaused(ExecutionId),
    /// A Turn's end would close its input while input that no step took waits (it arrived
    /// after the last input check): nothing was written; the Turn takes it instead.
    #[error("execution {0} has input waiting")]
    InputWaiting(ExecutionId),
    /// A capability's write refused the transaction it was part of (say, a reservation that
    /// would overspend): nothing was written. The capability keeps the typed reason.
    #[error("refused: {0}")]
    Refused(String),
    /// Stored data could not be read: a bug or damage, not a passing outage.
    #[error("invalid stored data: {0}")]
    Invalid(String),
    /// A sealed payload could not be sealed or opened: its key is not in the key ring, or it
    /// is damaged or was moved from its row.
    #[error("sealed {place}: {source}")]
    Sealed {
        /// Which row's payload (IDs only).
        place: String,
        /// Why.
        source: crate::sealed::SealError,
    },
    /// The database's schema is not the one this build expects.
    #[error(
        "the database schema is at version {found} but this openbot needs {expected}: run `openbot migrate`"
    )]
    SchemaVersion {
        /// The version found.
        found: i64,
        /// The version needed.
        expected: i64,
    },
}

impl StoreError {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::Decode(_)
            | sqlx::Error::TypeNotFound { .. } => StoreError::Invalid(err.to_string()),
            other => StoreError::Unavailable(other),
        }
    }
}
