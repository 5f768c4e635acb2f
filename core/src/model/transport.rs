//! The HTTP sending shared by the provider adapters.
//!
//! A [`Transport`] owns one HTTP client and one endpoint. [`Transport::open`] POSTs a JSON body
//! and turns the streamed answer into a [`ModelStream`] with the adapter's [`Decoder`]:
//!
//! - A request is sent again only while no answer has been read: after a connection error, a
//!   429 or a 5xx, at most `max_retries` times, waiting 200 ms, 400 ms, 800 ms, ... or the
//!   provider's `Retry-After`, never more than 20 s.
//! - Statuses become typed errors (401/403 unauthorized, 429 rate limited, other 4xx invalid
//!   request, 5xx server) carrying the provider's own message, cut to 500 characters.
//! - No headers within `response_timeout`, or no bytes within `idle_timeout` while streaming,
//!   is a [`ModelError::Timeout`]; a stream that ends before the provider's end marker is
//!   [`ModelError::Interrupted`]; data that cannot be read is [`ModelError::Malformed`].
//! - A server that ignores `stream: true` and answers `200 application/json` is read whole:
//!   an `error` in it is the error it reports; anything else goes to the adapter's
//!   [`Decoder::plain_answer`], which reads the provider's non-streamed format.
//! - The API key is never logged and is removed from every error message.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use reqwest::{Response, StatusCode};
use serde_json::Value;

use super::{HttpSettings, ModelError, ModelStream};

mod plain;
mod stream;
mod wire;

pub(crate) use plain::parse_answer;
pub(crate) use stream::Decoder;
pub(crate) use wire::{
    error_from_code, file_placeholder, malformed, parse_arguments, parts_text, priced,
};

/// The first wait before a retry; each further retry waits twice as long.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// The longest wait before a retry, whatever the provider asks.
const MAX_BACKOFF: Duration = Duration::from_secs(20);
/// The longest provider message kept in an error, in characters.
const MAX_MESSAGE_CHARS: usize = 500;
/// The most bytes of an error answer read to find the provider's message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// One provider endpoint: its URL, fixed headers and an HTTP client built from [`HttpSettings`].
pub(crate) struct Transport {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    settings: HttpSettings,
    label: String,
}

impl Transport {
    /// A transport that POSTs to `base_url` + `path` with `headers`. `label` names the model in
    /// logs. Fails with [`ModelError::Configuration`] when the base URL is not an `http(s)` URL
    /// or the client cannot be built.
    pub fn new(
        label: String,
        settings: HttpSettings,
        path: &str,
        headers: HeaderMap,
    ) -> Result<Self, ModelError> {
        let base = settings.base_url.trim_end_matches('/');
        let parsed = reqwest::Url::parse(base).map_err(|e| {
            ModelError::Configuration(format!("invalid base URL `{}`: {e}", cut(base, 200)))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ModelError::Configuration(format!(
                "the base URL `{}` must start with http:// or https://",
                cut(base, 200)
            )));
        }
        settings
            .outbound
            .check_url(base)
            .map_err(|e| ModelError::Configuration(e.to_string()))?;
        let url = format!("{base}{path}");
        let client = settings
            .outbound
            .client_builder()
            .connect_timeout(settings.connect_timeout)
            .user_agent(concat!("openbot/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ModelError::Configuration(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            client,
            url,
            headers,
            settings,
            label,
        })
    }

    /// The settings this transport was built from.
    pub fn settings(&self) -> &HttpSettings {
        &self.settings
    }

    /// Sends `body` (retrying as the module says) and streams the answer through `decoder`, or
    /// has `decoder` read it when it came whole, as one JSON document.
    pub async fn open<D: Decoder>(
        &self,
        body: &Value,
        decoder: D,
    ) -> Result<ModelStream, ModelError> {
        let encoded = serde_json::to_vec(body)
            .map_err(|e| ModelError::Configuration(format!("cannot encode the request: {e}")))?;
        let response = self
            .send_with_retries(Bytes::from(encoded))
            .await
            .map_err(|e| self.redact(e))?;
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if plain::is_json(&content_type) {
            tracing::debug!(model = %self.label, "the provider answered with one JSON document");
            let events = plain::events(response, decoder, self.settings.idle_timeout)
                .await
                .map_err(|e| self.redact(e))?;
            return Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed());
        }
        let body = response.bytes_stream().boxed();
        let api_key = self.settings.api_key.clone();
        Ok(stream::model_stream(
            body,
            decoder,
            self.settings.idle_timeout,
            api_key,
        ))
    }

    async fn send_with_retries(&self, body: Bytes) -> Result<Response, ModelError> {
        let mut retries = 0;
        loop {
            let failure = match self.send_once(body.clone()).await {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            if !failure.retryable || retries >= self.settings.max_retries {
                return Err(failure.error);
            }
            let backoff = FIRST_BACKOFF.saturating_mul(1 << retries.min(16));
            let wait = failure.retry_after.unwrap_or(backoff).min(MAX_BACKOFF);
            retries += 1;
            tracing::warn!(
                model = %self.label,
                retry = retries,
                wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                error = %self.redact(failure.error),
                "model request failed before any answer; sending it again"
            );
            tokio::time::sleep(wait).await;
        }
    }

    async fn send_once(&self, body: Bytes) -> Result<Response, Failure> {
        tracing::debug!(model = %self.label, "sending model request");
        let request = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send();
        let response = match tokio::time::timeout(self.settings.response_timeout, request).await {
            Err(_) => return Err(Failure::fatal(ModelError::Timeout)),
            Ok(Err(e)) => {
                // A request the outbound policy refused is a configuration error, not a
                // passing fault: sending it again would be refused again.
                if let Some(refusal) = crate::outbound::OutboundPolicy::refusal(&e) {
                    return Err(Failure::fatal(ModelError::Configuration(refusal)));
                }
                let error = if e.is_timeout() {
                    ModelError::Timeout
                } else {
                    ModelError::Transport(describe(&e))
                };
                return Err(Failure {
                    retryable: !e.is_builder(),
                    retry_after: None,
                    error,
                });
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        let message = self.error_message(response, status).await;
        let code = status.as_u16();
        let error = match code {
            401 | 403 => ModelError::Unauthorized {
                status: code,
                message,
            },
            429 => ModelError::RateLimited {
                retry_after,
                message,
            },
            500..=599 => ModelError::Server {
                status: code,
                message,
            },
            _ => ModelError::InvalidRequest {
                status: code,
                message,
            },
        };
        let retryable = code == 429 || status.is_server_error();
        tracing::debug!(model = %self.label, status = code, "model request got an error status");
        Err(Failure {
            retryable,
            retry_after,
            error,
        })
    }

    /// The provider's message from an error answer, or the status's reason when it has none.
    async fn error_message(&self, mut response: Response, status: StatusCode) -> String {
        let read = async {
            let mut body = Vec::new();
            while body.len() < MAX_ERROR_BODY {
                match response.chunk().await {
                    Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                    Ok(None) | Err(_) => break,
                }
            }
            body
        };
        let body = tokio::time::timeout(self.settings.response_timeout, read)
            .await
            .unwrap_or_default();
        let message = provider_message(&body).unwrap_or_else(|| {
            let text = String::from_utf8_lossy(&body).trim().to_string();
            if text.is_empty() {
                status
                    .canonical_reason()
                    .unwrap_or("no message")
                    .to_string()
            } else {
                text
            }
        });
        cut(&message, MAX_MESSAGE_CHARS)
    }

    fn redact(&self, error: ModelError) -> ModelError {
        redact(error, self.settings.api_key.as_deref())
    }
}

/// A failed attempt and whether another may be made.
struct Failure {
    retryable: bool,
    retry_after: Option<Duration>,
    error: ModelError,
}

impl Failure {
    fn fatal(error: ModelError) -> Self {
        Self {
            retryable: false,
            retry_after: None,
            error,
        }
    }
}

/// The header value for a secret, marked sensitive so it is never printed. The error names
/// `header` but never the value.
pub(crate) fn secret_header(header: &str, value: &str) -> Result<HeaderValue, ModelError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| {
        ModelError::Configuration(format!(
            "the API key for {header} contains characters not allowed in a header"
        ))
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// A header map from static names and values.
pub(crate) fn headers<const N: usize>(pairs: [(&'static str, HeaderValue); N]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(HeaderName::from_static(name), value);
    }
    map
}

/// The provider's message in an error body: `error.message` (OpenAI, Anthropic), `error` as a
/// string, `message` or `detail`; the first element when the body is a list.
fn provider_message(body: &[u8]) -> Option<String> {
    let mut value: Value = serde_json::from_slice(body).ok()?;
    if let Value::Array(items) = value {
        value = items.into_iter().next()?;
    }
    message_in(&value)
}

/// The provider's message in one error object, as [`provider_message`] looks for it.
fn message_in(value: &Value) -> Option<String> {
    let error = value.get("error");
    error
        .and_then(|e| e.get("message"))
        .or(error.filter(|e| e.is_string()))
        .or_else(|| value.get("message"))
        .or_else(|| value.get("detail"))
        .and_then(Value::as_str)
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
}

/// The wait a provider asked for: `retry-after-ms`, or `Retry-After` in (possibly decimal)
/// seconds. A date is ignored; the backoff applies then.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let seconds = |text: &str| {
        text.parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
    };
    if let Some(ms) = header("retry-after-ms").and_then(seconds) {
        return Some(Duration::from_secs_f64(ms.min(86_400_000.0) / 1000.0));
    }
    header(RETRY_AFTER.as_str())
        .and_then(seconds)
        .map(|s| Duration::from_secs_f64(s.min(86_400.0)))
}

/// A reqwest error with its causes, e.g. `error sending request: connection refused`.
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    cut(&text, MAX_MESSAGE_CHARS)
}

/// At most `max` characters of `text`.
fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// `error` with every occurrence of `key` in its message replaced.
fn redact(error: ModelError, key: Option<&str>) -> ModelError {
    let Some(key) = key.filter(|k| k.len() >= 4) else {
        return error;
    };
    let clean = |text: String| text.replace(key, "[redacted]");
    match error {
        ModelError::Configuration(m) => ModelError::Configuration(clean(m)),
        ModelError::Unauthorized { status, message } => ModelError::Unauthorized {
            status,
            message: clean(message),
        },
        ModelError::RateLimited {
            retry_after,
            message,
        } => ModelError::RateLimited {
            retry_after,
            message: clean(message),
        },
        ModelError::InvalidRequest { status, message } => ModelError::InvalidRequest {
            status,
            message: clean(message),
        },
        ModelError::Server { status, message } => ModelError::Server {
            status,
            message: clean(message),
        },
        ModelError::Transport(m) => ModelError::Transport(clean(m)),
        ModelError::Malformed(m) => ModelError::Malformed(clean(m)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_messages_are_found_in_each_shape() {
        let openai = br#"{"error":{"message":"Bad model","type":"invalid_request_error"}}"#;
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(provider_message(openai).as_deref(), Some("Bad model"));
        assert_eq!(provider_message(anthropic).as_deref(), Some("Overloaded"));
        assert_eq!(
            provider_message(br#"{"error":"model not found"}"#).as_deref(),
            Some("model not found")
        );
        assert_eq!(
            provider_message(br#"[{"error":{"message":"listed"}}]"#).as_deref(),
            Some("listed")
        );
        assert_eq!(provider_message(b"<html>"), None);
    }

    #[test]
    fn retry_after_reads_seconds_and_milliseconds() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        headers.clear();
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn the_key_is_removed_from_error_messages() {
        let error = ModelError::Unauthorized {
            status: 401,
            message: "bad key sk-secret-1".into(),
        };
        let clean = redact(error, Some("sk-secret-1"));
        assert_eq!(
            clean.to_string(),
            "the provider rejected the credentials (HTTP 401): bad key [redacted]"
        );
    }
}
