//! The few functions Kotlin and Swift need beside the schema's own records.
//!
//! Every record and enum of the API is the schema's type, derived for uniffi in the schema
//! crate (feature `uniffi`): IDs are their canonical text, times are timestamps
//! (`java.time.Instant`, `Date`) and free-form JSON (tool input schemas and arguments) is JSON
//! text. Nothing here mirrors a schema type.

use openbot_schema as schema;

/// Input of one text part, optionally named by a command key.
#[uniffi::export(default(command_key = None))]
pub fn text_input(text: String, command_key: Option<String>) -> schema::SendInput {
    schema::SendInput {
        content: vec![schema::ContentPart::Text { text }],
        command_key,
    }
}

/// Does nothing: one call through the binding and back, for measuring its cost
/// (`scripts/bench-kotlin`).
#[uniffi::export]
pub fn ping() {}

/// Whether `state` is an end state: nothing changes after it.
#[uniffi::export]
pub fn is_terminal(state: schema::ExecutionState) -> bool {
    state.is_terminal()
}

/// The whole event as JSON, as the HTTP API sends it.
#[uniffi::export]
pub fn event_json(event: schema::Event) -> String {
    // An event always encodes (its fields are plain data); "{}" only if that ever changed.
    serde_json::to_string(&event).unwrap_or_else(|_| "{}".to_string())
}

/// The wire name of an event's kind, e.g. `text_delta`, `turn_ended`.
#[uniffi::export]
pub fn event_type(event: schema::Event) -> String {
    match serde_json::to_value(&event) {
        Ok(serde_json::Value::Object(mut fields)) => match fields.remove("type") {
            Some(serde_json::Value::String(name)) => name,
            _ => String::new(),
        },
        _ => String::new(),
    }
}
