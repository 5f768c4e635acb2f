//! `/v1/bots`: create, read, list, change and delete Bots.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    Action, Bot, BotId, BotPage, BotSpec, BotUpdate, ErrorBody, PageQuery, Resource,
};

use super::AppState;
use super::error::ApiError;
use super::error::StoreResultExt;
use super::json::{ApiJson, ApiQuery};
use crate::bots::{bot_view, check_spec};
use crate::identity::Caller;
use crate::paging::Paging;

fn parse_id(id: &str) -> Result<BotId, ApiError> {
    id.parse()
        .map_err(|e: openbot_schema::IdParseError| ApiError::invalid(e.to_string()))
}

async fn visible(
    state: &AppState,
    caller: &Caller,
    id: BotId,
) -> Result<crate::bots::BotRow, ApiError> {
    match state.bots.visible_bot(caller, id).await {
        Ok(Some(row)) => Ok(row),
        Ok(None) => Err(ApiError::not_found("bot")),
        Err(err) => Err(ApiError::store(err, "bot")),
    }
}

/// Only the owner of a Bot (or an organization admin) may change or delete it.
fn may_change(caller: &Caller, row: &crate::bots::BotRow) -> Result<(), ApiError> {
    if row.owner_member_id == caller.member.member_id || caller.is_admin() {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            openbot_schema::ErrorCode::Forbidden,
            "only the Bot's owner or an admin may change it",
        ))
    }
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
    caller.require(Resource::Bots, Action::Write)?;
    check_spec(&spec).map_err(ApiError::invalid)?;
    state
        .platform
        .check_model(&spec.model)
        .map_err(ApiError::invalid)?;
    if caller.bot_ids.is_some() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            openbot_schema::ErrorCode::Forbidden,
            "a token limited to some Bots cannot create Bots",
        ));
    }
    let row = state
        .bots
        .create_bot(&caller, BotId::new(), &spec)
        .await
        .about("bot")?;
    Ok((StatusCode::CREATED, Json(bot_view(row)?)))
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
    caller.require(Resource::Bots, Action::Read)?;
    let paging = Paging::<BotId>::parse(&query)?;
    let rows = state
        .bots
        .visible_bots(&caller, paging.after, paging.fetch())
        .await
        .about("bots")?;
    Ok(Json(paging.try_page(rows, |row| row.id, bot_view)?))
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
    caller.require(Resource::Bots, Action::Read)?;
    Ok(Json(bot_view(
        visible(&state, &caller, parse_id(&id)?).await?,
    )?))
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
    caller.require(Resource::Bots, Action::Write)?;
    let row = visible(&state, &caller, parse_id(&id)?).await?;
    may_change(&caller, &row)?;
    let revision = match update.revision {
        Some(revision) if revision as i64 != row.revision => {
            return Err(ApiError::conflict(format!(
                "the Bot is at revision {}, not {revision}",
                row.revision
            )));
        }
        _ => row.revision,
    };
    let mut spec = row.spec.clone();
    if let Some(name) = update.name {
        spec.name = name;
    }
    if let Some(instructions) = update.instructions {
        spec.instructions = instructions;
    }
    if let Some(model) = update.model {
        state
            .platform
            .check_model(&model)
            .map_err(ApiError::invalid)?;
        spec.model = model;
    }
    if let Some(tools) = update.tools {
        spec.tools = tools;
    }
    if let Some(limits) = update.limits {
        spec.limits = limits;
    }
    if let Some(shared) = update.shared {
        spec.shared = shared;
    }
    if let Some(memory) = update.memory {
        spec.memory = memory;
    }
    if let Some(reminders) = update.reminders {
        spec.reminders = reminders;
    }
    if let Some(on) = update.code_mode {
        spec.code_mode = on;
    }
    check_spec(&spec).map_err(ApiError::invalid)?;
    match state.bots.update_bot(row.id, revision, &spec).await {
        Ok(Some(row)) => Ok(Json(bot_view(row)?)),
        Ok(None) => Err(ApiError::conflict(
            "the Bot changed meanwhile; read it again",
        )),
        Err(err) => Err(ApiError::store(err, "bot")),
    }
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
    caller.require(Resource::Bots, Action::Write)?;
    let row = visible(&state, &caller, parse_id(&id)?).await?;
    may_change(&caller, &row)?;
    match crate::bots::delete_bot(&state.engine, row.organization_id, row.id).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(crate::engine::EngineError::Store(err)) => Err(ApiError::store(err, "bot")),
        Err(err) => Err(ApiError::failed(
            openbot_schema::ErrorCategory::Internal,
            err.to_string(),
        )),
    }
}
