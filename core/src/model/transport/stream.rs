//! The stream of a model answer: bytes to events to model events, with the idle timeout and
//! the end-marker rule.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::Value;

use super::{describe, redact};
use crate::model::sse::{SseEvent, SseParser};
use crate::model::{ModelError, ModelEvent, ModelStream};

/// Turns a provider's stream events into model events.
pub(crate) trait Decoder: Send + 'static {
    /// Reads one event and appends what it means to `out`. Returns `true` once the event was the
    /// provider's end marker: nothing after it is read. An error ends the stream.
    fn decode(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError>;

    /// Reads a whole answer: the provider's non-streamed response object, which a server that
    /// ignores `stream: true` sends instead of events. Returns the events a stream of the same
    /// answer gives: the text as one delta, each tool call complete, the usage, then
    /// [`ModelEvent::Done`]. A body that is no such object is [`ModelError::Malformed`].
    fn plain_answer(self, answer: Value) -> Result<Vec<ModelEvent>, ModelError>;
}

/// The model events of an answer's `body`, decoded by `decoder`. The stream ends after the
/// decoder saw the end marker, or after the first error: [`ModelError::Timeout`] when no bytes
/// came for `idle_timeout`, [`ModelError::Transport`] when the connection broke,
/// [`ModelError::Interrupted`] when the body ended before the end marker,
/// [`ModelError::Malformed`] for bytes that are no event stream. `api_key` is removed from every
/// error message.
pub(super) fn model_stream<D: Decoder>(
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    decoder: D,
    idle_timeout: Duration,
    api_key: Option<String>,
) -> ModelStream {
    let pump = Pump {
        body,
        parser: SseParser::new(),
        decoder,
        ready: VecDeque::new(),
        idle_timeout,
        ended: false,
        api_key,
    };
    futures::stream::unfold(pump, Pump::next).boxed()
}

/// Reads the body stream, parses events and decodes them; the state of a [`ModelStream`].
struct Pump<D> {
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    parser: SseParser,
    decoder: D,
    ready: VecDeque<Result<ModelEvent, ModelError>>,
    idle_timeout: Duration,
    ended: bool,
    api_key: Option<String>,
}

impl<D: Decoder> Pump<D> {
    async fn next(mut self) -> Option<(Result<ModelEvent, ModelError>, Self)> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some((item, self));
            }
            if self.ended {
                return None;
            }
            match tokio::time::timeout(self.idle_timeout, self.body.next()).await {
                Err(_) => self.fail(ModelError::Timeout),
                Ok(Some(Ok(chunk))) => self.feed(&chunk),
                Ok(Some(Err(e))) => {
                    self.fail(ModelError::Transport(format!(
                        "the stream broke: {}",
                        describe(&e)
                    )));
                }
                Ok(None) => self.fail(ModelError::Interrupted),
            }
        }
    }

    fn feed(&mut self, chunk: &[u8]) {
        let events = match self.parser.push(chunk) {
            Ok(events) => events,
            Err(e) => return self.fail(ModelError::Malformed(e.to_string())),
        };
        for event in events {
            let mut out = Vec::new();
            let result = self.decoder.decode(event, &mut out);
            self.ready.extend(out.into_iter().map(Ok));
            match result {
                Ok(false) => {}
                Ok(true) => return self.finish(),
                Err(error) => return self.fail(error),
            }
        }
    }

    fn fail(&mut self, error: ModelError) {
        tracing::debug!(error = %error, "model stream failed");
        let error = redact(error, self.api_key.as_deref());
        self.ready.push_back(Err(error));
        self.finish();
    }

    fn finish(&mut self) {
        self.ended = true;
        self.body = futures::stream::empty().boxed();
    }
}
