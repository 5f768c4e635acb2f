//! `/v1/executions`: read an execution, follow its events (SSE or long polling, resumable
//! from any cursor), cancel, pause or resume it, deliver its tool results. Closing an event
//! stream cancels nothing. Every route answers `404` for work the caller may not see: another
//! member's, a service's, or, for a token limited to some Bots, work for a Chat of another Bot.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::http::header::{ACCEPT, HeaderName};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{FutureExt as _, StreamExt};
use openbot_schema::{ErrorBody, ErrorCategory, EventPage, Execution, ExecutionId, ToolResult};
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use super::lean::CanDefer;
use crate::engine::OBSERVE_PAGE;
use crate::executions::{Command, ExecutionError, Executions};
use crate::identity::Caller;
use crate::store::event_type;

/// The longest a long poll waits, in seconds.
pub const MAX_WAIT_SECONDS: u64 = 60;

fn parse_id(id: &str) -> Result<ExecutionId, ApiError> {
    id.parse()
        .map_err(|e: openbot_schema::IdParseError| ApiError::invalid(e.to_string()))
}

/// The execution use cases on this node's engine (a cheap wrapper, made per request).
fn executions(state: &AppState) -> Executions {
    Executions::new(Arc::clone(&state.engine))
}

impl From<ExecutionError> for ApiError {
    fn from(err: ExecutionError) -> Self {
        match err {
            ExecutionError::NotFound => ApiError::not_found("execution"),
            ExecutionError::Forbidden(message) => ApiError::forbidden(message),
            ExecutionError::Conflict(message) => ApiError::conflict(message),
            ExecutionError::Internal(cause) => ApiError::failed(ErrorCategory::Internal, cause),
            ExecutionError::Store(err) => ApiError::store(err, "execution"),
        }
    }
}

/// Reads an execution.
#[utoipa::path(get, path = "/v1/executions/{id}", tag = "executions", params(("id" = uuid::Uuid, Path, description = "The execution")),
    responses((status = 200, body = Execution), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_execution(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Execution>, ApiError> {
    Ok(Json(executions(&state).get(&caller, parse_id(&id)?).await?))
}

/// Runs `command` and answers 202 with the execution as it is then.
async fn command(
    state: &AppState,
    caller: &Caller,
    id: &str,
    command: Command,
) -> Result<(axum::http::StatusCode, Json<Execution>), ApiError> {
    let execution = executions(state)
        .command(caller, parse_id(id)?, command)
        .await?;
    Ok((axum::http::StatusCode::ACCEPTED, Json(execution)))
}

/// Asks an execution to stop. It moves to `cancelling` and ends `cancelled` once its work
/// stopped; an ended execution answers 409.
#[utoipa::path(post, path = "/v1/executions/{id}/cancel", tag = "executions", params(("id" = uuid::Uuid, Path, description = "The execution")),
    responses((status = 202, body = Execution), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("token" = [])))]
pub async fn cancel_execution(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(axum::http::StatusCode, Json<Execution>), ApiError> {
    command(&state, &caller, &id, Command::Cancel).await
}

/// Pauses an execution and its descendants: each stops sending, lets calls in flight save
/// their results, gives up its resources and waits (state `waiting`) until resumed. Paused
/// time does not count against a time limit. An ended execution answers 409.
#[utoipa::path(post, path = "/v1/executions/{id}/pause", tag = "executions", params(("id" = uuid::Uuid, Path, description = "The execution")),
    responses((status = 202, body = Execution), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("token" = [])))]
pub async fn pause_execution(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(axum::http::StatusCode, Json<Execution>), ApiError> {
    command(&state, &caller, &id, Command::Pause).await
}

/// Resumes a paused execution and its paused descendants. While a parent of it is paused it
/// answers 409: a child cannot bypass its parent's pause.
#[utoipa::path(post, path = "/v1/executions/{id}/resume", tag = "executions", params(("id" = uuid::Uuid, Path, description = "The execution")),
    responses((status = 202, body = Execution), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("token" = [])))]
pub async fn resume_execution(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(axum::http::StatusCode, Json<Execution>), ApiError> {
    command(&state, &caller, &id, Command::Resume).await
}

/// Delivers the result of a host-tool call the execution waits for (a `tool_call` event with
/// no `tool_result` yet). The Turn saves it like any tool result and goes on. The first
/// result delivered for a call is used; a call that is not open answers 409.
#[utoipa::path(post, path = "/v1/executions/{id}/tool-results", tag = "executions", params(("id" = uuid::Uuid, Path, description = "The execution")),
    request_body = ToolResult,
    responses((status = 202, description = "The result was delivered"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("token" = [])))]
pub async fn deliver_tool_result(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(result): ApiJson<ToolResult>,
) -> Result<axum::http::StatusCode, ApiError> {
    executions(&state)
        .deliver(&caller, parse_id(&id)?, &result)
        .await?;
    Ok(axum::http::StatusCode::ACCEPTED)
}

/// Where to start reading events.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Read the events after this sequence (default 0: from the start). `Last-Event-ID` wins.
    #[serde(default)]
    after: Option<u64>,
    /// Long polling: wait up to this many seconds (at most 60) for the first new event.
    #[serde(default)]
    wait: Option<u64>,
}

/// The events of an execution after a cursor. With `Accept: text/event-stream` they stream as
/// server-sent events (each with its sequence as `id`, so a client resumes with
/// `Last-Event-ID`) until the execution's last event; otherwise one page is answered as JSON,
/// waiting up to `wait` seconds for the first event.
#[utoipa::path(get, path = "/v1/executions/{id}/events", tag = "executions",
    params(("id" = uuid::Uuid, Path, description = "The execution"), EventsQuery),
    responses(
        (status = 200, description = "A page of events; with `Accept: text/event-stream`, the events as server-sent events",
            content((EventPage = "application/json"), (String = "text/event-stream"))),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn events(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<EventsQuery>,
    CanDefer(can_defer): CanDefer,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    // Boxed reads: a long poll's handler waits with only what it holds (see `page`).
    let row = Box::pin(executions(&state).readable(&caller, id)).await?;
    let last_event_id = HeaderName::from_static("last-event-id");
    let after = match headers.get(&last_event_id) {
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| ApiError::invalid("Last-Event-ID must be an event sequence"))?,
        None => query.after.unwrap_or(0),
    };
    let wants_stream = headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    // The header values share hyper's read buffer; let it go before waiting, so that an idle
    // long poll keeps one read buffer, not two.
    drop(headers);
    if wants_stream {
        return Ok(stream(state, id, after).into_response());
    }
    let wait = Duration::from_secs(query.wait.unwrap_or(0).min(MAX_WAIT_SECONDS));
    let ended = row.state.is_terminal();
    drop(row);
    let answer = async move {
        match page(&state, id, after, wait, ended).await {
            Ok(page) => Json(page).into_response(),
            // A deferred answer leaves without the sealing layer: its fault is sealed here.
            Err(err) => err.seal_now(&state).await.into_response(),
        }
    };
    if can_defer && !wait.is_zero() && !ended {
        // The connection waits outside this handler (see `http/lean.rs`), holding only the
        // page's future: the same answer, status included.
        return Ok(super::lean::deferred(answer));
    }
    Ok(Box::pin(answer).await)
}

async fn page(
    state: &AppState,
    id: ExecutionId,
    after: u64,
    wait: Duration,
    ended: bool,
) -> Result<EventPage, ApiError> {
    let events = if ended || wait.is_zero() {
        let store = &state.engine.context().store;
        match store.events(id, after as i64, OBSERVE_PAGE).await {
            Ok(events) => events,
            Err(err) => return Err(ApiError::store(err, "execution")),
        }
    } else {
        // Through the node's observer: readers at the execution's head share one read of the
        // log per wake-up (many long polls of one Turn cost one query, not one each), and a
        // reader behind reads its own page. It waits for the first event, then the page is
        // what the observer read with it (it ends after a terminal event).
        let mut observer = state.engine.observe(id, after);
        let mut events = Vec::new();
        match tokio::time::timeout(wait, observer.next()).await {
            Ok(Some(Ok(first))) => {
                events.push(first);
                // Only what it holds already: no wait for later events.
                while events.len() < OBSERVE_PAGE as usize {
                    match observer.next().now_or_never() {
                        Some(Some(Ok(event))) => events.push(event),
                        _ => break,
                    }
                }
            }
            Ok(Some(Err(err))) => return Err(ApiError::store(err, "execution")),
            Ok(None) | Err(_) => {}
        }
        events
    };
    let last = events.last().map(|e| e.sequence).unwrap_or(after);
    let ended = match events.last() {
        Some(event) => event.kind.is_terminal(),
        None => match state.engine.execution(id).await {
            Ok(row) => row.state.is_terminal() && after as i64 >= row.last_sequence,
            Err(err) => return Err(ApiError::store(err, "execution")),
        },
    };
    Ok(EventPage {
        events,
        next_after: last,
        ended,
    })
}

/// A `request_failed` event with the error body's fields, written by hand: the body is a
/// few plain fields, so it always encodes.
fn failure_event(failure: &ApiError) -> SseEvent {
    let data = serde_json::json!({
        "code": "request_failed",
        "message": failure.body.message,
        "category": failure.body.category,
        "error_id": failure.body.error_id.map(|id| id.to_string()),
    });
    SseEvent::default()
        .event("request_failed")
        .data(data.to_string())
}

fn stream(state: AppState, id: ExecutionId, after: u64) -> impl IntoResponse {
    let observer = state.engine.observe(id, after);
    let events = futures::stream::unfold(
        (observer, state, false),
        move |(mut observer, state, done)| async move {
            if done {
                return None;
            }
            match observer.next().await? {
                Ok(event) => match SseEvent::default()
                    .id(event.sequence.to_string())
                    .event(event_type(&event.kind))
                    .json_data(&event)
                {
                    Ok(sse) => Some((Ok::<_, Infallible>(sse), (observer, state, false))),
                    // Never skipped silently: the reader gets a failure with an error ID (the
                    // cause sealed) and ends here, and may resume from its last cursor.
                    Err(err) => {
                        let failure = ApiError::fault(
                            &state,
                            ErrorCategory::Internal,
                            format!(
                                "event {} of execution {id} could not be encoded: {err}",
                                event.sequence
                            ),
                        )
                        .await;
                        Some((Ok(failure_event(&failure)), (observer, state, true)))
                    }
                },
                Err(err) => {
                    // After the stream started, a fault is sent as a failure event with the same
                    // fields as the error body; the full cause is sealed.
                    // The stream leaves without the sealing layer: sealed here.
                    let failure = ApiError::store(err, "execution").seal_now(&state).await;
                    Some((Ok(failure_event(&failure)), (observer, state, true)))
                }
            }
        },
    );
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
