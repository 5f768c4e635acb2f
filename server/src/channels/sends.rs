//! Sending a reply: Slack `chat.postMessage` (the bot token as Bearer) and Telegram
//! `sendMessage` (the token in the URL path), through the one outbound policy, and what the
//! platform's answer proves.
//!
//! The retry rules: a request that never left (no connection) is sent again; a proven rate
//! limit (HTTP 429, with `Retry-After` or Telegram's `parameters.retry_after`) is sent again
//! after that time; any other proven rejection (`ok: false`, another 4xx) is final; and a lost
//! answer (a timeout or a connection lost after the request was written, or a 5xx that proves
//! nothing) is `unknown` and never sent again: the platforms have no idempotency key, so a
//! second request could post the reply twice.
//!
//! Errors never carry the URL: Telegram's holds the bot token.

use std::sync::Arc;

use openbot_core::outbound::OutboundPolicy;
use openbot_schema::ChannelKind;
use serde_json::{Value, json};

use crate::store::Millis;

/// The most of a platform's answer that is read.
const MAX_ANSWER: usize = 64 * 1024;
/// The most characters of a Telegram message (`sendMessage` refuses longer ones).
const TELEGRAM_MAX_TEXT: usize = 4096;
/// The most characters of a Slack message (Slack truncates longer ones).
const SLACK_MAX_TEXT: usize = 40_000;
/// The most characters of a platform's error that are kept.
const MAX_ERROR: usize = 300;
/// The wait after a rate limit that named none, in seconds.
const DEFAULT_RETRY_AFTER: u64 = 1;
/// The longest wait a rate limit may ask for, in seconds.
const MAX_RETRY_AFTER: u64 = 3600;

/// What a request proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// The platform took the reply: its message ID.
    Sent(String),
    /// Proven rate limit: send again after this many milliseconds.
    RetryAfter(Millis, String),
    /// The request never reached the platform: it may be sent again.
    NotSent(String),
    /// Proven, final rejection: the platform's error.
    Rejected(String),
    /// The answer was lost: the reply may have been posted.
    Unknown(String),
}

/// A reply to send.
#[derive(Debug, Clone)]
pub struct Reply<'a> {
    /// Slack or Telegram.
    pub kind: ChannelKind,
    /// The API base URL, without a trailing `/`.
    pub base: &'a str,
    /// The bot token.
    pub token: &'a str,
    /// The Slack channel or Telegram chat ID.
    pub to: &'a str,
    /// The Slack thread.
    pub thread: Option<&'a str>,
    /// The text.
    pub text: &'a str,
}

/// The HTTP client of Channel sends, built by the outbound policy.
#[derive(Clone)]
pub struct ChannelHttp {
    client: reqwest::Client,
    outbound: Arc<OutboundPolicy>,
}

impl std::fmt::Debug for ChannelHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelHttp").finish_non_exhaustive()
    }
}

/// Checks an API base URL: `http(s)`, allowed by the policy, `https` unless the host is this
/// machine, no credentials, query or fragment. Answers it without a trailing `/`.
pub fn check_base(outbound: &OutboundPolicy, base: &str) -> Result<String, String> {
    outbound.check_url(base).map_err(|e| e.to_string())?;
    let parsed = reqwest::Url::parse(base).map_err(|_| "api_base_url is not a URL".to_string())?;
    let local = match parsed.host() {
        Some(oauth2::url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(oauth2::url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(oauth2::url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if parsed.scheme() != "https" && !local {
        return Err("api_base_url must use https".into());
    }
    if !parsed.username().is_empty()
        || parsed.password().is_some()
        || parsed.query().is_some()
        || parsed.fragment().is_some()
    {
        return Err("api_base_url must have no credentials, query or fragment".into());
    }
    Ok(base.trim_end_matches('/').to_string())
}

fn cut(text: &str) -> String {
    text.chars().take(MAX_ERROR).collect()
}

/// The words of a transport error, without its URL.
fn transport(err: &reqwest::Error) -> String {
    if let Some(refusal) = OutboundPolicy::refusal(err) {
        return refusal;
    }
    if err.is_timeout() {
        "the request timed out".into()
    } else if err.is_connect() {
        "could not connect".into()
    } else {
        "the connection was lost".into()
    }
}

impl ChannelHttp {
    /// Sends through `platform`'s exchange client, under its outbound policy.
    pub fn new(platform: &crate::platform::Platform) -> Self {
        Self {
            client: platform.exchange_client(),
            outbound: Arc::clone(platform.outbound()),
        }
    }

    /// Sends one request with the reply and says what its answer proves.
    pub async fn send(&self, reply: &Reply<'_>) -> SendOutcome {
        if let Err(why) = check_base(&self.outbound, reply.base) {
            return SendOutcome::Rejected(why);
        }
        let text = fit(reply.kind, reply.text);
        let request = match reply.kind {
            ChannelKind::Slack => {
                let mut body = json!({"channel": reply.to, "text": text});
                if let Some(thread) = reply.thread {
                    body["thread_ts"] = json!(thread);
                }
                self.client
                    .post(format!("{}/chat.postMessage", reply.base))
                    .bearer_auth(reply.token)
                    .json(&body)
            }
            ChannelKind::Telegram => self
                .client
                .post(format!("{}/bot{}/sendMessage", reply.base, reply.token))
                .json(&json!({"chat_id": reply.to, "text": text})),
        };
        let response = match request.send().await {
            Ok(response) => response,
            // Refused by the policy or no connection: nothing was written.
            Err(err) if err.is_connect() || OutboundPolicy::refusal(&err).is_some() => {
                return SendOutcome::NotSent(transport(&err));
            }
            Err(err) if err.is_builder() => return SendOutcome::NotSent(transport(&err)),
            Err(err) => return SendOutcome::Unknown(transport(&err)),
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let body = match read_bounded(response).await {
            Ok(body) => body,
            Err(why) if status == 429 || (400..500).contains(&status) => {
                return classify(reply.kind, status, retry_after, None, why);
            }
            Err(why) => return SendOutcome::Unknown(why),
        };
        let value: Option<Value> = serde_json::from_slice(&body).ok();
        classify(
            reply.kind,
            status,
            retry_after,
            value.as_ref(),
            String::new(),
        )
    }
}

/// The reply cut to what the platform takes, ending in `…` when it was cut.
fn fit(kind: ChannelKind, text: &str) -> String {
    let most = match kind {
        ChannelKind::Slack => SLACK_MAX_TEXT,
        ChannelKind::Telegram => TELEGRAM_MAX_TEXT,
    };
    if text.chars().count() <= most {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(most - 1).collect();
    cut.push('…');
    cut
}

async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_ANSWER {
                    return Err("the answer was too large".into());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(err) => return Err(transport(&err)),
        }
    }
}

/// What an answer proves.
fn classify(
    kind: ChannelKind,
    status: u16,
    retry_after: Option<u64>,
    body: Option<&Value>,
    fallback: String,
) -> SendOutcome {
    let error = body
        .and_then(|b| match kind {
            ChannelKind::Slack => b.get("error").and_then(Value::as_str),
            ChannelKind::Telegram => b.get("description").and_then(Value::as_str),
        })
        .map(cut)
        .unwrap_or_else(|| {
            if fallback.is_empty() {
                format!("HTTP {status}")
            } else {
                fallback
            }
        });
    let ok = body.and_then(|b| b.get("ok")).and_then(Value::as_bool);
    let body_retry = body
        .and_then(|b| b.get("parameters"))
        .and_then(|p| p.get("retry_after"))
        .and_then(Value::as_u64);
    if status == 429 {
        let seconds = retry_after
            .or(body_retry)
            .unwrap_or(DEFAULT_RETRY_AFTER)
            .min(MAX_RETRY_AFTER);
        return SendOutcome::RetryAfter((seconds * 1000) as Millis, error);
    }
    if (200..300).contains(&status) {
        return match ok {
            Some(true) => {
                let id = body.and_then(|b| match kind {
                    ChannelKind::Slack => b.get("ts").and_then(Value::as_str).map(str::to_string),
                    ChannelKind::Telegram => b
                        .get("result")
                        .and_then(|r| r.get("message_id"))
                        .and_then(Value::as_i64)
                        .map(|id| id.to_string()),
                });
                match id {
                    Some(id) => SendOutcome::Sent(id),
                    // Taken, but the answer does not say as what.
                    None => SendOutcome::Sent(String::new()),
                }
            }
            Some(false) => SendOutcome::Rejected(error),
            None => SendOutcome::Unknown("the platform's answer could not be read".into()),
        };
    }
    if (400..500).contains(&status) {
        return SendOutcome::Rejected(error);
    }
    SendOutcome::Unknown(format!("the platform answered HTTP {status}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_reply_is_cut_to_what_the_platform_takes() {
        let long = "x".repeat(5000);
        let cut = fit(ChannelKind::Telegram, &long);
        assert_eq!(cut.chars().count(), TELEGRAM_MAX_TEXT);
        assert!(cut.ends_with('…'));
        assert_eq!(fit(ChannelKind::Slack, &long), long);
    }

    #[test]
    fn answers_are_classified_by_what_they_prove() {
        let slack = ChannelKind::Slack;
        let ok = json!({"ok": true, "ts": "1.5"});
        assert_eq!(
            classify(slack, 200, None, Some(&ok), String::new()),
            SendOutcome::Sent("1.5".into())
        );
        let refused = json!({"ok": false, "error": "channel_not_found"});
        assert_eq!(
            classify(slack, 200, None, Some(&refused), String::new()),
            SendOutcome::Rejected("channel_not_found".into())
        );
        let limited = json!({"ok": false, "error": "ratelimited"});
        assert_eq!(
            classify(slack, 429, Some(3), Some(&limited), String::new()),
            SendOutcome::RetryAfter(3000, "ratelimited".into())
        );
        let telegram = json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 5", "parameters": {"retry_after": 5}});
        assert!(matches!(
            classify(
                ChannelKind::Telegram,
                429,
                None,
                Some(&telegram),
                String::new()
            ),
            SendOutcome::RetryAfter(5000, _)
        ));
        assert!(matches!(
            classify(slack, 502, None, None, String::new()),
            SendOutcome::Unknown(_)
        ));
    }
}
