//! Host tools in remote mode: the caller's own handlers answer the tool calls of the
//! executions this client started or observes. The server publishes each call and waits; a
//! watcher here runs the handler and delivers the result, which the server saves like any
//! tool result. A later client with the same handlers picks up calls left open.

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use openbot_schema::{ErrorCode, EventKind, EventPage, ExecutionId, ToolCall, ToolResult};
use reqwest::Method;
use tokio_util::sync::CancellationToken;

use super::transport::{Retry, Transport};
use crate::error::Error;
use crate::tool::{SharedTool, ToolContext};

/// How long one long poll for new events waits, in seconds.
const POLL_SECONDS: u64 = 30;
/// The wait after a failed poll before the next.
const POLL_BACKOFF: Duration = Duration::from_millis(500);

/// The handlers and the executions being watched.
#[derive(Clone)]
pub(super) struct HostTools {
    transport: Transport,
    handlers: Arc<HashMap<String, SharedTool>>,
    watched: Arc<Mutex<HashSet<ExecutionId>>>,
}

impl HostTools {
    pub(super) fn new(transport: Transport, tools: Vec<SharedTool>) -> Self {
        let handlers = tools
            .into_iter()
            .map(|tool| (tool.definition().name.clone(), tool))
            .collect();
        Self {
            transport,
            handlers: Arc::new(handlers),
            watched: Arc::default(),
        }
    }

    /// Answers the calls of `id` that have a handler here, until the execution ends or the
    /// client closes. Watching an execution twice starts nothing new.
    pub(super) fn watch(&self, id: ExecutionId) {
        if self.handlers.is_empty()
            || !self
                .watched
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id)
        {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            this.answer_calls(id).await;
            this.watched
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
        });
    }

    async fn answer_calls(&self, id: ExecutionId) {
        let ended = self.transport.closed().child_token();
        let mut started: HashSet<String> = HashSet::new();
        let mut after = 0;
        loop {
            let path = format!("/v1/executions/{id}/events?after={after}&wait={POLL_SECONDS}");
            let page: EventPage = match self
                .transport
                .json(Method::GET, &path, None::<&()>, Retry::Safe)
                .await
            {
                Ok(page) => page,
                Err(err) if err.code == ErrorCode::Closed => break,
                Err(err) if err.code == ErrorCode::Unavailable => {
                    tokio::time::sleep(POLL_BACKOFF).await;
                    continue;
                }
                Err(err) => {
                    tracing::warn!(execution = %id, code = err.code.as_str(), "stopped answering host-tool calls");
                    break;
                }
            };
            after = page.next_after;
            // Calls answered within the same page are not open; a call answered later by
            // someone else gets a conflict on delivery, which is fine.
            let mut open: Vec<(u32, ToolCall)> = Vec::new();
            for event in page.events {
                match event.kind {
                    EventKind::ToolCall { step, call }
                        if self.handlers.contains_key(&call.name) =>
                    {
                        open.push((step, call))
                    }
                    EventKind::ToolResult { result, .. } => {
                        open.retain(|(_, call)| call.id != result.call_id)
                    }
                    _ => {}
                }
            }
            for (step, call) in open {
                if started.insert(call.id.clone()) {
                    tokio::spawn(self.clone().answer(id, step, call, ended.child_token()));
                }
            }
            if page.ended {
                break;
            }
        }
        ended.cancel();
    }

    /// Runs the handler of one call and delivers its result.
    async fn answer(self, id: ExecutionId, step: u32, call: ToolCall, cancel: CancellationToken) {
        let Some(handler) = self.handlers.get(&call.name) else {
            return;
        };
        let context = ToolContext {
            execution_id: id,
            step,
            call_id: call.id.clone(),
            idempotency_key: format!("{id}:{}", call.id),
            cancel: cancel.clone(),
            from_code: false,
        };
        let outcome = tokio::select! {
            outcome = AssertUnwindSafe(handler.call(call.arguments.clone(), context)).catch_unwind() => outcome,
            () = cancel.cancelled() => return,
        };
        let result = match outcome {
            Ok(Ok(output)) => ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                output: output.content,
                is_error: false,
            },
            Ok(Err(err)) => ToolResult::error(&call, err.message),
            Err(_) => {
                tracing::warn!(tool = %call.name, "a tool handler panicked");
                ToolResult::error(
                    &call,
                    format!("the tool `{}` failed unexpectedly", call.name),
                )
            }
        };
        if let Err(err) = deliver(&self.transport, id, &result).await
            && err.code != ErrorCode::Closed
        {
            tracing::warn!(execution = %id, code = err.code.as_str(), "a host-tool result was not delivered");
        }
    }
}

/// Delivers a result; a call that is not open (any more) fails with `conflict`.
pub(super) async fn deliver(
    transport: &Transport,
    id: ExecutionId,
    result: &ToolResult,
) -> Result<(), Error> {
    transport
        .send(
            Method::POST,
            &format!("/v1/executions/{id}/tool-results"),
            Some(result),
            Retry::Safe,
        )
        .await
        .map(|_| ())
}
