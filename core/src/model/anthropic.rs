//! Anthropic Messages (`POST {base}/v1/messages`).

mod plain;
mod request;
mod stream;

use async_trait::async_trait;
use reqwest::header::HeaderValue;

use super::transport::{Transport, headers, secret_header};
use super::{HttpSettings, Model, ModelError, ModelRequest, ModelStream};

/// The API version sent as `anthropic-version`.
const API_VERSION: &str = "2023-06-01";

/// A model behind the Anthropic Messages API.
///
/// Each request streams and sets `max_tokens` (the request's limit, or
/// [`AnthropicMessages::DEFAULT_MAX_TOKENS`]). The instructions go in `system`; tool calls and
/// results travel as `tool_use` and `tool_result` blocks, consecutive results in one user
/// message. Tool calls are emitted complete when their block stops. The stream must end with
/// `message_stop`, otherwise it fails with [`ModelError::Interrupted`]; an `error` event
/// becomes a typed error. Usage counts cache reads and writes as input, cache reads as cached.
/// A server that ignores `stream: true` and sends one `message` object is read as if it had
/// streamed it.
pub struct AnthropicMessages {
    name: String,
    model: String,
    transport: Transport,
}

impl std::fmt::Debug for AnthropicMessages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicMessages")
            .field("name", &self.name)
            .field("settings", self.transport.settings())
            .finish()
    }
}

impl AnthropicMessages {
    /// The `max_tokens` sent when the request sets no limit.
    pub const DEFAULT_MAX_TOKENS: u32 = 4096;

    /// A Messages API model named `anthropic:<model>`. Fails with
    /// [`ModelError::Configuration`] for an empty model, a missing or unusable API key, or a
    /// base URL that is not `http(s)`.
    pub fn new(model: impl Into<String>, settings: HttpSettings) -> Result<Self, ModelError> {
        let model = model.into();
        if model.is_empty() {
            return Err(ModelError::Configuration("the model name is empty".into()));
        }
        let key = settings
            .api_key
            .as_deref()
            .filter(|k| !k.is_empty())
            .ok_or_else(|| ModelError::Configuration("anthropic needs an API key".into()))?;
        let pairs = headers([
            ("accept", HeaderValue::from_static("text/event-stream")),
            ("anthropic-version", HeaderValue::from_static(API_VERSION)),
            ("x-api-key", secret_header("x-api-key", key)?),
        ]);
        let name = format!("anthropic:{model}");
        let transport = Transport::new(name.clone(), settings, "/v1/messages", pairs)?;
        Ok(Self {
            name,
            model,
            transport,
        })
    }
}

#[async_trait]
impl Model for AnthropicMessages {
    fn name(&self) -> &str {
        &self.name
    }

    fn context_window(&self) -> u32 {
        self.transport.settings().context_window
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let body = request::body(&self.model, &request);
        let decoder = stream::MessagesDecoder::new(self.transport.settings().pricing);
        self.transport.open(&body, decoder).await
    }
}
