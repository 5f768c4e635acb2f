//! The stores written once for both databases (see `store/dialect.rs`).

mod engine;
mod outcomes;
mod schema;
mod work;

use openbot_schema::EventKind;

use super::StoreError;

/// The `input_steered` events for input taken at a step.
pub(crate) fn steered_events(contents: &[String]) -> Result<Vec<EventKind>, StoreError> {
    contents
        .iter()
        .map(|content| {
            let input = serde_json::from_str(content)
                .map_err(|e| StoreError::Invalid(format!("turn input: {e}")))?;
            Ok(EventKind::InputSteered { input })
        })
        .collect()
}
