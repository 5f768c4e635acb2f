//! Authentication: `Authorization: Bearer <token>` or a session cookie becomes a [`Caller`]. A
//! missing, unknown, expired or revoked credential is 401; a cookie on an unsafe request from
//! another origin is 403. Tokens and cookies enter the same access checks.

use axum::extract::FromRequestParts;
use axum::http::Method;
use axum::http::header::{AUTHORIZATION, COOKIE, HOST, ORIGIN};
use axum::http::request::Parts;

use super::AppState;
use super::error::ApiError;
use crate::identity::Caller;

/// The browser session cookie.
pub const SESSION_COOKIE: &str = "openbot_session";

/// The session secret in the request's cookies, if any.
pub(crate) fn session_secret(parts: &Parts) -> Option<String> {
    parts
        .headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == SESSION_COOKIE && !value.is_empty()).then(|| value.to_string())
        })
}

/// Whether an unsafe request with a cookie comes from the server's own origin: its `Origin`
/// header must name this host. Browsers send `Origin` on every cross-origin and every unsafe
/// request, so a missing one is refused too.
fn same_origin(parts: &Parts) -> bool {
    let host = parts.headers.get(HOST).and_then(|h| h.to_str().ok());
    let origin = parts.headers.get(ORIGIN).and_then(|o| o.to_str().ok());
    match (host, origin) {
        (Some(host), Some(origin)) => {
            origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                == Some(host)
        }
        _ => false,
    }
}

async fn session_caller(parts: &Parts, state: &AppState, secret: &str) -> Result<Caller, ApiError> {
    if !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS) && !same_origin(parts)
    {
        return Err(ApiError::new(
            axum::http::StatusCode::FORBIDDEN,
            openbot_schema::ErrorCode::Forbidden,
            "a request with a session cookie must come from this server's own origin",
        ));
    }
    Ok(state.accounts.session_caller(secret).await?)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let Some(header) = parts.headers.get(AUTHORIZATION) else {
            return match session_secret(parts) {
                Some(secret) => Box::pin(session_caller(parts, state, &secret)).await,
                None => Err(ApiError::unauthorized(
                    "send an API token: `Authorization: Bearer <token>`",
                )),
            };
        };
        let secret = header
            .to_str()
            .ok()
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|secret| !secret.is_empty())
            .ok_or_else(|| {
                ApiError::unauthorized("the Authorization header must be `Bearer <token>`")
            })?;
        Ok(state.accounts.token_caller(secret).await?)
    }
}
