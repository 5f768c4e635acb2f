//! `/v1/models/providers`: the organization's model provider settings. Keys are stored sealed
//! and never returned; only owners and admins change them.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    Action, ErrorBody, PageQuery, ProviderSettings, ProviderSettingsPage, PutProvider, Resource,
};

use super::AppState;
use super::error::StoreResultExt;
use super::error::{ApiError, require_admin};
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::models::{PROVIDER_KINDS, ProviderRow};
use crate::paging::Paging;
use crate::store::{StoreError, stored_time};

fn view(row: ProviderRow) -> Result<ProviderSettings, StoreError> {
    Ok(ProviderSettings {
        kind: row.kind,
        base_url: row.base_url,
        has_key: row.key_record.is_some(),
        updated_at: stored_time(row.updated_at)?,
    })
}

fn kind(kind: &str) -> Result<&'static str, ApiError> {
    PROVIDER_KINDS
        .iter()
        .find(|k| **k == kind)
        .copied()
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "unknown provider `{kind}`: use {}",
                PROVIDER_KINDS.join(", ")
            ))
        })
}

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
    caller.require(Resource::Models, Action::Read)?;
    let paging = Paging::<String>::parse(&query)?;
    let rows = state
        .models
        .providers_page(
            caller.member.organization_id,
            paging.after.as_deref(),
            paging.fetch(),
        )
        .await
        .about("model providers")?;
    Ok(Json(paging.try_page(rows, |row| row.kind.clone(), view)?))
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
    caller.require(Resource::Models, Action::Write)?;
    require_admin(&caller, "change model providers")?;
    caller.require_whole_organization()?;
    let kind = kind(&kind_name)?;
    if let Some(url) = &request.base_url {
        let valid = reqwest::Url::parse(url)
            .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
        if !valid {
            return Err(ApiError::invalid(
                "base_url must be an http:// or https:// URL",
            ));
        }
        state
            .platform
            .outbound()
            .check_url(url)
            .map_err(|e| ApiError::invalid(e.to_string()))?;
    }
    let has_key = request.api_key.as_deref().is_some_and(|k| !k.is_empty());
    // The key rule (crate::platform): a platform key never goes to an organization's URL, and
    // a compatible key goes only to the URL saved with it.
    if request.base_url.is_some() && !has_key {
        return Err(ApiError::invalid(
            "a base_url needs the organization's own api_key: a platform key is only sent to the platform's endpoint",
        ));
    }
    if kind == "compatible" && has_key && request.base_url.is_none() {
        return Err(ApiError::invalid(
            "a compatible api_key needs its base_url: the key is sent only to that endpoint",
        ));
    }
    let key = match request.api_key.as_deref().filter(|k| !k.is_empty()) {
        Some(key) => match state
            .engine
            .context()
            .keys
            .seal(uuid::Uuid::now_v7(), key.as_bytes())
        {
            Ok(blob) => Some(blob),
            Err(err) => {
                return Err(ApiError::failed(
                    openbot_schema::ErrorCategory::Internal,
                    err.to_string(),
                ));
            }
        },
        None => None,
    };
    let row = state
        .models
        .put_provider(
            caller.member.organization_id,
            kind,
            request.base_url.as_deref(),
            key,
        )
        .await
        .about("model provider")?;
    Ok(Json(view(row)?))
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
    caller.require(Resource::Models, Action::Write)?;
    require_admin(&caller, "change model providers")?;
    caller.require_whole_organization()?;
    let kind = kind(&kind_name)?;
    match state
        .models
        .delete_provider(caller.member.organization_id, kind)
        .await
    {
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) => Err(ApiError::not_found("model provider")),
        Err(err) => Err(ApiError::store(err, "model provider")),
    }
}
