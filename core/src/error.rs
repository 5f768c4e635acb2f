//! The one error type of the Client, in both modes: a stable code, a message, and for faults
//! a safe category with the ID of the sealed record that holds the full cause.

use std::fmt;

use openbot_schema::{ErrorBody, ErrorCategory, ErrorCode, ErrorId};

/// An error from a Client call. Branch on [`Error::code`], never on the message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct Error {
    /// The stable code.
    pub code: ErrorCode,
    /// A message for people; never holds secrets or a full internal cause.
    pub message: String,
    /// For faults: the safe category.
    pub category: Option<ErrorCategory>,
    /// For faults: the ID of the sealed failure record.
    pub error_id: Option<ErrorId>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)?;
        if let Some(id) = self.error_id {
            write!(f, " (error id {id})")?;
        }
        Ok(())
    }
}

impl Error {
    /// An error with a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            category: None,
            error_id: None,
        }
    }

    /// Bad input; the message says what is wrong.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, message)
    }

    /// A resource that does not exist or is not visible.
    pub fn not_found(kind: &str, id: impl fmt::Display) -> Self {
        Self::new(ErrorCode::NotFound, format!("{kind} {id} was not found"))
    }

    /// A conflict with the current state.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }

    /// The client was closed.
    pub fn closed() -> Self {
        Self::new(ErrorCode::Closed, "the client is closed")
    }

    /// A fault whose full cause is sealed under `error_id`.
    pub fn request_failed(category: ErrorCategory, error_id: ErrorId) -> Self {
        Self {
            code: ErrorCode::RequestFailed,
            message: "the request failed".into(),
            category: Some(category),
            error_id: Some(error_id),
        }
    }

    /// The public body of this error.
    pub fn to_body(&self) -> ErrorBody {
        ErrorBody {
            code: self.code,
            message: self.message.clone(),
            category: self.category,
            error_id: self.error_id,
        }
    }
}

impl From<ErrorBody> for Error {
    fn from(body: ErrorBody) -> Self {
        Self {
            code: body.code,
            message: body.message,
            category: body.category,
            error_id: body.error_id,
        }
    }
}
