//! The OpenAI Responses API (`POST {base}/responses`).

mod plain;
mod request;
mod stream;

use async_trait::async_trait;
use reqwest::header::HeaderValue;

use super::transport::{Transport, headers, secret_header};
use super::{HttpSettings, Model, ModelError, ModelRequest, ModelStream};

/// A model behind the Responses API.
///
/// Each request streams, sends the instructions as `instructions` and the conversation as
/// `input` items, and asks the provider to keep nothing (`store: false`), so every request
/// carries the whole conversation. Function tools are sent with `strict: false`, so any JSON
/// Schema is accepted. Tool calls are emitted complete when their output item is done. The
/// stream must end with `response.completed` or `response.incomplete`, otherwise it fails with
/// [`ModelError::Interrupted`]; `response.failed` and `error` events become typed errors. A
/// server that ignores `stream: true` and sends one `response` object is read as if it had
/// streamed it.
pub struct OpenAiResponses {
    name: String,
    model: String,
    transport: Transport,
}

impl std::fmt::Debug for OpenAiResponses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiResponses")
            .field("name", &self.name)
            .field("settings", self.transport.settings())
            .finish()
    }
}

impl OpenAiResponses {
    /// A Responses API model named `openai-responses:<model>`. Fails with
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
            .ok_or_else(|| ModelError::Configuration("openai-responses needs an API key".into()))?;
        let pairs = headers([
            ("accept", HeaderValue::from_static("text/event-stream")),
            (
                "authorization",
                secret_header("authorization", &format!("Bearer {key}"))?,
            ),
        ]);
        let name = format!("openai-responses:{model}");
        let transport = Transport::new(name.clone(), settings, "/responses", pairs)?;
        Ok(Self {
            name,
            model,
            transport,
        })
    }
}

#[async_trait]
impl Model for OpenAiResponses {
    fn name(&self) -> &str {
        &self.name
    }

    fn context_window(&self) -> u32 {
        self.transport.settings().context_window
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let body = request::body(&self.model, &request);
        let decoder = stream::ResponsesDecoder::new(self.transport.settings().pricing);
        self.transport.open(&body, decoder).await
    }
}
