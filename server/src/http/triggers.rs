//! `/v1/triggers` (a member's schedules and webhooks, with their firings) and
//! `/v1/hooks/{id}`, a webhook's public URL: no token, its HMAC signature is the proof.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use openbot_schema::{
    CreateTrigger, CreatedTrigger, ErrorBody, ErrorCode, PageQuery, Trigger, TriggerFiring,
    TriggerFiringPage, TriggerPage,
};
use uuid::Uuid;

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::paging::Paging;
use crate::triggers::{
    DELIVERY_HEADER, Delivery, SIGNATURE_HEADER, SignatureError, TIMESTAMP_HEADER, TriggerError,
};

impl From<TriggerError> for ApiError {
    fn from(err: TriggerError) -> Self {
        match err {
            TriggerError::NotFound(what) => ApiError::not_found(what),
            TriggerError::Invalid(message) => ApiError::invalid(message),
            TriggerError::Access(err) => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, err.to_string())
            }
            TriggerError::Conflict(message) => ApiError::conflict(message),
            TriggerError::Signature(err @ SignatureError::Malformed(_)) => {
                ApiError::invalid(err.to_string())
            }
            TriggerError::Signature(err) => ApiError::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Unauthorized,
                err.to_string(),
            ),
            TriggerError::Store(err) => ApiError::store(err, "trigger"),
        }
    }
}

fn trigger_id(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text).map_err(|_| ApiError::not_found("trigger"))
}

/// Creates a trigger on one of the caller's Chats: a `schedule` (a cron expression in an IANA
/// time zone, with the text it sends) or a `webhook` (its own URL, `hook_path`, and a signing
/// secret shown only in this answer). Each firing sends as the caller, with the rights its
/// token has then.
#[utoipa::path(post, path = "/v1/triggers", tag = "triggers",
    request_body = CreateTrigger,
    responses((status = 201, body = CreatedTrigger), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn create_trigger(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(new): ApiJson<CreateTrigger>,
) -> Result<(StatusCode, Json<CreatedTrigger>), ApiError> {
    let created = state.triggers.create(&caller, new).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// The caller's triggers, oldest first. Paged: ask again with `next_cursor` until absent.
#[utoipa::path(get, path = "/v1/triggers", tag = "triggers", params(PageQuery),
    responses((status = 200, body = TriggerPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_triggers(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<TriggerPage>, ApiError> {
    let paging = Paging::parse(&query)?;
    let page = state.triggers.list(&caller, &paging).await?;
    Ok(Json(page))
}

/// One of the caller's triggers.
#[utoipa::path(get, path = "/v1/triggers/{id}", tag = "triggers",
    params(("id" = uuid::Uuid, Path, description = "The trigger")),
    responses((status = 200, body = Trigger), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_trigger(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Trigger>, ApiError> {
    let id = trigger_id(&id)?;
    let trigger = state.triggers.get(&caller, id).await?;
    Ok(Json(trigger))
}

/// Deletes one of the caller's triggers: it fires no more.
#[utoipa::path(delete, path = "/v1/triggers/{id}", tag = "triggers",
    params(("id" = uuid::Uuid, Path, description = "The trigger")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_trigger(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = trigger_id(&id)?;
    state.triggers.delete(&caller, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Pauses one of the caller's triggers: it does not fire (a webhook answers 409) until resumed.
#[utoipa::path(post, path = "/v1/triggers/{id}/pause", tag = "triggers",
    params(("id" = uuid::Uuid, Path, description = "The trigger")),
    responses((status = 200, body = Trigger), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn pause_trigger(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Trigger>, ApiError> {
    let id = trigger_id(&id)?;
    let trigger = state.triggers.pause(&caller, id).await?;
    Ok(Json(trigger))
}

/// Resumes one of the caller's triggers. A schedule fires next at its first slot after now;
/// slots that passed while it was paused are not caught up.
#[utoipa::path(post, path = "/v1/triggers/{id}/resume", tag = "triggers",
    params(("id" = uuid::Uuid, Path, description = "The trigger")),
    responses((status = 200, body = Trigger), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn resume_trigger(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Trigger>, ApiError> {
    let id = trigger_id(&id)?;
    let trigger = state.triggers.resume(&caller, id).await?;
    Ok(Json(trigger))
}

/// A trigger's firings, newest first: what was sent, what was refused and why, which were
/// catch-up firings after downtime. Paged: ask again with `next_cursor` until absent.
#[utoipa::path(get, path = "/v1/triggers/{id}/firings", tag = "triggers",
    params(("id" = uuid::Uuid, Path, description = "The trigger"), PageQuery),
    responses((status = 200, body = TriggerFiringPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_firings(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<TriggerFiringPage>, ApiError> {
    let id = trigger_id(&id)?;
    let paging = Paging::parse(&query)?;
    let page = state.triggers.firings(&caller, id, &paging).await?;
    Ok(Json(page))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A webhook delivery, public (no token). Signed: `x-openbot-timestamp` (Unix seconds, within
/// five minutes of the server's time), `x-openbot-signature: v1=<hex HMAC-SHA256 of
/// "{timestamp}.{body}" under the signing secret>`, and `x-openbot-delivery` (the sender's ID
/// of the delivery: a repeat is answered 200 with the first firing and sends nothing). The
/// body (UTF-8) goes to the Chat as the trigger's creator: 202 with the firing.
#[utoipa::path(post, path = "/v1/hooks/{id}", tag = "triggers",
    params(("id" = uuid::Uuid, Path, description = "The webhook trigger")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "Any UTF-8 body (JSON or text, with any media type), signed exactly as it is sent"),
    responses((status = 202, body = TriggerFiring), (status = 200, body = TriggerFiring, description = "A repeated delivery ID"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn receive_hook(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<TriggerFiring>), ApiError> {
    let id = trigger_id(&id)?;
    let delivery = Delivery {
        timestamp: header(&headers, TIMESTAMP_HEADER),
        signature: header(&headers, SIGNATURE_HEADER),
        delivery_id: header(&headers, DELIVERY_HEADER),
        body: &body,
    };
    match state.triggers.receive(id, delivery).await {
        Ok(received) if received.repeated => Ok((StatusCode::OK, Json(received.firing))),
        Ok(received) => Ok((StatusCode::ACCEPTED, Json(received.firing))),
        Err(err) => Err(ApiError::from(err)),
    }
}
