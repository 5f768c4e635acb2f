//! The one error of the binding: a variant per stable error code of the schema, each with the
//! code as text, a reason for people, and for faults the safe category and error ID.

use openbot_schema::{ErrorCategory, ErrorCode};

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
    pub(crate) fn new(code: ErrorCode, reason: impl Into<String>) -> Self {
        Self::build(code, reason.into(), None, None)
    }

    /// Bad input given to the binding itself (an ID or JSON text that does not parse).
    pub(crate) fn invalid_input(reason: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, reason)
    }

    /// A fault inside the binding; nothing private is in its reason.
    pub(crate) fn internal(reason: impl Into<String>) -> Self {
        Self::build(
            ErrorCode::RequestFailed,
            reason.into(),
            Some(category_name(ErrorCategory::Internal)),
            None,
        )
    }

    fn build(
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

    /// The message a tool failure gives the model: the reason alone.
    pub(crate) fn into_reason(self) -> String {
        self.parts().1.to_string()
    }
}

/// The wire name of a category, e.g. `model_provider`.
pub(crate) fn category_name(category: ErrorCategory) -> String {
    match serde_json::to_value(category) {
        Ok(serde_json::Value::String(name)) => name,
        _ => "internal".to_string(),
    }
}

impl From<openbot_core::Error> for OpenBotError {
    fn from(error: openbot_core::Error) -> Self {
        let openbot_core::Error {
            code,
            message,
            category,
            error_id,
        } = error;
        Self::build(
            code,
            message,
            category.map(category_name),
            error_id.map(|id| id.to_string()),
        )
    }
}

/// A host tool's exception that is not an `OpenBotException` arrives here with its text
/// (Kotlin gives `ClassName: message`); the model is given the message alone.
impl From<uniffi::UnexpectedUniFFICallbackError> for OpenBotError {
    fn from(error: uniffi::UnexpectedUniFFICallbackError) -> Self {
        Self::build(
            ErrorCode::RequestFailed,
            strip_class_name(&error.reason).to_string(),
            Some(category_name(ErrorCategory::Tool)),
            None,
        )
    }
}

/// `java.lang.IllegalStateException: boom` -> `boom`; any other text stays as it is.
fn strip_class_name(text: &str) -> &str {
    match text.split_once(": ") {
        Some((class, rest))
            if !class.is_empty()
                && class
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '.' | '$' | '_')) =>
        {
            rest
        }
        _ => text,
    }
}
