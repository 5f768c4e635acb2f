//! `/v1/limits`: shared permits and rate limits per scope of the organization (see
//! docs/limits.md). Listing needs the `models` read right; setting and removing need the
//! `models` write right and the owner or admin role.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{ErrorBody, ErrorCode, PageQuery, PutScopeLimit, ScopeLimit, ScopeLimitPage};

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::limits::LimitsError;
use crate::paging::Paging;

impl From<LimitsError> for ApiError {
    fn from(err: LimitsError) -> Self {
        match err {
            LimitsError::Invalid(message) => ApiError::invalid(message),
            LimitsError::Forbidden(err) => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, err.to_string())
            }
            LimitsError::NotAdmin => ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                "only owners and admins change limits",
            ),
            LimitsError::NotFound => ApiError::not_found("limit"),
            LimitsError::Store(err) => ApiError::store(err, "limit"),
        }
    }
}

/// The organization's limits by scope name, each with the permits held now. Paged: ask again
/// with `next_cursor` until absent.
#[utoipa::path(get, path = "/v1/limits", tag = "limits", params(PageQuery),
    responses((status = 200, body = ScopeLimitPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_limits(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<ScopeLimitPage>, ApiError> {
    let paging = Paging::parse(&query)?;
    let page = state.limits.list(&caller, &paging).await?;
    Ok(Json(page))
}

/// Sets the limit of a scope, shared by every node: `max_concurrent` calls at once,
/// `requests_per_window` and `tokens_per_window` per `window_ms`. Model requests take the
/// scopes `organization`, `provider:<kind>` and `bot:<id>`; other callers name their own. A
/// call waits for room up to `max_wait_ms`, then fails with category `timeout`. The buckets
/// start full.
#[utoipa::path(put, path = "/v1/limits/{scope}", tag = "limits",
    params(("scope" = String, Path, description = "The scope: letters, digits and `: . _ -`", pattern = "^[A-Za-z0-9:._-]{1,200}$")),
    request_body = PutScopeLimit,
    responses((status = 200, body = ScopeLimit), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn put_limit(
    State(state): State<AppState>,
    caller: Caller,
    Path(scope): Path<String>,
    ApiJson(request): ApiJson<PutScopeLimit>,
) -> Result<Json<ScopeLimit>, ApiError> {
    let limit = state.limits.put(&caller, &scope, &request).await?;
    Ok(Json(limit))
}

/// Removes the limit of a scope: its calls are no longer limited.
#[utoipa::path(delete, path = "/v1/limits/{scope}", tag = "limits",
    params(("scope" = String, Path, description = "The scope", pattern = "^[A-Za-z0-9:._-]{1,200}$")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_limit(
    State(state): State<AppState>,
    caller: Caller,
    Path(scope): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.limits.delete(&caller, &scope).await?;
    Ok(StatusCode::NO_CONTENT)
}
