//! The public error body: a stable code, a message, and for faults a safe category and the ID
//! of the sealed record that holds the full cause.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ids::ErrorId;

/// A stable error code. Clients branch on this, never on the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The input is malformed or breaks a rule; the message says which.
    InvalidInput,
    /// No valid credentials.
    Unauthorized,
    /// Valid credentials without the right to do this.
    Forbidden,
    /// The resource does not exist or is not visible to the caller.
    NotFound,
    /// The request conflicts with the current state (revision, command key reused with other
    /// input, resource closed).
    Conflict,
    /// The body is larger than the documented limit.
    PayloadTooLarge,
    /// The body's content type is not accepted.
    UnsupportedMediaType,
    /// Too many requests; try again later.
    RateLimited,
    /// The work was cancelled.
    Cancelled,
    /// The client or runtime was closed.
    Closed,
    /// The service could not be reached.
    Unavailable,
    /// A fault on the serving side; `category` and `error_id` name it.
    RequestFailed,
}

impl ErrorCode {
    /// The code as it appears on the wire, e.g. `invalid_input`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidInput => "invalid_input",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::RateLimited => "rate_limited",
            Self::Cancelled => "cancelled",
            Self::Closed => "closed",
            Self::Unavailable => "unavailable",
            Self::RequestFailed => "request_failed",
        }
    }
}

/// A safe, public category of a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCategory {
    /// The model provider failed or rejected the request.
    ModelProvider,
    /// A tool failed in a way the model could not be told about.
    Tool,
    /// Storage failed.
    Storage,
    /// A network peer could not be reached.
    Network,
    /// Something took too long.
    Timeout,
    /// The configuration is wrong (for example a missing API key).
    Configuration,
    /// The work's owner or credential lost the right to go on (a revoked or expired token,
    /// a removed member, a narrowed right).
    Access,
    /// Anything else.
    Internal,
}

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ErrorBody {
    /// The stable code.
    pub code: ErrorCode,
    /// A message for people. Never contains secrets or a full internal cause.
    pub message: String,
    /// For faults: the safe category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub category: Option<ErrorCategory>,
    /// For faults: the ID of the sealed record with the full cause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub error_id: Option<ErrorId>,
}

/// A sealed error record, opened for the platform operator (`GET /v1/admin/errors/{id}`):
/// the full cause an error answer or a failed execution keeps behind its error ID.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ErrorRecord {
    /// The error ID the answer or the `failed` event gave.
    pub error_id: ErrorId,
    /// The fault's category.
    pub category: ErrorCategory,
    /// When the fault happened.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// The execution that failed with it, for an execution's failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub execution_id: Option<crate::ids::ExecutionId>,
    /// The full cause, opened from its sealed record.
    pub cause: String,
}
