//! The limit store: configured limits, their buckets and who holds their permits.

use async_trait::async_trait;
use openbot_schema::ExecutionId;
use uuid::Uuid;

use crate::store::{Millis, StoreError};

/// What a limit allows; `None` leaves that dimension open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSettings {
    /// How many calls of the scope may be in flight at once (permits).
    pub max_concurrent: Option<i64>,
    /// How many requests a window admits (a token bucket refilled over the window).
    pub requests_per_window: Option<i64>,
    /// How many tokens (input and output) the scope's calls may use per window; a call is
    /// admitted while the bucket is above zero and its confirmed usage is taken after it.
    pub tokens_per_window: Option<i64>,
    /// The window of both buckets, in milliseconds (a minute unless configured).
    pub window_ms: i64,
    /// How long a caller waits for room before it gives up.
    pub max_wait_ms: i64,
}

/// A configured limit as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRow {
    /// Its scope's name.
    pub scope: String,
    /// What it allows.
    pub settings: LimitSettings,
    /// Permits held now by executions whose owners hold their leases.
    pub in_use: i64,
    /// When it was last set.
    pub updated_at: Millis,
}

/// Who takes a permit: one call slot of an execution, for one owner (generation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The organization whose limits apply.
    pub organization: Uuid,
    /// The execution.
    pub execution: ExecutionId,
    /// Its owner's generation.
    pub generation: i64,
    /// Which of its calls (`model` for a Turn's model requests); one permit per slot and scope.
    pub slot: String,
}

/// The answer to one attempt to take room in every named limit at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// Room was taken in every limit of these scopes (the named scopes that have a limit).
    Granted {
        /// The scopes whose limits apply.
        scopes: Vec<String>,
    },
    /// A limit has no room now; nothing was taken.
    Busy {
        /// The first full limit.
        scope: String,
        /// When a bucket will have room again, if a bucket is what is full (a permit frees
        /// when its holder releases it, at a time nobody knows).
        retry_in_ms: Option<i64>,
        /// The shortest wait any of the limits read allows (`i64::MAX` when another taker held
        /// them all).
        max_wait_ms: i64,
    },
    /// The holder's generation no longer owns its execution with a live lease: it may not
    /// take anything (a newer owner does).
    NotOwner,
}

/// Limits per organization and scope, shared by every node.
#[async_trait]
pub trait LimitStore: Send + Sync + 'static {
    /// Sets the limit of `scope`, replacing an earlier one; its buckets start full.
    async fn put_limit(
        &self,
        organization: Uuid,
        scope: &str,
        settings: &LimitSettings,
    ) -> Result<LimitRow, StoreError>;

    /// The organization's limits by scope name, after `after`, at most `count`; with
    /// `bot_scopes` (`bot:<id>` names), of the Bots' scopes only those named (the scopes of
    /// every Bot, such as `organization` and `provider:*`, are always listed).
    async fn limits(
        &self,
        organization: Uuid,
        bot_scopes: Option<&[String]>,
        after: Option<&str>,
        count: i64,
    ) -> Result<Vec<LimitRow>, StoreError>;

    /// Removes a limit and its permits; returns whether it existed.
    async fn delete_limit(&self, organization: Uuid, scope: &str) -> Result<bool, StoreError>;

    /// Which of `scopes` have a limit (a read; nothing is taken).
    async fn limited_scopes(
        &self,
        organization: Uuid,
        scopes: &[String],
    ) -> Result<Vec<String>, StoreError>;

    /// In one transaction: checks that the holder's generation owns its execution with a live
    /// lease, then takes a permit (or keeps the one its slot holds) and a request from every
    /// limit of `scopes`, or nothing when one of them has no room or another taker holds it at
    /// this moment (never waiting for that taker).
    async fn try_take(&self, holder: &Holder, scopes: &[String]) -> Result<Take, StoreError>;

    /// Gives the slot's permits back and takes `used_tokens` from the token buckets of
    /// `scopes`, in one transaction.
    async fn give_back(
        &self,
        holder: &Holder,
        scopes: &[String],
        used_tokens: u64,
    ) -> Result<(), StoreError>;

    /// Gives back every permit an execution holds under `generation` or an older one.
    async fn release_execution(
        &self,
        execution: ExecutionId,
        generation: i64,
    ) -> Result<u64, StoreError>;
}

/// Whether `scope` is a valid scope name: 1 to 200 characters of ASCII letters, digits and
/// `: . _ -` (the schema's rule, [`openbot_schema::ScopeLimit::is_valid_scope`]).
pub fn valid_scope(scope: &str) -> bool {
    openbot_schema::ScopeLimit::is_valid_scope(scope)
}
