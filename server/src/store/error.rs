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
    /// Only a failure that can pass (the connection, the pool, a lock or serialization
    /// conflict, a server shutting down or short of resources) is an outage to retry. A
    /// statement the database refused (a constraint, a type, a syntax error), a value that does
    /// not decode and a missing column are bugs or damage: [`StoreError::Invalid`], reported
    /// and never retried as if the database were away.
    fn from(err: sqlx::Error) -> Self {
        if outage(&err) {
            StoreError::Unavailable(err)
        } else {
            StoreError::Invalid(err.to_string())
        }
    }
}

/// Whether `err` may pass if the same statement is tried again later.
fn outage(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                postgres_transient(pg.code())
            } else if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                db.code()
                    .and_then(|code| code.parse::<i64>().ok())
                    .is_some_and(sqlite_transient)
            } else {
                false
            }
        }
        _ => false,
    }
}

/// PostgreSQL's SQLSTATEs of a passing failure: classes 08 (connection), 53 (insufficient
/// resources), 57 (operator intervention: shutdown, cancel), 58 (system error), the
/// serialization failure and deadlock of class 40, and P0001, an exception a trigger raised:
/// OpenBot's schema has no triggers or functions, so one is an operator holding writes back
/// for a while (as during maintenance), which passes.
fn postgres_transient(code: &str) -> bool {
    matches!(code.get(..2), Some("08" | "53" | "57" | "58"))
        || matches!(code, "40001" | "40P01" | "P0001")
}

/// SQLite's extended result code of a write a trigger refused (`RAISE(ABORT, ...)`): as on
/// PostgreSQL, an operator's hold on writes, not a constraint of OpenBot's schema.
const SQLITE_CONSTRAINT_TRIGGER: i64 = 1811;

/// SQLite's result codes of a passing failure, by their primary code (the low byte of an
/// extended code): BUSY, LOCKED, NOMEM, IOERR, FULL, CANTOPEN, PROTOCOL; and a trigger's
/// refusal.
fn sqlite_transient(code: i64) -> bool {
    code == SQLITE_CONSTRAINT_TRIGGER || matches!(code & 0xff, 5 | 6 | 7 | 10 | 13 | 14 | 15)
}

#[cfg(test)]
mod tests {
    use super::{postgres_transient, sqlite_transient};

    #[test]
    fn postgres_connection_and_conflict_codes_are_outages() {
        for code in [
            "08006", "08003", "53300", "57P01", "40001", "40P01", "58030",
        ] {
            assert!(postgres_transient(code), "{code}");
        }
    }

    #[test]
    fn postgres_constraint_and_data_codes_are_not_outages() {
        // unique, foreign key, not null, check, invalid text, undefined column
        for code in ["23505", "23503", "23502", "23514", "22P02", "42703"] {
            assert!(!postgres_transient(code), "{code}");
        }
    }

    #[test]
    fn sqlite_busy_and_io_codes_are_outages_and_constraints_are_not() {
        for code in [5, 517, 6, 10, 13, 1811] {
            assert!(sqlite_transient(code), "{code}");
        }
        // SQLITE_CONSTRAINT_UNIQUE, _PRIMARYKEY, _NOTNULL, SQLITE_MISMATCH
        for code in [2067, 1555, 1299, 20] {
            assert!(!sqlite_transient(code), "{code}");
        }
    }
}
