//! `/v1/files`: a member's stored files. Storing and deleting need the `chats` write right,
//! reading the `chats` read right; each file is its owner's alone, and a token limited to
//! some Bots reaches only the files it stored itself (files have no Bot; others are `404`).

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use openbot_schema::{
    ErrorBody, ErrorCategory, ErrorCode, FileId, FileRetention, PageQuery, PutFileRetention,
    StoredFile, StoredFilePage,
};
use serde::Deserialize;

use super::AppState;
use super::error::ApiError;
use super::json::{ApiJson, ApiQuery};
use crate::files::{FileError, MAX_FILE_BYTES};
use crate::identity::Caller;
use crate::paging::Paging;

impl From<FileError> for ApiError {
    fn from(err: FileError) -> Self {
        match err {
            FileError::NotFound => ApiError::not_found("file"),
            FileError::Invalid(message) => ApiError::invalid(message),
            FileError::Forbidden(err) => err.into(),
            FileError::Store(err) => ApiError::store(err, "file"),
            FileError::Objects(cause) => ApiError::failed(ErrorCategory::Storage, cause),
        }
    }
}

fn parse_id(id: &str) -> Result<FileId, ApiError> {
    id.parse()
        .map_err(|e: openbot_schema::IdParseError| ApiError::invalid(e.to_string()))
}

/// The name of a file to store.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UploadQuery {
    /// Its display name: 1-255 characters, no slash.
    name: String,
}

/// Stores a file: the request body is its bytes (at most 20 MiB) and its `Content-Type` its
/// media type. Its description is answered; its bytes are read at `/v1/files/{id}/content`.
#[utoipa::path(post, path = "/v1/files", tag = "files", params(UploadQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The file's bytes; any media type"),
    responses((status = 201, body = StoredFile), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn upload_file(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<UploadQuery>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<StoredFile>), ApiError> {
    let Some(media_type) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::UnsupportedMediaType,
            "send the file's media type as Content-Type",
        ));
    };
    let media_type = media_type.to_string();
    let bytes = axum::body::to_bytes(body, MAX_FILE_BYTES)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::PayloadTooLarge,
                format!("a file has at most {MAX_FILE_BYTES} bytes"),
            )
        })?;
    let file = state
        .files
        .upload(&caller, &query.name, &media_type, bytes)
        .await?;
    Ok((StatusCode::CREATED, Json(file)))
}

/// The caller's files, newest first. Paged: ask again with `next_cursor` until it is absent.
#[utoipa::path(get, path = "/v1/files", tag = "files", params(PageQuery),
    responses((status = 200, body = StoredFilePage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_files(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<StoredFilePage>, ApiError> {
    let paging = Paging::parse(&query)?;
    let files = state.files.list(&caller, &paging).await?;
    Ok(Json(files))
}

/// One of the caller's files.
#[utoipa::path(get, path = "/v1/files/{id}", tag = "files",
    params(("id" = String, Path, description = "The file's ID")),
    responses((status = 200, body = StoredFile), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_file(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<StoredFile>, ApiError> {
    let id = parse_id(&id)?;
    let file = state.files.get(&caller, id).await?;
    Ok(Json(file))
}

/// Deletes one of the caller's files: it is gone at once (not listed, not read); its bytes and
/// then its description are removed by durable work that retries until the object store
/// confirms.
#[utoipa::path(delete, path = "/v1/files/{id}", tag = "files",
    params(("id" = String, Path, description = "The file's ID")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_file(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id)?;
    state.files.delete(&caller, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A file's bytes, with its media type.
#[utoipa::path(get, path = "/v1/files/{id}/content", tag = "files",
    params(("id" = String, Path, description = "The file's ID")),
    responses((status = 200, content_type = "application/octet-stream", description = "The file's bytes, with its media type as Content-Type"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn file_content(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    match state.files.content(&caller, id).await {
        Ok((file, bytes)) => Ok((
            [
                (header::CONTENT_TYPE, file.media_type.clone()),
                (header::CONTENT_LENGTH, bytes.len().to_string()),
                // Uploaded bytes are never run as a page of this origin: no type sniffing,
                // and a browser saves them instead of showing them.
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
                (header::CONTENT_DISPOSITION, attachment(&file.name)),
            ],
            bytes,
        )
            .into_response()),
        Err(err) => Err(ApiError::from(err)),
    }
}

/// The organization's file retention: files older than `days` are deleted by the retention
/// sweep; `days` is absent when files are kept until deleted.
#[utoipa::path(get, path = "/v1/files/retention", tag = "files",
    responses((status = 200, body = FileRetention), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_file_retention(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<FileRetention>, ApiError> {
    let retention = state.files.retention(&caller).await?;
    Ok(Json(retention))
}

/// Sets the organization's file retention in days (1-36500; owner or admin): from the next
/// sweep on (at most an hour later), older files are deleted, their bytes and descriptions.
#[utoipa::path(put, path = "/v1/files/retention", tag = "files", request_body = PutFileRetention,
    responses((status = 200, body = FileRetention), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)),
    security(("token" = [])))]
pub async fn put_file_retention(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<PutFileRetention>,
) -> Result<Json<FileRetention>, ApiError> {
    let retention = state.files.put_retention(&caller, request).await?;
    Ok(Json(retention))
}

/// Removes the organization's file retention (owner or admin): files are kept until deleted.
#[utoipa::path(delete, path = "/v1/files/retention", tag = "files",
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_file_retention(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<StatusCode, ApiError> {
    match state.files.delete_retention(&caller).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(FileError::NotFound) => Err(ApiError::not_found("file retention")),
        Err(err) => Err(ApiError::from(err)),
    }
}

/// `Content-Disposition: attachment` with the file's name: a plain ASCII `filename` (quotes,
/// backslashes and control characters replaced) and the exact name as RFC 5987 `filename*`.
fn attachment(name: &str) -> String {
    let plain: String = name
        .chars()
        .map(|c| {
            if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    format!("attachment; filename=\"{plain}\"; filename*=UTF-8''{encoded}")
}

#[cfg(test)]
mod tests {
    use super::attachment;

    #[test]
    fn a_files_name_is_sent_safely_as_an_attachment() {
        assert_eq!(
            attachment("report.pdf"),
            "attachment; filename=\"report.pdf\"; filename*=UTF-8''report.pdf"
        );
        assert_eq!(
            attachment("a\"b\r\nc ü.txt"),
            "attachment; filename=\"a_b__c _.txt\"; filename*=UTF-8''a%22b%0D%0Ac%20%C3%BC.txt"
        );
    }
}
