//! Telegram's webhook: the `X-Telegram-Bot-Api-Secret-Token` header must equal the secret
//! given to `setWebhook` (compared in constant time), and an update's `message.text` from a
//! person becomes input, taken once per `update_id`.

use serde_json::Value;

use super::inbound::{Inbound, InboundError, InboundMessage, bounded, same};

/// The header Telegram sends the webhook's secret token in.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";
/// The default API base URL.
pub const DEFAULT_BASE: &str = "https://api.telegram.org";

/// Whether `secret` is a token Telegram accepts: 1-256 of `A-Z a-z 0-9 _ -`.
pub fn valid_secret(secret: &str) -> bool {
    (1..=256).contains(&secret.len())
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Checks the header against the Channel's secret token.
pub fn verify(secret: &str, header: Option<&str>) -> Result<(), InboundError> {
    let given = header.ok_or(InboundError::Malformed(
        "the X-Telegram-Bot-Api-Secret-Token header is missing",
    ))?;
    if same(secret.as_bytes(), given.as_bytes()) {
        Ok(())
    } else {
        Err(InboundError::Mismatch)
    }
}

/// Reads a verified update.
pub fn parse(body: &[u8]) -> Result<Inbound, InboundError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| InboundError::Malformed("the body must be a JSON Telegram update"))?;
    let update_id = value
        .get("update_id")
        .and_then(Value::as_i64)
        .ok_or(InboundError::Malformed("an update without an update_id"))?;
    let Some(message) = value.get("message") else {
        return Ok(Inbound::Ignored("not a message update"));
    };
    let Some(text) = message.get("text").and_then(Value::as_str) else {
        return Ok(Inbound::Ignored("a message without text"));
    };
    let from = message.get("from");
    if from
        .and_then(|f| f.get("is_bot"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        return Ok(Inbound::Ignored("a bot's message"));
    }
    let Some(chat) = message
        .get("chat")
        .and_then(|c| c.get("id"))
        .and_then(Value::as_i64)
    else {
        return Ok(Inbound::Ignored("a message without a chat"));
    };
    let Some(user) = from.and_then(|f| f.get("id")).and_then(Value::as_i64) else {
        return Ok(Inbound::Ignored("a message without a sender"));
    };
    if text.trim().is_empty() {
        return Ok(Inbound::Ignored("an empty message"));
    }
    let name = |key: &str| {
        from.and_then(|f| f.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let display_name = match (name("first_name"), name("last_name"), name("username")) {
        (Some(first), Some(last), _) => Some(format!("{first} {last}")),
        (Some(first), None, _) => Some(first),
        (None, _, username) => username,
    };
    Ok(Inbound::Message(InboundMessage {
        event_id: update_id.to_string(),
        conversation: chat.to_string(),
        reply_to: chat.to_string(),
        reply_thread: None,
        user_id: user.to_string(),
        display_name,
        text: bounded(text),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_token_must_match() {
        assert_eq!(verify("abc_1", Some("abc_1")), Ok(()));
        assert_eq!(verify("abc_1", Some("abc_2")), Err(InboundError::Mismatch));
        assert!(matches!(
            verify("abc", None),
            Err(InboundError::Malformed(_))
        ));
        assert!(valid_secret("A-z_09"));
        assert!(!valid_secret("no spaces"));
    }

    #[test]
    fn a_text_message_becomes_input() {
        let update = br#"{"update_id":7,"message":{"message_id":1,"from":{"id":42,"is_bot":false,"first_name":"Ada"},"chat":{"id":-100,"type":"group"},"text":"hello"}}"#;
        let Inbound::Message(m) = parse(update).unwrap() else {
            panic!("a message")
        };
        assert_eq!(
            (m.event_id.as_str(), m.conversation.as_str()),
            ("7", "-100")
        );
        assert_eq!(m.display_name.as_deref(), Some("Ada"));
        assert!(matches!(
            parse(br#"{"update_id":8,"edited_message":{}}"#).unwrap(),
            Inbound::Ignored(_)
        ));
    }
}
