//! The generic call path over HTTP: any operation of the table, by its method and path.

use reqwest::Method;

use super::RemoteClient;
use super::transport::{Retry, lost};
use crate::client::api::{
    AnswerKind, ApiAnswer, ApiBody, ApiBytes, ApiRequest, fill_path, operation, unknown_operation,
};
use crate::client::dispatch::client_operation;
use crate::error::Error;

/// Operations that do more than one request, run by their typed method: input gets a command
/// key and watches its execution for host tools; a Chat deletion waits for its end.
const TYPED: &[&str] = &["send", "steer", "delete_chat"];

impl RemoteClient {
    pub(super) async fn call_operation(
        &self,
        id: &str,
        request: ApiRequest,
    ) -> Result<ApiAnswer, Error> {
        let op = operation(id).ok_or_else(|| unknown_operation(id))?;
        if TYPED.contains(&op.id)
            && let Some(answer) = client_operation(self, op, &request).await
        {
            return answer;
        }
        let path = fill_path(op, &request)?;
        let method = Method::from_bytes(op.method.as_bytes())
            .map_err(|_| Error::invalid_input(format!("{} has no HTTP method", op.id)))?;
        let retry = if op.retry_safe() {
            Retry::Safe
        } else {
            Retry::BeforeSending
        };
        let body = match request.body {
            Some(ApiBody::Json(value)) => Some((
                serde_json::to_vec(&value).map_err(|e| {
                    Error::invalid_input(format!("the request cannot be encoded: {e}"))
                })?,
                "application/json".to_string(),
            )),
            Some(ApiBody::Bytes { data, content_type }) => Some((data, content_type)),
            None => None,
        };
        let response = self
            .transport
            .send_raw(
                method,
                &path,
                body.as_ref()
                    .map(|(data, kind)| (data.clone(), kind.as_str())),
                retry,
            )
            .await?;
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/octet-stream")
            .to_string();
        let bytes = response.bytes().await.map_err(|e| lost(&e))?;
        match op.answer {
            AnswerKind::Empty => Ok(ApiAnswer::Empty),
            AnswerKind::Bytes => Ok(ApiAnswer::Bytes(ApiBytes {
                data: bytes.to_vec(),
                content_type,
            })),
            AnswerKind::Json if bytes.is_empty() => Ok(ApiAnswer::Empty),
            AnswerKind::Json => serde_json::from_slice(&bytes)
                .map(ApiAnswer::Json)
                .map_err(|e| {
                    Error::new(
                        openbot_schema::ErrorCode::Unavailable,
                        format!("the server's answer to {} is not JSON: {e}", op.id),
                    )
                }),
        }
    }
}
