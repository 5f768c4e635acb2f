//! The one error of the mobile SDK (feature `uniffi`): a variant per stable error code, each
//! with the code as text, a reason for people, and for faults the safe category and error ID.
//!
//! It lives here, beside the records, so that a value that cannot cross into a record (an ID
//! that is no UUID, JSON text that does not parse) fails as `invalid_input` of this error, which
//! every call of the mobile SDK throws, rather than as uniffi's internal error.

use crate::error::{ErrorCategory, ErrorCode};

/// An error from an OpenBot call. Kotlin sees `OpenBotException` with one subclass per code
/// (`OpenBotException.NotFound`, ...); Swift sees `OpenBotError`. Branch on the variant or on
/// `code`, never on `reason`.
#[derive(Debug, Clone, PartialEq, thiserror::Error, uniffi::Error)]
pub enum OpenBotError {
    /// The input is malformed or breaks a rule; the reason says which.
    #[error("invalid_input: {reason}")]
    InvalidInput {
        /// `invalid_input`.
        code: String,
        /// What went wrong, for people.
        reason: String,
        /// For faults: the safe category.
        category: Option<String>,
        /// For faults: the ID of the sealed failure record.
        error_id: Option<String>,
    },
    /// No valid credentials.
    #[error("unauthorized: {reason}")]
    Unauthorized {
        /// `unauthorized`.
        code: String,
        /// What went wrong, for people.
        reason: String,
        /// For faults: the safe category.
        category: Option<String>,
        /// For faults: the ID of the sealed failure record.
        error_id: Option<String>,
    },
    /// Valid credentials without the right to do this.
    #[error("forbidden: {reason}")]
    Forbidden {
        /// `forbidden`.
        code: String,
        /// What went wrong, for people.
        reason: String,
        /// For faults: the safe category.
        category: Option<String>,
        /// For faults: the ID of the sealed failure record.
        error_id: Option<String>,
    },
    /// The resource does not exist or is not visible.
    #[error("not_found: {reason}")]
    NotFound {
        /// `not_found`.
        code: String,
        /// What went wrong, for people.
        reason: String,
        /// For faults: the safe category.
        category: Option<String>,
        /// For faults: the ID of the sealed failure record.
        error_id: Option<String>,
    },
    /// The request conflicts with the current state.
    #[error("conflict: {reason}")]
    Conflict {
        /// `conflict`.
        code: String,
        /// What went wrong, for people.
        reason: String,
        /// For faults: the safe category.
        category: Option<String>,
        /// For faults: the ID of the sealed failure record.
        error_id: Option<String>,
    },
    /// The body is larger than the documented limit.
    #[error("payload_too_large: {reason}")]
    PayloadTooLarge {
        /// `payload_too_large`.
        code: String,
        /// What went wrong, for people.
        reason: String,
        /// For faults: the safe category.
        category: Option<String>,
        /// For faults: the ID of the sealed failure record.
        error_id: Option<String>,
    },
    /// The body's content type is not accepted.
    #[error("unsupported_media_type: {reason}")]
    UnsupportedMediaType {
        /// `unsupported_media_type`.
        code: String,
        /// What went wrong, for people.
        reason: String,
        /// For faults: the safe category.
        category: Option<String>,
        /// For faults: the ID of the sealed failure record.
        error_id: Option<String>,
    },
    /// Too many requests; try again later.
    #[error("rate_limited: {reason}")]
    RateLimited {
        /// `rate_limited`.
        code: String,
        /// What went wrong, for people.
        reason: String,
        /// For faults: the safe category.
        category: Option<String>,
        /// For faults: the ID of the sealed failure record.
        error_id: Option<String>,
    },
    /// The work was cancelled.
    #[error("cancelled: {reason}")]
    Cancelled {
        /// `cancelled`.
        code: String,
        /// What went wrong, for people.
        reason: String,
        /// For faults: the safe category.
        category: Option<String>,
        /// For faults: the ID of the sealed failure record.
        error_id: Option<String>,
    },
    /// The client was closed.
    #[error("closed: {reason}")]
    Closed {
        /// `closed`.
        code: String,
        /// What went wrong, for people.
        reason: String,
        /// For faults: the safe category.
        category: Option<String>,
        /// For faults: the ID of the sealed failure record.
        error_id: Option<String>,
    },
    /// The service could not be reached.
    #[error("unavailable: {reason}")]
    Unavailable {
        /// `unavailable`.
        code: String,
        /// What went wrong, for people.
        reason: String,
        /// For faults: the safe category.
        category: Option<String>,
        /// For faults: the ID of the sealed failure record.
        error_id: Option<String>,
    },
    /// A fault on the serving side; `category` and `error_id` name it.
    #[error("request_failed: {reason}")]
    RequestFailed {
        /// `request_failed`.
        code: String,
        /// What went wrong, for people.
        reason: String,
        /// For faults: the safe category.
        category: Option<String>,
        /// For faults: the ID of the sealed failure record.
        error_id: Option<String>,
    },
}

#[uniffi::export]
impl OpenBotError {
    /// The stable code, e.g. `not_found`.
    pub fn error_code(&self) -> String {
        self.parts().0.to_string()
    }

    /// The reason, for people.
    pub fn error_reason(&self) -> String {
        self.parts().1.to_string()
    }

    /// For faults: the safe category, e.g. `model_provider`.
    pub fn error_category(&self) -> Option<String> {
        self.fault().0.clone()
    }

    /// For faults: the ID of the sealed failure record.
    pub fn error_id(&self) -> Option<String> {
        self.fault().1.clone()
    }
}

impl OpenBotError {
    /// An error with this code and reason and no fault fields.
    pub fn new(code: ErrorCode, reason: impl Into<String>) -> Self {
        Self::build(code, reason.into(), None, None)
    }

    /// Bad input given to the SDK itself (an ID or JSON text that does not parse).
    pub fn invalid_input(reason: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, reason)
    }

    /// A fault inside the SDK; nothing private is in its reason.
    pub fn internal(reason: impl Into<String>) -> Self {
        Self::build(
            ErrorCode::RequestFailed,
            reason.into(),
            Some(category_name(ErrorCategory::Internal)),
            None,
        )
    }

    /// The error of this code with these parts.
    pub fn build(
        code: ErrorCode,
        reason: String,
        category: Option<String>,
        error_id: Option<String>,
    ) -> Self {
        let name = code.as_str().to_string();
        match code {
            ErrorCode::InvalidInput => Self::InvalidInput {
                code: name,
                reason,
                category,
                error_id,
            },
            ErrorCode::Unauthorized => Self::Unauthorized {
                code: name,
                reason,
                category,
                error_id,
            },
            ErrorCode::Forbidden => Self::Forbidden {
                code: name,
                reason,
                category,
                error_id,
            },
            ErrorCode::NotFound => Self::NotFound {
                code: name,
                reason,
                category,
                error_id,
            },
            ErrorCode::Conflict => Self::Conflict {
                code: name,
                reason,
                category,
                error_id,
            },
            ErrorCode::PayloadTooLarge => Self::PayloadTooLarge {
                code: name,
                reason,
                category,
                error_id,
            },
            ErrorCode::UnsupportedMediaType => Self::UnsupportedMediaType {
                code: name,
                reason,
                category,
                error_id,
            },
            ErrorCode::RateLimited => Self::RateLimited {
                code: name,
                reason,
                category,
                error_id,
            },
            ErrorCode::Cancelled => Self::Cancelled {
                code: name,
                reason,
                category,
                error_id,
            },
            ErrorCode::Closed => Self::Closed {
                code: name,
                reason,
                category,
                error_id,
            },
            ErrorCode::Unavailable => Self::Unavailable {
                code: name,
                reason,
                category,
                error_id,
            },
            ErrorCode::RequestFailed => Self::RequestFailed {
                code: name,
                reason,
                category,
                error_id,
            },
        }
    }

    /// The code and reason of any variant.
    fn parts(&self) -> (&str, &str) {
        match self {
            Self::InvalidInput { code, reason, .. }
            | Self::Unauthorized { code, reason, .. }
            | Self::Forbidden { code, reason, .. }
            | Self::NotFound { code, reason, .. }
            | Self::Conflict { code, reason, .. }
            | Self::PayloadTooLarge { code, reason, .. }
            | Self::UnsupportedMediaType { code, reason, .. }
            | Self::RateLimited { code, reason, .. }
            | Self::Cancelled { code, reason, .. }
            | Self::Closed { code, reason, .. }
            | Self::Unavailable { code, reason, .. }
            | Self::RequestFailed { code, reason, .. } => (code, reason),
        }
    }

    /// The category and error ID of any variant.
    fn fault(&self) -> (&Option<String>, &Option<String>) {
        match self {
            Self::InvalidInput {
                category, error_id, ..
            }
            | Self::Unauthorized {
                category, error_id, ..
            }
            | Self::Forbidden {
                category, error_id, ..
            }
            | Self::NotFound {
                category, error_id, ..
            }
            | Self::Conflict {
                category, error_id, ..
            }
            | Self::PayloadTooLarge {
                category, error_id, ..
            }
            | Self::UnsupportedMediaType {
                category, error_id, ..
            }
            | Self::RateLimited {
                category, error_id, ..
            }
            | Self::Cancelled {
                category, error_id, ..
            }
            | Self::Closed {
                category, error_id, ..
            }
            | Self::Unavailable {
                category, error_id, ..
            }
            | Self::RequestFailed {
                category, error_id, ..
            } => (category, error_id),
        }
    }
}

/// The wire name of a category, e.g. `model_provider`.
pub fn category_name(category: ErrorCategory) -> String {
    match serde_json::to_value(category) {
        Ok(serde_json::Value::String(name)) => name,
        _ => "internal".to_string(),
    }
}
