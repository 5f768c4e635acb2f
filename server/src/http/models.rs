//! `/v1/models/providers`: the organization's model provider settings, through their use
//! cases. Keys are stored sealed and never returned; only owners and admins change them.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{ErrorBody, PageQuery, ProviderSettings, ProviderSettingsPage, PutProvider};

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::paging::Paging;

/// The organization's provider settings (without keys), by kind. Paged: ask again with
/// `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/models/providers", tag = "models", params(PageQuery),
    responses((status = 200, body = ProviderSettingsPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_providers(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<ProviderSettingsPage>, ApiError> {
    let paging = Paging::<String>::parse(&query)?;
    Ok(Json(state.providers.list(&caller, &paging).await?))
}

/// Sets the organization's settings for a provider: its API key (sealed) and base URL. Turns
/// of the organization's Bots use them from their next model request.
#[utoipa::path(put, path = "/v1/models/providers/{kind}", tag = "models",
    params(("kind" = String, Path, description = "openai, anthropic or compatible", pattern = "^(openai|anthropic|compatible)$")),
    request_body = PutProvider,
    responses((status = 200, body = ProviderSettings), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn put_provider(
    State(state): State<AppState>,
    caller: Caller,
    Path(kind_name): Path<String>,
    ApiJson(request): ApiJson<PutProvider>,
) -> Result<Json<ProviderSettings>, ApiError> {
    Ok(Json(
        state.providers.put(&caller, &kind_name, &request).await?,
    ))
}

/// Removes the organization's settings for a provider; its Bots then use the server's.
#[utoipa::path(delete, path = "/v1/models/providers/{kind}", tag = "models",
    params(("kind" = String, Path, description = "openai, anthropic or compatible", pattern = "^(openai|anthropic|compatible)$")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_provider(
    State(state): State<AppState>,
    caller: Caller,
    Path(kind_name): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.providers.delete(&caller, &kind_name).await?;
    Ok(StatusCode::NO_CONTENT)
}
