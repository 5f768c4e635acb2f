//! JSON bodies: malformed JSON, unknown fields, a wrong content type or an oversize body each
//! get a declared 4xx error with a stable code.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use openbot_schema::ErrorCode;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// The largest request body accepted, in bytes (1 MiB).
pub const BODY_LIMIT: usize = 1024 * 1024;

/// A JSON request body.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<serde_json::Value>::from_request(request, state).await {
            Ok(axum::Json(value)) => {
                if holds_nul(&value) {
                    return Err(ApiError::invalid(
                        "text may not contain the NUL character (\\u0000)",
                    ));
                }
                serde_json::from_value(value)
                    .map(Self)
                    .map_err(|e| ApiError::invalid(e.to_string()))
            }
            Err(rejection) => Err(match rejection {
                JsonRejection::MissingJsonContentType(_) => ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    ErrorCode::UnsupportedMediaType,
                    "send the body as JSON with `content-type: application/json`",
                ),
                JsonRejection::JsonSyntaxError(err) => {
                    ApiError::invalid(format!("malformed JSON: {}", err.body_text()))
                }
                JsonRejection::JsonDataError(err) => ApiError::invalid(err.body_text()),
                JsonRejection::BytesRejection(err)
                    if err.status() == StatusCode::PAYLOAD_TOO_LARGE =>
                {
                    ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        ErrorCode::PayloadTooLarge,
                        format!("the body is larger than {BODY_LIMIT} bytes"),
                    )
                }
                other => ApiError::invalid(other.body_text()),
            }),
        }
    }
}

/// Whether any string (or key) in the value holds a NUL character, which no text column
/// can store.
fn holds_nul(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(text) => text.contains('\0'),
        serde_json::Value::Array(items) => items.iter().any(holds_nul),
        serde_json::Value::Object(map) => map
            .iter()
            .any(|(key, value)| key.contains('\0') || holds_nul(value)),
        _ => false,
    }
}

/// Query parameters; a malformed query is a declared `invalid_input` error.
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl<T, S> axum::extract::FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(ApiError::invalid(rejection.body_text())),
        }
    }
}
