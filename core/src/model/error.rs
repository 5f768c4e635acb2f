//! Errors of model providers.

use std::time::Duration;

/// Why a model request failed. Messages never contain an API key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The configuration is unusable: no API key, a bad base URL, an unknown model.
    #[error("model configuration: {0}")]
    Configuration(String),
    /// The provider rejected the credentials (401/403).
    #[error("the provider rejected the credentials (HTTP {status}): {message}")]
    Unauthorized {
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider asks to slow down (429).
    #[error("the provider is rate limiting requests: {message}")]
    RateLimited {
        /// How long the provider asked to wait, if it said.
        retry_after: Option<Duration>,
        /// The provider's message.
        message: String,
    },
    /// The provider rejected the request (other 4xx). Repeating it would fail again.
    #[error("the provider rejected the request (HTTP {status}): {message}")]
    InvalidRequest {
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider failed (5xx).
    #[error("the provider failed (HTTP {status}): {message}")]
    Server {
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider could not be reached or the connection broke.
    #[error("could not reach the provider: {0}")]
    Transport(String),
    /// No answer within the configured time.
    #[error("the provider did not answer in time")]
    Timeout,
    /// The provider's answer could not be understood.
    #[error("the provider sent data that could not be read: {0}")]
    Malformed(String),
    /// The answer's stream ended before it was complete.
    #[error("the provider's stream ended before the answer was complete")]
    Interrupted,
    /// A file attached to a message cannot be sent: not readable, or a type or size the
    /// provider does not take. The message says which file and why.
    #[error("{0}")]
    File(String),
    /// A scripted model ran out of steps: a configuration error (the script is too short for
    /// the conversation), never a provider fault.
    #[error(
        "the scripted model has no step {0}: its script has fewer steps than this conversation asks for (each answer in a Chat takes the next step; start a new Chat, or make the script longer or repeating)"
    )]
    ScriptExhausted(usize),
}

impl ModelError {
    /// The failure's kind as a short fixed name (for spans and metrics: never the provider's
    /// message, which may echo the request).
    pub fn kind(&self) -> &'static str {
        match self {
            ModelError::Configuration(_) => "configuration",
            ModelError::Unauthorized { .. } => "unauthorized",
            ModelError::RateLimited { .. } => "rate_limited",
            ModelError::InvalidRequest { .. } => "invalid_request",
            ModelError::Server { .. } => "server",
            ModelError::Transport(_) => "transport",
            ModelError::Timeout => "timeout",
            ModelError::Malformed(_) => "malformed",
            ModelError::Interrupted => "interrupted",
            ModelError::File(_) => "file",
            ModelError::ScriptExhausted(_) => "script_exhausted",
        }
    }

    /// Whether sending the same request again may succeed. Model requests write nothing
    /// outside, so every transient failure is safe to retry.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ModelError::RateLimited { .. }
                | ModelError::Server { .. }
                | ModelError::Transport(_)
                | ModelError::Timeout
                | ModelError::Interrupted
        )
    }
}
