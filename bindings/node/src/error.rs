//! Errors across the boundary: a core [`Error`] becomes a JavaScript `Error` whose message is
//! [`MARKER`] followed by the public error body as JSON. The TypeScript layer reads it back and
//! throws the matching `OpenBotError` subclass; the body never holds secrets or a full cause.

use napi::Status;
use openbot_core::Error;

/// The start of the message of every error this addon throws.
pub const MARKER: &str = "openbot-error:";

/// The JavaScript error for a core error.
pub fn to_js(error: Error) -> napi::Error {
    let body = error.to_body();
    let json = serde_json::to_string(&body).unwrap_or_else(|_| {
        // The body is plain data; this arm only keeps the boundary free of panics.
        format!(
            r#"{{"code":"{}","message":"the error could not be encoded"}}"#,
            body.code.as_str()
        )
    });
    napi::Error::new(Status::GenericFailure, format!("{MARKER}{json}"))
}

/// Bad input from JavaScript: a value that does not match the schema, an ID that is not one.
pub fn invalid_input(message: impl Into<String>) -> napi::Error {
    to_js(Error::invalid_input(message))
}
