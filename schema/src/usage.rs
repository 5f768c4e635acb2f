//! Token usage and cost of model calls.

use std::ops::AddAssign;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Tokens used and, when the price is known, what they cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Usage {
    /// Input tokens, including cached ones.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub output_tokens: u64,
    /// Input tokens the provider served from its cache.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub cached_input_tokens: u64,
    /// The cost in millionths of a US dollar, when the model's price is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub cost_micros: Option<u64>,
}

impl AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.cost_micros = match (self.cost_micros, other.cost_micros) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_adds_up_and_keeps_unknown_cost_unknown() {
        let mut total = Usage::default();
        total += Usage {
            input_tokens: 3,
            output_tokens: 2,
            ..Usage::default()
        };
        assert_eq!(total.cost_micros, None);
        total += Usage {
            input_tokens: 1,
            cost_micros: Some(5),
            ..Usage::default()
        };
        assert_eq!(total.input_tokens, 4);
        assert_eq!(total.output_tokens, 2);
        assert_eq!(total.cost_micros, Some(5));
    }
}
