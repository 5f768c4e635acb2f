//! `/v1/organizations`: the organizations of the caller's account, and new ones. An account
//! may belong to several organizations; each token acts in one of them.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use openbot_schema::{
    Action, CreateOrganization, CreatedOrganization, ErrorBody, Organization, OrganizationPage,
    PageQuery, Resource,
};

use super::AppState;
use super::error::{ApiError, require_admin};
use super::json::{ApiJson, ApiQuery};
use super::members::role_view;
use crate::identity::{Caller, NewToken, OrganizationRow};
use crate::paging::Paging;
use crate::store::{StoreError, stored_time};

fn view(row: OrganizationRow) -> Result<Organization, StoreError> {
    Ok(Organization {
        id: row.id,
        name: row.name,
        member_id: row.member_id,
        role: role_view(row.role),
        created_at: stored_time(row.created_at)?,
    })
}

/// The organizations the caller's account belongs to, oldest first. Paged: ask again with
/// `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/organizations", tag = "organization", params(PageQuery),
    responses((status = 200, body = OrganizationPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_organizations(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<OrganizationPage>, ApiError> {
    caller.require(Resource::Organizations, Action::Read)?;
    let paging = Paging::parse(&query)?;
    match state
        .identity
        .organizations_of(&caller.member, paging.after, paging.fetch())
        .await
    {
        Ok(rows) => Ok(Json(paging.try_page(
            rows,
            |row| (row.created_at, row.id),
            view,
        )?)),
        Err(err) => Err(ApiError::store(err, "organizations")),
    }
}

/// Creates an organization owned by the caller's account, with the owner's first token there
/// (shown once). Owners and admins of an organization may create more.
#[utoipa::path(post, path = "/v1/organizations", tag = "organization", request_body = CreateOrganization,
    responses((status = 201, body = CreatedOrganization), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn create_organization(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<CreateOrganization>,
) -> Result<(StatusCode, Json<CreatedOrganization>), ApiError> {
    require_admin(&caller, "create organizations")?;
    // A new organization's first token holds every right: only a token that holds as much.
    caller.require_unrestricted(Resource::Organizations)?;
    let name = request.name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(ApiError::invalid("name must have 1-200 characters"));
    }
    let (token_secret, token) = NewToken::with_every_right("first");
    match state
        .identity
        .create_organization(&caller.member, name, token)
        .await
    {
        Ok(row) => Ok((
            StatusCode::CREATED,
            Json(CreatedOrganization {
                organization: view(row)?,
                token_secret,
            }),
        )),
        Err(err) => Err(ApiError::store(err, "organization")),
    }
}
