//! OpenAI Chat Completions (`POST {base}/chat/completions`), also for any OpenAI-compatible
//! endpoint such as a local model server.

mod plain;
mod request;
mod stream;

use async_trait::async_trait;
use reqwest::header::HeaderValue;

use super::transport::{Transport, headers, secret_header};
use super::{HttpSettings, Model, ModelError, ModelRequest, ModelStream};

/// A model behind the Chat Completions API.
///
/// Each request streams (`stream: true`) and asks for usage (`stream_options.include_usage`).
/// Tool calls are emitted complete, in the order of their `index`, once the model finished
/// them; arguments that are not valid JSON arrive as `{"_raw": "<text>"}` so the Turn can tell
/// the model what went wrong. The stream must end with `data: [DONE]`, otherwise it fails with
/// [`ModelError::Interrupted`]. A server that ignores `stream: true` and sends one
/// `chat.completion` object is read as if it had streamed it.
pub struct OpenAiChat {
    name: String,
    model: String,
    /// Whether this is OpenAI itself, which takes `max_completion_tokens`; compatible servers
    /// get the older `max_tokens`.
    is_openai: bool,
    transport: Transport,
}

impl std::fmt::Debug for OpenAiChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiChat")
            .field("name", &self.name)
            .field("settings", self.transport.settings())
            .finish()
    }
}

impl OpenAiChat {
    /// A Chat Completions model. `provider_label` is `openai` (an API key is required) or
    /// `compatible` (the key is optional); the model's name is `<provider_label>:<model>`.
    /// Fails with [`ModelError::Configuration`] for an empty model, a missing OpenAI key, a key
    /// that cannot be a header, or a base URL that is not `http(s)`.
    pub fn new(
        provider_label: &str,
        model: impl Into<String>,
        settings: HttpSettings,
    ) -> Result<Self, ModelError> {
        let model = model.into();
        if model.is_empty() {
            return Err(ModelError::Configuration("the model name is empty".into()));
        }
        let is_openai = provider_label == "openai";
        let key = settings.api_key.as_deref().filter(|k| !k.is_empty());
        if is_openai && key.is_none() {
            return Err(ModelError::Configuration("openai needs an API key".into()));
        }
        let mut pairs = headers([("accept", HeaderValue::from_static("text/event-stream"))]);
        if let Some(key) = key {
            pairs.insert(
                "authorization",
                secret_header("authorization", &format!("Bearer {key}"))?,
            );
        }
        let name = format!("{provider_label}:{model}");
        let transport = Transport::new(name.clone(), settings, "/chat/completions", pairs)?;
        Ok(Self {
            name,
            model,
            is_openai,
            transport,
        })
    }
}

#[async_trait]
impl Model for OpenAiChat {
    fn name(&self) -> &str {
        &self.name
    }

    fn context_window(&self) -> u32 {
        self.transport.settings().context_window
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let body = request::body(&self.model, self.is_openai, &request);
        let decoder = stream::ChatDecoder::new(self.transport.settings().pricing);
        self.transport.open(&body, decoder).await
    }
}
