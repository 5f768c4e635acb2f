//! `/v1/sessions`: a browser session, a same-origin cookie that acts for the member.

use axum::Json;
use axum::extract::State;
use axum::http::header::SET_COOKIE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use openbot_schema::{ErrorBody, Session};

use super::AppState;
use super::auth::{SESSION_COOKIE, session_secret};
use super::error::ApiError;
use crate::identity::{Caller, SESSION_SECONDS};
use crate::store::stored_time;

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
    let session = state.accounts.start_session(&caller).await?;
    let cookie = format!(
        "{SESSION_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={SESSION_SECONDS}",
        session.secret
    );
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        headers.insert(SET_COOKIE, value);
    }
    let session = Session {
        expires_at: stored_time(session.expires_at)?,
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
    state.accounts.end_session(&caller).await?;
    let mut headers = HeaderMap::new();
    let cleared = format!("{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    if let Ok(value) = HeaderValue::from_str(&cleared) {
        headers.insert(SET_COOKIE, value);
    }
    Ok((StatusCode::NO_CONTENT, headers))
}
