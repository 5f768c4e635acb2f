//! `/v1/admin/...`: the platform operator's routes. They take only an operator token
//! (`openbot admin operator-token create`), never a member's: a member's token or session,
//! an organization owner's or admin's included, is refused with 403. Each read is audited
//! (`crate::operator`).

use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use openbot_schema::{ErrorBody, ErrorCategory, ErrorCode, ErrorId, ErrorRecord};

use super::AppState;
use super::error::ApiError;
use crate::identity::{Caller, secret_hash};
use crate::operator::{OperatorActor, OperatorError, read_error};

/// The platform operator, proven by an operator token.
pub struct Operator(pub OperatorActor);

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let secret = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|secret| !secret.is_empty())
            .map(str::to_string);
        if let Some(secret) = secret {
            match operator_store(state)?
                .operator_token_by_hash(&secret_hash(&secret))
                .await
            {
                Ok(Some(token)) => return Ok(Operator(OperatorActor::Token(token))),
                Ok(None) => {}
                Err(err) => return Err(ApiError::store(err, "operator token")),
            }
        }
        // Not an operator: a member's credential is refused, anything else is not valid.
        Caller::from_request_parts(parts, state).await?;
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "only the platform operator (an operator token) may use admin routes; no member may",
        ))
    }
}

/// Reads a sealed error record: the error ID, its category, when it happened, the execution
/// that failed with it (if any) and the full cause, opened. Only for the platform operator,
/// with an operator token; every read (found or not) is written to the operator audit first.
#[utoipa::path(get, path = "/v1/admin/errors/{id}", tag = "admin", params(("id" = uuid::Uuid, Path, description = "The error ID an answer or a `failed` event gave")),
    responses((status = 200, body = ErrorRecord), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_error(
    State(state): State<AppState>,
    Operator(actor): Operator,
    Path(id): Path<String>,
) -> Result<Json<ErrorRecord>, ApiError> {
    let id: ErrorId = id
        .parse()
        .map_err(|e: openbot_schema::IdParseError| ApiError::invalid(e.to_string()))?;
    let keys = &state.engine.context().keys;
    match read_error(operator_store(&state)?.as_ref(), keys, id, &actor).await {
        Ok(Some(record)) => Ok(Json(record)),
        Ok(None) => Err(ApiError::not_found("error record")),
        Err(OperatorError::Store(err)) => Err(ApiError::store(err, "error record")),
        Err(err @ OperatorError::Open(_)) => {
            Err(ApiError::failed(ErrorCategory::Internal, err.to_string()))
        }
    }
}

/// The operator's store as its capability registered it; a node built without it is a fault.
fn operator_store(
    state: &AppState,
) -> Result<&std::sync::Arc<dyn crate::operator::OperatorStore>, ApiError> {
    crate::operator::store(&state.features).ok_or_else(|| {
        ApiError::failed(
            openbot_schema::ErrorCategory::Internal,
            "the operator's store was not registered",
        )
    })
}
