//! Model specs: `provider:model` strings that name a model and its provider.

use std::path::PathBuf;
use std::sync::Arc;

use crate::outbound::OutboundPolicy;

use super::{
    AnthropicMessages, HttpSettings, Model, ModelError, OpenAiChat, OpenAiResponses, ScriptedModel,
};

/// A parsed model spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// `openai:<model>`: OpenAI Chat Completions.
    OpenAi {
        /// The model name.
        model: String,
    },
    /// `openai-responses:<model>`: the OpenAI Responses API.
    OpenAiResponses {
        /// The model name.
        model: String,
    },
    /// `anthropic:<model>`: Anthropic Messages.
    Anthropic {
        /// The model name.
        model: String,
    },
    /// `compatible:<base-url>:<model>`: any OpenAI-compatible Chat Completions endpoint.
    Compatible {
        /// The endpoint's base URL, e.g. `http://localhost:11434/v1`.
        base_url: String,
        /// The model name.
        model: String,
    },
    /// `scripted:<file>`: a fixed list of outputs from a JSON file.
    Scripted {
        /// The file.
        path: String,
    },
}

/// Why a model spec cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelSpecError {
    /// The spec is not `provider:model`.
    #[error("`{0}` is not a model spec: expected provider:model, e.g. openai:gpt-4o-mini")]
    Malformed(String),
    /// The provider is not known.
    #[error(
        "unknown model provider `{0}`: use openai, openai-responses, anthropic, compatible or scripted"
    )]
    UnknownProvider(String),
    /// The provider needs an API key and its variable is not set.
    #[error("{provider} needs an API key: set {variable}")]
    MissingKey {
        /// The provider.
        provider: &'static str,
        /// The environment variable that holds the key.
        variable: &'static str,
    },
    /// A scripted model's file may not be read here.
    #[error("{0}")]
    ScriptNotAllowed(String),
    /// The provider could not be set up.
    #[error(transparent)]
    Model(#[from] ModelError),
}

impl ModelSpec {
    /// Parses `provider:model`.
    pub fn parse(spec: &str) -> Result<Self, ModelSpecError> {
        let malformed = || ModelSpecError::Malformed(spec.chars().take(200).collect());
        let (provider, rest) = spec.split_once(':').ok_or_else(malformed)?;
        if rest.is_empty() {
            return Err(malformed());
        }
        let model = rest.to_string();
        match provider {
            "openai" => Ok(Self::OpenAi { model }),
            "openai-responses" => Ok(Self::OpenAiResponses { model }),
            "anthropic" => Ok(Self::Anthropic { model }),
            "compatible" => {
                let (base_url, model) = rest.rsplit_once(':').ok_or_else(malformed)?;
                if model.is_empty()
                    || !(base_url.starts_with("http://") || base_url.starts_with("https://"))
                {
                    return Err(malformed());
                }
                Ok(Self::Compatible {
                    base_url: base_url.to_string(),
                    model: model.to_string(),
                })
            }
            "scripted" => Ok(Self::Scripted { path: model }),
            other => Err(ModelSpecError::UnknownProvider(
                other.chars().take(64).collect(),
            )),
        }
    }
}

/// Builds the model a spec names. Keys and base URLs come from `env` (usually the process
/// environment): `OPENAI_API_KEY` and `OPENAI_BASE_URL`, `ANTHROPIC_API_KEY` and
/// `ANTHROPIC_BASE_URL`, and for compatible endpoints the optional `OPENBOT_COMPATIBLE_API_KEY`.
/// Every address may be reached and a scripted model reads any file: this is for a standalone
/// agent, whose endpoints and files the person running it chose.
pub fn model_from_spec(
    spec: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Model>, ModelSpecError> {
    model_from_spec_with(spec, env, &Arc::new(OutboundPolicy::allow_all()), &|path| {
        Ok(PathBuf::from(path))
    })
}

/// Builds the model a spec names as [`model_from_spec`] does, with every request kept to
/// `outbound`, and a scripted model read from the file `scripted` gives for its name (or
/// refused with the error it gives).
pub fn model_from_spec_with(
    spec: &str,
    env: &dyn Fn(&str) -> Option<String>,
    outbound: &Arc<OutboundPolicy>,
    scripted: &dyn Fn(&str) -> Result<PathBuf, ModelSpecError>,
) -> Result<Arc<dyn Model>, ModelSpecError> {
    let key = |provider, variable| {
        env(variable)
            .filter(|k| !k.is_empty())
            .ok_or(ModelSpecError::MissingKey { provider, variable })
    };
    let settings = |base: String, key: Option<String>| {
        let mut settings = HttpSettings::new(base, key);
        settings.outbound = Arc::clone(outbound);
        settings
    };
    let openai_base =
        || env("OPENAI_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".into());
    Ok(match ModelSpec::parse(spec)? {
        ModelSpec::OpenAi { model } => {
            let settings = settings(openai_base(), Some(key("openai", "OPENAI_API_KEY")?));
            Arc::new(OpenAiChat::new("openai", model, settings)?)
        }
        ModelSpec::OpenAiResponses { model } => {
            let settings = settings(openai_base(), Some(key("openai", "OPENAI_API_KEY")?));
            Arc::new(OpenAiResponses::new(model, settings)?)
        }
        ModelSpec::Anthropic { model } => {
            let base =
                env("ANTHROPIC_BASE_URL").unwrap_or_else(|| "https://api.anthropic.com".into());
            let settings = settings(base, Some(key("anthropic", "ANTHROPIC_API_KEY")?));
            Arc::new(AnthropicMessages::new(model, settings)?)
        }
        ModelSpec::Compatible { base_url, model } => {
            let settings = settings(base_url, env("OPENBOT_COMPATIBLE_API_KEY"));
            Arc::new(OpenAiChat::new("compatible", model, settings)?)
        }
        ModelSpec::Scripted { path } => Arc::new(ScriptedModel::from_file(&scripted(&path)?)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_by_provider() {
        assert_eq!(
            ModelSpec::parse("openai:gpt-4o-mini").unwrap(),
            ModelSpec::OpenAi {
                model: "gpt-4o-mini".into()
            }
        );
        assert_eq!(
            ModelSpec::parse("compatible:http://localhost:8000/v1:llama3").unwrap(),
            ModelSpec::Compatible {
                base_url: "http://localhost:8000/v1".into(),
                model: "llama3".into()
            }
        );
        assert!(
            matches!(ModelSpec::parse("nope:x"), Err(ModelSpecError::UnknownProvider(p)) if p == "nope")
        );
        assert!(matches!(
            ModelSpec::parse("gpt-4o"),
            Err(ModelSpecError::Malformed(_))
        ));
        assert!(matches!(
            ModelSpec::parse("compatible:llama3"),
            Err(ModelSpecError::Malformed(_))
        ));
    }

    #[test]
    fn a_missing_key_names_its_variable() {
        let err = model_from_spec("anthropic:claude-sonnet-4-5", &|_| None)
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "anthropic needs an API key: set ANTHROPIC_API_KEY"
        );
    }
}
