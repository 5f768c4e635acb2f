//! An execution's events from a server as one stream: server-sent events, resumed from the
//! last sequence read after a dropped connection, so no event is lost or repeated.

use std::time::Duration;

use futures::StreamExt;
use openbot_schema::{ErrorBody, ErrorCode, Event, ExecutionId};
use reqwest::{Method, StatusCode};

use super::transport::{Transport, error_answer, reason};
use crate::client::ObserveStream;
use crate::error::Error;
use crate::model::sse::SseParser;

/// Reconnects in a row without a new event before the stream gives up.
const RECONNECTS: u32 = 5;
/// The longest wait for bytes; the server sends a keep-alive every 15 s.
const IDLE: Duration = Duration::from_secs(45);
/// The wait before the first reconnect; it doubles after each.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// The state between reads.
struct Reader {
    transport: Transport,
    id: ExecutionId,
    after: u64,
    body: Option<futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>>,
    parser: SseParser,
    pending: std::collections::VecDeque<Event>,
    failures: u32,
    done: bool,
}

/// The events of `id` after `after`, ending after its last event.
pub(super) async fn observe(
    transport: Transport,
    id: ExecutionId,
    after: u64,
) -> Result<ObserveStream, Error> {
    let mut reader = Reader {
        transport,
        id,
        after,
        body: None,
        parser: SseParser::new(),
        pending: Default::default(),
        failures: 0,
        done: false,
    };
    // The first connection fails the call itself: an unknown execution is an error here.
    reader.connect().await?;
    Ok(futures::stream::unfold(reader, |mut reader| async move {
        reader.next().await.map(|item| (item, reader))
    })
    .boxed())
}

impl Reader {
    async fn connect(&mut self) -> Result<(), Error> {
        self.transport.check_open()?;
        let (at, request) = self
            .transport
            .request(Method::GET, &format!("/v1/executions/{}/events", self.id));
        let request = request
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .header("last-event-id", self.after.to_string());
        let response = tokio::select! {
            response = request.send() => response,
            () = self.transport.closed().cancelled() => return Err(Error::closed()),
        };
        let response = response.map_err(|e| {
            // The next try resumes from the same cursor on another node, when there is one.
            self.transport.fail_over(at);
            Error::new(
                ErrorCode::Unavailable,
                format!("the event stream could not be opened: {}", reason(&e)),
            )
        })?;
        if response.status() != StatusCode::OK {
            if response.status().is_server_error() {
                self.transport.fail_over(at);
            }
            return Err(error_answer(response).await);
        }
        self.body = Some(response.bytes_stream().boxed());
        self.parser = SseParser::new();
        Ok(())
    }

    async fn next(&mut self) -> Option<Result<Event, Error>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            match self.read().await {
                Ok(()) => {}
                Err(err) => {
                    self.done = true;
                    return Some(Err(err));
                }
            }
        }
    }

    /// Reads more of the stream into `pending`, reconnecting after a dropped connection.
    async fn read(&mut self) -> Result<(), Error> {
        let Some(body) = self.body.as_mut() else {
            return self.reconnect().await;
        };
        let chunk = tokio::select! {
            chunk = tokio::time::timeout(IDLE, body.next()) => chunk,
            () = self.transport.closed().cancelled() => return Err(Error::closed()),
        };
        match chunk {
            Ok(Some(Ok(bytes))) => {
                let events = self.parser.push(&bytes).map_err(|e| {
                    Error::new(
                        ErrorCode::Unavailable,
                        format!("the event stream broke: {e}"),
                    )
                })?;
                for sse in events {
                    self.take(sse.name(), &sse.data)?;
                }
                Ok(())
            }
            // The server ends the stream after the last event; ending sooner is a drop.
            Ok(None) | Ok(Some(Err(_))) | Err(_) => {
                self.body = None;
                self.reconnect().await
            }
        }
    }

    fn take(&mut self, name: &str, data: &str) -> Result<(), Error> {
        if name == "request_failed" {
            let body: ErrorBody = serde_json::from_str(data).map_err(|e| {
                Error::new(
                    ErrorCode::Unavailable,
                    format!("unreadable failure event: {e}"),
                )
            })?;
            return Err(body.into());
        }
        let event: Event = serde_json::from_str(data).map_err(|e| {
            Error::new(
                ErrorCode::Unavailable,
                format!("an event from the server is not what this client reads: {e}"),
            )
        })?;
        if event.sequence <= self.after {
            return Ok(());
        }
        self.after = event.sequence;
        self.failures = 0;
        if event.kind.is_terminal() {
            self.done = true;
            self.body = None;
        }
        self.pending.push_back(event);
        Ok(())
    }

    async fn reconnect(&mut self) -> Result<(), Error> {
        loop {
            self.failures += 1;
            if self.failures > RECONNECTS {
                return Err(Error::new(
                    ErrorCode::Unavailable,
                    format!(
                        "the event stream of execution {} broke and could not be resumed after sequence {}",
                        self.id, self.after
                    ),
                ));
            }
            let wait = FIRST_BACKOFF * 2u32.pow(self.failures - 1);
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.transport.closed().cancelled() => return Err(Error::closed()),
            }
            match self.connect().await {
                Ok(()) => return Ok(()),
                Err(err) if err.code == ErrorCode::Unavailable => {
                    tracing::debug!(execution = %self.id, "event stream reconnect failed");
                }
                Err(err) => return Err(err),
            }
        }
    }
}
