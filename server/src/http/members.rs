//! `/v1/members` and `/v1/invitations`: the caller's organization. Owners and admins invite
//! and remove; everyone may list the members.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    AcceptInvitation, AcceptedInvitation, Action, CreateInvitation, CreatedInvitation, ErrorBody,
    Invitation, InvitationPage, Member, MemberPage, MemberRole, PageQuery, Resource,
};

use super::AppState;
use super::error::{ApiError, require_admin};
use super::json::{ApiJson, ApiQuery};
use crate::identity::{Caller, InvitationRow, NewToken, Role, new_secret, secret_hash};
use crate::paging::Paging;
use crate::store::{StoreError, now_ms, stored_time, stored_time_opt};

/// How long an invitation stays valid (seven days).
pub const INVITATION_DAYS: i64 = 7;

pub(super) fn role_view(role: Role) -> MemberRole {
    match role {
        Role::Owner => MemberRole::Owner,
        Role::Admin => MemberRole::Admin,
        Role::Member => MemberRole::Member,
    }
}

fn invitation_view(row: InvitationRow) -> Result<Invitation, StoreError> {
    Ok(Invitation {
        id: row.id,
        email: row.email,
        role: role_view(row.role),
        expires_at: stored_time(row.expires_at)?,
        accepted_at: stored_time_opt(row.accepted_at)?,
        revoked_at: stored_time_opt(row.revoked_at)?,
    })
}

fn parse_id(id: &str) -> Result<uuid::Uuid, ApiError> {
    id.parse().map_err(|_| {
        ApiError::invalid(format!(
            "`{}` is not a valid ID: expected a UUID",
            id.chars().take(64).collect::<String>()
        ))
    })
}

/// Managing members: the `members` write right, the owner or admin role, and a token not
/// limited to some Bots (membership is the whole organization's).
fn manage(caller: &Caller) -> Result<(), ApiError> {
    caller.require(Resource::Members, Action::Write)?;
    require_admin(caller, "manage members")?;
    if caller.bot_ids.is_some() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            openbot_schema::ErrorCode::Forbidden,
            "a token limited to some Bots does not manage members",
        ));
    }
    Ok(())
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
    caller.require(Resource::Members, Action::Read)?;
    let paging = Paging::parse(&query)?;
    match state
        .identity
        .members_page(caller.member.organization_id, paging.after, paging.fetch())
        .await
    {
        Ok(rows) => Ok(Json(paging.try_page(
            rows,
            |row| (row.created_at, row.member.member_id),
            |row| {
                Ok::<_, StoreError>(Member {
                    id: row.member.member_id,
                    email: row.email,
                    role: role_view(row.member.role),
                    created_at: stored_time(row.created_at)?,
                })
            },
        )?)),
        Err(err) => Err(ApiError::store(err, "members")),
    }
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
    manage(&caller)?;
    match state
        .identity
        .remove_member(caller.member.organization_id, parse_id(&id)?)
        .await
    {
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) => Err(ApiError::not_found("member")),
        Err(err) => Err(ApiError::store(err, "member")),
    }
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
    manage(&caller)?;
    // An invitation hands out a whole membership with an every-right first token.
    caller.require_unrestricted(Resource::Members)?;
    let role = match request.role {
        MemberRole::Member => Role::Member,
        MemberRole::Admin => Role::Admin,
        MemberRole::Owner => {
            return Err(ApiError::invalid(
                "an organization has one owner; invite as member or admin",
            ));
        }
    };
    if !request.email.contains('@') || request.email.len() > 320 {
        return Err(ApiError::invalid("email must be an email address"));
    }
    let secret = new_secret();
    let expires_at = now_ms() + INVITATION_DAYS * 86_400_000;
    match state
        .identity
        .create_invitation(
            &caller.member,
            uuid::Uuid::now_v7(),
            &request.email,
            role,
            &secret_hash(&secret),
            expires_at,
        )
        .await
    {
        Ok(row) => Ok((
            StatusCode::CREATED,
            Json(CreatedInvitation {
                invitation: invitation_view(row)?,
                secret,
            }),
        )),
        Err(err) => Err(ApiError::store(err, "invitation")),
    }
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
    manage(&caller)?;
    let paging = Paging::parse(&query)?;
    match state
        .identity
        .invitations_of(caller.member.organization_id, paging.after, paging.fetch())
        .await
    {
        Ok(rows) => Ok(Json(paging.try_page(
            rows,
            |row| (row.created_at, row.id),
            invitation_view,
        )?)),
        Err(err) => Err(ApiError::store(err, "invitations")),
    }
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
    manage(&caller)?;
    match state
        .identity
        .revoke_invitation(caller.member.organization_id, parse_id(&id)?)
        .await
    {
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) => Err(ApiError::not_found("pending invitation")),
        Err(err) => Err(ApiError::store(err, "invitation")),
    }
}

/// Accepts an invitation with its secret (no token needed): the person becomes a member and
/// gets a first token with every right. An invitation is accepted once.
#[utoipa::path(post, path = "/v1/invitations/accept", tag = "organization", request_body = AcceptInvitation,
    responses((status = 201, body = AcceptedInvitation), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)))]
pub async fn accept_invitation(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<AcceptInvitation>,
) -> Result<(StatusCode, Json<AcceptedInvitation>), ApiError> {
    let (token_secret, token) = NewToken::with_every_right("first");
    match state
        .identity
        .accept_invitation(&secret_hash(&request.secret), token)
        .await
    {
        Ok(Some(member)) => Ok((
            StatusCode::CREATED,
            Json(AcceptedInvitation {
                member_id: member.member_id,
                organization_id: member.organization_id,
                token_secret,
            }),
        )),
        Ok(None) => Err(ApiError::not_found("pending invitation")),
        Err(err) => Err(ApiError::store(err, "invitation")),
    }
}
