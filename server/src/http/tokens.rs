//! `/v1/tokens`: the caller's API tokens, through the account use cases.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{ApiTokenPage, CreateToken, CreatedToken, ErrorBody, PageQuery, TokenId};

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::paging::Paging;

/// Creates a token for the caller's member, with no more rights than the caller's token and
/// no wider Bot limit. The secret is in this answer only.
#[utoipa::path(post, path = "/v1/tokens", tag = "tokens", request_body = CreateToken,
    responses((status = 201, body = CreatedToken), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn create_token(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<CreateToken>,
) -> Result<(StatusCode, Json<CreatedToken>), ApiError> {
    let created = state.accounts.create_token(&caller, request).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// The caller's member's tokens, newest first. Paged: ask again with `next_cursor` until it
/// is absent.
#[utoipa::path(get, path = "/v1/tokens", tag = "tokens", params(PageQuery),
    responses((status = 200, body = ApiTokenPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_tokens(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<ApiTokenPage>, ApiError> {
    let paging = Paging::parse(&query)?;
    Ok(Json(state.accounts.tokens(&caller, &paging).await?))
}

/// Revokes one of the caller's member's tokens; it stops working at once.
#[utoipa::path(delete, path = "/v1/tokens/{id}", tag = "tokens", params(("id" = uuid::Uuid, Path, description = "The token")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn revoke_token(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id: TokenId = id
        .parse()
        .map_err(|e: openbot_schema::IdParseError| ApiError::invalid(e.to_string()))?;
    state.accounts.revoke_token(&caller, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
