//! The Computer store: paired machines and their pairings.

use async_trait::async_trait;
use openbot_core::computer::link::OutputBatch;
use openbot_schema::OutputChunk;
use uuid::Uuid;

use crate::store::{Millis, StoreError};

/// A Computer as stored (never its credential: only its hash is kept, and never read back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputerRow {
    /// Its ID.
    pub id: Uuid,
    /// Its organization.
    pub organization_id: Uuid,
    /// The member it belongs to; `None`: the organization's.
    pub owner_member_id: Option<Uuid>,
    /// Its name.
    pub name: String,
    /// When its pairing was approved.
    pub created_at: Millis,
    /// When the machine first claimed its credential.
    pub paired_at: Option<Millis>,
}

/// A pairing as stored: hashes only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairingRow {
    /// Its ID.
    pub id: Uuid,
    /// The hash of its pairing secret.
    pub secret_hash: Vec<u8>,
    /// The name the machine asked for.
    pub name: String,
    /// When its code (before approval) or its claim window (after) ends.
    pub expires_at: Millis,
    /// The Computer its approval made.
    pub computer_id: Option<Uuid>,
}

/// A new pairing, as the store saves it.
#[derive(Debug, Clone)]
pub struct NewPairing {
    /// Its ID.
    pub id: Uuid,
    /// The hash of its code.
    pub code_hash: Vec<u8>,
    /// The hash of its secret.
    pub secret_hash: Vec<u8>,
    /// The name the machine asked for.
    pub name: String,
    /// When its code stops working.
    pub expires_at: Millis,
}

/// An approval, as the store applies it.
#[derive(Debug, Clone)]
pub struct Approval {
    /// The pairing.
    pub pairing_id: Uuid,
    /// The new Computer's ID.
    pub computer_id: Uuid,
    /// Its organization.
    pub organization_id: Uuid,
    /// Its owner; `None`: the organization's.
    pub owner_member_id: Option<Uuid>,
    /// Its name.
    pub name: String,
    /// Until when the machine may claim its credential.
    pub claim_until: Millis,
}

/// A Bot's grant of a Computer, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantRow {
    /// The Bot (it has at most one Computer).
    pub bot_id: Uuid,
    /// The Computer.
    pub computer_id: Uuid,
    /// Whether the Bot's calls that change the machine wait for a person's approval.
    pub ask: bool,
    /// The member who granted it.
    pub granted_by: Uuid,
    /// When.
    pub granted_at: Millis,
}

/// Where Computers and pairings live.
#[async_trait]
pub trait ComputerStore: Send + Sync + 'static {
    /// Saves a new pairing and forgets pairings that ended before `forget_before`. Refuses
    /// (`false`) when `max_open` pairings are open (neither approved nor expired) already.
    async fn start_pairing(
        &self,
        pairing: &NewPairing,
        max_open: i64,
        forget_before: Millis,
    ) -> Result<bool, StoreError>;

    /// The pairing with this code hash.
    async fn pairing_by_code(&self, code_hash: &[u8]) -> Result<Option<PairingRow>, StoreError>;

    /// The pairing with this ID.
    async fn pairing(&self, id: Uuid) -> Result<Option<PairingRow>, StoreError>;

    /// Makes the Computer of an approval, once: `None` when the pairing was approved already
    /// or its code expired (`now` or later).
    async fn approve(
        &self,
        approval: &Approval,
        now: Millis,
    ) -> Result<Option<ComputerRow>, StoreError>;

    /// Sets a Computer's credential (by hash), voiding the one before; `false` when the
    /// Computer was removed.
    async fn set_credential(
        &self,
        computer: Uuid,
        credential_hash: &[u8],
        now: Millis,
    ) -> Result<bool, StoreError>;

    /// A page of the Computers `member` of `organization` may see: its own and the shared
    /// ones, not removed, by ID after `after`.
    async fn computers_page(
        &self,
        organization: Uuid,
        member: Uuid,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<ComputerRow>, StoreError>;

    /// One Computer `member` may see, as [`Self::computers_page`] filters.
    async fn computer(
        &self,
        organization: Uuid,
        member: Uuid,
        id: Uuid,
    ) -> Result<Option<ComputerRow>, StoreError>;

    /// Removes a Computer and revokes its credential at once; `false` when it was gone.
    async fn remove(&self, organization: Uuid, id: Uuid, now: Millis) -> Result<bool, StoreError>;

    /// The Computer (not removed) whose credential has this hash.
    async fn computer_by_credential(
        &self,
        credential_hash: &[u8],
    ) -> Result<Option<ComputerRow>, StoreError>;

    /// Saves a grant, replacing the Bot's grant before (a Bot has one Computer).
    async fn grant(&self, grant: &GrantRow) -> Result<(), StoreError>;

    /// Removes `bot`'s grant of `computer`; `false` when it had none.
    async fn revoke(&self, bot: Uuid, computer: Uuid) -> Result<bool, StoreError>;

    /// `bot`'s grant, with its Computer, while that Computer is not removed.
    async fn grant_of_bot(&self, bot: Uuid) -> Result<Option<(GrantRow, ComputerRow)>, StoreError>;

    /// Saves terminal output of `computer` in one transaction: each batch's session (its end
    /// too), each chunk once by its sequence, and each session trimmed to its newest
    /// `KEPT_CHUNKS` chunks. Nothing of a removed Computer is saved.
    async fn save_output(&self, computer: Uuid, batches: &[OutputBatch]) -> Result<(), StoreError>;

    /// A saved terminal session of `computer`.
    async fn terminal(
        &self,
        computer: Uuid,
        session: &str,
    ) -> Result<Option<TerminalRow>, StoreError>;

    /// At most `limit` saved chunks of a session after `after`, in order.
    async fn output_after(
        &self,
        computer: Uuid,
        session: &str,
        after: u64,
        limit: i64,
    ) -> Result<Vec<OutputChunk>, StoreError>;
}

/// The most chunks of one session the server keeps (its newest).
pub const KEPT_CHUNKS: i64 = 2048;

/// A terminal session as saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalRow {
    /// Its ID on the machine.
    pub session_id: String,
    /// The folder it started in.
    pub cwd: String,
    /// Its program.
    pub command: String,
    /// When it started.
    pub started_at: Millis,
    /// The newest chunk's sequence saved (0: none yet).
    pub last_seq: i64,
    /// Whether it ended.
    pub exited: bool,
    /// Its exit code, once it ended with one.
    pub exit_code: Option<i32>,
}
