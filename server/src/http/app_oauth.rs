//! `/v1/app-connections/{connection_id}/oauth`: OAuth 2.1 sign-in of an App connection (see
//! docs/apps-oauth.md). Reading needs the `apps` read right; signing in and removing need the
//! `apps` write right. The browser step is the caller's: `authorize` answers the URL to open,
//! `complete` takes the redirect's `code` and `state` from the member who began it.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    BeginOAuth, CompleteOAuth, ErrorBody, ErrorCode, OAuthAuthorization, OAuthCleanup,
    OAuthConnection, OAuthRemoval,
};
use uuid::Uuid;

use super::AppState;
use super::error::ApiError;
use super::json::ApiJson;
use crate::apps::oauth::OAuthError;
use crate::identity::Caller;

impl From<OAuthError> for ApiError {
    fn from(err: OAuthError) -> Self {
        match err {
            OAuthError::Invalid(message)
            | OAuthError::Discovery(message)
            | OAuthError::Refused(message) => ApiError::invalid(message),
            OAuthError::Exchange(_) | OAuthError::State(_) => ApiError::invalid(err.to_string()),
            OAuthError::Forbidden(err) => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, err.to_string())
            }
            OAuthError::NotAdmin => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, err.to_string())
            }
            OAuthError::NotFound => ApiError::not_found("OAuth connection"),
            OAuthError::ServerMismatch(_) => ApiError::invalid(err.to_string()),
            OAuthError::StateUsed | OAuthError::NeedsSignIn(_) | OAuthError::NotOAuth(_) => {
                ApiError::conflict(err.to_string())
            }
            OAuthError::Pending => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Unavailable,
                "the token request is still running: read the connection again",
            ),
            OAuthError::Store(err) => ApiError::store(err, "OAuth connection"),
        }
    }
}

fn parse(id: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(id).map_err(|_| {
        ApiError::invalid(format!(
            "`{}` is not an ID",
            id.chars().take(64).collect::<String>()
        ))
    })
}

/// Begins a sign-in of an App Connection opened with auth `oauth`, at its App's URL:
/// discovers the MCP server's authorization server (RFC 9728, RFC 8414),
/// registers a client there unless `client_id` is given (RFC 7591), and answers the
/// authorization URL (PKCE S256, `resource`) and its single-use `state`.
#[utoipa::path(post, path = "/v1/app-connections/{connection_id}/oauth/authorize", tag = "apps",
    params(("connection_id" = String, Path, description = "The App connection")),
    request_body = BeginOAuth,
    responses((status = 200, body = OAuthAuthorization), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn authorize_oauth(
    State(state): State<AppState>,
    caller: Caller,
    Path(connection_id): Path<String>,
    ApiJson(request): ApiJson<BeginOAuth>,
) -> Result<Json<OAuthAuthorization>, ApiError> {
    let id = parse(&connection_id)?;
    let step = crate::apps::begin_sign_in(&state.apps, &state.oauth, &caller, id, &request).await?;
    Ok(Json(step))
}

/// Completes a sign-in with the redirect's `code` and `state`: only the member who began it,
/// for this connection, once, before it expires. Answers the connection once the code
/// exchange (durable work) has ended.
#[utoipa::path(post, path = "/v1/app-connections/{connection_id}/oauth/complete", tag = "apps",
    params(("connection_id" = String, Path, description = "The App connection")),
    request_body = CompleteOAuth,
    responses((status = 200, body = OAuthConnection), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("token" = [])))]
pub async fn complete_oauth(
    State(state): State<AppState>,
    caller: Caller,
    Path(connection_id): Path<String>,
    ApiJson(request): ApiJson<CompleteOAuth>,
) -> Result<Json<OAuthConnection>, ApiError> {
    let id = parse(&connection_id)?;
    let status = state.oauth.complete(&caller, id, &request).await?;
    Ok(Json(status))
}

/// The connection's OAuth sign-in: `ready`, `needs_sign_in` (with why) or `removed`.
#[utoipa::path(get, path = "/v1/app-connections/{connection_id}/oauth", tag = "apps",
    params(("connection_id" = String, Path, description = "The App connection")),
    responses((status = 200, body = OAuthConnection), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_oauth(
    State(state): State<AppState>,
    caller: Caller,
    Path(connection_id): Path<String>,
) -> Result<Json<OAuthConnection>, ApiError> {
    let id = parse(&connection_id)?;
    let status = state.oauth.status(&caller, id).await?;
    Ok(Json(status))
}

/// Removes the connection's sign-in. Its grant goes to the organization's cleanup service in
/// the same transaction; the answer names that cleanup (none when there was no grant).
#[utoipa::path(delete, path = "/v1/app-connections/{connection_id}/oauth", tag = "apps",
    params(("connection_id" = String, Path, description = "The App connection")),
    responses((status = 200, body = OAuthRemoval), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_oauth(
    State(state): State<AppState>,
    caller: Caller,
    Path(connection_id): Path<String>,
) -> Result<Json<OAuthRemoval>, ApiError> {
    let id = parse(&connection_id)?;
    match state.oauth.remove(&caller, id).await {
        Ok(cleanup) => Ok(Json(OAuthRemoval {
            connection_id: id,
            cleanup,
        })),
        Err(err) => Err(ApiError::from(err)),
    }
}

/// A cleanup of the connection's grants and its saved result (`revoked`, `local_only`,
/// `failed`).
#[utoipa::path(get, path = "/v1/app-connections/{connection_id}/oauth/cleanups/{cleanup_id}", tag = "apps",
    params(("connection_id" = String, Path, description = "The App connection"), ("cleanup_id" = String, Path, description = "The cleanup")),
    responses((status = 200, body = OAuthCleanup), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_oauth_cleanup(
    State(state): State<AppState>,
    caller: Caller,
    Path((connection_id, cleanup_id)): Path<(String, String)>,
) -> Result<Json<OAuthCleanup>, ApiError> {
    let id = parse(&connection_id)?;
    let cleanup = parse(&cleanup_id)?;
    let found = state.oauth.cleanup(&caller, id, cleanup).await?;
    Ok(Json(found))
}
