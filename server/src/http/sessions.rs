//! `/v1/sessions`: a browser session, a same-origin cookie that acts for the member.

use axum::Json;
use axum::extract::State;
use axum::http::header::SET_COOKIE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use openbot_schema::{ErrorBody, ErrorCode, Right, Session};

use super::AppState;
use super::auth::{SESSION_COOKIE, session_secret};
use super::error::ApiError;
use crate::identity::{Caller, Credential, new_secret, secret_hash};
use crate::store::{now_ms, stored_time};

/// How long a session lasts, in seconds (one day).
pub const SESSION_SECONDS: i64 = 86_400;

/// Starts a session for the member of the token (which must hold every right) and sets it as
/// an `HttpOnly`, `SameSite=Strict` cookie. Unsafe requests with the cookie must come from
/// this server's own origin.
#[utoipa::path(post, path = "/v1/sessions", tag = "sessions",
    responses((status = 201, body = Session), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn create_session(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<(StatusCode, HeaderMap, Json<Session>), ApiError> {
    if Right::all().iter().any(|r| !caller.rights.contains(r)) || caller.bot_ids.is_some() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "a session needs a token with every right and no Bot limit",
        ));
    }
    let secret = new_secret();
    let expires_at = now_ms() + SESSION_SECONDS * 1000;
    if let Err(err) = state
        .identity
        .create_session(
            caller.member.member_id,
            uuid::Uuid::now_v7(),
            &secret_hash(&secret),
            expires_at,
        )
        .await
    {
        return Err(ApiError::store(err, "session"));
    }
    let cookie = format!(
        "{SESSION_COOKIE}={secret}; HttpOnly; SameSite=Strict; Path=/; Max-Age={SESSION_SECONDS}"
    );
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        headers.insert(SET_COOKIE, value);
    }
    let session = Session {
        expires_at: stored_time(expires_at)?,
    };
    Ok((StatusCode::CREATED, headers, Json(session)))
}

/// Ends the session of the cookie and clears it.
#[utoipa::path(delete, path = "/v1/sessions", tag = "sessions",
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn end_session(
    State(state): State<AppState>,
    caller: Caller,
    parts: Parts,
) -> Result<(StatusCode, HeaderMap), ApiError> {
    if session_secret(&parts).is_none() {
        return Err(ApiError::unauthorized("no session cookie"));
    }
    // A request that also sent a token acts with the token: its session is not the caller's.
    if let Credential::Session { id } = caller.credential
        && let Err(err) = state.identity.revoke_session(id).await
    {
        return Err(ApiError::store(err, "session"));
    }
    let mut headers = HeaderMap::new();
    let cleared = format!("{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    if let Ok(value) = HeaderValue::from_str(&cleared) {
        headers.insert(SET_COOKIE, value);
    }
    Ok((StatusCode::NO_CONTENT, headers))
}
