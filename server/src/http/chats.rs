//! `/v1/chats`: Chats, their input, their history; stop and delete.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    Chat, ChatEntryPage, ChatFilter, ChatId, ChatPage, CreateChat, ErrorBody, PageQuery, PlanMode,
    SendInput, SendReceipt,
};

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::chats::ChatError;
use crate::identity::Caller;
use crate::paging::Paging;

fn parse_id(id: &str) -> Result<ChatId, ApiError> {
    id.parse()
        .map_err(|e: openbot_schema::IdParseError| ApiError::invalid(e.to_string()))
}

impl From<ChatError> for ApiError {
    fn from(err: ChatError) -> Self {
        match err {
            ChatError::NotFound(what) => ApiError::not_found(what),
            ChatError::Invalid(message) => ApiError::invalid(message),
            ChatError::Conflict(message) => ApiError::conflict(message),
            ChatError::Forbidden(message) => ApiError::forbidden(message),
            ChatError::Store(err) => ApiError::store(err, "chat"),
        }
    }
}

/// Creates a Chat of the caller with a Bot it may use.
#[utoipa::path(post, path = "/v1/chats", tag = "chats", request_body = CreateChat,
    responses((status = 201, body = Chat), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn create_chat(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<CreateChat>,
) -> Result<(StatusCode, Json<Chat>), ApiError> {
    let chat = state.chats.create(&caller, request.bot_id).await?;
    Ok((StatusCode::CREATED, Json(chat)))
}

/// The caller's Chats, oldest first; with `bot`, only its Chats with that Bot. Paged: ask
/// again with `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/chats", tag = "chats", params(PageQuery, ChatFilter),
    responses((status = 200, body = ChatPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_chats(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
    ApiQuery(filter): ApiQuery<ChatFilter>,
) -> Result<Json<ChatPage>, ApiError> {
    let paging = Paging::parse(&query)?;
    // The token's Bot limit is part of the query.
    let chats = state.chats.list(&caller, filter.bot, &paging).await?;
    Ok(Json(chats))
}

/// Reads one of the caller's Chats.
#[utoipa::path(get, path = "/v1/chats/{id}", tag = "chats", params(("id" = uuid::Uuid, Path, description = "The Chat")),
    responses((status = 200, body = Chat), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_chat(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Chat>, ApiError> {
    Ok(Json(state.chats.get(&caller, parse_id(&id)?).await?))
}

/// Sends input. It starts a Turn, or waits in order for its own Turn while one runs. A retry
/// with the same `command_key` and input answers the same execution; the same key with other
/// input, or for another Chat, is a 409 conflict.
#[utoipa::path(post, path = "/v1/chats/{id}/messages", tag = "chats", params(("id" = uuid::Uuid, Path, description = "The Chat")), request_body = SendInput,
    responses((status = 202, body = SendReceipt), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("token" = [])))]
pub async fn send(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<SendInput>,
) -> Result<(StatusCode, Json<SendReceipt>), ApiError> {
    // The use case reads the Chat (and answers 404 when the caller has none by this ID).
    let receipt = state.chats.send(&caller, parse_id(&id)?, input).await?;
    Ok((StatusCode::ACCEPTED, Json(receipt)))
}

/// Adds input to the running Turn (`steered`); with no Turn running it is sent as its own input.
/// A retry with the same `command_key` and input answers the same execution and adds nothing
/// again; the same key with other input, or for another Chat, is a 409 conflict.
#[utoipa::path(post, path = "/v1/chats/{id}/steer", tag = "chats", params(("id" = uuid::Uuid, Path, description = "The Chat")), request_body = SendInput,
    responses((status = 202, body = SendReceipt), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("token" = [])))]
pub async fn steer(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<SendInput>,
) -> Result<(StatusCode, Json<SendReceipt>), ApiError> {
    // The use case reads the Chat (and answers 404 when the caller has none by this ID).
    let receipt = state.chats.steer(&caller, parse_id(&id)?, input).await?;
    Ok((StatusCode::ACCEPTED, Json(receipt)))
}

/// Stops the running Turn; queued input then runs.
#[utoipa::path(post, path = "/v1/chats/{id}/stop", tag = "chats", params(("id" = uuid::Uuid, Path, description = "The Chat")),
    responses((status = 202), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn stop(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.chats.stop(&caller, parse_id(&id)?).await?;
    Ok(StatusCode::ACCEPTED)
}

/// Whether the Chat is in plan mode.
#[utoipa::path(get, path = "/v1/chats/{id}/plan-mode", tag = "chats", params(("id" = uuid::Uuid, Path, description = "The Chat")),
    responses((status = 200, body = PlanMode), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_plan_mode(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<PlanMode>, ApiError> {
    let enabled = state.chats.plan_mode(&caller, parse_id(&id)?).await?;
    Ok(Json(PlanMode { enabled }))
}

/// Turns plan mode on or off. In plan mode the Bot may only propose a plan; a person approves
/// it through `/v1/approvals` (which switches plan mode off) or switches it off here.
#[utoipa::path(put, path = "/v1/chats/{id}/plan-mode", tag = "chats", params(("id" = uuid::Uuid, Path, description = "The Chat")),
    request_body = PlanMode,
    responses((status = 200, body = PlanMode), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn put_plan_mode(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(request): ApiJson<PlanMode>,
) -> Result<Json<PlanMode>, ApiError> {
    let enabled = state
        .chats
        .set_plan_mode(&caller, parse_id(&id)?, request.enabled)
        .await?;
    Ok(Json(PlanMode { enabled }))
}

/// Deletes a Chat: closes it to input, cancels its Turns, and answers 204 once they ended
/// (202 when they still end after 30 s).
#[utoipa::path(delete, path = "/v1/chats/{id}", tag = "chats", params(("id" = uuid::Uuid, Path, description = "The Chat")),
    responses((status = 204), (status = 202), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_chat(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    match state.chats.delete(&caller, parse_id(&id)?).await {
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) => Ok(StatusCode::ACCEPTED),
        Err(err) => Err(ApiError::from(err)),
    }
}

/// The Chat's messages, oldest first: the saved messages of its ended Turns, with the notices
/// that followed them. Paged: ask again with `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/chats/{id}/messages", tag = "chats", params(("id" = uuid::Uuid, Path, description = "The Chat"), PageQuery),
    responses((status = 200, body = ChatEntryPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn history(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<ChatEntryPage>, ApiError> {
    let paging = Paging::parse(&query)?;
    let entries = state
        .chats
        .history(&caller, parse_id(&id)?, &paging)
        .await?;
    Ok(Json(entries))
}
