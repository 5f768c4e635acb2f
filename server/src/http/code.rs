//! `/v1/bots/{id}/code-runs`: Code Mode's own operation, a program run against a Bot's tools
//! without a model (docs/code-mode.md).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{BotId, CodeRun, CodeRunResult, ErrorBody, ErrorCode};

use super::AppState;
use super::error::ApiError;
use super::json::ApiJson;
use crate::chats::ChatError;
use crate::codemode::{CodeRunError, run_program};
use crate::identity::Caller;

async fn mapped(state: &AppState, err: CodeRunError) -> ApiError {
    match err {
        CodeRunError::Chat(ChatError::NotFound(what)) => ApiError::not_found(what),
        CodeRunError::Chat(ChatError::Invalid(message)) => ApiError::invalid(message),
        CodeRunError::Chat(ChatError::Conflict(message)) => ApiError::conflict(message),
        CodeRunError::Chat(ChatError::Store(err)) => ApiError::from_store(state, err, "bot").await,
        CodeRunError::Forbidden(message) => {
            ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, message)
        }
        CodeRunError::Rules(err) => ApiError::invalid(err.to_string()),
        CodeRunError::Sandbox(message) => {
            tracing::warn!(%message, "the Code Mode sandbox failed");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Unavailable,
                "Code Mode is unavailable on this server",
            )
        }
    }
}

/// Runs a program against the Bot's tools with no model and no Turn, as the model's
/// `run_code` would, and returns its result. Only HTTP tools that are not background run;
/// each call is checked against its schema and the approval rules (a call that would ask for
/// approval is refused). Needs the right to chat with the Bot.
#[utoipa::path(post, path = "/v1/bots/{id}/code-runs", tag = "bots", request_body = CodeRun,
    params(("id" = String, Path, description = "The Bot's ID")),
    responses((status = 200, body = CodeRunResult), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("token" = [])))]
pub async fn run_code(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(run): ApiJson<CodeRun>,
) -> Result<Json<CodeRunResult>, ApiError> {
    let id: BotId = id
        .parse()
        .map_err(|e: openbot_schema::IdParseError| ApiError::invalid(e.to_string()))?;
    if caller
        .bot_ids
        .as_ref()
        .is_some_and(|ids| !ids.contains(&id))
    {
        return Err(ApiError::not_found("bot"));
    }
    match run_program(
        &state.chats,
        &state.approvals,
        &state.vaults,
        &state.platform,
        &caller,
        id,
        run,
    )
    .await
    {
        Ok(result) => Ok(Json(result)),
        Err(err) => Err(mapped(&state, err).await),
    }
}
