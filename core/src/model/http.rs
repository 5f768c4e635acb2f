//! Settings shared by the HTTP model providers.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use openbot_schema::Usage;

use crate::outbound::OutboundPolicy;

/// How to reach a provider's HTTP API.
#[derive(Clone)]
pub struct HttpSettings {
    /// The API's base URL, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// The API key. Never printed: `Debug` shows only whether it is set.
    pub api_key: Option<String>,
    /// The longest wait for a connection.
    pub connect_timeout: Duration,
    /// The longest wait for the response headers.
    pub response_timeout: Duration,
    /// The longest wait between two chunks of a streamed answer.
    pub idle_timeout: Duration,
    /// How often a request that failed before any answer arrived is sent again.
    pub max_retries: u32,
    /// The model's context window in tokens.
    pub context_window: u32,
    /// The model's price, when known; then usage carries a cost.
    pub pricing: Option<Pricing>,
    /// Which addresses requests may reach (a server's policy; everything for a standalone
    /// agent).
    pub outbound: Arc<OutboundPolicy>,
}

impl HttpSettings {
    /// Settings with the given base URL and key, and defaults for the rest: 10 s to connect,
    /// 60 s for headers and between chunks, 2 retries, a 128k-token window, no price, every
    /// address allowed.
    pub fn new(base_url: impl Into<String>, api_key: Option<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key,
            connect_timeout: Duration::from_secs(10),
            response_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            max_retries: 2,
            context_window: 128_000,
            pricing: None,
            outbound: Arc::new(OutboundPolicy::allow_all()),
        }
    }
}

impl fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpSettings")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_retries", &self.max_retries)
            .field("context_window", &self.context_window)
            .field("pricing", &self.pricing)
            .field("outbound", &self.outbound)
            .finish()
    }
}

/// A model's price per million tokens, in millionths of a US dollar.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pricing {
    /// Per million uncached input tokens.
    pub input_per_million: u64,
    /// Per million cached input tokens.
    pub cached_input_per_million: u64,
    /// Per million output tokens.
    pub output_per_million: u64,
}

impl Pricing {
    /// What `usage` costs at this price, rounded up to a whole millionth of a dollar.
    pub fn cost_micros(&self, usage: &Usage) -> u64 {
        let uncached = usage.input_tokens.saturating_sub(usage.cached_input_tokens);
        let total = u128::from(uncached) * u128::from(self.input_per_million)
            + u128::from(usage.cached_input_tokens) * u128::from(self.cached_input_per_million)
            + u128::from(usage.output_tokens) * u128::from(self.output_per_million);
        u64::try_from(total.div_ceil(1_000_000)).unwrap_or(u64::MAX)
    }

    /// `usage` with its cost filled in.
    pub fn priced(&self, usage: Usage) -> Usage {
        Usage {
            cost_micros: Some(self.cost_micros(&usage)),
            ..usage
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_counts_cached_tokens_at_their_own_price() {
        let price = Pricing {
            input_per_million: 1_000_000,
            cached_input_per_million: 0,
            output_per_million: 2_000_000,
        };
        let usage = Usage {
            input_tokens: 10,
            cached_input_tokens: 4,
            output_tokens: 3,
            cost_micros: None,
        };
        // 6 uncached * $1/M + 3 output * $2/M = 12 micro-dollars.
        assert_eq!(price.cost_micros(&usage), 12);
    }

    #[test]
    fn debug_never_shows_the_key() {
        let settings = HttpSettings::new("http://x", Some("sk-secret".into()));
        assert!(!format!("{settings:?}").contains("sk-secret"));
    }
}
