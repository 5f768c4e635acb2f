//! Slack's Events API: request signatures (`v0=` and the hex HMAC-SHA256 of
//! `v0:{timestamp}:{body}` under the app's signing secret, timestamps more than five minutes
//! from now refused, as Slack's own `SignatureVerifier` does), and the events that become
//! input: `message` events from people (no `bot_id`, no `subtype`).

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::inbound::{Inbound, InboundError, InboundMessage, bounded, same};
use crate::store::Millis;

/// The header with the Unix time (seconds) Slack signed at.
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";
/// The header with the signature, `v0=<hex>`.
pub const SIGNATURE_HEADER: &str = "x-slack-signature";
/// The header Slack adds to a retried delivery (the event keeps its `event_id`).
pub const RETRY_HEADER: &str = "x-slack-retry-num";
/// How far a signed timestamp may be from the server's time, either way, in seconds.
pub const TOLERANCE_SECONDS: i64 = 5 * 60;
/// The default API base URL.
pub const DEFAULT_BASE: &str = "https://slack.com/api";

fn mac(secret: &str, timestamp: &str, body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length, so this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"));
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    mac
}

/// The `X-Slack-Signature` of `body` signed at `timestamp` (Unix seconds) with `secret`.
pub fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let bytes = mac(secret, timestamp, body).finalize().into_bytes();
    format!("v0={}", crate::hex::encode(&bytes))
}

/// Checks a request as Slack's `SignatureVerifier` does: both headers present, the timestamp
/// within five minutes of `now`, and the signature equal (in constant time) to the one
/// computed over the raw body.
pub fn verify(
    secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: Millis,
) -> Result<(), InboundError> {
    let timestamp = timestamp.ok_or(InboundError::Malformed(
        "the X-Slack-Request-Timestamp header is missing",
    ))?;
    let signature = signature.ok_or(InboundError::Malformed(
        "the X-Slack-Signature header is missing",
    ))?;
    let seconds: i64 = timestamp.trim().parse().map_err(|_| {
        InboundError::Malformed("X-Slack-Request-Timestamp must be Unix time in seconds")
    })?;
    // Slack's verifier: abs(now - timestamp) > 300 seconds is refused.
    let now_seconds = now as f64 / 1000.0;
    if (now_seconds - seconds as f64).abs() > TOLERANCE_SECONDS as f64 {
        return Err(InboundError::Stale);
    }
    let expected = sign(secret, timestamp, body);
    if same(expected.as_bytes(), signature.as_bytes()) {
        Ok(())
    } else {
        Err(InboundError::Mismatch)
    }
}

fn text_of(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Reads a verified Events API body. A message in a thread is a conversation of its own
/// (`{channel}:{thread_ts}`), and its reply goes to that thread; a message outside threads is
/// the channel's conversation and its reply goes to the channel.
pub fn parse(body: &[u8]) -> Result<Inbound, InboundError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| InboundError::Malformed("the body must be a JSON Events API payload"))?;
    match value.get("type").and_then(Value::as_str) {
        Some("url_verification") => {
            let challenge = text_of(&value, "challenge").ok_or(InboundError::Malformed(
                "url_verification without a challenge",
            ))?;
            Ok(Inbound::Challenge(challenge))
        }
        Some("event_callback") => {
            let event_id = text_of(&value, "event_id")
                .filter(|id| !id.is_empty() && id.len() <= 200)
                .ok_or(InboundError::Malformed(
                    "event_callback without an event_id",
                ))?;
            let event = value
                .get("event")
                .ok_or(InboundError::Malformed("event_callback without an event"))?;
            if event.get("type").and_then(Value::as_str) != Some("message") {
                return Ok(Inbound::Ignored("not a message event"));
            }
            if event.get("bot_id").is_some() || event.get("subtype").is_some() {
                return Ok(Inbound::Ignored(
                    "a bot's message, or an edit or other subtype",
                ));
            }
            let (Some(channel), Some(user), Some(text)) = (
                text_of(event, "channel"),
                text_of(event, "user"),
                text_of(event, "text"),
            ) else {
                return Ok(Inbound::Ignored("a message without channel, user or text"));
            };
            if text.trim().is_empty() {
                return Ok(Inbound::Ignored("an empty message"));
            }
            let thread = text_of(event, "thread_ts");
            let display_name = event.get("user_profile").and_then(|profile| {
                text_of(profile, "display_name")
                    .filter(|name| !name.is_empty())
                    .or_else(|| text_of(profile, "real_name"))
            });
            Ok(Inbound::Message(InboundMessage {
                event_id,
                conversation: match &thread {
                    Some(ts) => format!("{channel}:{ts}"),
                    None => channel.clone(),
                },
                reply_to: channel,
                reply_thread: thread,
                user_id: user,
                display_name,
                text: bounded(&text),
            }))
        }
        _ => Ok(Inbound::Ignored("not an event callback")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_is_checked_with_its_timestamp() {
        let now = 1_800_000_000_000;
        let ts = "1800000000";
        let good = sign("secret", ts, b"{}");
        assert_eq!(verify("secret", Some(ts), Some(&good), b"{}", now), Ok(()));
        assert_eq!(
            verify("other", Some(ts), Some(&good), b"{}", now),
            Err(InboundError::Mismatch)
        );
        assert_eq!(
            verify("secret", Some(ts), Some(&good), b"{} ", now),
            Err(InboundError::Mismatch)
        );
        assert_eq!(
            verify("secret", Some(ts), Some(&good), b"{}", now + 301_000),
            Err(InboundError::Stale)
        );
        assert_eq!(
            verify("secret", Some(ts), Some(&good), b"{}", now + 300_000),
            Ok(())
        );
        assert!(matches!(
            verify("secret", None, Some(&good), b"{}", now),
            Err(InboundError::Malformed(_))
        ));
    }

    #[test]
    fn only_messages_from_people_become_input() {
        let message = br#"{"type":"event_callback","event_id":"Ev1","event":{"type":"message","channel":"C1","user":"U1","text":"hi","ts":"1.2","thread_ts":"1.0","user_profile":{"display_name":"Ada"}}}"#;
        let Inbound::Message(m) = parse(message).unwrap() else {
            panic!("a message")
        };
        assert_eq!(m.conversation, "C1:1.0");
        assert_eq!(m.reply_thread.as_deref(), Some("1.0"));
        assert_eq!(m.display_name.as_deref(), Some("Ada"));
        let bot = br#"{"type":"event_callback","event_id":"Ev2","event":{"type":"message","channel":"C1","bot_id":"B1","text":"hi"}}"#;
        assert!(matches!(parse(bot).unwrap(), Inbound::Ignored(_)));
        let edit = br#"{"type":"event_callback","event_id":"Ev3","event":{"type":"message","subtype":"message_changed","channel":"C1"}}"#;
        assert!(matches!(parse(edit).unwrap(), Inbound::Ignored(_)));
        assert_eq!(
            parse(br#"{"type":"url_verification","challenge":"abc"}"#).unwrap(),
            Inbound::Challenge("abc".into())
        );
        assert!(parse(b"not json").is_err());
    }
}
