//! `/v1/approvals` and `/v1/approval-rules`: the requests a person decides, and the rules
//! that create them. Reading needs the `chats` read right, deciding and changing rules the
//! `chats` write right; an admin sees and decides every request of the organization, a
//! member those of their own work, and a token limited to some Bots only the requests of work
//! for a Chat of one of them (others are `404`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    ApprovalRequest, ApprovalRequestPage, ApprovalRule, ApprovalRulePage, ApprovalState,
    CreateApprovalRule, DecideApproval, ErrorBody, ErrorCode, PageQuery,
};
use serde::Deserialize;
use uuid::Uuid;

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::approvals::ApprovalError;
use crate::identity::Caller;
use crate::paging::Paging;

impl From<ApprovalError> for ApiError {
    fn from(err: ApprovalError) -> Self {
        match err {
            ApprovalError::NotFound(what) => ApiError::not_found(what),
            ApprovalError::Invalid(message) => ApiError::invalid(message),
            ApprovalError::Forbidden(message) => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, message)
            }
            ApprovalError::Closed(message) => ApiError::conflict(message),
            ApprovalError::Store(err) => ApiError::store(err, "approval request"),
        }
    }
}

fn parse_id(id: &str, what: &str) -> Result<Uuid, ApiError> {
    id.parse()
        .map_err(|_| ApiError::invalid(format!("the {what} ID must be a UUID")))
}

/// Which requests to list, beside the page.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only requests in this state, e.g. `pending`.
    #[param(required = false, nullable = false)]
    state: Option<ApprovalState>,
}

/// The approval requests the caller may decide, newest first, only in `state` when given.
/// Paged: ask again with `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/approvals", tag = "approvals", params(PageQuery, ListQuery),
    responses((status = 200, body = ApprovalRequestPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_approvals(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(page): ApiQuery<PageQuery>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<ApprovalRequestPage>, ApiError> {
    let paging = Paging::parse(&page)?;
    let list = state.approvals.list(&caller, query.state, &paging).await?;
    Ok(Json(list))
}

/// One approval request.
#[utoipa::path(get, path = "/v1/approvals/{id}", tag = "approvals",
    params(("id" = Uuid, Path, description = "The request's ID")),
    responses((status = 200, body = ApprovalRequest), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_approval(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ApprovalRequest>, ApiError> {
    let id = parse_id(&id, "request")?;
    let request = state.approvals.get(&caller, id).await?;
    Ok(Json(request))
}

/// Decides a pending request: approve (the call runs once) or deny (it never runs; the model
/// is told). A request that was decided, expired or cancelled answers 409 and grants nothing;
/// so does an approval whose original rights are gone (the request closes `revoked`).
#[utoipa::path(post, path = "/v1/approvals/{id}/decision", tag = "approvals",
    params(("id" = Uuid, Path, description = "The request's ID")),
    request_body = DecideApproval,
    responses((status = 200, body = ApprovalRequest), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn decide_approval(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(decision): ApiJson<DecideApproval>,
) -> Result<Json<ApprovalRequest>, ApiError> {
    let id = parse_id(&id, "request")?;
    let request = state.approvals.decide(&caller, id, decision).await?;
    Ok(Json(request))
}

/// The organization's approval rules, oldest first. Paged: ask again with `next_cursor`
/// until it is absent.
#[utoipa::path(get, path = "/v1/approval-rules", tag = "approvals", params(PageQuery),
    responses((status = 200, body = ApprovalRulePage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_rules(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<ApprovalRulePage>, ApiError> {
    let paging = Paging::parse(&query)?;
    let rules = state.approvals.rules(&caller, &paging).await?;
    Ok(Json(rules))
}

/// Adds a rule. Rules for the organization or a Bot need an owner or admin; a member may add
/// rules for themselves (`member_id` = their own).
#[utoipa::path(post, path = "/v1/approval-rules", tag = "approvals", request_body = CreateApprovalRule,
    responses((status = 201, body = ApprovalRule), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn create_rule(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(rule): ApiJson<CreateApprovalRule>,
) -> Result<(StatusCode, Json<ApprovalRule>), ApiError> {
    let rule = state.approvals.add_rule(&caller, rule).await?;
    Ok((StatusCode::CREATED, Json(rule)))
}

/// Removes a rule; calls of Turns already running are decided by the rules of the moment.
#[utoipa::path(delete, path = "/v1/approval-rules/{id}", tag = "approvals",
    params(("id" = Uuid, Path, description = "The rule's ID")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_rule(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id, "rule")?;
    state.approvals.delete_rule(&caller, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
