//! `/v1/channels` (a member's Slack and Telegram Channels, their inputs and sends) and the
//! platforms' public routes: `/v1/channels/{id}/slack/events` and `/v1/channels/{id}/telegram`,
//! with no token (the platform's signature or secret token is the proof).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use openbot_schema::{
    Channel, ChannelAck, ChannelKind, ChannelPage, ChannelSendPage, CreateChannel, ErrorBody,
    ErrorCode, LinkSpeaker, PageQuery, Speaker,
};
use uuid::Uuid;

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::channels::{ChannelError, InboundError, PlatformRequest, Received, slack, telegram};
use crate::identity::Caller;
use crate::paging::Paging;

impl From<ChannelError> for ApiError {
    fn from(err: ChannelError) -> Self {
        match err {
            ChannelError::NotFound(what) => ApiError::not_found(what),
            ChannelError::Invalid(message) => ApiError::invalid(message),
            ChannelError::Access(err) => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, err.to_string())
            }
            ChannelError::Closed => ApiError::conflict(ChannelError::Closed.to_string()),
            ChannelError::Inbound(err @ InboundError::Malformed(_)) => {
                ApiError::invalid(err.to_string())
            }
            ChannelError::Inbound(err) => ApiError::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Unauthorized,
                err.to_string(),
            ),
            ChannelError::Store(err) => ApiError::store(err, "channel"),
        }
    }
}

fn channel_id(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text).map_err(|_| ApiError::not_found("channel"))
}

/// Connects a Bot the caller may use to Slack or Telegram. The bot token and the signing
/// secret (Slack) or secret token (Telegram) are stored sealed and never shown again.
/// `webhook_path` is the path to give the platform.
#[utoipa::path(post, path = "/v1/channels", tag = "channels",
    request_body = CreateChannel,
    responses((status = 201, body = Channel), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn create_channel(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(new): ApiJson<CreateChannel>,
) -> Result<(StatusCode, Json<Channel>), ApiError> {
    let channel = state.channels.create(&caller, new).await?;
    Ok((StatusCode::CREATED, Json(channel)))
}

/// The caller's Channels, oldest first, with their status. Paged: ask again with
/// `next_cursor` until absent.
#[utoipa::path(get, path = "/v1/channels", tag = "channels", params(PageQuery),
    responses((status = 200, body = ChannelPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_channels(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<ChannelPage>, ApiError> {
    let paging = Paging::parse(&query)?;
    let page = state.channels.list(&caller, &paging).await?;
    Ok(Json(page))
}

/// One of the caller's Channels.
#[utoipa::path(get, path = "/v1/channels/{id}", tag = "channels",
    params(("id" = uuid::Uuid, Path, description = "The Channel")),
    responses((status = 200, body = Channel), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_channel(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Channel>, ApiError> {
    let id = channel_id(&id)?;
    let channel = state.channels.get(&caller, id).await?;
    Ok(Json(channel))
}

/// Removes one of the caller's Channels: it refuses input at once (status `removing`) and
/// becomes `removed` once every input's delivery has ended (pending sends sent or rejected,
/// unknown results recorded, Turns of its Chats ended). 202 with the Channel as it is.
#[utoipa::path(delete, path = "/v1/channels/{id}", tag = "channels",
    params(("id" = uuid::Uuid, Path, description = "The Channel")),
    responses((status = 202, body = Channel), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_channel(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Channel>), ApiError> {
    let id = channel_id(&id)?;
    let channel = state.channels.delete(&caller, id).await?;
    Ok((StatusCode::ACCEPTED, Json(channel)))
}

/// A Channel's inputs, newest first, each with its Speaker, its Chat and Turn, and its
/// reply's send: `pending`, `sent` (with the platform's message ID), `rejected` (with the
/// platform's error), `unknown` (the answer was lost; never sent again) or `refused`.
/// Paged: ask again with `next_cursor` until absent.
#[utoipa::path(get, path = "/v1/channels/{id}/sends", tag = "channels",
    params(("id" = uuid::Uuid, Path, description = "The Channel"), PageQuery),
    responses((status = 200, body = ChannelSendPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_channel_sends(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<ChannelSendPage>, ApiError> {
    let id = channel_id(&id)?;
    let paging = Paging::parse(&query)?;
    let page = state.channels.sends(&caller, id, &paging).await?;
    Ok(Json(page))
}

/// Links a platform user (Slack `U...`, Telegram's numeric ID) of one of the caller's
/// Channels to a member of its organization: inputs taken from then on keep the member with
/// their Speaker (`speaker.member_id` in the sends). Replaces an earlier link.
#[utoipa::path(put, path = "/v1/channels/{id}/speakers/{user_id}", tag = "channels",
    params(("id" = uuid::Uuid, Path, description = "The Channel"), ("user_id" = String, Path, description = "The platform's user ID")),
    request_body = LinkSpeaker,
    responses((status = 200, body = Speaker), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn link_speaker(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, user_id)): Path<(String, String)>,
    ApiJson(link): ApiJson<LinkSpeaker>,
) -> Result<Json<Speaker>, ApiError> {
    let id = channel_id(&id)?;
    let speaker = state
        .channels
        .link_speaker(&caller, id, &user_id, link)
        .await?;
    Ok(Json(speaker))
}

/// Removes a platform user's link to a member; inputs taken before keep theirs.
#[utoipa::path(delete, path = "/v1/channels/{id}/speakers/{user_id}", tag = "channels",
    params(("id" = uuid::Uuid, Path, description = "The Channel"), ("user_id" = String, Path, description = "The platform's user ID")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn unlink_speaker(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, user_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let id = channel_id(&id)?;
    state.channels.unlink_speaker(&caller, id, &user_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn answer(received: Received) -> Json<ChannelAck> {
    let ack = ChannelAck {
        ok: true,
        repeated: None,
        ignored: None,
        challenge: None,
    };
    Json(match received {
        Received::Challenge(challenge) => ChannelAck {
            challenge: Some(challenge),
            ..ack
        },
        Received::Taken { repeated } => ChannelAck {
            repeated: Some(repeated),
            ..ack
        },
        Received::Ignored => ChannelAck {
            ignored: Some(true),
            ..ack
        },
    })
}

/// Slack's Events API request URL, public (no token). Signed by Slack: `X-Slack-Signature`
/// (`v0=` and the hex HMAC-SHA256 of `v0:{timestamp}:{body}` under the signing secret) and
/// `X-Slack-Request-Timestamp` (within five minutes). Answers `url_verification` with its
/// challenge; a `message` event from a person becomes input, once per `event_id` (Slack's
/// retries answer 200 and send nothing). Answers at once: the Turn and its reply are durable
/// work. A removing Channel answers 409 `conflict`.
#[utoipa::path(post, path = "/v1/channels/{id}/slack/events", tag = "channels",
    params(("id" = uuid::Uuid, Path, description = "The Slack Channel")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "A Slack Events API payload (JSON, any media type), signed exactly as sent"),
    responses((status = 200, body = ChannelAck, description = "Taken, repeated, ignored, or the challenge"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn slack_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<ChannelAck>, ApiError> {
    let id = channel_id(&id)?;
    let request = PlatformRequest {
        timestamp: header(&headers, slack::TIMESTAMP_HEADER),
        signature: header(&headers, slack::SIGNATURE_HEADER),
        body: &body,
    };
    let received = state
        .channels
        .receive(id, ChannelKind::Slack, request)
        .await?;
    Ok(answer(received))
}

/// Telegram's webhook, public (no token): the `X-Telegram-Bot-Api-Secret-Token` header must
/// be the Channel's secret token. An update's `message.text` becomes input, once per
/// `update_id`. A removing Channel answers 409 `conflict`.
#[utoipa::path(post, path = "/v1/channels/{id}/telegram", tag = "channels",
    params(("id" = uuid::Uuid, Path, description = "The Telegram Channel")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "A Telegram Update (JSON, any media type)"),
    responses((status = 200, body = ChannelAck, description = "Taken, repeated or ignored"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn telegram_update(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<ChannelAck>, ApiError> {
    let id = channel_id(&id)?;
    let request = PlatformRequest {
        timestamp: None,
        signature: header(&headers, telegram::SECRET_HEADER),
        body: &body,
    };
    let received = state
        .channels
        .receive(id, ChannelKind::Telegram, request)
        .await?;
    Ok(answer(received))
}
