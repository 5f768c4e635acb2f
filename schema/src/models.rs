//! The model registry's public types: an organization's provider settings.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Settings for one provider kind, to set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct PutProvider {
    /// The API key; stored sealed and never returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    #[schema(min_length = 1)]
    pub api_key: Option<String>,
    /// A base URL instead of the provider's default (`openai`, `anthropic` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    #[schema(pattern = "^https?://.+")]
    pub base_url: Option<String>,
}

/// An organization's settings for one provider kind (never the key itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ProviderSettings {
    /// The kind: `openai`, `anthropic` or `compatible`.
    pub kind: String,
    /// The base URL, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub base_url: Option<String>,
    /// Whether a key is stored.
    pub has_key: bool,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}
