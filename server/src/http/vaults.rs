//! `/v1/vault-items` and `/v1/vault-rules`: Vault items, their fields and rules (see
//! docs/vaults.md). Values are write-only: no answer carries one. Reading needs the `vaults`
//! read right, changing the `vaults` write right; an organization's items change only with
//! the owner or admin role, a member's item only by that member (others get `404`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use openbot_schema::{
    CreateVaultItem, CreateVaultRule, ErrorBody, ErrorCategory, ErrorCode, PageQuery,
    PutVaultField, VaultItem, VaultItemPage, VaultRule, VaultRulePage,
};
use uuid::Uuid;

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::identity::Caller;
use crate::paging::Paging;
use crate::vaults::VaultError;

/// A Vault failure as the API's error.
impl From<VaultError> for ApiError {
    fn from(err: VaultError) -> Self {
        match err {
            VaultError::Invalid(message) => ApiError::invalid(message),
            VaultError::Forbidden(err) => err.into(),
            VaultError::NotAllowed(message) => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, message)
            }
            VaultError::NotFound(what) => ApiError::not_found(what),
            VaultError::Seal => {
                ApiError::failed(ErrorCategory::Internal, "a vault value could not be sealed")
            }
            VaultError::Store(err) => ApiError::store(err, "vault item"),
        }
    }
}

fn parse_id(id: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(id).map_err(|_| {
        ApiError::invalid(format!(
            "`{}` is not an ID",
            id.chars().take(64).collect::<String>()
        ))
    })
}

/// The Vault items the caller sees (the organization's and its own), oldest first, with their
/// fields' names. Paged: ask again with `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/vault-items", tag = "vaults", params(PageQuery),
    responses((status = 200, body = VaultItemPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_vault_items(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<VaultItemPage>, ApiError> {
    let paging = Paging::parse(&query)?;
    let page = state.vaults.list(&caller, &paging).await?;
    Ok(Json(page))
}

/// Creates a Vault item with its fields; each value is sealed and never shown again. The
/// answer names the fields only.
#[utoipa::path(post, path = "/v1/vault-items", tag = "vaults",
    request_body = CreateVaultItem,
    responses((status = 201, body = VaultItem), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn create_vault_item(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<CreateVaultItem>,
) -> Result<(StatusCode, Json<VaultItem>), ApiError> {
    let item = state.vaults.create(&caller, request).await?;
    Ok((StatusCode::CREATED, Json(item)))
}

/// One Vault item: its name, owner and fields' names (never their values).
#[utoipa::path(get, path = "/v1/vault-items/{id}", tag = "vaults",
    params(("id" = String, Path, description = "The item's ID")),
    responses((status = 200, body = VaultItem), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_vault_item(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<VaultItem>, ApiError> {
    let id = parse_id(&id)?;
    let item = state.vaults.get(&caller, id).await?;
    Ok(Json(item))
}

/// Deletes a Vault item with its fields and rules. Saved calls that reference it fail with a
/// clear error from then on; a new item under the same name does not replace it.
#[utoipa::path(delete, path = "/v1/vault-items/{id}", tag = "vaults",
    params(("id" = String, Path, description = "The item's ID")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_vault_item(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id)?;
    state.vaults.delete(&caller, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Sets a field's value (adds the field, or replaces its value); sealed, never shown again.
#[utoipa::path(put, path = "/v1/vault-items/{id}/fields/{field}", tag = "vaults",
    params(("id" = String, Path, description = "The item's ID"),
           ("field" = String, Path, description = "The field's name: 1-64 of a-z A-Z 0-9 _ -")),
    request_body = PutVaultField,
    responses((status = 200, body = VaultItem), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn put_vault_field(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, field)): Path<(String, String)>,
    ApiJson(request): ApiJson<PutVaultField>,
) -> Result<Json<VaultItem>, ApiError> {
    let id = parse_id(&id)?;
    let item = state.vaults.put_field(&caller, id, &field, request).await?;
    Ok(Json(item))
}

/// Removes a field and the rules that name it.
#[utoipa::path(delete, path = "/v1/vault-items/{id}/fields/{field}", tag = "vaults",
    params(("id" = String, Path, description = "The item's ID"),
           ("field" = String, Path, description = "The field's name")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_vault_field(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, field)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id)?;
    state.vaults.delete_field(&caller, id, &field).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The rules of a Vault item, oldest first. Paged.
#[utoipa::path(get, path = "/v1/vault-items/{id}/rules", tag = "vaults",
    params(("id" = String, Path, description = "The item's ID"), PageQuery),
    responses((status = 200, body = VaultRulePage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_vault_rules(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<VaultRulePage>, ApiError> {
    let id = parse_id(&id)?;
    let paging = Paging::parse(&query)?;
    let page = state.vaults.rules(&caller, id, &paging).await?;
    Ok(Json(page))
}

/// Adds a rule: a Bot (one the caller can use) or a registered HTTP tool may read a field (or
/// `*`, every field). A send needs a rule for each reader on its path: the Turn's Bot and the
/// tool. Adding the same rule twice answers the existing one.
#[utoipa::path(post, path = "/v1/vault-items/{id}/rules", tag = "vaults",
    params(("id" = String, Path, description = "The item's ID")),
    request_body = CreateVaultRule,
    responses((status = 201, body = VaultRule), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn create_vault_rule(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(request): ApiJson<CreateVaultRule>,
) -> Result<(StatusCode, Json<VaultRule>), ApiError> {
    let id = parse_id(&id)?;
    let rule = state.vaults.create_rule(&caller, id, request).await?;
    Ok((StatusCode::CREATED, Json(rule)))
}

/// Removes a rule; the next send checks the rules again.
#[utoipa::path(delete, path = "/v1/vault-rules/{id}", tag = "vaults",
    params(("id" = String, Path, description = "The rule's ID")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_vault_rule(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id)?;
    state.vaults.delete_rule(&caller, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
