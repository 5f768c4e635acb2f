//! `/v1/organizations`: the organizations of the caller's account, and new ones, through the
//! account use cases. An account may belong to several organizations; each token acts in one.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use openbot_schema::{
    CreateOrganization, CreatedOrganization, ErrorBody, OrganizationPage, PageQuery,
};

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::paging::Paging;

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
    let paging = Paging::parse(&query)?;
    Ok(Json(state.accounts.organizations(&caller, &paging).await?))
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
    let created = state
        .accounts
        .create_organization(&caller, &request)
        .await?;
    Ok((StatusCode::CREATED, Json(created)))
}
