//! HTTP requests to an OpenBot server: the token, timeouts, safe retries and the mapping of
//! answers back to [`Error`] with the server's stable codes.

use std::time::Duration;

use openbot_schema::{ErrorBody, ErrorCode};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::error::Error;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a whole request (not an event stream) may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);
/// Tries of one request, the first included.
const ATTEMPTS: u32 = 4;
/// The wait before the first retry; it doubles after each.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// When a failed request may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Retry {
    /// The request changes nothing, or the same request twice has the effect of one (a read,
    /// a cancel, input with a command key): retried after any failure that is not an answer,
    /// and after 502, 503 and 504.
    Safe,
    /// Retried only when the connection was refused, so the server never saw the request.
    BeforeSending,
}

/// The server's address, the token and the HTTP client.
#[derive(Debug, Clone)]
pub(super) struct Transport {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    closed: CancellationToken,
}

impl Transport {
    /// A transport to `base` (`http://host:port`, maybe with a path).
    pub(super) fn new(base: &str, token: Option<String>) -> Result<Self, Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("openbot-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::new(ErrorCode::Unavailable, format!("no HTTP client: {e}")))?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            token,
            closed: CancellationToken::new(),
        })
    }

    /// Cancelled when the client closes.
    pub(super) fn closed(&self) -> &CancellationToken {
        &self.closed
    }

    /// Fails with `closed` once the client closed.
    pub(super) fn check_open(&self) -> Result<(), Error> {
        if self.closed.is_cancelled() {
            Err(Error::closed())
        } else {
            Ok(())
        }
    }

    /// A request to `path` (starting with `/v1/`), with the token.
    pub(super) fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let mut builder = self.http.request(method, format!("{}{path}", self.base));
        // The caller's trace, when it exports one: the server's request span joins it.
        for (name, value) in crate::telemetry::trace_headers() {
            builder = builder.header(name, value);
        }
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// Sends a request with a JSON body (or none) and reads a JSON answer.
    pub(super) async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&(impl Serialize + Sync)>,
        retry: Retry,
    ) -> Result<T, Error> {
        let response = self.send(method, path, body, retry).await?;
        let bytes = response.bytes().await.map_err(|e| lost(&e))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            Error::new(
                ErrorCode::Unavailable,
                format!("the server's answer to {path} is not what this client reads: {e}"),
            )
        })
    }

    /// Sends a request and returns its success answer; an error answer becomes its [`Error`].
    pub(super) async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&(impl Serialize + Sync)>,
        retry: Retry,
    ) -> Result<Response, Error> {
        let body = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| Error::invalid_input(format!("the request cannot be encoded: {e}")))?;
        self.send_raw(method, path, body.map(|b| (b, "application/json")), retry)
            .await
    }

    /// Sends a request with a body of any media type (or none), as [`Transport::send`] does.
    pub(super) async fn send_raw(
        &self,
        method: Method,
        path: &str,
        body: Option<(Vec<u8>, &str)>,
        retry: Retry,
    ) -> Result<Response, Error> {
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            self.check_open()?;
            let mut request = self.request(method.clone(), path).timeout(REQUEST_TIMEOUT);
            if let Some((body, content_type)) = &body {
                request = request
                    .header(reqwest::header::CONTENT_TYPE, *content_type)
                    .body(body.clone());
            }
            let outcome = tokio::select! {
                outcome = request.send() => outcome,
                () = self.closed.cancelled() => return Err(Error::closed()),
            };
            let again = match &outcome {
                Err(err) => err.is_connect() || (retry == Retry::Safe && !err.is_builder()),
                Ok(response) => {
                    retry == Retry::Safe
                        && matches!(
                            response.status(),
                            StatusCode::BAD_GATEWAY
                                | StatusCode::SERVICE_UNAVAILABLE
                                | StatusCode::GATEWAY_TIMEOUT
                        )
                }
            };
            if again && attempt < ATTEMPTS {
                tracing::debug!(path, attempt, "retrying a request to the server");
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = self.closed.cancelled() => return Err(Error::closed()),
                }
                backoff *= 2;
                attempt += 1;
                continue;
            }
            let response = outcome.map_err(|e| unreachable_server(&self.base, &e))?;
            if response.status().is_success() {
                return Ok(response);
            }
            return Err(error_answer(response).await);
        }
    }
}

/// The error for a request that got no answer.
fn unreachable_server(base: &str, err: &reqwest::Error) -> Error {
    Error::new(
        ErrorCode::Unavailable,
        format!("the server at {base} could not be reached: {}", reason(err)),
    )
}

/// The error for an answer whose body could not be read.
pub(super) fn lost(err: &reqwest::Error) -> Error {
    Error::new(
        ErrorCode::Unavailable,
        format!("the server's answer was lost: {}", reason(err)),
    )
}

/// Why a request got no (whole) answer, for people; never the URL or a header.
pub(super) fn reason(err: &reqwest::Error) -> &'static str {
    if err.is_timeout() {
        "it timed out"
    } else if err.is_connect() {
        "the connection failed"
    } else {
        "the connection broke"
    }
}

/// The [`Error`] of an error answer: the server's body when it sent one, else one made from
/// the status.
pub(super) async fn error_answer(response: Response) -> Error {
    let status = response.status();
    let bytes = response.bytes().await.unwrap_or_default();
    if let Ok(body) = serde_json::from_slice::<ErrorBody>(&bytes) {
        return body.into();
    }
    let code = match status {
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => ErrorCode::InvalidInput,
        StatusCode::UNAUTHORIZED => ErrorCode::Unauthorized,
        StatusCode::FORBIDDEN => ErrorCode::Forbidden,
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::CONFLICT => ErrorCode::Conflict,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
        StatusCode::TOO_MANY_REQUESTS => ErrorCode::RateLimited,
        _ => ErrorCode::Unavailable,
    };
    Error::new(code, format!("the server answered {status}"))
}
