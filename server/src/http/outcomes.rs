//! `/v1/unknown-outcomes` and `/v1/executions/{id}/outcome`: the calls whose outcome is
//! unknown, waiting for a person, and the decision on one. Listing needs the `outcomes` read
//! right, deciding the `outcomes` write right; each caller sees and decides only the
//! executions of their own work (others answer 404).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    DecideOutcome, ErrorBody, ErrorCode, ExecutionId, OutcomeDecisionRecord, PageQuery,
    UnknownOutcomePage,
};

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::outcomes::OutcomeError;
use crate::paging::Paging;

impl From<OutcomeError> for ApiError {
    fn from(err: OutcomeError) -> Self {
        match err {
            OutcomeError::NotFound(what) => ApiError::not_found(what),
            OutcomeError::Invalid(message) => ApiError::invalid(message),
            OutcomeError::Forbidden(err) => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, err.to_string())
            }
            OutcomeError::Conflict(message) => ApiError::conflict(message),
            OutcomeError::Store(err) => ApiError::store(err, "execution"),
        }
    }
}

/// The caller's executions that wait in `outcome_unknown` for a decision, oldest first, each
/// with the call whose outcome is unknown: its key, its tool and the arguments it was sent
/// with (to check in the outside system). Paged: ask again with `next_cursor` until absent.
#[utoipa::path(get, path = "/v1/unknown-outcomes", tag = "outcomes", params(PageQuery),
    responses((status = 200, body = UnknownOutcomePage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_unknown_outcomes(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<UnknownOutcomePage>, ApiError> {
    let paging = Paging::parse(&query)?;
    let page = state.outcomes.list(&caller, &paging).await?;
    Ok(Json(page))
}

/// Decides the call an execution in `outcome_unknown` waits for: `applied` with its `result`
/// (the result is saved as the call's and the work goes on with it; the call is not sent
/// again), `not_applied` (the call is sent again, as a new attempt) or `give_up` (the
/// execution ends `failed`, category `tool`, sending nothing). The decision and its audit entry
/// (who, with which token, when) commit together. A decision for another call than the one
/// the execution waits for, or a second decision, answers 409.
#[utoipa::path(post, path = "/v1/executions/{id}/outcome", tag = "outcomes",
    params(("id" = uuid::Uuid, Path, description = "The execution")),
    request_body = DecideOutcome,
    responses((status = 200, body = OutcomeDecisionRecord), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn decide_outcome(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(decision): ApiJson<DecideOutcome>,
) -> Result<Json<OutcomeDecisionRecord>, ApiError> {
    let id: ExecutionId = id
        .parse()
        .map_err(|e: openbot_schema::IdParseError| ApiError::invalid(e.to_string()))?;
    let record = state.outcomes.decide(&caller, id, decision).await?;
    Ok(Json(record))
}
