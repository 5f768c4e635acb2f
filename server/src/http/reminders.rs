//! `/v1/chats/{id}/reminders`: the reminders a Chat's Bot set, and cancelling one.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{ChatId, ErrorBody, ErrorCode, PageQuery, Reminder, ReminderPage};
use uuid::Uuid;

use super::AppState;
use super::error::ApiError;
use super::json::ApiQuery;
use crate::identity::Caller;
use crate::paging::Paging;
use crate::reminders::ReminderError;

impl From<ReminderError> for ApiError {
    fn from(err: ReminderError) -> Self {
        match err {
            ReminderError::NotFound(what) => ApiError::not_found(what),
            ReminderError::Access(err) => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, err.to_string())
            }
            ReminderError::Conflict(message) => ApiError::conflict(message),
            ReminderError::Store(err) => ApiError::store(err, "reminder"),
        }
    }
}

fn chat_id(text: &str) -> Result<ChatId, ApiError> {
    text.parse().map_err(|_| ApiError::not_found("chat"))
}

/// The reminders of one of the caller's Chats, every state, by due time. Paged: ask again
/// with `next_cursor` until absent.
#[utoipa::path(get, path = "/v1/chats/{id}/reminders", tag = "reminders",
    params(("id" = uuid::Uuid, Path, description = "The Chat"), PageQuery),
    responses((status = 200, body = ReminderPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_reminders(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<ReminderPage>, ApiError> {
    let id = chat_id(&id)?;
    let paging = Paging::parse(&query)?;
    let page = state.reminders.list(&caller, id, &paging).await?;
    Ok(Json(page))
}

/// Cancels a pending reminder of one of the caller's Chats; one that was delivered, refused
/// or cancelled already answers 409.
#[utoipa::path(delete, path = "/v1/chats/{id}/reminders/{reminder_id}", tag = "reminders",
    params(("id" = uuid::Uuid, Path, description = "The Chat"), ("reminder_id" = uuid::Uuid, Path, description = "The reminder")),
    responses((status = 200, body = Reminder), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("token" = [])))]
pub async fn cancel_reminder(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, reminder)): Path<(String, String)>,
) -> Result<Json<Reminder>, ApiError> {
    let id = chat_id(&id)?;
    let reminder = Uuid::parse_str(&reminder).map_err(|_| ApiError::not_found("reminder"))?;
    let reminder = state.reminders.cancel(&caller, id, reminder).await?;
    Ok(Json(reminder))
}
