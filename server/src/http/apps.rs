//! `/v1/apps`: the organization's Apps (MCP servers), their Connections and discovery.
//! Seeing Apps and Connections and running discovery need the `apps` read right; registering
//! and removing Apps and opening and removing Connections need the `apps` write right and the
//! owner or admin role, like the OAuth routes (tokens made for the `bots` rights, which these
//! routes took before, no longer reach them). Members use App tools through their Bots.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    Action, App, AppConnection, AppConnectionPage, AppDiscovery, AppPage, ErrorBody, ErrorCategory,
    ErrorCode, NewApp, NewAppConnection, PageQuery, Resource,
};
use uuid::Uuid;

use super::AppState;
use super::error::StoreResultExt;
use super::error::{ApiError, require_admin};
use super::json::{ApiJson, ApiQuery};
use crate::apps::{AppError, app_view, connection_view};
use crate::identity::Caller;
use crate::paging::Paging;

fn api_error(err: AppError, what: &str) -> ApiError {
    match err {
        AppError::NotFound(what) => ApiError::not_found(what),
        AppError::Invalid(message) => ApiError::invalid(message),
        AppError::Conflict(message) => ApiError::conflict(message),
        AppError::Upstream(message) => {
            ApiError::new(StatusCode::BAD_GATEWAY, ErrorCode::Unavailable, message)
        }
        AppError::CleanupPending(message) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Unavailable,
            message,
        ),
        AppError::Store(err) => ApiError::store(err, what),
    }
}

fn id(text: &str, what: &'static str) -> Result<Uuid, ApiError> {
    text.parse().map_err(|_| ApiError::not_found(what))
}

/// The organization's Apps, oldest first. Paged: ask again with `next_cursor` until it is
/// absent.
#[utoipa::path(get, path = "/v1/apps", tag = "apps", params(PageQuery),
    responses((status = 200, body = AppPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_apps(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<AppPage>, ApiError> {
    caller.require(Resource::Apps, Action::Read)?;
    let paging = Paging::<Uuid>::parse(&query)?;
    let rows = state
        .apps
        .store()
        .apps_page(caller.member.organization_id, paging.after, paging.fetch())
        .await
        .about("apps")?;
    Ok(Json(paging.try_page(
        rows,
        |row| row.id,
        |row| app_view(&row),
    )?))
}

/// Registers an App: a streamable-HTTP URL (checked against the deployment's outbound
/// policy), or a stdio command where the operator enabled stdio Apps. Its name is unique in
/// the organization; Bots name its tools `<name>__<tool>`.
#[utoipa::path(post, path = "/v1/apps", tag = "apps", request_body = NewApp,
    responses((status = 201, body = App), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn register_app(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<NewApp>,
) -> Result<(StatusCode, Json<App>), ApiError> {
    caller.require(Resource::Apps, Action::Write)?;
    require_admin(&caller, "register Apps")?;
    caller.require_whole_organization()?;
    let app = state
        .apps
        .register(
            caller.member.organization_id,
            caller.member.member_id,
            request,
        )
        .await
        .map_err(|err| api_error(err, "app"))?;
    Ok((StatusCode::CREATED, Json(app)))
}

/// One App of the organization.
#[utoipa::path(get, path = "/v1/apps/{id}", tag = "apps",
    params(("id" = String, Path, description = "The App's ID")),
    responses((status = 200, body = App), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_app(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
) -> Result<Json<App>, ApiError> {
    caller.require(Resource::Apps, Action::Read)?;
    let app = id(&app, "app")?;
    let row = state
        .apps
        .live_app(caller.member.organization_id, app)
        .await
        .map_err(|err| api_error(err, "app"))?;
    Ok(Json(app_view(&row)?))
}

/// Removes an App and its Connections. Turns submitted later no longer offer its tools;
/// saved calls that name it fail with a clear result and send nothing.
#[utoipa::path(delete, path = "/v1/apps/{id}", tag = "apps",
    params(("id" = String, Path, description = "The App's ID")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn remove_app(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
) -> Result<StatusCode, ApiError> {
    caller.require(Resource::Apps, Action::Write)?;
    require_admin(&caller, "remove Apps")?;
    caller.require_whole_organization()?;
    let app = id(&app, "app")?;
    state
        .apps
        .remove(caller.member.organization_id, app)
        .await
        .map_err(|err| api_error(err, "app"))?;
    Ok(StatusCode::NO_CONTENT)
}

/// An App's Connections that are not removed, oldest first. Paged.
#[utoipa::path(get, path = "/v1/apps/{id}/connections", tag = "apps",
    params(("id" = String, Path, description = "The App's ID"), PageQuery),
    responses((status = 200, body = AppConnectionPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_app_connections(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<AppConnectionPage>, ApiError> {
    caller.require(Resource::Apps, Action::Read)?;
    let app = id(&app, "app")?;
    let paging = Paging::<Uuid>::parse(&query)?;
    let organization = caller.member.organization_id;
    if let Err(err) = state.apps.live_app(organization, app).await {
        return Err(api_error(err, "app"));
    }
    match state
        .apps
        .store()
        .connections_page(organization, app, paging.after, paging.fetch())
        .await
    {
        Ok(rows) => Ok(Json(paging.try_page(
            rows,
            |row| row.id,
            |row| connection_view(&row),
        )?)),
        Err(err) => Err(ApiError::store(err, "connections")),
    }
}

/// Opens a Connection to an App: `none`, `manual` (headers sealed at rest, never shown
/// again) or `oauth` (it starts as `needs_sign_in`).
#[utoipa::path(post, path = "/v1/apps/{id}/connections", tag = "apps",
    params(("id" = String, Path, description = "The App's ID")),
    request_body = NewAppConnection,
    responses((status = 201, body = AppConnection), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn open_app_connection(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    ApiJson(request): ApiJson<NewAppConnection>,
) -> Result<(StatusCode, Json<AppConnection>), ApiError> {
    caller.require(Resource::Apps, Action::Write)?;
    require_admin(&caller, "connect Apps")?;
    caller.require_whole_organization()?;
    let app = id(&app, "app")?;
    // Vault references in manual headers name items by ID: each must be a field the
    // connecting member sees now (the values are opened only at each request).
    let headers: std::collections::BTreeMap<String, String> = request
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let refs =
        crate::apps::header_references(&headers).map_err(|e| ApiError::invalid(e.to_string()))?;
    if let Err(err) = state.vaults.check_references(&caller, &refs).await {
        return Err(ApiError::from(err));
    }
    let connection = state
        .apps
        .connect(
            caller.member.organization_id,
            caller.member.member_id,
            app,
            request,
        )
        .await
        .map_err(|err| api_error(err, "connection"))?;
    Ok((StatusCode::CREATED, Json(connection)))
}

/// One Connection of an App, removed ones too (with status `removed`).
#[utoipa::path(get, path = "/v1/apps/{id}/connections/{connection}", tag = "apps",
    params(("id" = String, Path, description = "The App's ID"), ("connection" = String, Path, description = "The Connection's ID")),
    responses((status = 200, body = AppConnection), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_app_connection(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, connection)): Path<(String, String)>,
) -> Result<Json<AppConnection>, ApiError> {
    caller.require(Resource::Apps, Action::Read)?;
    let (app, connection) = (id(&app, "app")?, id(&connection, "connection")?);
    let row = state
        .apps
        .connection(caller.member.organization_id, app, connection)
        .await
        .map_err(|err| api_error(err, "connection"))?;
    Ok(Json(connection_view(&row)?))
}

/// Removes a Connection: its credentials are dropped, its revision grows, and saved calls
/// that name it fail with a clear result and send nothing. Then every MCP session it has open
/// on any node is closed by its owner; the answer is 204 once all are closed, or 503
/// `unavailable` naming the sessions not known to be closed (an owner that did not answer, a
/// close that failed, with its error ID). Removing it again waits for those again.
#[utoipa::path(delete, path = "/v1/apps/{id}/connections/{connection}", tag = "apps",
    params(("id" = String, Path, description = "The App's ID"), ("connection" = String, Path, description = "The Connection's ID")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("token" = [])))]
pub async fn remove_app_connection(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, connection)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    caller.require(Resource::Apps, Action::Write)?;
    require_admin(&caller, "remove App connections")?;
    caller.require_whole_organization()?;
    let (app, connection) = (id(&app, "app")?, id(&connection, "connection")?);
    state
        .apps
        .disconnect(caller.member.organization_id, app, connection)
        .await
        .map_err(|err| api_error(err, "connection"))?;
    Ok(StatusCode::NO_CONTENT)
}

/// Discovery: lists every tool of the App over this Connection, with input schemas and
/// annotations, and saves the list on the Connection. Turns submitted from now on take App
/// tool declarations from it; Turns already submitted keep the declarations they saved.
#[utoipa::path(post, path = "/v1/apps/{id}/connections/{connection}/discover", tag = "apps",
    params(("id" = String, Path, description = "The App's ID"), ("connection" = String, Path, description = "The Connection's ID")),
    responses((status = 200, body = AppDiscovery), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 502, body = ErrorBody)),
    security(("token" = [])))]
pub async fn discover_app_tools(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, connection)): Path<(String, String)>,
) -> Result<Json<AppDiscovery>, ApiError> {
    caller.require(Resource::Apps, Action::Read)?;
    let (app, connection) = (id(&app, "app")?, id(&connection, "connection")?);
    match state
        .apps
        .discover(
            caller.member.organization_id,
            caller.member.member_id,
            app,
            connection,
        )
        .await
    {
        Ok(discovery) => Ok(Json(discovery)),
        Err(AppError::Store(err)) => Err(ApiError::failed(ErrorCategory::Storage, err.to_string())),
        Err(err) => Err(api_error(err, "connection")),
    }
}
