//! The built-in price catalog: the providers' published prices per million tokens for their
//! current models, as a table taken on [`CATALOG_DATE`]. Prices change; an organization
//! overrides any of them (or prices a model the table does not know, such as a `compatible:`
//! endpoint's) with its own, which wins from the next call sent on.

use openbot_core::model::{ModelSpec, Pricing};

/// The day the table below was taken from the providers' price pages (OpenAI's API pricing
/// page, Anthropic's model pricing page). It is older than this build: check it against the
/// providers' pages and override what changed.
pub const CATALOG_DATE: &str = "2025-10-15";

/// One catalog entry: the provider, the model name (a prefix of dated snapshot names), and
/// its price per million tokens in millionths of a US dollar: input, output, cached input.
struct Entry {
    provider: Provider,
    model: &'static str,
    input: u64,
    output: u64,
    cached: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Provider {
    OpenAi,
    Anthropic,
}

const fn entry(
    provider: Provider,
    model: &'static str,
    input: u64,
    output: u64,
    cached: u64,
) -> Entry {
    Entry {
        provider,
        model,
        input,
        output,
        cached,
    }
}

use Provider::{Anthropic, OpenAi};

/// Anthropic's cached price is its cache-read price (cache writes are not reported apart).
const TABLE: &[Entry] = &[
    entry(OpenAi, "gpt-5", 1_250_000, 10_000_000, 125_000),
    entry(OpenAi, "gpt-5-mini", 250_000, 2_000_000, 25_000),
    entry(OpenAi, "gpt-5-nano", 50_000, 400_000, 5_000),
    entry(OpenAi, "gpt-4.1", 2_000_000, 8_000_000, 500_000),
    entry(OpenAi, "gpt-4.1-mini", 400_000, 1_600_000, 100_000),
    entry(OpenAi, "gpt-4.1-nano", 100_000, 400_000, 25_000),
    entry(OpenAi, "gpt-4o", 2_500_000, 10_000_000, 1_250_000),
    entry(OpenAi, "gpt-4o-mini", 150_000, 600_000, 75_000),
    entry(OpenAi, "o3", 2_000_000, 8_000_000, 500_000),
    entry(OpenAi, "o3-mini", 1_100_000, 4_400_000, 550_000),
    entry(OpenAi, "o4-mini", 1_100_000, 4_400_000, 275_000),
    entry(
        Anthropic,
        "claude-opus-4-1",
        15_000_000,
        75_000_000,
        1_500_000,
    ),
    entry(
        Anthropic,
        "claude-opus-4",
        15_000_000,
        75_000_000,
        1_500_000,
    ),
    entry(
        Anthropic,
        "claude-sonnet-4-5",
        3_000_000,
        15_000_000,
        300_000,
    ),
    entry(Anthropic, "claude-sonnet-4", 3_000_000, 15_000_000, 300_000),
    entry(
        Anthropic,
        "claude-3-7-sonnet",
        3_000_000,
        15_000_000,
        300_000,
    ),
    entry(Anthropic, "claude-haiku-4-5", 1_000_000, 5_000_000, 100_000),
    entry(Anthropic, "claude-3-5-haiku", 800_000, 4_000_000, 80_000),
];

/// The catalog's price for a model spec, if it has one: the entry whose name is the model's,
/// or the longest one the model's name starts with followed by `-` (a dated snapshot such as
/// `gpt-4o-2024-08-06`, or `-latest`). `compatible:` and `scripted:` models have none.
pub fn catalog_price(spec: &str) -> Option<Pricing> {
    let (provider, model) = match ModelSpec::parse(spec).ok()? {
        ModelSpec::OpenAi { model } | ModelSpec::OpenAiResponses { model } => (OpenAi, model),
        ModelSpec::Anthropic { model } => (Anthropic, model),
        ModelSpec::Compatible { .. } | ModelSpec::Scripted { .. } => return None,
    };
    TABLE
        .iter()
        .filter(|e| e.provider == provider)
        .filter(|e| {
            model == e.model
                || model
                    .strip_prefix(e.model)
                    .is_some_and(|rest| rest.starts_with('-'))
        })
        .max_by_key(|e| e.model.len())
        .map(|e| Pricing {
            input_per_million: e.input,
            cached_input_per_million: e.cached,
            output_per_million: e.output,
        })
}

/// Every catalog entry as the spec a Bot names it with (`openai:` or `anthropic:`) and its
/// price, in table order.
pub fn catalog() -> impl Iterator<Item = (String, Pricing)> {
    TABLE.iter().map(|e| {
        let provider = match e.provider {
            OpenAi => "openai",
            Anthropic => "anthropic",
        };
        (
            format!("{provider}:{}", e.model),
            Pricing {
                input_per_million: e.input,
                cached_input_per_million: e.cached,
                output_per_million: e.output,
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dated_snapshot_takes_the_longest_matching_entry() {
        let mini = catalog_price("openai:gpt-4o-mini-2024-07-18").map(|p| p.input_per_million);
        assert_eq!(mini, Some(150_000));
        let full = catalog_price("openai:gpt-4o-2024-08-06").map(|p| p.input_per_million);
        assert_eq!(full, Some(2_500_000));
        let responses =
            catalog_price("openai-responses:gpt-4.1-mini").map(|p| p.output_per_million);
        assert_eq!(responses, Some(1_600_000));
        let claude = catalog_price("anthropic:claude-sonnet-4-5-20250929")
            .map(|p| p.cached_input_per_million);
        assert_eq!(claude, Some(300_000));
    }

    #[test]
    fn unknown_and_self_hosted_models_have_no_catalog_price() {
        assert_eq!(catalog_price("openai:gpt-4ox"), None);
        assert_eq!(catalog_price("anthropic:gpt-4o"), None);
        assert_eq!(
            catalog_price("compatible:http://localhost:11434/v1:gpt-4o"),
            None
        );
        assert_eq!(catalog_price("scripted:answers.json"), None);
    }
}
