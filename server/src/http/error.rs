//! The error boundary: every failure of a request becomes a declared error body. A server
//! fault answers `request_failed` with a safe category and an error ID (also in the
//! `openbot-error-id` header); its full cause goes only to a sealed error record.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use openbot_schema::{ErrorBody, ErrorCategory, ErrorCode, ErrorId};

use super::AppState;
use crate::identity::AccessError;
use crate::store::StoreError;

/// The header that carries a fault's error ID.
pub const ERROR_ID_HEADER: &str = "openbot-error-id";

/// A failed request, ready to answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body.
    pub body: ErrorBody,
}

impl ApiError {
    /// A declared error with its status and code.
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status,
            body: ErrorBody {
                code,
                message: message.into(),
                category: None,
                error_id: None,
            },
        }
    }

    /// 400 `invalid_input`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidInput, message)
    }

    /// 401 `unauthorized`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, message)
    }

    /// 404 `not_found`.
    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("{what} was not found"),
        )
    }

    /// 409 `conflict`.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, ErrorCode::Conflict, message)
    }

    /// A server fault: seals `cause` and answers only its category and error ID.
    pub async fn fault(state: &AppState, category: ErrorCategory, cause: String) -> Self {
        let error_id = state.seal_error(category, cause).await;
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            body: ErrorBody {
                code: ErrorCode::RequestFailed,
                message: "the request failed; quote the error ID when you report it".into(),
                category: Some(category),
                error_id: Some(error_id),
            },
        }
    }

    /// Maps a storage failure: declared cases keep their meaning, the rest is a fault.
    pub async fn from_store(state: &AppState, err: StoreError, what: &str) -> Self {
        match err {
            StoreError::NotFound(_) => Self::not_found(what),
            StoreError::Ended(_) => Self::conflict(format!("{what} has ended")),
            StoreError::AdmissionClosed => Self::conflict(format!("{what} takes no more input")),
            StoreError::NotWaiting(_) => Self::conflict(format!(
                "the {what} does not wait for a decision on that call"
            )),
            StoreError::ParentPaused(_) => Self::conflict(format!(
                "a parent of the {what} is paused: resume the parent"
            )),
            StoreError::CommandKeyConflict(key) => {
                Self::conflict(format!("command key `{key}` was used for other input"))
            }
            // Boxed: every handler awaits this on its error path, and an idle long poll
            // would keep room for the fault's future.
            other => {
                Box::pin(Self::fault(
                    state,
                    ErrorCategory::Storage,
                    other.to_string(),
                ))
                .await
            }
        }
    }
}

impl From<AccessError> for ApiError {
    fn from(err: AccessError) -> Self {
        Self::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, err.to_string())
    }
}

impl From<crate::paging::PageError> for ApiError {
    fn from(err: crate::paging::PageError) -> Self {
        Self::invalid(err.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let error_id = self.body.error_id;
        let mut response = (self.status, axum::Json(self.body)).into_response();
        if let Some(id) = error_id
            && let Ok(value) = HeaderValue::from_str(&id.to_string())
        {
            response.headers_mut().insert(ERROR_ID_HEADER, value);
        }
        response
    }
}

/// The most error records that wait at once to be saved again; past it a record is given up
/// (with a warning naming its ID), so a long outage costs bounded memory.
pub const ERROR_RECORDS_WAITING: usize = 1_000;

/// How long a record that waits is tried again before it is given up.
const SAVE_LATER_FOR: std::time::Duration = std::time::Duration::from_secs(600);

static WAITING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Saves a sealed error record the database refused, in the background: again and again with
/// a growing pause (100 ms to 5 s) for up to ten minutes. The record is sealed already, so
/// nothing of its cause is held in the clear meanwhile.
pub(crate) fn save_later(
    store: Arc<dyn crate::store::Store>,
    category: String,
    blob: crate::store::SealedBlob,
) {
    use std::sync::atomic::Ordering;
    let error_id = ErrorId::from(blob.id);
    if WAITING.fetch_add(1, Ordering::Relaxed) >= ERROR_RECORDS_WAITING {
        WAITING.fetch_sub(1, Ordering::Relaxed);
        tracing::warn!(%error_id, "too many error records wait to be saved; this one is given up");
        return;
    }
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        let mut pause = std::time::Duration::from_millis(100);
        loop {
            tokio::time::sleep(pause).await;
            match store.put_error_record(None, &category, blob.clone()).await {
                Ok(()) => {
                    tracing::info!(%error_id, "saved an error record that had waited");
                    break;
                }
                Err(_) if started.elapsed() < SAVE_LATER_FOR => {
                    pause = (pause * 2).min(std::time::Duration::from_secs(5));
                }
                Err(err) => {
                    tracing::warn!(%error_id, error_kind = crate::engine::store_error_kind(&err), "an error record could not be saved; given up");
                    break;
                }
            }
        }
        WAITING.fetch_sub(1, Ordering::Relaxed);
    });
}

/// The error ID of a sealed fault, for logs: never the cause.
pub(crate) fn log_fault(category: ErrorCategory, error_id: ErrorId) {
    tracing::warn!(?category, %error_id, "request failed; cause sealed");
}

/// Fails with 403 unless the caller is an owner or admin of its organization; `what` completes
/// "only owners and admins ...", e.g. `change budgets`.
pub(crate) fn require_admin(caller: &crate::identity::Caller, what: &str) -> Result<(), ApiError> {
    if caller.is_admin() {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            format!("only owners and admins {what}"),
        ))
    }
}
