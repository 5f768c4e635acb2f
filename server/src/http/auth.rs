//! Authentication: `Authorization: Bearer <token>` becomes a [`Caller`]. A missing, unknown,
//! expired or revoked token is 401; every token enters the same access checks.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use super::AppState;
use super::error::ApiError;
use crate::identity::{Caller, secret_hash};
use crate::store::now_ms;

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts.headers.get(AUTHORIZATION).ok_or_else(|| {
            ApiError::unauthorized("send an API token: `Authorization: Bearer <token>`")
        })?;
        let secret = header
            .to_str()
            .ok()
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|secret| !secret.is_empty())
            .ok_or_else(|| {
                ApiError::unauthorized("the Authorization header must be `Bearer <token>`")
            })?;
        let found = match state.identity.token_by_hash(&secret_hash(secret)).await {
            Ok(found) => found,
            Err(err) => return Err(ApiError::from_store(state, err, "token").await),
        };
        let Some((token, member)) = found else {
            return Err(ApiError::unauthorized("the token is not valid"));
        };
        if token.revoked_at.is_some() {
            return Err(ApiError::unauthorized("the token was revoked"));
        }
        if token.expires_at.is_some_and(|at| at <= now_ms()) {
            return Err(ApiError::unauthorized("the token has expired"));
        }
        Ok(Caller {
            member,
            token_id: token.id,
            rights: token.rights,
            bot_ids: token.bot_ids,
        })
    }
}
