//! Sealed payloads of engine rows: what an event says (message text, text deltas, tool
//! arguments and results), Turn input (steering input and the notices a Turn receives),
//! notices kept as Chat history, and what a request asks (a tool call and its arguments).
//!
//! Sealing happens here, in the store, and nowhere else: both stores seal every such payload
//! as they write it and open it as they read it, so every writer (a step's commit, a
//! submission, a child, a steer, a notice, a decision, the `input_steered` events the store
//! itself publishes when a Turn takes input) and every reader (observation and its shared
//! tails, Chat history, approvals, `openbot admin events`) goes through this one path and
//! sees plain values. The store keeps in the clear only what its queries and the engine's own
//! logic need: IDs, kinds, sequences, states and times. Nothing the engine decides on is
//! sealed, so no query ever needs a key.
//!
//! A row written by an older build has its payload in clear text and no key ID; it is read as
//! it is, and `openbot migrate` seals such rows ([`crate::store::RecordStore::seal_clear_rows`]).

use openbot_schema::{Event, EventKind, ExecutionId};
use uuid::Uuid;

use super::{Millis, StoreError};
use crate::sealed::{KeyRing, SealError, SealedValue};

/// What a sealed row keeps in its old clear-text column: nothing.
pub(crate) const CLEARED: &str = "";

/// How many clear-text rows `seal_clear_rows` seals per transaction.
pub(crate) const SEAL_BATCH: i64 = 500;

/// Where a sealed payload lives. A payload is sealed for its place, so it opens only there:
/// a database writer cannot move one execution's text into another's row.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Place {
    /// The payload of event `sequence` of an execution.
    Event {
        /// The execution.
        execution: ExecutionId,
        /// The event's sequence.
        sequence: i64,
    },
    /// Input waiting for (or taken by) a Turn: steering input or a notice.
    TurnInput {
        /// The Turn.
        execution: ExecutionId,
    },
    /// A notice kept as a Chat's history.
    ChatNotice {
        /// The Chat.
        chat: Uuid,
        /// The child that sent it.
        source: ExecutionId,
    },
    /// What a request asks.
    Request {
        /// The request.
        id: Uuid,
    },
}

impl Place {
    /// The bytes bound to the ciphertext: a table tag, then fixed-width keys, so no two places
    /// share them.
    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        match self {
            Place::Event {
                execution,
                sequence,
            } => {
                out.extend_from_slice(b"openbot:events\0");
                out.extend_from_slice(execution.as_uuid().as_bytes());
                out.extend_from_slice(&sequence.to_be_bytes());
            }
            Place::TurnInput { execution } => {
                out.extend_from_slice(b"openbot:turn_inputs\0");
                out.extend_from_slice(execution.as_uuid().as_bytes());
            }
            Place::ChatNotice { chat, source } => {
                out.extend_from_slice(b"openbot:chat_notices\0");
                out.extend_from_slice(chat.as_bytes());
                out.extend_from_slice(source.as_uuid().as_bytes());
            }
            Place::Request { id } => {
                out.extend_from_slice(b"openbot:requests\0");
                out.extend_from_slice(id.as_bytes());
            }
        }
        out
    }

    /// The place in words, for an error (IDs only, never content).
    fn describe(&self) -> String {
        match self {
            Place::Event {
                execution,
                sequence,
            } => format!("event {sequence} of execution {execution}"),
            Place::TurnInput { execution } => format!("input of execution {execution}"),
            Place::ChatNotice { chat, source } => format!("notice of {source} to chat {chat}"),
            Place::Request { id } => format!("request {id}"),
        }
    }
}

/// A payload as a row stores it: sealed (`key_id` and `sealed` set, `plain` empty), or the
/// clear text an older build wrote (`key_id` NULL).
#[derive(Debug)]
pub(crate) struct Stored {
    /// The old clear-text column.
    pub plain: String,
    /// The key that sealed it; `None` for a clear-text row.
    pub key_id: Option<String>,
    /// The nonce and ciphertext.
    pub sealed: Option<Vec<u8>>,
}

/// Reads a payload's three columns (`<plain>`, `key_id`, `sealed`) from a row.
macro_rules! stored_from_row {
    ($row:expr, $plain:literal) => {{
        use sqlx::Row as _;
        let row = $row;
        Ok::<$crate::store::sealing::Stored, $crate::store::StoreError>(
            $crate::store::sealing::Stored {
                plain: row.try_get($plain)?,
                key_id: row.try_get("key_id")?,
                sealed: row.try_get("sealed")?,
            },
        )
    }};
}
pub(crate) use stored_from_row;

/// The key ring as the store uses it: seals payloads as rows are written, opens them as rows
/// are read.
#[derive(Debug, Clone)]
pub(crate) struct RowSeal {
    keys: KeyRing,
}

impl RowSeal {
    pub(crate) fn new(keys: KeyRing) -> Self {
        Self { keys }
    }

    fn failed(place: Place, source: SealError) -> StoreError {
        StoreError::Sealed {
            place: place.describe(),
            source,
        }
    }

    /// Seals `plaintext` for `place` under the current key.
    pub(crate) fn seal(&self, place: Place, plaintext: &[u8]) -> Result<SealedValue, StoreError> {
        self.keys
            .seal_at(&place.bytes(), plaintext)
            .map_err(|e| Self::failed(place, e))
    }

    /// Opens the payload stored at `place` as text: a sealed payload with the key it names, a
    /// clear-text row of an older build as it is.
    pub(crate) fn open(&self, place: Place, stored: Stored) -> Result<String, StoreError> {
        let bytes = match (stored.key_id, stored.sealed) {
            (None, _) => return Ok(stored.plain),
            (Some(key_id), Some(bytes)) => self
                .keys
                .open_at(&place.bytes(), &SealedValue { key_id, bytes })
                .map_err(|e| Self::failed(place, e))?,
            (Some(_), None) => {
                return Err(StoreError::Invalid(format!(
                    "{} has a key but no sealed value",
                    place.describe()
                )));
            }
        };
        String::from_utf8(bytes)
            .map_err(|_| StoreError::Invalid(format!("{} is not text", place.describe())))
    }

    /// Seals an event's payload (its JSON) for its place.
    pub(crate) fn seal_event(
        &self,
        execution: ExecutionId,
        sequence: i64,
        event: &EventKind,
    ) -> Result<SealedValue, StoreError> {
        let json = serde_json::to_vec(event).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.seal(
            Place::Event {
                execution,
                sequence,
            },
            &json,
        )
    }

    /// Opens a stored event.
    pub(crate) fn open_event(
        &self,
        execution: ExecutionId,
        sequence: i64,
        at: Millis,
        stored: Stored,
    ) -> Result<Event, StoreError> {
        let payload = self.open(
            Place::Event {
                execution,
                sequence,
            },
            stored,
        )?;
        let kind: EventKind = serde_json::from_str(&payload)
            .map_err(|e| StoreError::Invalid(format!("event payload: {e}")))?;
        Ok(Event {
            execution_id: execution,
            sequence: sequence.max(0) as u64,
            at: super::stored_time(at)?,
            kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seal() -> RowSeal {
        RowSeal::new(KeyRing::generate("k1").0)
    }

    #[test]
    fn a_payload_opens_only_at_its_place() {
        let seal = seal();
        let execution = ExecutionId::new();
        let place = Place::TurnInput { execution };
        let value = seal.seal(place, b"secret").unwrap();
        let stored = |value: &SealedValue| Stored {
            plain: String::new(),
            key_id: Some(value.key_id.clone()),
            sealed: Some(value.bytes.clone()),
        };
        assert_eq!(seal.open(place, stored(&value)).unwrap(), "secret");
        let elsewhere = Place::TurnInput {
            execution: ExecutionId::new(),
        };
        assert!(matches!(
            seal.open(elsewhere, stored(&value)),
            Err(StoreError::Sealed { .. })
        ));
    }

    #[test]
    fn a_clear_text_row_is_read_as_it_is() {
        let stored = Stored {
            plain: "old".into(),
            key_id: None,
            sealed: None,
        };
        let place = Place::Request { id: Uuid::now_v7() };
        assert_eq!(seal().open(place, stored).unwrap(), "old");
    }
}
