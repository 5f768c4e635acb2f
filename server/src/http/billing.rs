//! `/v1/billing/...` and `/v1/usage`: model prices, the organization's credits and its usage
//! reports. Every route needs the owner or admin role and the `billing` right (read to see,
//! write to change); a Bot-limited token reads only the usage of its Bots' Chats.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use openbot_schema::{
    CreditBalance, CreditLedgerPage, ErrorBody, ErrorCode, GrantCredits, ModelPrice,
    ModelPricePage, PutModelPrice, UsageGroup, UsagePage,
};
use serde::Deserialize;
use uuid::Uuid;

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::billing::{BillingError, UsageFilter};
use crate::identity::Caller;
use crate::paging::Paging;

impl From<BillingError> for ApiError {
    fn from(err: BillingError) -> Self {
        match err {
            BillingError::Forbidden(err) => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, err.to_string())
            }
            BillingError::Invalid(message) => ApiError::invalid(message),
            BillingError::NotFound(what) => ApiError::not_found(what),
            BillingError::Store(err) => ApiError::store(err, "billing"),
        }
    }
}

/// The prices in force: the organization's overrides and the catalog's prices (with the day
/// the catalog was taken) of the models it did not override, by model spec. Paged: ask again
/// with `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/billing/prices", tag = "billing", params(openbot_schema::PageQuery),
    responses((status = 200, body = ModelPricePage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_prices(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<openbot_schema::PageQuery>,
) -> Result<Json<ModelPricePage>, ApiError> {
    let paging = Paging::<String>::parse(&query)?;
    let page = state.billing.prices(&caller, &paging).await?;
    Ok(Json(page))
}

/// Sets the organization's price for a model spec. Calls sent from now on are priced with it;
/// a call already sent keeps the price saved with its reservation.
#[utoipa::path(put, path = "/v1/billing/prices", tag = "billing", request_body = PutModelPrice,
    responses((status = 200, body = ModelPrice), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn put_price(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<PutModelPrice>,
) -> Result<Json<ModelPrice>, ApiError> {
    let price = state.billing.put_price(&caller, request).await?;
    Ok(Json(price))
}

/// Which price to remove.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PriceQuery {
    /// The model spec whose override to remove.
    model: String,
}

/// Removes the organization's price for a model: the catalog's applies again, if it has one.
#[utoipa::path(delete, path = "/v1/billing/prices", tag = "billing", params(PriceQuery),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_price(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PriceQuery>,
) -> Result<StatusCode, ApiError> {
    state.billing.delete_price(&caller, &query.model).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The organization's credits: balance, what calls being sent hold, and what is available.
#[utoipa::path(get, path = "/v1/billing/credits", tag = "billing",
    responses((status = 200, body = CreditBalance), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_credits(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<CreditBalance>, ApiError> {
    let balance = state.billing.credits(&caller).await?;
    Ok(Json(balance))
}

/// Grants credits to the organization (a ledger entry and the balance, in one transaction).
/// The first grant puts the organization on credits: from then on a model request whose
/// reservation the credits do not cover is not sent, and its Turn ends `credits_exhausted`.
#[utoipa::path(post, path = "/v1/billing/credits/grants", tag = "billing", request_body = GrantCredits,
    responses((status = 200, body = CreditBalance), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn grant_credits(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<GrantCredits>,
) -> Result<Json<CreditBalance>, ApiError> {
    let balance = state.billing.grant(&caller, request).await?;
    Ok(Json(balance))
}

/// Which page of the ledger.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// How many entries a page holds: 1-500, default 50.
    limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the page before.
    cursor: Option<String>,
}

/// The organization's credit ledger (grants and charges), newest first. Paged: ask again with
/// `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/billing/credits/ledger", tag = "billing", params(PageQuery),
    responses((status = 200, body = CreditLedgerPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn credit_ledger(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<CreditLedgerPage>, ApiError> {
    let page = state
        .billing
        .ledger(&caller, query.limit, query.cursor.as_deref())
        .await?;
    Ok(Json(page))
}

/// What a usage report selects.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UsageQueryParams {
    /// Calls sent at or after this time (RFC 3339).
    from: Option<DateTime<Utc>>,
    /// Calls sent before this time (RFC 3339).
    to: Option<DateTime<Utc>>,
    /// One row per `organization`, `bot`, `chat`, `member` or `model` (the default).
    group_by: Option<String>,
    /// Only calls made by this Bot.
    bot_id: Option<Uuid>,
    /// Only calls for this Chat.
    chat_id: Option<Uuid>,
    /// Only calls of this member's work.
    member_id: Option<Uuid>,
    /// Only calls to this model spec.
    model: Option<String>,
    /// How many rows a page holds: 1-500, default 50 (not for the CSV export).
    limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the page before (not for the CSV export).
    cursor: Option<String>,
}

fn filter(query: &UsageQueryParams) -> Result<UsageFilter, ApiError> {
    let group = query
        .group_by
        .as_deref()
        .map(|text| {
            UsageGroup::parse(text).ok_or_else(|| {
                ApiError::invalid("group_by must be organization, bot, chat, member or model")
            })
        })
        .transpose()?;
    Ok(UsageFilter {
        from: query.from,
        to: query.to,
        group,
        bot: query.bot_id,
        chat: query.chat_id,
        member: query.member_id,
        model: query.model.clone(),
    })
}

/// Usage and cost of model calls in a time range, one row per group, by key. Cost is the
/// confirmed usage priced at the price in force when each call was sent; calls whose result
/// had no usage are counted apart (`unknown_calls`, with their estimates) and never charged.
/// Paged: ask again with `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/usage", tag = "billing", params(UsageQueryParams),
    responses((status = 200, body = UsagePage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn usage(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<UsageQueryParams>,
) -> Result<Json<UsagePage>, ApiError> {
    let filter = filter(&query)?;
    let page = state
        .billing
        .usage(&caller, &filter, query.limit, query.cursor.as_deref())
        .await?;
    Ok(Json(page))
}

/// The same report as CSV: a header line, then one line per group (at most 10000).
#[utoipa::path(get, path = "/v1/usage/export", tag = "billing", params(UsageQueryParams),
    responses((status = 200, content_type = "text/csv", description = "The report as CSV"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn usage_export(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<UsageQueryParams>,
) -> Result<Response, ApiError> {
    if query.limit.is_some() || query.cursor.is_some() {
        return Err(ApiError::invalid(
            "the CSV export has no pages: leave out limit and cursor",
        ));
    }
    let filter = filter(&query)?;
    let csv = state.billing.usage_csv(&caller, &filter).await?;
    Ok(([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], csv).into_response())
}
