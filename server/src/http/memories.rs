//! `/v1/bots/{id}/memories`: a Bot's memories with their evidence (list, search, write, edit,
//! delete), and `/v1/memory-settings`: the organization's embeddings and helper models.
//! Reading needs the `bots` read right, changing the `bots` write right; a member reads the
//! shared memories and its own private ones whose evidence (Chat) it may read, and changes its
//! own (shared ones: the Bot's owner or an admin).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    BotId, CreateMemory, ErrorBody, ErrorCode, Memory, MemoryFilter, MemoryPage, MemorySearch,
    MemorySearchResult, MemorySettings, MemoryUpdate, PageQuery,
};
use uuid::Uuid;

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::memories::MemoryError;
use crate::paging::Paging;

fn ids(bot: &str, memory: Option<&str>) -> Result<(BotId, Option<Uuid>), ApiError> {
    let bot = bot
        .parse()
        .map_err(|e: openbot_schema::IdParseError| ApiError::invalid(e.to_string()))?;
    let memory = memory
        .map(|m| {
            m.parse()
                .map_err(|_| ApiError::invalid("the memory ID must be a UUID"))
        })
        .transpose()?;
    Ok((bot, memory))
}

impl From<MemoryError> for ApiError {
    fn from(err: MemoryError) -> Self {
        match err {
            MemoryError::NotFound(what) => ApiError::not_found(what),
            MemoryError::Invalid(message) => ApiError::invalid(message),
            MemoryError::Forbidden(message) => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, message)
            }
            MemoryError::Store(err) => ApiError::store(err, "memory"),
            MemoryError::Sealed(err) => {
                ApiError::failed(openbot_schema::ErrorCategory::Internal, err.to_string())
            }
        }
    }
}

/// A Bot's memories the caller may read, oldest first; with `tag` or `status` only those.
/// Paged: ask again with `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/bots/{id}/memories", tag = "memories",
    params(("id" = uuid::Uuid, Path, description = "The Bot's ID"), PageQuery, MemoryFilter),
    responses((status = 200, body = MemoryPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_memories(
    State(state): State<AppState>,
    caller: Caller,
    Path(bot): Path<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
    ApiQuery(filter): ApiQuery<MemoryFilter>,
) -> Result<Json<MemoryPage>, ApiError> {
    let (bot, _) = ids(&bot, None)?;
    let paging = Paging::<Uuid>::parse(&query)?;
    let page = state.memories.list(&caller, bot, &filter, &paging).await?;
    Ok(Json(page))
}

/// Writes a memory by hand: the caller's private memory, or (`private: false`, the Bot's owner
/// or an admin) one every member of the Bot shares. Its evidence is empty.
#[utoipa::path(post, path = "/v1/bots/{id}/memories", tag = "memories",
    params(("id" = uuid::Uuid, Path, description = "The Bot's ID")),
    request_body = CreateMemory,
    responses((status = 201, body = Memory), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn create_memory(
    State(state): State<AppState>,
    caller: Caller,
    Path(bot): Path<String>,
    ApiJson(request): ApiJson<CreateMemory>,
) -> Result<(StatusCode, Json<Memory>), ApiError> {
    let (bot, _) = ids(&bot, None)?;
    let memory = state.memories.create(&caller, bot, request).await?;
    Ok((StatusCode::CREATED, Json(memory)))
}

/// One memory the caller may read, with its evidence.
#[utoipa::path(get, path = "/v1/bots/{id}/memories/{memory}", tag = "memories",
    params(("id" = uuid::Uuid, Path, description = "The Bot's ID"), ("memory" = uuid::Uuid, Path, description = "The memory's ID")),
    responses((status = 200, body = Memory), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_memory(
    State(state): State<AppState>,
    caller: Caller,
    Path((bot, memory)): Path<(String, String)>,
) -> Result<Json<Memory>, ApiError> {
    let (bot, memory) = ids(&bot, Some(&memory))?;
    let memory = state
        .memories
        .get(&caller, bot, memory.unwrap_or_default())
        .await?;
    Ok(Json(memory))
}

/// Changes a memory's content, tags or status (`retired` memories are never recalled).
/// Changing only tags or status keeps the stored ciphertext of its content.
#[utoipa::path(patch, path = "/v1/bots/{id}/memories/{memory}", tag = "memories",
    params(("id" = uuid::Uuid, Path, description = "The Bot's ID"), ("memory" = uuid::Uuid, Path, description = "The memory's ID")),
    request_body = MemoryUpdate,
    responses((status = 200, body = Memory), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn update_memory(
    State(state): State<AppState>,
    caller: Caller,
    Path((bot, memory)): Path<(String, String)>,
    ApiJson(update): ApiJson<MemoryUpdate>,
) -> Result<Json<Memory>, ApiError> {
    let (bot, memory) = ids(&bot, Some(&memory))?;
    let memory = state
        .memories
        .update(&caller, bot, memory.unwrap_or_default(), update)
        .await?;
    Ok(Json(memory))
}

/// Deletes a memory with its evidence.
#[utoipa::path(delete, path = "/v1/bots/{id}/memories/{memory}", tag = "memories",
    params(("id" = uuid::Uuid, Path, description = "The Bot's ID"), ("memory" = uuid::Uuid, Path, description = "The memory's ID")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_memory(
    State(state): State<AppState>,
    caller: Caller,
    Path((bot, memory)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let (bot, memory) = ids(&bot, Some(&memory))?;
    state
        .memories
        .delete(&caller, bot, memory.unwrap_or_default())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Searches the caller's readable active memories of a Bot, best first within `max_tokens`:
/// filtered in SQL (rights, owner, tags, status), then ranked by keyword and, where the
/// organization has an embeddings model, by vector similarity.
#[utoipa::path(post, path = "/v1/bots/{id}/memories/search", tag = "memories",
    params(("id" = uuid::Uuid, Path, description = "The Bot's ID")),
    request_body = MemorySearch,
    responses((status = 200, body = MemorySearchResult), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn search_memories(
    State(state): State<AppState>,
    caller: Caller,
    Path(bot): Path<String>,
    ApiJson(search): ApiJson<MemorySearch>,
) -> Result<Json<MemorySearchResult>, ApiError> {
    let (bot, _) = ids(&bot, None)?;
    let found = state.memories.search(&caller, bot, &search).await?;
    Ok(Json(found))
}

/// The organization's memory settings.
#[utoipa::path(get, path = "/v1/memory-settings", tag = "memories",
    responses((status = 200, body = MemorySettings), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_memory_settings(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<MemorySettings>, ApiError> {
    let settings = state.memories.settings(&caller).await?;
    Ok(Json(settings))
}

/// Sets the organization's embeddings model (`openai:<model>` or `compatible:<base
/// url>:<model>`, called in OpenAI's `/v1/embeddings` format with the organization's own
/// provider key) and helper model (learning); owners and admins with the `models` write right.
#[utoipa::path(put, path = "/v1/memory-settings", tag = "memories",
    request_body = MemorySettings,
    responses((status = 200, body = MemorySettings), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn put_memory_settings(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(settings): ApiJson<MemorySettings>,
) -> Result<Json<MemorySettings>, ApiError> {
    let platform = &state.platform;
    let settings = state
        .memories
        .put_settings(&caller, &settings, |spec| platform.check_model(spec))
        .await?;
    Ok(Json(settings))
}
