//! `/v1/tools` and `/v1/delegates`: the organization's tool registry, through its use cases.
//! A Bot tool with a registered name calls its endpoint or hands its task to a Bot.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    DelegateTool, DelegateToolPage, ErrorBody, HttpTool, HttpToolPage, PageQuery, PutDelegateTool,
    PutHttpTool,
};

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::paging::Paging;

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
    let paging = Paging::<String>::parse(&query)?;
    Ok(Json(state.tools.list_http(&caller, &paging).await?))
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
    Ok(Json(state.tools.put_http(&caller, &name, request).await?))
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
    state.tools.delete_http(&caller, &name).await?;
    Ok(StatusCode::NO_CONTENT)
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
    let paging = Paging::<String>::parse(&query)?;
    Ok(Json(state.tools.list_delegates(&caller, &paging).await?))
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
    Ok(Json(
        state.tools.put_delegate(&caller, &name, request).await?,
    ))
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
    state.tools.delete_delegate(&caller, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
