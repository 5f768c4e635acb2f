//! `/v1/computers`: machines paired with the server, through the Computer use cases
//! (docs/computers.md). Starting a pairing and claiming its credential are the machine's
//! (no member token); approving, listing and removing are a member's.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    ApprovePairing, BotId, ClaimPairing, Computer, ComputerGrant, ComputerPage, ErrorBody,
    GrantComputer, OutputQuery, PageQuery, Pairing, PairingClaim, StartPairing, TerminalOutput,
};
use uuid::Uuid;

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::computers::Computers;
use crate::identity::Caller;
use crate::paging::Paging;

fn computers(state: &AppState) -> Result<Computers, ApiError> {
    let store = crate::computers::store(&state.features).ok_or_else(|| {
        ApiError::failed(
            openbot_schema::ErrorCategory::Internal,
            "this node has no Computer store",
        )
    })?;
    let computers = Computers::new(std::sync::Arc::clone(store)).with_bots(state.bots.clone());
    Ok(match crate::computers::links(&state.features) {
        Some(links) => computers.with_links(std::sync::Arc::clone(links)),
        None => computers,
    })
}

fn id(text: &str, what: &'static str) -> Result<Uuid, ApiError> {
    text.parse().map_err(|_| ApiError::not_found(what))
}

/// Starts a pairing, for a machine (no token): answers the code a member approves and the
/// secret the machine claims its credential with, both shown only now. The code works for 10
/// minutes. 429 while too many pairings wait for approval.
#[utoipa::path(post, path = "/v1/computers/pairings", tag = "computers",
    request_body = StartPairing,
    responses((status = 201, body = Pairing), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn start_pairing(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<StartPairing>,
) -> Result<(StatusCode, Json<Pairing>), ApiError> {
    let pairing = computers(&state)?.start_pairing(&request).await?;
    Ok((StatusCode::CREATED, Json(pairing)))
}

/// Approves a pairing code a machine shows: makes the Computer, the caller's own or (with
/// `shared`, an owner or admin) the organization's. 404 for an unknown code, 409 for a code
/// that expired or was used already.
#[utoipa::path(post, path = "/v1/computers/pairings/approve", tag = "computers",
    request_body = ApprovePairing,
    responses((status = 201, body = Computer), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn approve_pairing(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<ApprovePairing>,
) -> Result<(StatusCode, Json<Computer>), ApiError> {
    let computer = computers(&state)?.approve(&caller, &request).await?;
    Ok((StatusCode::CREATED, Json(computer)))
}

/// The machine's claim, with its pairing secret (no token): `approved: false` while no member
/// approved the code, else the Computer and its credential, shown once. A claim again within
/// the pairing's 10 minutes issues a new credential and voids the one before. 404 for an
/// unknown pairing or a wrong secret, 409 once the pairing expired or its Computer was removed.
#[utoipa::path(post, path = "/v1/computers/pairings/{id}/claim", tag = "computers",
    params(("id" = uuid::Uuid, Path, description = "The pairing")),
    request_body = ClaimPairing,
    responses((status = 200, body = PairingClaim), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)))]
pub async fn claim_pairing(
    State(state): State<AppState>,
    Path(pairing): Path<String>,
    ApiJson(request): ApiJson<ClaimPairing>,
) -> Result<Json<PairingClaim>, ApiError> {
    let pairing = id(&pairing, "pairing")?;
    Ok(Json(computers(&state)?.claim(pairing, &request).await?))
}

/// The Computers the caller sees: its own and the organization's shared ones, oldest first.
/// Paged: ask again with `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/computers", tag = "computers", params(PageQuery),
    responses((status = 200, body = ComputerPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_computers(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<ComputerPage>, ApiError> {
    let paging = Paging::<Uuid>::parse(&query)?;
    Ok(Json(computers(&state)?.list(&caller, &paging).await?))
}

/// One Computer the caller sees; another member's is not found.
#[utoipa::path(get, path = "/v1/computers/{id}", tag = "computers",
    params(("id" = uuid::Uuid, Path, description = "The Computer")),
    responses((status = 200, body = Computer), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_computer(
    State(state): State<AppState>,
    caller: Caller,
    Path(computer): Path<String>,
) -> Result<Json<Computer>, ApiError> {
    let computer = id(&computer, "computer")?;
    Ok(Json(computers(&state)?.get(&caller, computer).await?))
}

/// Removes a Computer: its credential stops working at once, and the removal is saved before
/// the answer. A shared Computer is removed by an owner or admin only.
#[utoipa::path(delete, path = "/v1/computers/{id}", tag = "computers",
    params(("id" = uuid::Uuid, Path, description = "The Computer")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn remove_computer(
    State(state): State<AppState>,
    caller: Caller,
    Path(computer): Path<String>,
) -> Result<StatusCode, ApiError> {
    let computer = id(&computer, "computer")?;
    computers(&state)?.remove(&caller, computer).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Grants a Computer to a Bot the caller may change: the Bot's Turns get the Computer tools on
/// it. Its calls that change the machine wait for a person's approval unless `ask` is false.
/// A Bot has one Computer; this replaces its grant before. A shared Computer is granted by an
/// owner or admin only.
#[utoipa::path(put, path = "/v1/computers/{id}/bots/{bot_id}", tag = "computers",
    params(("id" = uuid::Uuid, Path, description = "The Computer"), ("bot_id" = uuid::Uuid, Path, description = "The Bot")),
    request_body = GrantComputer,
    responses((status = 200, body = ComputerGrant), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn grant_computer(
    State(state): State<AppState>,
    caller: Caller,
    Path((computer, bot)): Path<(String, String)>,
    ApiJson(request): ApiJson<GrantComputer>,
) -> Result<Json<ComputerGrant>, ApiError> {
    let computer = id(&computer, "computer")?;
    let bot = BotId::from(id(&bot, "bot")?);
    Ok(Json(
        computers(&state)?
            .grant(&caller, computer, bot, &request)
            .await?,
    ))
}

/// Takes a Computer back from a Bot: Turns submitted afterwards get no Computer tools, and
/// calls of running Turns are refused before they are sent.
#[utoipa::path(delete, path = "/v1/computers/{id}/bots/{bot_id}", tag = "computers",
    params(("id" = uuid::Uuid, Path, description = "The Computer"), ("bot_id" = uuid::Uuid, Path, description = "The Bot")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn revoke_computer(
    State(state): State<AppState>,
    caller: Caller,
    Path((computer, bot)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let computer = id(&computer, "computer")?;
    let bot = BotId::from(id(&bot, "bot")?);
    computers(&state)?.revoke(&caller, computer, bot).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A terminal session's output on a Computer the caller sees, after the cursor `after`,
/// waiting up to `wait_ms` for some: the output the server saved as the machine sent it
/// (readable from any node, and after the machine went away), so a member watches what a Bot
/// does there. The session's ID is in the Bot's `computer_terminal_start` result. 404 for a
/// session the server has no output of.
#[utoipa::path(get, path = "/v1/computers/{id}/terminals/{session_id}/output", tag = "computers",
    params(("id" = uuid::Uuid, Path, description = "The Computer"), ("session_id" = String, Path, description = "The terminal session"), OutputQuery),
    responses((status = 200, body = TerminalOutput), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn terminal_output(
    State(state): State<AppState>,
    caller: Caller,
    Path((computer, session)): Path<(String, String)>,
    ApiQuery(query): ApiQuery<OutputQuery>,
) -> Result<Json<TerminalOutput>, ApiError> {
    let computer = id(&computer, "computer")?;
    let wait = std::time::Duration::from_millis(query.wait_ms.unwrap_or(0));
    Ok(Json(
        computers(&state)?
            .terminal_output(&caller, computer, &session, query.after.unwrap_or(0), wait)
            .await?,
    ))
}

/// The machine's link (`openbot computer run`): a WebSocket authenticated by the Computer's
/// own credential (`Authorization: Bearer obc_...`), over which this node sends the calls of
/// Bots working on the machine. Not an API operation: the agent speaks it
/// (`openbot_core::computer::link`).
pub async fn link(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    upgrade: axum::extract::ws::WebSocketUpgrade,
) -> Result<axum::response::Response, ApiError> {
    use openbot_core::computer::link::{MAX_MESSAGE_BYTES, PROTOCOL, PROTOCOL_HEADER};
    let credential = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .ok_or_else(|| {
            ApiError::from(crate::service::ServiceError::Unauthorized(
                "a Computer links with its own credential: `Authorization: Bearer obc_...`",
            ))
        })?;
    let computer = computers(&state)?.machine(credential).await?;
    let protocol = headers
        .get(PROTOCOL_HEADER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u32>().ok());
    if protocol != Some(PROTOCOL) {
        return Err(ApiError::from(crate::service::ServiceError::Invalid(
            format!(
                "this server speaks Computer link protocol {PROTOCOL}: update openbot on the machine"
            ),
        )));
    }
    let links = crate::computers::links(&state.features)
        .cloned()
        .ok_or_else(|| {
            ApiError::failed(
                openbot_schema::ErrorCategory::Internal,
                "this node holds no Computer links",
            )
        })?;
    let registered = links.register(computer.id).await.map_err(|err| {
        ApiError::failed(
            openbot_schema::ErrorCategory::Storage,
            format!("the link could not be registered ({})", err.kind()),
        )
    })?;
    Ok(upgrade
        .max_message_size(MAX_MESSAGE_BYTES)
        .on_upgrade(move |socket| links.serve(registered, socket)))
}
