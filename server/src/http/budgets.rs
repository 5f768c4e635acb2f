//! `/v1/budgets`: spending caps on every Turn of the organization, a Bot or a Chat, through
//! the budget use cases.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{Budget, BudgetPage, BudgetScope, ErrorBody, PageQuery, PutBudget};
use uuid::Uuid;

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::paging::Paging;

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
    let paging = Paging::<(String, Uuid)>::parse(&query)?;
    Ok(Json(state.budgets.list(&caller, &paging).await?))
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
    let (scope, target_id) = target(&scope, &target_id)?;
    Ok(Json(
        state
            .budgets
            .put(&caller, scope, target_id, &request)
            .await?,
    ))
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
    let (scope, target_id) = target(&scope, &target_id)?;
    state.budgets.delete(&caller, scope, target_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
