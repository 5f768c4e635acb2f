//! The uniffi side of the schema (feature `uniffi`): every type of this crate is a Kotlin and
//! Swift record or enum, derived from its Rust definition, so the mobile SDK copies none.
//!
//! The types this crate uses but does not own cross as custom types: a UUID as its canonical
//! text, a time as a timestamp (`java.time.Instant`, `Date`) and free-form JSON (tool input
//! schemas and arguments) as JSON text. A value that cannot cross (text that is no UUID, JSON
//! text that does not parse) fails the call with `invalid_input` of [`OpenBotError`].

use crate::ffi_error::OpenBotError;

/// A time, in UTC.
pub type Timestamp = chrono::DateTime<chrono::Utc>;

/// Free-form JSON, crossing as its text; the empty text is JSON `null` (a left-out value).
pub type JsonValue = serde_json::Value;

/// A UUID.
pub type Uuid = uuid::Uuid;

uniffi::custom_type!(Timestamp, std::time::SystemTime, {
    remote,
    lower: |at| std::time::SystemTime::from(at),
    try_lift: |at| Ok(Timestamp::from(at)),
});

uniffi::custom_type!(JsonValue, String, {
    remote,
    lower: |value| value.to_string(),
    try_lift: |text| {
        if text.trim().is_empty() {
            return Ok(JsonValue::Null);
        }
        serde_json::from_str(&text).map_err(|e| {
            OpenBotError::invalid_input(format!("JSON text that does not parse: {e}")).into()
        })
    },
});

uniffi::custom_type!(Uuid, String, {
    remote,
    lower: |id| id.to_string(),
    try_lift: |text| Uuid::parse_str(&text).map_err(|_| {
        OpenBotError::invalid_input(format!(
            "`{}` is not a valid UUID",
            text.chars().take(64).collect::<String>()
        ))
        .into()
    }),
});
