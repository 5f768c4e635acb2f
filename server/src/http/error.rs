//! The error boundary: every failure of a request becomes a declared error body. A server
//! fault answers `request_failed` with a safe category and an error ID (also in the
//! `openbot-error-id` header); its full cause goes only to a sealed error record.
//!
//! Errors compose with `?`: each use case's error converts into [`ApiError`] (a `From` beside
//! its handlers), synchronously. A fault carries its cause inside the [`ApiError`] to one
//! layer, `seal_faults`, which seals it as the response leaves and answers only the
//! category and the error ID. Nothing before that layer logs or answers the cause.

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
    /// A fault's cause, until `seal_faults` seals it.
    fault: Option<Unsealed>,
}

/// A fault's cause on its way to the sealing layer. Its `Debug` names the category only, so
/// the cause never reaches a log through a debug print.
#[derive(Clone, PartialEq)]
struct Unsealed {
    category: ErrorCategory,
    cause: String,
}

impl std::fmt::Debug for Unsealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unsealed")
            .field("category", &self.category)
            .finish_non_exhaustive()
    }
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
            fault: None,
        }
    }

    /// 403 `forbidden`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, message)
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

    /// A server fault: `cause` is sealed into an error record by `seal_faults` as the
    /// response leaves, and only the category and the record's ID are answered.
    pub fn failed(category: ErrorCategory, cause: impl Into<String>) -> Self {
        Self {
            fault: Some(Unsealed {
                category,
                cause: cause.into(),
            }),
            ..Self::sealed(category, None)
        }
    }

    /// A server fault sealed now, for answers that leave without the sealing layer (an
    /// event stream's last event).
    pub async fn fault(state: &AppState, category: ErrorCategory, cause: String) -> Self {
        let error_id = state.seal_error(category, cause).await;
        Self::sealed(category, Some(error_id))
    }

    /// This error with its fault (if any) sealed now, for an answer that leaves without the
    /// sealing layer (a long poll answered outside its handler).
    pub async fn seal_now(self, state: &AppState) -> Self {
        match self.fault {
            None => self,
            Some(fault) => {
                let error_id = state.seal_error(fault.category, fault.cause).await;
                Self::sealed(fault.category, Some(error_id))
            }
        }
    }

    fn sealed(category: ErrorCategory, error_id: Option<ErrorId>) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            body: ErrorBody {
                code: ErrorCode::RequestFailed,
                message: "the request failed; quote the error ID when you report it".into(),
                category: Some(category),
                error_id,
            },
            fault: None,
        }
    }

    /// Maps a storage failure about `what`: declared cases keep their meaning, the rest is a
    /// fault.
    pub fn store(err: StoreError, what: &str) -> Self {
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
            other => Self::failed(ErrorCategory::Storage, other.to_string()),
        }
    }
}

/// The engine store's declared failures are about executions (`NotFound(ExecutionId)`,
/// `Ended`, ...); name another subject with `StoreResultExt::about`.
impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        Self::store(err, "execution")
    }
}

/// Names what a storage failure was about, for `?`:
/// `state.budgets.delete(..).await.about("budget")?`.
pub trait StoreResultExt<T> {
    /// The result, with a storage failure mapped as [`ApiError::store`] does.
    fn about(self, what: &str) -> Result<T, ApiError>;
}

impl<T> StoreResultExt<T> for Result<T, StoreError> {
    fn about(self, what: &str) -> Result<T, ApiError> {
        self.map_err(|err| ApiError::store(err, what))
    }
}

/// The layer that seals faults: a response that carries an unsealed cause gets it sealed into
/// an error record, and answers `request_failed` with the category and the record's ID (also
/// in the `openbot-error-id` header).
pub async fn seal_faults(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let mut response = next.run(request).await;
    match response.extensions_mut().remove::<Unsealed>() {
        None => response,
        Some(fault) => {
            let error_id = state.seal_error(fault.category, fault.cause).await;
            crate::telemetry::http::record_error_id(error_id.as_uuid());
            ApiError::sealed(fault.category, Some(error_id)).into_response()
        }
    }
}

impl From<AccessError> for ApiError {
    fn from(err: AccessError) -> Self {
        Self::forbidden(err.to_string())
    }
}

impl From<crate::service::ServiceError> for ApiError {
    fn from(err: crate::service::ServiceError) -> Self {
        use crate::service::ServiceError;
        match err {
            ServiceError::NotFound(what) => Self::not_found(what),
            ServiceError::Invalid(message) => Self::invalid(message),
            ServiceError::Forbidden(message) => Self::forbidden(message),
            ServiceError::Conflict(message) => Self::conflict(message),
            ServiceError::Unauthorized(message) => Self::unauthorized(message),
            ServiceError::RateLimited(message) => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::RateLimited,
                message,
            ),
            ServiceError::Internal(cause) => Self::failed(ErrorCategory::Internal, cause),
            ServiceError::Store(err) => Self::store(err, "record"),
        }
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
        let fault = self.fault;
        let mut response = (self.status, axum::Json(self.body)).into_response();
        if let Some(fault) = fault {
            response.extensions_mut().insert(fault);
        }
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
    crate::telemetry::spawn(async move {
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
