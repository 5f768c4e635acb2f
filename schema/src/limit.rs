//! Shared limits: permits and token buckets per named scope of an organization.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A limit to set on a scope. Every field left out leaves that dimension open; at least one of
/// `max_concurrent`, `requests_per_window` and `tokens_per_window` is needed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct PutScopeLimit {
    /// How many calls of the scope may be in flight at once, on every node together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub max_concurrent: Option<u32>,
    /// How many requests the scope may send per window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub requests_per_window: Option<u64>,
    /// How many tokens (input and output, as the provider confirmed them) the scope's calls
    /// may use per window. A call is admitted while the bucket is above zero; its usage is
    /// taken when it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub tokens_per_window: Option<u64>,
    /// The window of both buckets in milliseconds: 60000 (a minute) unless given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 100, maximum = 86400000)]
    pub window_ms: Option<u64>,
    /// How long a call waits for room before it fails with category `timeout`: 60000 unless
    /// given. With several limits the shortest wait applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 3600000)]
    pub max_wait_ms: Option<u64>,
}

/// A limit on a scope and how many of its permits are held now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ScopeLimit {
    /// The scope: `organization`, `provider:<kind>`, `bot:<id>` or any name a caller takes.
    pub scope: String,
    /// Calls in flight at once, if limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<u32>,
    /// Requests per window, if limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_window: Option<u64>,
    /// Tokens per window, if limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_window: Option<u64>,
    /// The buckets' window in milliseconds.
    pub window_ms: u64,
    /// How long a call waits for room.
    pub max_wait_ms: u64,
    /// Permits held now by running work.
    pub in_use: u64,
    /// When it was last set.
    pub updated_at: DateTime<Utc>,
}

impl ScopeLimit {
    /// Whether `scope` can name a limit: 1 to 200 of ASCII letters, digits and `: . _ -` (it
    /// goes into a path).
    pub fn is_valid_scope(scope: &str) -> bool {
        !scope.is_empty()
            && scope.len() <= 200
            && scope
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b":._-".contains(&b))
    }
}
