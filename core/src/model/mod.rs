//! Models: the [`Model`] trait every provider implements, and the providers.
//!
//! A model turns a [`ModelRequest`] into a stream of [`ModelEvent`]s: text as it is produced,
//! complete tool calls, usage, and the end. Adapters retry only where a retry is safe: before
//! any part of an answer arrived (connection refused, 429, 5xx). A stream that breaks midway
//! is reported as an error; the Turn loop then starts a new attempt with a new start event.

mod anthropic;
mod error;
mod files;
mod http;
mod openai_chat;
mod openai_responses;
mod request;
mod scripted;
mod spec;
pub(crate) mod sse;
mod transport;

use async_trait::async_trait;
use futures::stream::BoxStream;

pub use anthropic::AnthropicMessages;
pub use error::ModelError;
pub use files::{
    FileBytes, FileFormat, FileKind, FileReadError, FileSource, WithFiles, attach_stored,
    check_file, file_format_of,
};
pub use http::{HttpSettings, Pricing};
pub use openai_chat::OpenAiChat;
pub use openai_responses::OpenAiResponses;
pub use request::{ModelEvent, ModelRequest, ModelResponse, StopReason};
pub use scripted::{ScriptedModel, ScriptedStep};
pub use spec::{ModelSpec, ModelSpecError, model_from_spec, model_from_spec_with};

/// A stream of model events that ends after [`ModelEvent::Done`] or an error.
pub type ModelStream = BoxStream<'static, Result<ModelEvent, ModelError>>;

/// A language model.
#[async_trait]
pub trait Model: Send + Sync {
    /// The model's name as `provider:model`, for events, usage and logs.
    fn name(&self) -> &str;

    /// The size of the model's context window in tokens. The Turn keeps each request under it.
    fn context_window(&self) -> u32;

    /// Starts one request. The stream yields text deltas as they arrive, each tool call once
    /// complete, usage when known, and [`ModelEvent::Done`] last.
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError>;
}
