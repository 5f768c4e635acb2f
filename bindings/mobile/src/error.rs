//! The error every call throws: the schema's [`OpenBotError`] (Kotlin `OpenBotException`,
//! Swift `OpenBotError`), and the core's errors turned into it.

pub use openbot_schema::OpenBotError;

/// The core's error as the SDK's, with its code, message, category and error ID.
pub(crate) fn from_core(error: openbot_core::Error) -> OpenBotError {
    let openbot_core::Error {
        code,
        message,
        category,
        error_id,
    } = error;
    OpenBotError::build(
        code,
        message,
        category.map(openbot_schema::category_name),
        error_id.map(|id| id.to_string()),
    )
}
