//! Live sessions: a real-time conversation with a model over a provider's socket
//! (docs/live.md). Text and audio go in as they come; transcripts, audio, tool calls and
//! each response's usage come out as events.
//!
//! - [`LiveConfig`], [`LiveInput`], [`LiveEvent`], [`LiveUsage`] are provider-neutral: what
//!   OpenBot's clients send and read, whichever realtime API serves the session.
//! - [`RealtimeProvider`] opens a [`LiveConnection`]; a second realtime API implements it.
//! - [`openai::OpenAiRealtime`] speaks the OpenAI Realtime API's WebSocket wire format.
//!
//! Nothing here sends anything again: an input whose delivery is unknown (the socket broke
//! after it was handed over) is [`LiveError::Lost`], and a lost connection is never re-opened
//! on its own.

pub mod openai;

use async_trait::async_trait;
use openbot_schema::ToolDefinition;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What a live session is: its model, instructions and tools.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveConfig {
    /// The provider's model (`gpt-realtime`, say).
    pub model: String,
    /// The system instructions.
    pub instructions: String,
    /// The tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// Whether the model answers in audio (with a transcript) or in text.
    pub audio_out: bool,
    /// The voice of audio answers, when the provider has voices.
    pub voice: Option<String>,
}

/// What a client sends into a live session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LiveInput {
    /// A user message in text; the model answers it.
    Text {
        /// The text.
        text: String,
    },
    /// A chunk of spoken input (base64 of 16-bit PCM, 24 kHz mono), added to the input.
    Audio {
        /// The base64 audio.
        data: String,
    },
    /// The end of spoken input: the model answers what was said.
    AudioCommit,
    /// A tool call's result, sent back to the model, which goes on.
    ToolResult {
        /// The call it answers.
        call_id: String,
        /// The result for the model.
        output: String,
    },
    /// Stops the response being made.
    Cancel,
}

/// What a live session tells its client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LiveEvent {
    /// The provider's session is ready for input.
    Ready,
    /// Part of a text answer.
    TextDelta {
        /// The response.
        response_id: String,
        /// The text.
        text: String,
    },
    /// Part of an audio answer (base64, as the provider sent it).
    AudioDelta {
        /// The response.
        response_id: String,
        /// The base64 audio.
        data: String,
    },
    /// Part of the transcript of an audio answer.
    TranscriptDelta {
        /// The response.
        response_id: String,
        /// The text.
        text: String,
    },
    /// The final transcript of what the user said.
    UserTranscript {
        /// The provider's item.
        item_id: String,
        /// The text.
        text: String,
    },
    /// The model calls a tool; answer it with [`LiveInput::ToolResult`].
    ToolCall {
        /// The response.
        response_id: String,
        /// The call's ID.
        call_id: String,
        /// The tool.
        name: String,
        /// Its arguments (the provider's text, parsed when it is JSON).
        arguments: Value,
    },
    /// A response ended: its final text (or transcript), and its usage when the provider
    /// reported it (missing usage stays unknown, never zero).
    ResponseDone {
        /// The response.
        response_id: String,
        /// `completed`, `cancelled`, `failed` or `incomplete`.
        status: String,
        /// Its text, or its audio's transcript.
        text: String,
        /// What it used.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<LiveUsage>,
    },
    /// The provider reported an error; the session goes on unless it closes.
    Error {
        /// The provider's code, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        /// What went wrong (no secret).
        message: String,
    },
    /// The provider connection ended; nothing follows.
    Closed {
        /// Why.
        reason: String,
    },
}

/// What one response used, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveUsage {
    /// Input tokens (text and audio).
    pub input_tokens: u64,
    /// Output tokens (text and audio).
    pub output_tokens: u64,
}

/// Why a live session could not be opened or used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiveError {
    /// The endpoint may not be reached (the outbound policy, a bad URL).
    #[error("{0}")]
    Refused(String),
    /// The provider could not be reached or did not accept the socket.
    #[error("the realtime provider could not be reached: {0}")]
    Unreachable(String),
    /// The provider refused the key.
    #[error("the realtime provider refused the key")]
    Unauthorized,
    /// The connection ended: an input handed over may or may not have reached the provider.
    #[error("the realtime connection ended; what was sent last may not have arrived")]
    Lost,
}

/// An open provider connection: send inputs, read events until [`LiveEvent::Closed`].
/// Dropping it closes the connection.
#[derive(Debug)]
pub struct LiveConnection {
    inputs: mpsc::Sender<LiveInput>,
    events: mpsc::Receiver<LiveEvent>,
    close: CancellationToken,
}

impl LiveConnection {
    /// A connection whose socket task reads `inputs` and writes `events` until `close`.
    pub fn new(
        inputs: mpsc::Sender<LiveInput>,
        events: mpsc::Receiver<LiveEvent>,
        close: CancellationToken,
    ) -> Self {
        Self {
            inputs,
            events,
            close,
        }
    }

    /// Hands `input` to the socket. [`LiveError::Lost`] when the connection ended: it was not
    /// sent, or it was and its delivery is unknown; either way it is not sent again.
    pub async fn send(&self, input: LiveInput) -> Result<(), LiveError> {
        self.inputs.send(input).await.map_err(|_| LiveError::Lost)
    }

    /// The next event; `None` after [`LiveEvent::Closed`].
    pub async fn next(&mut self) -> Option<LiveEvent> {
        self.events.recv().await
    }

    /// Closes the provider connection; the events end with [`LiveEvent::Closed`].
    pub fn close(&self) {
        self.close.cancel();
    }
}

impl Drop for LiveConnection {
    fn drop(&mut self) {
        self.close.cancel();
    }
}

/// A realtime API: opens provider connections for live sessions.
#[async_trait]
pub trait RealtimeProvider: Send + Sync {
    /// Opens a connection configured by `config`, ready when this returns.
    async fn connect(&self, config: &LiveConfig) -> Result<LiveConnection, LiveError>;
}
