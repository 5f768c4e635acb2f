//! Typed identifiers. Each is a UUIDv7 (time ordered) serialized as its canonical string, so
//! IDs sort by creation time and a BotId can never be passed where a ChatId is expected.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// A string that is not a valid ID of the expected kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a valid {kind}: expected a UUID")]
pub struct IdParseError {
    /// The kind of ID that was expected, e.g. `ChatId`.
    pub kind: &'static str,
    /// The rejected text, cut to 64 characters.
    pub value: String,
}

macro_rules! define_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
        )]
        #[serde(transparent)]
        #[schema(value_type = String, format = Uuid)]
        pub struct $name(Uuid);

        impl $name {
            /// A new, unique, time-ordered ID.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            /// The ID as a UUID.
            pub fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl From<Uuid> for $name {
            fn from(value: Uuid) -> Self {
                Self(value)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        // Kotlin and Swift see an ID as its canonical text; text that is no such ID fails to
        // cross, so no call ever holds a malformed one.
        #[cfg(feature = "uniffi")]
        uniffi::custom_type!($name, String, {
            lower: |id| id.to_string(),
            try_lift: |text| text
                .parse::<$name>()
                .map_err(|e| crate::OpenBotError::invalid_input(e.to_string()).into()),
        });

        impl FromStr for $name {
            type Err = IdParseError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self).map_err(|_| IdParseError {
                    kind: stringify!($name),
                    value: s.chars().take(64).collect(),
                })
            }
        }
    };
}

define_id!(
    /// Names one Bot.
    BotId
);
define_id!(
    /// Names one Chat.
    ChatId
);
define_id!(
    /// Names one execution: stored work with a state and an ordered event log.
    ExecutionId
);
define_id!(
    /// Names one stored file.
    FileId
);
define_id!(
    /// Names one sealed failure record; the only thing about a fault that is made public.
    ErrorId
);
define_id!(
    /// Names one API token.
    TokenId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_round_trips_through_its_string() {
        let id = ChatId::new();
        let text = id.to_string();
        assert_eq!(text.parse::<ChatId>(), Ok(id));
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{text}\""));
    }

    #[test]
    fn a_bad_id_names_its_kind() {
        let err = "nope".parse::<BotId>().unwrap_err();
        assert_eq!(err.kind, "BotId");
        assert!(err.to_string().contains("not a valid BotId"));
    }

    #[test]
    fn ids_sort_by_creation() {
        let a = ExecutionId::new();
        let b = ExecutionId::new();
        assert!(a < b);
    }
}
