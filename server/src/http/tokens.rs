//! `/v1/tokens`: the caller's API tokens.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::Utc;
use openbot_schema::{
    Action, ApiToken, ApiTokenPage, CreateToken, CreatedToken, ErrorBody, PageQuery, Resource,
    TokenId,
};
use uuid::Uuid;

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::identity::{Caller, NewToken, TokenRow, new_secret, secret_hash};
use crate::paging::Paging;
use crate::store::{StoreError, stored_time, stored_time_opt};

fn token_view(row: TokenRow) -> Result<ApiToken, StoreError> {
    Ok(ApiToken {
        id: TokenId::from(row.id),
        name: row.name,
        rights: row.rights,
        bot_ids: row.bot_ids,
        expires_at: stored_time_opt(row.expires_at)?,
        revoked_at: stored_time_opt(row.revoked_at)?,
        created_at: stored_time(row.created_at)?,
    })
}

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
    caller.require(Resource::Tokens, Action::Write)?;
    if request.name.is_empty() || request.name.chars().count() > 100 {
        return Err(ApiError::invalid(
            "a token's name must have 1-100 characters",
        ));
    }
    if let Some(extra) = request.rights.iter().find(|r| !caller.rights.contains(r)) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            openbot_schema::ErrorCode::Forbidden,
            format!(
                "a new token cannot have a right this token lacks: {:?} {:?}",
                extra.action, extra.resource
            ),
        ));
    }
    if let Some(limit) = &caller.bot_ids {
        let wider = match &request.bot_ids {
            None => true,
            Some(ids) => ids.iter().any(|id| !limit.contains(id)),
        };
        if wider {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                openbot_schema::ErrorCode::Forbidden,
                "a new token cannot reach Bots this token cannot",
            ));
        }
    }
    if request.expires_at.is_some_and(|at| at <= Utc::now()) {
        return Err(ApiError::invalid("expires_at must be in the future"));
    }
    let secret = new_secret();
    let new = NewToken {
        id: Uuid::now_v7(),
        name: request.name,
        secret_hash: secret_hash(&secret),
        rights: request.rights,
        bot_ids: request.bot_ids,
        expires_at: request.expires_at.map(|at| at.timestamp_millis()),
    };
    let row = match state
        .identity
        .create_token(caller.member.member_id, new)
        .await
    {
        Ok(row) => row,
        Err(err) => return Err(ApiError::store(err, "token")),
    };
    Ok((
        StatusCode::CREATED,
        Json(CreatedToken {
            token: token_view(row)?,
            secret,
        }),
    ))
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
    caller.require(Resource::Tokens, Action::Read)?;
    let paging = Paging::parse(&query)?;
    match state
        .identity
        .tokens_of(caller.member.member_id, paging.after, paging.fetch())
        .await
    {
        Ok(rows) => Ok(Json(paging.try_page(
            rows,
            |row| (row.created_at, row.id),
            token_view,
        )?)),
        Err(err) => Err(ApiError::store(err, "tokens")),
    }
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
    caller.require(Resource::Tokens, Action::Write)?;
    let id: TokenId = id
        .parse()
        .map_err(|e: openbot_schema::IdParseError| ApiError::invalid(e.to_string()))?;
    match state
        .identity
        .revoke_token(caller.member.member_id, id.as_uuid())
        .await
    {
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) => Err(ApiError::not_found("token")),
        Err(err) => Err(ApiError::store(err, "token")),
    }
}
