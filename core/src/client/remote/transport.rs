//! HTTP requests to an OpenBot server: the token, timeouts, safe retries (on another node of
//! the cluster when several are given) and the mapping of answers back to [`Error`] with the
//! server's stable codes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// The servers' addresses, the token and the HTTP client.
#[derive(Debug, Clone)]
pub(super) struct Transport {
    http: reqwest::Client,
    /// The nodes of one deployment (one database), any of which answers any call.
    bases: Arc<[String]>,
    /// The index in `bases` of the node requests go to now: the last that answered.
    current: Arc<AtomicUsize>,
    token: Option<String>,
    closed: CancellationToken,
}

/// The server addresses in `uri`: one (`http://host:port`, maybe with a path) or several
/// nodes of one deployment separated by commas (`http://a:8080,http://b:8080`).
pub(super) fn bases(uri: &str) -> Result<Vec<String>, Error> {
    let bases: Vec<String> = uri
        .split(',')
        .map(|base| base.trim().trim_end_matches('/').to_string())
        .collect();
    for base in &bases {
        let url = reqwest::Url::parse(base).map_err(|_| {
            Error::invalid_input(format!(
                "`{base}` is not a server URL: use http://host:port (several separated by commas)"
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(Error::invalid_input(format!(
                "`{base}` is not a server URL: use http://host:port (several separated by commas)"
            )));
        }
    }
    Ok(bases)
}

impl Transport {
    /// A transport to the servers of `uri` (see [`bases`]).
    pub(super) fn new(uri: &str, token: Option<String>) -> Result<Self, Error> {
        let bases = bases(uri)?;
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("openbot-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::new(ErrorCode::Unavailable, format!("no HTTP client: {e}")))?;
        Ok(Self {
            http,
            bases: bases.into(),
            current: Arc::new(AtomicUsize::new(0)),
            token,
            closed: CancellationToken::new(),
        })
    }

    /// The node requests go to now, and its index.
    fn base(&self) -> (usize, &str) {
        let at = self.current.load(Ordering::Relaxed) % self.bases.len();
        (at, &self.bases[at])
    }

    /// Moves on from node `from`, which did not answer, to the next one (when no other
    /// request moved on already), so the next try goes to another node of the deployment.
    pub(super) fn fail_over(&self, from: usize) {
        if self.bases.len() > 1 {
            let next = (from + 1) % self.bases.len();
            if self
                .current
                .compare_exchange(from, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                tracing::info!(from = %self.bases[from], to = %self.bases[next], "failing over to another server");
            }
        }
    }

    /// How many times a request is tried: at least twice on every node.
    fn attempts(&self) -> u32 {
        ATTEMPTS.max(2 * self.bases.len() as u32)
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

    /// A request to `path` (starting with `/v1/`), with the token, to the node requests go
    /// to now; its index, for [`Transport::fail_over`].
    pub(super) fn request(&self, method: Method, path: &str) -> (usize, RequestBuilder) {
        let (at, base) = self.base();
        let mut builder = self.http.request(method, format!("{base}{path}"));
        // The caller's trace, when it exports one: the server's request span joins it.
        for (name, value) in crate::telemetry::trace_headers() {
            builder = builder.header(name, value);
        }
        let builder = match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        };
        (at, builder)
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
            let (at, request) = self.request(method.clone(), path);
            let mut request = request.timeout(REQUEST_TIMEOUT);
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
            if again && attempt < self.attempts() {
                tracing::debug!(path, attempt, "retrying a request to the server");
                // The same request (with its command key) goes to the next node: one that
                // was refused never saw it, and a safe one has the effect of one.
                self.fail_over(at);
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = self.closed.cancelled() => return Err(Error::closed()),
                }
                backoff *= 2;
                attempt += 1;
                continue;
            }
            let response = outcome.map_err(|e| unreachable_server(&self.bases[at], &e))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_server_urls_separated_by_commas_are_several_nodes() {
        let bases = bases("http://a:8080/, https://b.example:8443/api").unwrap();
        assert_eq!(bases, ["http://a:8080", "https://b.example:8443/api"]);
    }

    #[test]
    fn an_empty_or_foreign_server_url_is_invalid_input() {
        for uri in [
            "http://a:8080,",
            "http://a:8080,ftp://b",
            "http://a:8080,b:9",
        ] {
            let err = bases(uri).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidInput, "{uri}");
        }
    }

    #[test]
    fn a_node_that_did_not_answer_is_left_for_the_next_once() {
        let transport = Transport::new("http://a:1,http://b:2", None).unwrap();
        assert_eq!(transport.base(), (0, "http://a:1"));
        transport.fail_over(0);
        // A second request that saw the same node fail does not skip the next one.
        transport.fail_over(0);
        assert_eq!(transport.base(), (1, "http://b:2"));
        transport.fail_over(1);
        assert_eq!(transport.base(), (0, "http://a:1"));
    }
}
