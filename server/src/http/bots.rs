//! `/v1/bots`: create, read, list, change and delete Bots, through the Bot use cases.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{Bot, BotId, BotPage, BotSpec, BotUpdate, ErrorBody, PageQuery};

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::paging::Paging;

fn parse_id(id: &str) -> Result<BotId, ApiError> {
    id.parse()
        .map_err(|e: openbot_schema::IdParseError| ApiError::invalid(e.to_string()))
}

/// Creates a Bot owned by the caller; `shared` lets every member of the organization use it.
#[utoipa::path(post, path = "/v1/bots", tag = "bots", request_body = BotSpec,
    responses((status = 201, body = Bot), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn create_bot(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(spec): ApiJson<BotSpec>,
) -> Result<(StatusCode, Json<Bot>), ApiError> {
    let bot = state.bots.create(&caller, &spec).await?;
    Ok((StatusCode::CREATED, Json(bot)))
}

/// The Bots the caller may use: its own and the organization's shared ones, oldest first.
/// Paged: ask again with `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/bots", tag = "bots", params(PageQuery),
    responses((status = 200, body = BotPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_bots(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<BotPage>, ApiError> {
    let paging = Paging::<BotId>::parse(&query)?;
    Ok(Json(state.bots.list(&caller, &paging).await?))
}

/// Reads a Bot.
#[utoipa::path(get, path = "/v1/bots/{id}", tag = "bots", params(("id" = uuid::Uuid, Path, description = "The Bot")),
    responses((status = 200, body = Bot), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_bot(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Bot>, ApiError> {
    Ok(Json(state.bots.get(&caller, parse_id(&id)?).await?))
}

/// Changes a Bot. With `revision`, a Bot that changed since is a 409 conflict.
#[utoipa::path(patch, path = "/v1/bots/{id}", tag = "bots", params(("id" = uuid::Uuid, Path, description = "The Bot")), request_body = BotUpdate,
    responses((status = 200, body = Bot), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("token" = [])))]
pub async fn update_bot(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(update): ApiJson<BotUpdate>,
) -> Result<Json<Bot>, ApiError> {
    Ok(Json(
        state.bots.update(&caller, parse_id(&id)?, update).await?,
    ))
}

/// Deletes a Bot: from this answer on nobody sees it, starts a Chat with it or sends to its
/// Chats; every member's Chats with it are then closed as a Chat's deletion closes them
/// (their Turns cancelled), durably, in the background.
#[utoipa::path(delete, path = "/v1/bots/{id}", tag = "bots", params(("id" = uuid::Uuid, Path, description = "The Bot")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_bot(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.bots.delete(&caller, parse_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}
