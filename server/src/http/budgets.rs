//! `/v1/budgets`: spending caps on every Turn of the organization, a Bot or a Chat. Listing
//! needs the `models` read right; setting and removing need the `models` write right and the
//! owner or admin role. A token limited to some Bots lists the organization's budget and its
//! Bots' and their Chats' budgets, and sets or removes only its Bots' budgets.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    Action, Budget, BudgetPage, BudgetScope, ErrorBody, PageQuery, PutBudget, Resource,
};
use uuid::Uuid;

use super::AppState;
use super::error::{ApiError, require_admin};
use super::json::{ApiJson, ApiQuery};
use crate::budgets::BudgetRow;
use crate::identity::Caller;
use crate::paging::Paging;
use crate::store::{StoreError, stored_time};

fn view(row: BudgetRow) -> Result<Budget, StoreError> {
    Ok(Budget {
        scope: row.scope,
        target_id: row.target_id,
        max_cost_micros: row.max_cost_micros.max(0) as u64,
        spent_micros: row.spent_micros.max(0) as u64,
        updated_at: stored_time(row.updated_at)?,
    })
}

fn target(scope: &str, target: &str) -> Result<(BudgetScope, Uuid), ApiError> {
    let scope = BudgetScope::parse(scope).ok_or_else(|| {
        ApiError::invalid(format!(
            "unknown budget scope `{}`: use organization, bot or chat",
            scope.chars().take(40).collect::<String>()
        ))
    })?;
    let target = target
        .parse()
        .map_err(|_| ApiError::invalid("the target must be a UUID"))?;
    Ok((scope, target))
}

/// A token limited to some Bots sets and removes the budgets of those Bots only: the
/// organization's budget and a Chat's reach further than its Bots.
fn within_bot_limit(caller: &Caller, scope: BudgetScope, target: Uuid) -> Result<(), ApiError> {
    if caller.bot_ids.is_none()
        || (scope == BudgetScope::Bot && caller.may_use(openbot_schema::BotId::from(target)))
    {
        Ok(())
    } else {
        Ok(caller.require_whole_organization()?)
    }
}

/// The organization's budgets with what each scope spent so far, by scope and target. Paged:
/// ask again with `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/budgets", tag = "budgets", params(PageQuery),
    responses((status = 200, body = BudgetPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_budgets(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<BudgetPage>, ApiError> {
    caller.require(Resource::Models, Action::Read)?;
    let paging = Paging::<(String, Uuid)>::parse(&query)?;
    match state
        .budgets
        .budgets_page(
            caller.member.organization_id,
            caller.bot_ids.as_deref(),
            paging.after.clone(),
            paging.fetch(),
        )
        .await
    {
        Ok(rows) => Ok(Json(paging.try_page(
            rows,
            |row| (row.scope.as_str().to_string(), row.target_id),
            view,
        )?)),
        Err(err) => Err(ApiError::store(err, "budgets")),
    }
}

/// Sets a budget: the most all Turns of the organization (target: its ID), a Bot or a Chat
/// may cost together. Checked before each model request a Turn sends; a Turn above a used-up
/// budget ends with `max_cost`.
#[utoipa::path(put, path = "/v1/budgets/{scope}/{target}", tag = "budgets",
    params(("scope" = String, Path, description = "organization, bot or chat", pattern = "^(organization|bot|chat)$"),
        ("target" = uuid::Uuid, Path, description = "The organization's, Bot's or Chat's ID")),
    request_body = PutBudget,
    responses((status = 200, body = Budget), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn put_budget(
    State(state): State<AppState>,
    caller: Caller,
    Path((scope, target_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<PutBudget>,
) -> Result<Json<Budget>, ApiError> {
    caller.require(Resource::Models, Action::Write)?;
    require_admin(&caller, "change budgets")?;
    let (scope, target_id) = target(&scope, &target_id)?;
    within_bot_limit(&caller, scope, target_id)?;
    let max = i64::try_from(request.max_cost_micros)
        .map_err(|_| ApiError::invalid("max_cost_micros is too large"))?;
    match state
        .budgets
        .put_budget(caller.member.organization_id, scope, target_id, max)
        .await
    {
        Ok(Some(row)) => Ok(Json(view(row)?)),
        Ok(None) => Err(ApiError::not_found(scope.as_str())),
        Err(err) => Err(ApiError::store(err, "budget")),
    }
}

/// Removes a budget.
#[utoipa::path(delete, path = "/v1/budgets/{scope}/{target}", tag = "budgets",
    params(("scope" = String, Path, description = "organization, bot or chat", pattern = "^(organization|bot|chat)$"),
        ("target" = uuid::Uuid, Path, description = "The organization's, Bot's or Chat's ID")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_budget(
    State(state): State<AppState>,
    caller: Caller,
    Path((scope, target_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    caller.require(Resource::Models, Action::Write)?;
    require_admin(&caller, "change budgets")?;
    let (scope, target_id) = target(&scope, &target_id)?;
    within_bot_limit(&caller, scope, target_id)?;
    match state
        .budgets
        .delete_budget(caller.member.organization_id, scope, target_id)
        .await
    {
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) => Err(ApiError::not_found("budget")),
        Err(err) => Err(ApiError::store(err, "budget")),
    }
}
