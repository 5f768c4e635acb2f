//! The `remind` tool: what the model sees, and reading its arguments into a due time and a
//! text. Every mistake the model can fix comes back to it as an error result.

use chrono::DateTime;
use openbot_schema::ToolDefinition;
use serde_json::Value;

use crate::store::Millis;
use crate::turns::{SavedTool, ToolRoute};

/// The tool's name.
pub const REMIND: &str = "remind";
/// The longest a reminder may wait.
pub const MAX_WAIT_MS: Millis = 366 * 24 * 3600 * 1000;
/// The most characters of a reminder's text.
pub const MAX_TEXT_CHARS: usize = 4000;

/// The `remind` tool as a Turn saves it.
pub fn remind_tool() -> SavedTool {
    SavedTool {
        definition: ToolDefinition {
            name: REMIND.into(),
            description: "Sets a reminder: at the given time the text comes back to this Chat as \
                input, and you act on it then. Give either `at` (an RFC 3339 time) or `in` \
                (seconds, or an ISO 8601 duration such as PT2H)."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "What to remember, in full."},
                    "at": {"type": "string", "description": "When, as RFC 3339, e.g. 2026-12-24T09:00:00+01:00."},
                    "in": {"description": "After how long: seconds (a number) or an ISO 8601 duration (PT30M)."}
                },
                "required": ["text"]
            }),
        },
        route: ToolRoute::Remind,
    }
}

/// Reads an ISO 8601 duration of weeks, days, hours, minutes and seconds (`P1DT2H`, `PT90S`,
/// `P2W`) into milliseconds. Years and months have no fixed length and are refused.
pub fn iso_duration_ms(text: &str) -> Option<Millis> {
    let rest = text.strip_prefix('P').or_else(|| text.strip_prefix('p'))?;
    let (date, time) = match rest.split_once(['T', 't']) {
        Some((date, time)) => (date, Some(time)),
        None => (rest, None),
    };
    fn part(text: &str, units: &[(char, f64)]) -> Option<f64> {
        let mut total = 0.0;
        let mut number = String::new();
        for c in text.chars() {
            if c.is_ascii_digit() || c == '.' {
                number.push(c);
                continue;
            }
            let (_, scale) = units.iter().find(|(u, _)| u.eq_ignore_ascii_case(&c))?;
            let value: f64 = number.parse().ok()?;
            total += value * scale;
            number.clear();
        }
        number.is_empty().then_some(total)
    }
    let date_s = part(date, &[('W', 604_800.0), ('D', 86_400.0)])?;
    let time_s = match time {
        Some("") => return None,
        Some(time) => part(time, &[('H', 3600.0), ('M', 60.0), ('S', 1.0)])?,
        None => 0.0,
    };
    if date.is_empty() && time.is_none() {
        return None;
    }
    let ms = (date_s + time_s) * 1000.0;
    (ms.is_finite() && ms < 1e15).then_some(ms as Millis)
}

/// A checked `remind` call: when and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemindArgs {
    /// When it is due.
    pub due_at: Millis,
    /// Its text.
    pub text: String,
}

/// Reads a `remind` call's arguments against `now`; the error is for the model.
pub fn parse_args(arguments: &Value, now: Millis) -> Result<RemindArgs, String> {
    let text = arguments
        .get("text")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or("`text` is required: what to remember")?;
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(format!(
            "`text` may have at most {MAX_TEXT_CHARS} characters"
        ));
    }
    let due_at = match (arguments.get("at"), arguments.get("in")) {
        (Some(_), Some(_)) => return Err("give either `at` or `in`, not both".into()),
        (None, None) => return Err("give `at` (an RFC 3339 time) or `in` (a duration)".into()),
        (Some(at), None) => {
            let at = at.as_str().ok_or("`at` must be an RFC 3339 time as text")?;
            DateTime::parse_from_rfc3339(at)
                .map_err(|_| format!("`at` is not an RFC 3339 time: {at}"))?
                .timestamp_millis()
        }
        (None, Some(after)) => {
            let ms = match after {
                Value::Number(n) => n
                    .as_f64()
                    .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e12)
                    .map(|s| (s * 1000.0) as Millis),
                Value::String(s) => iso_duration_ms(s).or_else(|| {
                    s.parse::<f64>()
                        .ok()
                        .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e12)
                        .map(|s| (s * 1000.0) as Millis)
                }),
                _ => None,
            }
            .ok_or("`in` must be seconds or an ISO 8601 duration such as PT30M")?;
            now.saturating_add(ms)
        }
    };
    if due_at <= now {
        return Err("the reminder's time has already passed".into());
    }
    if due_at - now > MAX_WAIT_MS {
        return Err("a reminder may be at most a year ahead".into());
    }
    Ok(RemindArgs {
        due_at,
        text: text.to_string(),
    })
}

/// Offers `remind` to a Turn of a Bot with its `reminders` setting on.
pub struct RemindOffer;

impl crate::chats::TurnOffer for RemindOffer {
    fn offer(&self, bot: &crate::bots::BotRow, _chat: &crate::chats::ChatRow) -> Option<SavedTool> {
        bot.spec.reminders.then(remind_tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_are_read() {
        assert_eq!(iso_duration_ms("PT90S"), Some(90_000));
        assert_eq!(iso_duration_ms("P1DT2H"), Some(93_600_000));
        assert_eq!(iso_duration_ms("P2W"), Some(1_209_600_000));
        assert_eq!(iso_duration_ms("PT"), None);
        assert_eq!(iso_duration_ms("P1M"), None);
        assert_eq!(iso_duration_ms("1H"), None);
    }

    #[test]
    fn arguments_are_checked() {
        let now = 1_800_000_000_000;
        assert_eq!(
            parse_args(&json!({"text": "tea", "in": 60}), now),
            Ok(RemindArgs {
                due_at: now + 60_000,
                text: "tea".into()
            })
        );
        assert_eq!(
            parse_args(&json!({"text": "tea", "in": "PT1M"}), now).map(|a| a.due_at),
            Ok(now + 60_000)
        );
        assert!(parse_args(&json!({"text": "tea"}), now).is_err());
        assert!(parse_args(&json!({"in": 5}), now).is_err());
        assert!(parse_args(&json!({"text": "tea", "in": -5}), now).is_err());
        assert!(parse_args(&json!({"text": "tea", "at": "2020-01-01T00:00:00Z"}), now).is_err());
        assert!(parse_args(&json!({"text": "tea", "at": "tomorrow"}), now).is_err());
        assert!(
            parse_args(
                &json!({"text": "tea", "in": 60, "at": "2030-01-01T00:00:00Z"}),
                now
            )
            .is_err()
        );
        assert!(parse_args(&json!({"text": "tea", "in": "P400D"}), now).is_err());
    }
}
