//! Computers: a machine a Bot works on through terminal sessions and file reads and writes
//! inside the folders its owner allowed (docs/computers.md). These are the shapes the
//! Computer tools answer with, the same in this process and through a server.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A terminal session started on a Computer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct TerminalSession {
    /// Its ID, unique on its Computer.
    pub id: String,
    /// The folder it started in (inside an allowed folder).
    pub cwd: String,
    /// The program it runs (the machine's shell unless a command was given).
    pub command: String,
    /// When it started.
    pub started_at: DateTime<Utc>,
}

/// One piece of a terminal session's output, numbered in the order it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct OutputChunk {
    /// Its sequence in the session, from 1, without gaps.
    pub seq: u64,
    /// The text (invalid UTF-8 replaced; a character split between reads is kept whole).
    pub text: String,
}

/// A terminal session's output after a cursor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct TerminalOutput {
    /// The session.
    pub session_id: String,
    /// The chunks after the cursor, in order.
    pub chunks: Vec<OutputChunk>,
    /// The cursor to read on from: the last chunk's `seq`, or the cursor given.
    pub next_cursor: u64,
    /// Chunks after the cursor that are no longer kept (a session keeps its newest output
    /// only); the first returned chunk follows them.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub dropped: u64,
    /// Whether the session's program has ended; no chunk follows `next_cursor` then.
    pub exited: bool,
    /// Its exit code, once it ended with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub exit_code: Option<i32>,
}

impl TerminalOutput {
    /// The chunks' text joined.
    pub fn text(&self) -> String {
        self.chunks.iter().map(|c| c.text.as_str()).collect()
    }
}

/// A text file read from a Computer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ComputerFile {
    /// Its path, as resolved on the machine (symbolic links followed).
    pub path: String,
    /// Its content.
    pub content: String,
    /// Its size in bytes.
    pub size: u64,
}

/// A machine paired with the server as a Computer (`/v1/computers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Computer {
    /// Its ID.
    pub id: uuid::Uuid,
    /// Its name, as the machine asked for it when pairing.
    pub name: String,
    /// The member it belongs to; absent when it is the organization's (shared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub owner_member_id: Option<uuid::Uuid>,
    /// When its pairing was approved.
    pub created_at: DateTime<Utc>,
    /// When the machine claimed its credential; absent until it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub paired_at: Option<DateTime<Utc>>,
}

/// What a machine asks for to pair (`POST /v1/computers/pairings`, no credential).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct StartPairing {
    /// The name the Computer will have, 1-100 characters.
    #[schema(min_length = 1, max_length = 100)]
    pub name: String,
}

/// A started pairing, as the machine keeps it: the code a member approves and the secret the
/// machine alone claims its credential with. Neither is shown again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Pairing {
    /// Its ID, to claim with.
    pub id: uuid::Uuid,
    /// The short code a member approves (`XXXX-XXXX`), single-use.
    pub code: String,
    /// The secret the machine claims its credential with; never show it.
    pub secret: String,
    /// When the code stops working.
    pub expires_at: DateTime<Utc>,
}

/// A member's approval of a pairing code (`POST /v1/computers/pairings/approve`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct ApprovePairing {
    /// The code the machine shows, with or without its dash, in any case.
    #[schema(min_length = 1, max_length = 20)]
    pub code: String,
    /// Whether the Computer is the organization's (an owner or admin shares one) instead of
    /// the approving member's own.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub shared: bool,
}

/// The machine's claim of its credential (`POST /v1/computers/pairings/{id}/claim`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct ClaimPairing {
    /// The pairing's secret.
    pub secret: String,
}

/// The answer to a claim: still waiting for a member, or paired with the machine's own
/// credential (shown once; a later claim issues a new one and voids this).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct PairingClaim {
    /// Whether a member approved the code yet.
    pub approved: bool,
    /// The Computer, once approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub computer_id: Option<uuid::Uuid>,
    /// The machine's credential (`obc_...`), once approved. Never a member's token: it
    /// reaches only the Computer's own connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub credential: Option<String>,
}

/// How a member grants a Computer to a Bot (`PUT /v1/computers/{id}/bots/{bot_id}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct GrantComputer {
    /// Whether the Bot's calls that change the machine (start, write to or close a terminal,
    /// write a file) wait for a person's approval. On unless turned off here; reads never ask.
    #[serde(default = "ask_by_default")]
    #[cfg_attr(feature = "uniffi", uniffi(default = true))]
    #[schema(default = true)]
    pub ask: bool,
}

impl Default for GrantComputer {
    fn default() -> Self {
        Self { ask: true }
    }
}

fn ask_by_default() -> bool {
    true
}

/// A Bot's grant of a Computer: the Bot's Turns get the Computer tools on it. A Bot has at
/// most one Computer; a new grant replaces the one before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ComputerGrant {
    /// The Computer.
    pub computer_id: uuid::Uuid,
    /// The Bot.
    pub bot_id: crate::BotId,
    /// Whether its calls that change the machine wait for a person's approval.
    pub ask: bool,
    /// The member who granted it.
    pub granted_by: uuid::Uuid,
    /// When.
    pub granted_at: DateTime<Utc>,
}

/// Which part of a terminal session's output to read
/// (`GET /v1/computers/{id}/terminals/{session_id}/output`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OutputQuery {
    /// Read the chunks after this one (a `next_cursor`); 0, the default, reads from the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 0, nullable = false)]
    pub after: Option<u64>,
    /// How long to wait for output when there is none after the cursor, in milliseconds:
    /// 0-30000, default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 0, maximum = 30000, nullable = false)]
    pub wait_ms: Option<u64>,
}
