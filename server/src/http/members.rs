//! `/v1/members` and `/v1/invitations`: the caller's organization, through the account use
//! cases. Owners and admins invite and remove; everyone may list the members.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    AcceptInvitation, AcceptedInvitation, CreateInvitation, CreatedInvitation, ErrorBody,
    InvitationPage, MemberPage, PageQuery,
};

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::paging::Paging;

fn parse_id(id: &str) -> Result<uuid::Uuid, ApiError> {
    id.parse().map_err(|_| {
        ApiError::invalid(format!(
            "`{}` is not a valid ID: expected a UUID",
            id.chars().take(64).collect::<String>()
        ))
    })
}

/// The organization's members, oldest first. Paged: ask again with `next_cursor` until it
/// is absent.
#[utoipa::path(get, path = "/v1/members", tag = "organization", params(PageQuery),
    responses((status = 200, body = MemberPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_members(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<MemberPage>, ApiError> {
    let paging = Paging::parse(&query)?;
    Ok(Json(state.accounts.members(&caller, &paging).await?))
}

/// Removes a member (never an owner). Their tokens and sessions stop working at once, also for
/// work that was already admitted when it next checks its rights.
#[utoipa::path(delete, path = "/v1/members/{id}", tag = "organization", params(("id" = uuid::Uuid, Path, description = "The member")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn remove_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state
        .accounts
        .remove_member(&caller, parse_id(&id)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Invites a person as `member` or `admin`; the secret is in this answer only.
#[utoipa::path(post, path = "/v1/invitations", tag = "organization", request_body = CreateInvitation,
    responses((status = 201, body = CreatedInvitation), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn create_invitation(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<CreateInvitation>,
) -> Result<(StatusCode, Json<CreatedInvitation>), ApiError> {
    let created = state.accounts.invite(&caller, &request).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// The organization's invitations, newest first. Paged: ask again with `next_cursor` until
/// it is absent.
#[utoipa::path(get, path = "/v1/invitations", tag = "organization", params(PageQuery),
    responses((status = 200, body = InvitationPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_invitations(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<InvitationPage>, ApiError> {
    let paging = Paging::parse(&query)?;
    Ok(Json(state.accounts.invitations(&caller, &paging).await?))
}

/// Revokes a pending invitation.
#[utoipa::path(delete, path = "/v1/invitations/{id}", tag = "organization", params(("id" = uuid::Uuid, Path, description = "The invitation")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn revoke_invitation(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state
        .accounts
        .revoke_invitation(&caller, parse_id(&id)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Accepts an invitation with its secret (no token needed): the person becomes a member and
/// gets a first token with every right. An invitation is accepted once.
#[utoipa::path(post, path = "/v1/invitations/accept", tag = "organization", request_body = AcceptInvitation,
    responses((status = 201, body = AcceptedInvitation), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)))]
pub async fn accept_invitation(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<AcceptInvitation>,
) -> Result<(StatusCode, Json<AcceptedInvitation>), ApiError> {
    let accepted = state.accounts.accept_invitation(&request.secret).await?;
    Ok((StatusCode::CREATED, Json(accepted)))
}
