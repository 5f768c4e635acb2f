//! What a platform's request to a Channel holds, once its signature was checked.

/// One input from a platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundMessage {
    /// The platform's ID of the input (Slack `event_id`, Telegram `update_id`).
    pub event_id: String,
    /// The conversation: the key of its Chat.
    pub conversation: String,
    /// Where the reply goes (the Slack channel, the Telegram chat ID).
    pub reply_to: String,
    /// The Slack thread the reply goes to.
    pub reply_thread: Option<String>,
    /// The speaker's platform user ID.
    pub user_id: String,
    /// The speaker's name, when the platform gave one.
    pub display_name: Option<String>,
    /// The text.
    pub text: String,
}

/// What a verified request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// Slack's `url_verification`: answer its challenge.
    Challenge(String),
    /// Input for the Bot.
    Message(InboundMessage),
    /// Something the Channel takes no input from (another event type, a bot's own message,
    /// an edit): answered 200 and dropped.
    Ignored(&'static str),
}

/// A request whose proof or body was refused. The messages never echo a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InboundError {
    /// A header is missing or malformed, or the body cannot be read.
    #[error("{0}")]
    Malformed(&'static str),
    /// Slack: the timestamp is more than five minutes from the server's time.
    #[error("the request timestamp is more than five minutes from the server's time")]
    Stale,
    /// The signature or secret token does not match.
    #[error("the request's signature does not match")]
    Mismatch,
}

/// The most characters of an input's text that reach the Bot.
pub const MAX_TEXT_CHARS: usize = 16_000;

/// `text` cut to [`MAX_TEXT_CHARS`].
pub(crate) fn bounded(text: &str) -> String {
    text.chars().take(MAX_TEXT_CHARS).collect()
}

/// Compares two byte strings in time that depends only on their lengths.
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    // Every byte is compared, whatever differs first.
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
