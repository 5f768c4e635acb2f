//! The operations the [`Client`] trait declares by hand, reached through the generic call path:
//! each one decodes its parameters, calls the typed method and encodes its answer. Both modes
//! use this one table, so an SDK's generic call does exactly what the typed method does (a
//! send watches its execution for host tools, a Chat deletion waits for its end).

use std::str::FromStr;
use std::time::Duration;

use futures::StreamExt;
use openbot_schema::{ApprovalState, Event, EventPage, PlanMode};

use super::Client;
use super::api::{ApiAnswer, ApiRequest, Operation};
use crate::error::Error;

/// The longest wait a generic `events` call may ask for, as on the server.
const MAX_EVENTS_WAIT: Duration = Duration::from_secs(60);

/// Runs `op` through the typed [`Client`] method that declares it. `None` when no Client method
/// declares it (an operation of the generated `Operations` only).
pub async fn client_operation<C: Client + ?Sized>(
    client: &C,
    op: &Operation,
    request: &ApiRequest,
) -> Option<Result<ApiAnswer, Error>> {
    op.client_method?;
    Some(run(client, op.id, request).await)
}

async fn run<C: Client + ?Sized>(
    client: &C,
    id: &str,
    request: &ApiRequest,
) -> Result<ApiAnswer, Error> {
    let path_id = || parse::<uuid::Uuid>(request, id, "id");
    match id {
        "create_bot" => ApiAnswer::of(&client.create_bot(request.body_as(id)?).await?),
        "get_bot" => ApiAnswer::of(&client.get_bot(path_id()?.into()).await?),
        "list_bots" => page_of(client.list_bots().await?, request, id),
        "update_bot" => ApiAnswer::of(
            &client
                .update_bot(path_id()?.into(), request.body_as(id)?)
                .await?,
        ),
        "delete_bot" => empty(client.delete_bot(path_id()?.into()).await),
        "create_chat" => {
            let body: openbot_schema::CreateChat = request.body_as(id)?;
            ApiAnswer::of(&client.create_chat(body.bot_id).await?)
        }
        "get_chat" => ApiAnswer::of(&client.get_chat(path_id()?.into()).await?),
        "send" => ApiAnswer::of(&client.send(path_id()?.into(), request.body_as(id)?).await?),
        "steer" => ApiAnswer::of(
            &client
                .steer(path_id()?.into(), request.body_as(id)?)
                .await?,
        ),
        "stop" => empty(client.stop(path_id()?.into()).await),
        "delete_chat" => empty(client.delete_chat(path_id()?.into()).await),
        "history" => page_of(client.history(path_id()?.into()).await?, request, id),
        "get_execution" => ApiAnswer::of(&client.get_execution(path_id()?.into()).await?),
        "events" => {
            let after: u64 = request.decoded(id, "after")?.unwrap_or(0);
            let wait: u64 = request.decoded(id, "wait")?.unwrap_or(0);
            let wait = Duration::from_secs(wait).min(MAX_EVENTS_WAIT);
            ApiAnswer::of(&events_page(client, path_id()?.into(), after, wait).await?)
        }
        "cancel_execution" => ApiAnswer::of(&client.cancel_execution(path_id()?.into()).await?),
        "deliver_tool_result" => empty(
            client
                .deliver_tool_result(path_id()?.into(), request.body_as(id)?)
                .await,
        ),
        "list_approvals" => {
            let state: Option<ApprovalState> = request.decoded(id, "state")?;
            page_of(client.list_approvals(state).await?, request, id)
        }
        "decide_approval" => ApiAnswer::of(
            &client
                .decide_approval(path_id()?, request.body_as(id)?)
                .await?,
        ),
        "list_unknown_outcomes" => ApiAnswer::of(
            &client
                .list_unknown_outcomes(
                    request.decoded(id, "limit")?,
                    request.decoded(id, "cursor")?,
                )
                .await?,
        ),
        "decide_outcome" => ApiAnswer::of(
            &client
                .decide_outcome(path_id()?.into(), request.body_as(id)?)
                .await?,
        ),
        "pause_execution" => ApiAnswer::of(&client.pause_execution(path_id()?.into()).await?),
        "resume_execution" => ApiAnswer::of(&client.resume_execution(path_id()?.into()).await?),
        "get_plan_mode" => ApiAnswer::of(&client.plan_mode(path_id()?.into()).await?),
        "put_plan_mode" => {
            let body: PlanMode = request.body_as(id)?;
            ApiAnswer::of(
                &client
                    .set_plan_mode(path_id()?.into(), body.enabled)
                    .await?,
            )
        }
        other => Err(super::api::unknown_operation(other)),
    }
}

/// The events after `after` that are there now or arrive within `wait`, as the server's long
/// poll answers them.
async fn events_page<C: Client + ?Sized>(
    client: &C,
    id: openbot_schema::ExecutionId,
    after: u64,
    wait: Duration,
) -> Result<EventPage, Error> {
    let mut stream = client.observe(id, after).await?;
    let mut events: Vec<Event> = Vec::new();
    let mut ended = false;
    let mut deadline = Some(tokio::time::Instant::now() + wait);
    loop {
        // The first event may be waited for; later ones are taken while they are ready.
        let next = match deadline {
            Some(at) => tokio::time::timeout_at(at, stream.next()).await.ok(),
            None => futures::FutureExt::now_or_never(stream.next()),
        };
        match next {
            Some(Some(event)) => {
                let event = event?;
                ended = event.kind.is_terminal();
                events.push(event);
                deadline = None;
                if ended {
                    break;
                }
            }
            Some(None) => {
                ended = true;
                break;
            }
            None => break,
        }
    }
    let next_after = events.last().map_or(after, |event| event.sequence);
    Ok(EventPage {
        events,
        next_after,
        ended,
    })
}

/// A page of a whole list the typed method read, as the paged operation answers it:
/// `{items, next_cursor}` with the request's `limit` (1-200, default 50) after its `cursor`.
/// The typed methods read whole lists (the remote one follows the server's cursors), so this
/// page's cursor is the position in that list: lists are ordered by when their items were
/// created, so a page stays right while items are added.
pub(crate) fn page_of<T: serde::Serialize>(
    items: Vec<T>,
    request: &ApiRequest,
    op: &str,
) -> Result<ApiAnswer, Error> {
    let limit: u64 = request.decoded(op, "limit")?.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(Error::invalid_input(format!(
            "limit must be between 1 and {MAX_PAGE}"
        )));
    }
    let start = match request.decoded::<String>(op, "cursor")? {
        None => 0,
        Some(cursor) => cursor
            .strip_prefix("at-")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| Error::invalid_input("cursor must be a `next_cursor` of this list"))?,
    };
    let total = items.len();
    let end = start.saturating_add(limit as usize).min(total);
    let page: Vec<T> = items.into_iter().skip(start).take(limit as usize).collect();
    let mut answer = serde_json::json!({ "items": page });
    if end < total {
        answer["next_cursor"] = serde_json::Value::String(format!("at-{end}"));
    }
    Ok(ApiAnswer::Json(answer))
}

/// The page size of a list unless asked otherwise, and the most a page holds (as the server's).
const DEFAULT_PAGE: u64 = 50;
const MAX_PAGE: u64 = 200;

fn empty(result: Result<(), Error>) -> Result<ApiAnswer, Error> {
    result.map(|()| ApiAnswer::Empty)
}

fn parse<T: FromStr>(request: &ApiRequest, op: &str, name: &str) -> Result<T, Error> {
    let text = request.text(op, name)?;
    T::from_str(&text).map_err(|_| {
        Error::invalid_input(format!(
            "`{}` is not a valid `{name}` for {op}",
            text.chars().take(64).collect::<String>()
        ))
    })
}
