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

impl From<CodeRunError> for ApiError {
    fn from(err: CodeRunError) -> Self {
        match err {
            CodeRunError::Chat(ChatError::NotFound(what)) => ApiError::not_found(what),
            CodeRunError::Chat(ChatError::Invalid(message)) => ApiError::invalid(message),
            CodeRunError::Chat(ChatError::Conflict(message)) => ApiError::conflict(message),
            CodeRunError::Chat(ChatError::Store(err)) => ApiError::store(err, "bot"),
            CodeRunError::Chat(ChatError::Forbidden(message))
            | CodeRunError::Forbidden(message) => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, message)
            }
            CodeRunError::Conflict(key) => {
                ApiError::conflict(format!("command key `{key}` was used for other input"))
            }
            CodeRunError::Store(err) => ApiError::store(err, "code run"),
        }
    }
}

/// Runs a program against the Bot's tools with no model and no Turn, as the model's
/// `run_code` would, and returns its result. Only HTTP tools that are not background run;
/// each call is checked against its schema and the approval rules (a call that would ask for
/// approval is refused). Needs the right to chat with the Bot.
///
/// The run is an execution of its own (`execution_id` in the answer; its events show each
/// call): its calls are saved in its call log, so a takeover or a restart never sends a saved
/// call again nor repeats a write whose answer was lost (that run waits in `outcome_unknown`
/// for a decision). A retry with the same `command_key` and program answers the same
/// execution and its saved result and sends nothing again; the same key with another program
/// or Bot is a 409 conflict. The answer waits for the run's end up to its wall time plus 10 s;
/// a run that has not ended by then is answered `202` with `error.code` `code_mode.running`
/// and its `execution_id` (a retry with the same key waits again).
#[utoipa::path(post, path = "/v1/bots/{id}/code-runs", tag = "bots", request_body = CodeRun,
    params(("id" = String, Path, description = "The Bot's ID")),
    responses((status = 200, body = CodeRunResult, description = "The run ended: its result"), (status = 202, body = CodeRunResult, description = "The run has not ended yet: `code_mode.running` and its execution"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("token" = [])))]
pub async fn run_code(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(run): ApiJson<CodeRun>,
) -> Result<(StatusCode, Json<CodeRunResult>), ApiError> {
    let id: BotId = id
        .parse()
        .map_err(|e: openbot_schema::IdParseError| ApiError::invalid(e.to_string()))?;
    if !caller.may_use(id) {
        return Err(ApiError::not_found("bot"));
    }
    match run_program(
        &state.engine,
        &state.chats,
        &state.platform,
        &caller,
        id,
        run,
    )
    .await
    {
        Ok(answer) => {
            let status = if answer.ended {
                StatusCode::OK
            } else {
                StatusCode::ACCEPTED
            };
            Ok((status, Json(answer.result)))
        }
        Err(err) => Err(ApiError::from(err)),
    }
}
