//! `/v1/tools`: the organization's HTTP tools. A Bot tool with a registered name calls its
//! endpoint. Listing needs the `bots` read right; registering and removing need the `bots`
//! write right and the owner or admin role.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    Action, DelegateTool, DelegateToolPage, ErrorBody, HttpTool, HttpToolPage, PageQuery,
    PutDelegateTool, PutHttpTool, Resource,
};

use super::AppState;
use super::error::StoreResultExt;
use super::error::{ApiError, require_admin};
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::paging::Paging;
use crate::store::{StoreError, stored_time};
use crate::tools::{CallTemplate, DelegateToolRow, HttpToolRow};

fn view(row: HttpToolRow) -> Result<HttpTool, StoreError> {
    Ok(HttpTool {
        name: row.definition.name,
        description: row.definition.description,
        input_schema: row.definition.input_schema,
        url: row.url,
        retry_safe: row.retry_safe,
        background: row.background,
        headers: row.template.headers.into_iter().collect(),
        body: row.template.body.map(serde_json::Value::Object),
        updated_at: stored_time(row.updated_at)?,
    })
}

/// The organization's HTTP tools, by name. Paged: ask again with `next_cursor` until it is
/// absent.
#[utoipa::path(get, path = "/v1/tools", tag = "tools", params(PageQuery),
    responses((status = 200, body = HttpToolPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_tools(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<HttpToolPage>, ApiError> {
    caller.require(Resource::Bots, Action::Read)?;
    let paging = Paging::<String>::parse(&query)?;
    match state
        .tools
        .tools_page(
            caller.member.organization_id,
            paging.after.as_deref(),
            paging.fetch(),
        )
        .await
    {
        Ok(rows) => Ok(Json(paging.try_page(
            rows,
            |row| row.definition.name.clone(),
            view,
        )?)),
        Err(err) => Err(ApiError::store(err, "tools")),
    }
}

/// Registers an HTTP tool under a name (replacing an earlier one). Turns submitted from now on
/// call its endpoint; Turns already submitted keep the definition they saved.
#[utoipa::path(put, path = "/v1/tools/{name}", tag = "tools",
    params(("name" = String, Path, description = "The tool's name: 1-64 of a-z A-Z 0-9 _ -")),
    request_body = PutHttpTool,
    responses((status = 200, body = HttpTool), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn put_tool(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    ApiJson(request): ApiJson<PutHttpTool>,
) -> Result<Json<HttpTool>, ApiError> {
    caller.require(Resource::Bots, Action::Write)?;
    require_admin(&caller, "change the organization's tools")?;
    caller.require_whole_organization()?;
    // The one check of a registration, shared with the in-memory Client.
    let definition =
        openbot_core::tool::check_http_tool(&name, &request, state.platform.outbound())
            .map_err(ApiError::invalid)?;
    let body = match request.body {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Object(map)) => Some(map),
        Some(_) => return Err(ApiError::invalid("body must be a JSON object")),
    };
    let template = CallTemplate {
        headers: request.headers.into_iter().collect(),
        body,
    };
    let refs = template
        .check()
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    // References name items by ID: each must be a field the registering member sees now.
    if let Err(err) = state.vaults.check_references(&caller, &refs).await {
        return Err(ApiError::from(err));
    }
    let row = HttpToolRow {
        definition,
        url: request.url,
        retry_safe: request.retry_safe,
        background: request.background,
        template,
        updated_at: 0,
    };
    let row = state
        .tools
        .put_tool(caller.member.organization_id, row)
        .await
        .about("tool")?;
    Ok(Json(view(row)?))
}

/// Removes an HTTP tool; Bot tools of that name become host tools for later Turns.
#[utoipa::path(delete, path = "/v1/tools/{name}", tag = "tools",
    params(("name" = String, Path, description = "The tool's name")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_tool(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    caller.require(Resource::Bots, Action::Write)?;
    require_admin(&caller, "change the organization's tools")?;
    caller.require_whole_organization()?;
    match state
        .tools
        .delete_tool(caller.member.organization_id, &name)
        .await
    {
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) => Err(ApiError::not_found("tool")),
        Err(err) => Err(ApiError::store(err, "tool")),
    }
}

fn delegate_view(row: DelegateToolRow) -> Result<DelegateTool, StoreError> {
    Ok(DelegateTool {
        name: row.name,
        description: row.description,
        bot_id: row.bot_id,
        limits: row.limits,
        updated_at: stored_time(row.updated_at)?,
    })
}

/// The organization's delegate tools, by name. Paged: ask again with `next_cursor` until it
/// is absent.
#[utoipa::path(get, path = "/v1/delegates", tag = "tools", params(PageQuery),
    responses((status = 200, body = DelegateToolPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_delegates(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<DelegateToolPage>, ApiError> {
    caller.require(Resource::Bots, Action::Read)?;
    let paging = Paging::<String>::parse(&query)?;
    match state
        .tools
        .delegates_page(
            caller.member.organization_id,
            paging.after.as_deref(),
            paging.fetch(),
        )
        .await
    {
        Ok(rows) => Ok(Json(paging.try_page(
            rows,
            |row| row.name.clone(),
            delegate_view,
        )?)),
        Err(err) => Err(ApiError::store(err, "delegates")),
    }
}

/// Registers a delegate tool under a name (replacing an earlier one): a Bot tool of this name
/// hands its `task` to the named Bot as a child Turn. Turns submitted from now on use it.
#[utoipa::path(put, path = "/v1/delegates/{name}", tag = "tools",
    params(("name" = String, Path, description = "The tool's name: 1-64 of a-z A-Z 0-9 _ -")),
    request_body = PutDelegateTool,
    responses((status = 200, body = DelegateTool), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn put_delegate(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    ApiJson(request): ApiJson<PutDelegateTool>,
) -> Result<Json<DelegateTool>, ApiError> {
    caller.require(Resource::Bots, Action::Write)?;
    require_admin(&caller, "change the organization's tools")?;
    caller.require_whole_organization()?;
    // The one check of a registration, shared with the in-memory Client.
    openbot_core::delegation::check_delegate(&name, &request).map_err(ApiError::invalid)?;
    state.bots.visible(&caller, request.bot_id).await?;
    let row = DelegateToolRow {
        name,
        description: request.description,
        bot_id: request.bot_id,
        limits: request.limits,
        updated_at: 0,
    };
    let row = state
        .tools
        .put_delegate(caller.member.organization_id, row)
        .await
        .about("delegate")?;
    Ok(Json(delegate_view(row)?))
}

/// Removes a delegate tool; Bot tools of that name become host tools for later Turns.
#[utoipa::path(delete, path = "/v1/delegates/{name}", tag = "tools",
    params(("name" = String, Path, description = "The tool's name")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_delegate(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    caller.require(Resource::Bots, Action::Write)?;
    require_admin(&caller, "change the organization's tools")?;
    caller.require_whole_organization()?;
    match state
        .tools
        .delete_delegate(caller.member.organization_id, &name)
        .await
    {
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) => Err(ApiError::not_found("delegate")),
        Err(err) => Err(ApiError::store(err, "delegate")),
    }
}
