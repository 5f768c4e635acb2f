//! The rows the store reads and writes. Storage rows, not HTTP types.

use openbot_core::turn::{CallKey, CallSlot};
use openbot_schema::{
    BotId, ErrorCategory, Event, EventKind, ExecutionId, ExecutionState, TurnOutcome, Usage,
};
use uuid::Uuid;

use super::StoreError;

/// Milliseconds since the Unix epoch, the store's clock.
pub type Millis = i64;

/// The current time in milliseconds since the Unix epoch.
pub fn now_ms() -> Millis {
    chrono::Utc::now().timestamp_millis()
}

/// A stored time read back. A value no calendar holds is damage, reported as
/// [`StoreError::Invalid`], never shown as 1970.
pub fn stored_time(ms: Millis) -> Result<chrono::DateTime<chrono::Utc>, StoreError> {
    chrono::DateTime::from_timestamp_millis(ms)
        .ok_or_else(|| StoreError::Invalid(format!("stored time {ms} is out of range")))
}

/// A stored time that may be absent, read back as [`stored_time`] reads it.
pub fn stored_time_opt(
    ms: Option<Millis>,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
    ms.map(stored_time).transpose()
}

/// Who a command and its execution belong to. Command keys are unique within a scope; a
/// member's work and a service's work never share one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A member of an organization.
    Member(String),
    /// A service of the platform or of an organization; it has no member.
    Service(String),
}

impl Scope {
    /// The stored form: `member:<id>` or `service:<name>`.
    pub fn to_stored(&self) -> String {
        match self {
            Scope::Member(id) => format!("member:{id}"),
            Scope::Service(name) => format!("service:{name}"),
        }
    }

    /// Reads the stored form.
    pub fn from_stored(text: &str) -> Option<Self> {
        match text.split_once(':')? {
            ("member", id) => Some(Scope::Member(id.to_string())),
            ("service", name) => Some(Scope::Service(name.to_string())),
            _ => None,
        }
    }
}

/// Ciphertext of a sealed record, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedBlob {
    /// The record's ID.
    pub id: Uuid,
    /// The ID of the key that sealed it.
    pub key_id: String,
    /// The 24-byte nonce.
    pub nonce: Vec<u8>,
    /// The ciphertext with its tag.
    pub ciphertext: Vec<u8>,
}

/// A new execution, submitted under an optional command key.
#[derive(Debug, Clone, PartialEq)]
pub struct NewExecution {
    /// Its ID, chosen by the caller.
    pub id: ExecutionId,
    /// The workflow that runs it, e.g. `turn`.
    pub kind: String,
    /// Whose it is.
    pub scope: Scope,
    /// The caller's name for this request.
    pub command_key: Option<String>,
    /// A digest of the request's input; the same key with another digest is a conflict.
    pub input_digest: Vec<u8>,
    /// The sealed input.
    pub input: SealedBlob,
    /// The execution that started this one.
    pub parent_id: Option<ExecutionId>,
    /// The Chat of a Turn. A Chat's Turns run one at a time, in the order they were submitted.
    pub chat_id: Option<Uuid>,
    /// An admission gate that must be open: a Chat's, closed by its deletion in the same
    /// transaction that checks it on submit.
    pub admission_gate: Option<Uuid>,
    /// Events published with the submission (e.g. `turn_started`).
    pub events: Vec<EventKind>,
}

impl NewExecution {
    /// New work of `kind` in `scope`, with `input` sealed by `keys` (its digest is that of its
    /// JSON): no command key, parent, Chat, gate or first events.
    pub fn sealed<T: serde::Serialize>(
        keys: &crate::sealed::KeyRing,
        kind: &str,
        scope: Scope,
        input: &T,
    ) -> Result<Self, StoreError> {
        use sha2::Digest as _;
        let json = serde_json::to_vec(input).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let sealed = keys
            .seal(Uuid::now_v7(), &json)
            .map_err(|e| StoreError::Invalid(format!("the input could not be sealed: {e}")))?;
        Ok(Self {
            id: ExecutionId::new(),
            kind: kind.to_string(),
            scope,
            command_key: None,
            input_digest: sha2::Sha256::digest(&json).to_vec(),
            input: sealed,
            parent_id: None,
            chat_id: None,
            admission_gate: None,
            events: Vec::new(),
        })
    }

    /// Started by `parent` (its tree: cancelled with it, its usage rolled up).
    pub fn child_of(mut self, parent: ExecutionId) -> Self {
        self.parent_id = Some(parent);
        self
    }

    /// Admitted only while `gate` is open (a Chat's: closed by its deletion).
    pub fn behind_gate(mut self, gate: Option<Uuid>) -> Self {
        self.admission_gate = gate;
        self
    }

    /// Published with `events` as its first.
    pub fn with_events(mut self, events: Vec<EventKind>) -> Self {
        self.events = events;
        self
    }
}

/// A command key recorded with a write that starts no execution (input that joins a running
/// Turn), so that a retry finds what the first request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyWrite {
    /// Whose key it is.
    pub scope: Scope,
    /// The caller's name for the request.
    pub key: String,
    /// A digest of the request (its kind, target and input).
    pub input_digest: Vec<u8>,
}

/// A recorded command key: what the request was and the execution that answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandKeyRow {
    /// A digest of the request.
    pub input_digest: Vec<u8>,
    /// The execution the request started or joined.
    pub execution_id: ExecutionId,
}

/// Whose approval requests a reader may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestAccess {
    /// The organization the requests belong to.
    pub organization_id: Uuid,
    /// Only the requests of this member's work, when given (a member who is not an admin).
    pub member: Option<Uuid>,
    /// Only the requests of work for a Chat of one of these Bots, when given (a token limited
    /// to some Bots).
    pub bot_ids: Option<Vec<BotId>>,
}

/// A Bot limit as the JSON array of IDs that the queries read (`None`: no limit).
pub(crate) fn bot_limit_json(bots: Option<&[BotId]>) -> Result<Option<String>, StoreError> {
    bots.map(|ids| serde_json::to_string(ids).map_err(|e| StoreError::Invalid(e.to_string())))
        .transpose()
}

/// What a submission did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// A new execution was stored.
    Created(ExecutionId),
    /// The command key named an earlier submission with the same input: its execution.
    Existing(ExecutionId),
}

impl Submitted {
    /// The execution, new or earlier.
    pub fn execution_id(self) -> ExecutionId {
        match self {
            Submitted::Created(id) | Submitted::Existing(id) => id,
        }
    }
}

/// An execution as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRow {
    /// Its ID.
    pub id: ExecutionId,
    /// Its workflow.
    pub kind: String,
    /// Its state.
    pub state: ExecutionState,
    /// Its current owner's number.
    pub generation: i64,
    /// The node that owns it, if any.
    pub owner_node: Option<String>,
    /// When the owner's lease ends.
    pub lease_expires_at: Option<Millis>,
    /// Whose it is.
    pub scope: Scope,
    /// The execution that started it.
    pub parent_id: Option<ExecutionId>,
    /// The Chat of a Turn.
    pub chat_id: Option<Uuid>,
    /// The sealed input.
    pub input_record: Uuid,
    /// The sealed output, once it ended.
    pub output_record: Option<Uuid>,
    /// How a Turn ended.
    pub outcome: Option<TurnOutcome>,
    /// The public category of a failure.
    pub failure_category: Option<ErrorCategory>,
    /// The sealed error record of a failure.
    pub error_id: Option<Uuid>,
    /// What it used.
    pub usage: Usage,
    /// The sequence of its last event.
    pub last_sequence: i64,
    /// When a waiting execution becomes claimable again.
    pub wake_at: Option<Millis>,
    /// The call whose result is unknown, in state `outcome_unknown`.
    pub unknown_call: Option<CallKey>,
    /// When it was created.
    pub created_at: Millis,
    /// When it last changed.
    pub updated_at: Millis,
    /// Since when it is paused, if it is.
    pub paused_at: Option<Millis>,
    /// How long it was paused before, in all: its time limit does not count that time.
    pub paused_ms: i64,
    /// Why it was interrupted, when it was.
    pub reason: Option<String>,
}

impl ExecutionRow {
    /// When its time limit starts counting: its creation, moved on by the time it spent
    /// paused, so neither a takeover nor a pause gives it more or less time to run.
    pub fn limit_start(&self) -> std::time::SystemTime {
        let at = self.created_at.saturating_add(self.paused_ms).max(0) as u64;
        std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(at)
    }
}

/// An execution a node claimed.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The execution.
    pub id: ExecutionId,
    /// Its workflow.
    pub kind: String,
    /// The claimer's generation: one more than before.
    pub generation: i64,
    /// Its row as the claim wrote it, so the owner starts without reading it again.
    pub execution: ExecutionRow,
    /// Whether it had unhandled signals when claimed: without, the owner's first pass reads
    /// none (a signal that arrives later wakes the phase's watcher).
    pub signals_pending: bool,
    /// Its sealed input when the claimer holds it already (a submission that claimed its own
    /// work), so the owner does not read it again.
    pub input: Option<SealedBlob>,
}

/// What [`crate::store::ExecutionStore::cancel_tree`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CancelledTree {
    /// The number of the root's cancel signal (the one that waited already, if any), with
    /// `with_root`.
    pub root: Option<i64>,
    /// Every execution of the tree that has a cancel signal waiting now, root included:
    /// the ones to wake.
    pub cancelling: Vec<ExecutionId>,
}

/// What one claim took: the executions to run, and those whose row could not be read.
#[derive(Debug, Default)]
pub struct Claimed {
    /// The executions claimed, in claim order.
    pub claims: Vec<Claim>,
    /// Executions claimed whose row is damaged (a value this build cannot read). The claim
    /// owns them at `generation`, so the claimer ends them (`interrupted`, with the cause
    /// sealed) instead of leaving them in every later batch.
    pub damaged: Vec<DamagedClaim>,
}

/// An execution a claim took whose row could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedClaim {
    /// The execution.
    pub id: ExecutionId,
    /// The claimer's generation.
    pub generation: i64,
    /// Its workflow kind, when that much of the row could be read.
    pub kind: Option<String>,
    /// Why its row could not be read (for the sealed error record, never for logs).
    pub cause: String,
}

/// A node's claim written by the submission of new work itself ([`crate::store::ExecutionStore::submit_claiming`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimFor {
    /// The node that runs the work.
    pub node: String,
    /// How long its lease lasts from the submission.
    pub lease_ms: i64,
}

/// Where a call is, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallPhase {
    /// About to be sent.
    Intent,
    /// Maybe sent.
    Sending,
    /// Result saved.
    Done,
    /// Result lost; not repeatable.
    Unknown,
}

impl CallPhase {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            CallPhase::Intent => "intent",
            CallPhase::Sending => "sending",
            CallPhase::Done => "done",
            CallPhase::Unknown => "unknown",
        }
    }

    /// Reads the stored name.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "intent" => CallPhase::Intent,
            "sending" => CallPhase::Sending,
            "done" => CallPhase::Done,
            "unknown" => CallPhase::Unknown,
            _ => return None,
        })
    }
}

/// A write to the call log.
#[derive(Debug, Clone, PartialEq)]
pub struct CallWrite {
    /// The call.
    pub key: CallKey,
    /// Where it is now.
    pub phase: CallPhase,
    /// The key outside services deduplicate by.
    pub idempotency_key: String,
    /// The sealed result, with `Done`.
    pub result: Option<SealedBlob>,
    /// Confirmed usage, with a model result.
    pub usage: Option<Usage>,
}

/// One row of the call log.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRow {
    /// The call.
    pub key: CallKey,
    /// Where it is.
    pub phase: CallPhase,
    /// The provider idempotency key.
    pub idempotency_key: String,
    /// The sealed result record.
    pub result_record: Option<Uuid>,
    /// Confirmed usage.
    pub usage: Option<Usage>,
    /// The generation that wrote it.
    pub generation: i64,
    /// Whether an old owner saved it after it lost the execution.
    pub late: bool,
}

/// A state change committed with a step.
#[derive(Debug, Clone, PartialEq)]
pub struct StateChange {
    /// The new state.
    pub state: ExecutionState,
    /// How a Turn ended.
    pub outcome: Option<TurnOutcome>,
    /// A failure's public category and sealed cause.
    pub failure: Option<(ErrorCategory, SealedBlob)>,
    /// The sealed output of an ended execution (a Turn's messages).
    pub output: Option<SealedBlob>,
    /// When a waiting execution wakes (and gives up its owner until then).
    pub wake_at: Option<Millis>,
    /// The call whose result is unknown.
    pub unknown_call: Option<CallKey>,
    /// Whether the owner gives the execution up (its lease ends now).
    pub release: bool,
    /// Why the execution was interrupted (engine-made text a person can read).
    pub reason: Option<String>,
}

impl StateChange {
    /// The end of work in `state` with no Turn outcome, failure or output: its owner gives
    /// it up.
    pub fn ended(state: ExecutionState) -> Self {
        Self {
            state,
            outcome: None,
            failure: None,
            output: None,
            wake_at: None,
            unknown_call: None,
            release: true,
            reason: None,
        }
    }
}

/// Everything one step of an execution commits, together or not at all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Commit {
    /// Call log writes.
    pub calls: Vec<CallWrite>,
    /// Events to publish, in order.
    pub events: Vec<EventKind>,
    /// A state change.
    pub state: Option<StateChange>,
    /// Usage to add to the execution's total.
    pub usage: Option<Usage>,
    /// Signals this step handled.
    pub handled_signals: Vec<i64>,
    /// Outgoing commands, delivered after commit.
    pub outbox: Vec<(String, String)>,
    /// Child executions this step starts, each with its parent set to this execution.
    pub children: Vec<NewChild>,
    /// A notice this step sends (an ending child reports to its source).
    pub notice: Option<NoticeWrite>,
    /// The rows capabilities write in the same transaction (see [`super::TxWrite`]).
    pub writes: super::TxWrites,
    /// Marks the Turn's input as taken up to this step (`ChatQueueStore::take_inputs`): set by a model
    /// request's `sending` commit, so input that arrives after the step looked for it is taken
    /// by a later step, never by this one on replay. Never lowers the mark.
    pub input_step: Option<u32>,
    /// Closes the Turn's input (a Turn's end after its last input check found nothing): later
    /// input gets a Turn of its own. Refused with [`super::StoreError::InputWaiting`], and
    /// nothing written, when input that no step took waits: it arrived after that check.
    pub close_input: bool,
}

impl Commit {
    /// The commit that ends a job (work that is not a Turn) in `state`: its `job_ended`
    /// event and end state, with the signals it handled.
    pub fn job_ended(state: ExecutionState, handled_signals: Vec<i64>) -> Self {
        Self {
            events: vec![EventKind::JobEnded { state }],
            state: Some(StateChange::ended(state)),
            handled_signals,
            ..Self::default()
        }
    }
}

/// How a child execution starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildStart {
    /// Claimable at once.
    Queued,
    /// Waiting, without a wake time, until a decision wakes it.
    Waiting,
}

/// A child execution started by a step of its parent, in the same transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct NewChild {
    /// The child; `parent_id` is set to the committing execution.
    pub execution: NewExecution,
    /// How it starts.
    pub start: ChildStart,
    /// Whether the parent waits for it before it ends.
    pub attached: bool,
    /// A decision it waits for.
    pub request: Option<NewRequest>,
}

/// A decision a child waits for, written with the child.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRequest {
    /// Its ID.
    pub id: Uuid,
    /// What is asked, e.g. `approval`.
    pub kind: String,
    /// The organization it belongs to.
    pub organization_id: Uuid,
    /// The member whose work asked; they (or an admin) decide.
    pub owner_member_id: Uuid,
    /// The Chat the work reports to.
    pub chat_id: Option<Uuid>,
    /// The Bot that asked.
    pub bot_id: Uuid,
    /// What deciders see (JSON).
    pub payload: String,
    /// When it expires unless decided.
    pub expires_at: Millis,
}

/// A stored request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRow {
    /// Its ID.
    pub id: Uuid,
    /// What is asked.
    pub kind: String,
    /// The execution that waits for it.
    pub execution_id: ExecutionId,
    /// The execution whose step asked.
    pub source_execution_id: ExecutionId,
    /// Its organization.
    pub organization_id: Uuid,
    /// The member whose work asked.
    pub owner_member_id: Uuid,
    /// The Chat the work reports to.
    pub chat_id: Option<Uuid>,
    /// The Bot that asked.
    pub bot_id: Uuid,
    /// What deciders see (JSON).
    pub payload: String,
    /// `pending`, or how it was closed.
    pub state: String,
    /// When it was asked.
    pub created_at: Millis,
    /// When it expires unless decided.
    pub expires_at: Millis,
    /// When it was decided.
    pub decided_at: Option<Millis>,
    /// Who decided.
    pub decided_by: Option<Uuid>,
    /// The reason given.
    pub reason: Option<String>,
}

/// A decision to write on a pending request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestDecision {
    /// The state it closes in, e.g. `approved`.
    pub state: String,
    /// Who decided.
    pub member_id: Uuid,
    /// Why.
    pub reason: Option<String>,
    /// A notice sent with the decision.
    pub notice: Option<NoticeWrite>,
    /// The rows capabilities write with the decision, when it is not an expiry (an approved
    /// plan switches its Chat's plan mode off).
    pub writes: super::TxWrites,
}

/// The signal that ends an execution whose outcome is unknown because a person gave up on it
/// (see [`Resolution::GiveUp`]). Its payload is a [`GiveUpPayload`].
pub const GIVE_UP: &str = "give_up";

/// What a give-up signal carries.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GiveUpPayload {
    /// The call given up on, in its stored form.
    pub call: String,
    /// The person's reason.
    pub reason: String,
}

/// How a person's decision resolves the call an execution in `outcome_unknown` waits for.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// The call was applied: this sealed result becomes its saved result, and `events` (its
    /// `tool_result`) are published with it. The call is never sent again.
    Applied {
        /// The call's result.
        result: SealedBlob,
        /// Events published in the same transaction.
        events: Vec<EventKind>,
    },
    /// The call was not applied: its next attempt is saved as intent, so the work sends it
    /// again under that attempt's own idempotency key.
    NotApplied,
    /// A person gave up: a [`GIVE_UP`] signal with this payload (JSON) ends the execution
    /// `failed` when the engine takes it; nothing more is sent.
    GiveUp {
        /// The signal's payload.
        payload: String,
    },
}

impl Resolution {
    /// The decision's stored name.
    pub fn name(&self) -> &'static str {
        match self {
            Resolution::Applied { .. } => "applied",
            Resolution::NotApplied => "not_applied",
            Resolution::GiveUp { .. } => "give_up",
        }
    }
}

/// A decision to write on an execution in `outcome_unknown`, with its audit entry.
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownDecision {
    /// The audit entry's ID.
    pub id: Uuid,
    /// The call decided; it must be the one the execution waits for.
    pub key: CallKey,
    /// What happens now.
    pub resolution: Resolution,
    /// Who decided.
    pub member_id: Uuid,
    /// The token they decided with, if any.
    pub token_id: Option<Uuid>,
    /// The browser session they decided with, if any.
    pub session_id: Option<Uuid>,
    /// Why.
    pub reason: Option<String>,
}

/// A stored decision on an unknown outcome: its audit entry.
#[derive(Debug, Clone, PartialEq)]
pub struct OutcomeDecisionRow {
    /// Its ID.
    pub id: Uuid,
    /// The execution that waited.
    pub execution_id: ExecutionId,
    /// The call decided.
    pub key: CallKey,
    /// `applied`, `not_applied` or `give_up`.
    pub decision: String,
    /// Who decided.
    pub member_id: Uuid,
    /// The token they decided with, if any.
    pub token_id: Option<Uuid>,
    /// The browser session they decided with, if any.
    pub session_id: Option<Uuid>,
    /// Why.
    pub reason: Option<String>,
    /// The sealed result an `applied` decision saved.
    pub result_record: Option<Uuid>,
    /// When.
    pub decided_at: Millis,
}

/// Where a notice goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeTarget {
    /// A Chat: its Turn that still takes input gets it as input; with none, it adds history
    /// and starts no Turn.
    Chat(Uuid),
    /// An execution (a delegated Turn's parent with no Chat): it gets it as input while it
    /// takes input; closed work drops it.
    Execution(ExecutionId),
}

/// A notice: input for the work that started a child, e.g. a background tool's result.
#[derive(Debug, Clone, PartialEq)]
pub struct NoticeWrite {
    /// Where it goes.
    pub target: NoticeTarget,
    /// The content parts, as JSON (the form of Turn input).
    pub content: String,
}

/// Events after a cursor and the execution's end, read together (`EventStore::events_to_end`).
#[derive(Debug, Clone, PartialEq)]
pub struct TailPage {
    /// The events, in order.
    pub events: Vec<Event>,
    /// The execution's last sequence when it had ended at the read, else `None`.
    pub ended_at: Option<i64>,
}

/// One of a Chat's executions as its history reads it (`ChatQueueStore::chat_outputs`).
#[derive(Debug, Clone, PartialEq)]
pub struct ChatOutput {
    /// The execution.
    pub id: ExecutionId,
    /// When it last changed (its messages' time in the history).
    pub updated_at: Millis,
    /// Its output record's ID, when it saved one.
    pub output_record: Option<Uuid>,
    /// That record, read with it; `None` with an ID when the record is missing.
    pub output: Option<SealedBlob>,
}

/// A notice kept as Chat history.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatNoticeRow {
    /// The Chat execution it comes after, if any.
    pub after_execution: Option<ExecutionId>,
    /// The child that sent it.
    pub source_id: ExecutionId,
    /// The content parts, as JSON.
    pub content: String,
    /// When it arrived.
    pub created_at: Millis,
}

/// A stored signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignalRow {
    /// Its number within the execution.
    pub number: i64,
    /// What it asks, e.g. `cancel`.
    pub kind: String,
    /// Its JSON payload.
    pub payload: String,
}

/// A call key's stored form: `<step>/<slot>/<attempt>`.
pub fn call_key_name(key: &openbot_core::turn::CallKey) -> String {
    format!("{}/{}/{}", key.step, slot_name(key.slot), key.attempt)
}

/// Reads a call key's stored form.
pub fn parse_call_key(text: &str) -> Option<openbot_core::turn::CallKey> {
    let mut parts = text.split('/');
    let step = parts.next()?.parse().ok()?;
    let slot = parse_slot(parts.next()?)?;
    let attempt = parts.next()?.parse().ok()?;
    Some(openbot_core::turn::CallKey {
        step,
        slot,
        attempt,
    })
}

/// A slot's stored name: `model`, `tool:<index>`, or `code:<tool>:<call>` for a call made by
/// a Code Mode program.
pub fn slot_name(slot: CallSlot) -> String {
    match slot {
        CallSlot::Model => "model".into(),
        CallSlot::Tool(index) => format!("tool:{index}"),
        CallSlot::Code { tool, call } => format!("code:{tool}:{call}"),
    }
}

/// Reads a slot's stored name.
pub fn parse_slot(text: &str) -> Option<CallSlot> {
    match text {
        "model" => Some(CallSlot::Model),
        other if other.starts_with("code:") => {
            let (tool, call) = other.strip_prefix("code:")?.split_once(':')?;
            Some(CallSlot::Code {
                tool: tool.parse().ok()?,
                call: call.parse().ok()?,
            })
        }
        other => other
            .strip_prefix("tool:")?
            .parse()
            .ok()
            .map(CallSlot::Tool),
    }
}

/// An execution state's stored name back to the state.
pub fn parse_state(text: &str) -> Option<ExecutionState> {
    serde_json::from_value(serde_json::Value::String(text.to_string())).ok()
}

/// A Turn outcome's stored name.
pub fn outcome_name(outcome: TurnOutcome) -> String {
    serde_json::to_value(outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A stored Turn outcome back to the outcome.
pub fn parse_outcome(text: &str) -> Option<TurnOutcome> {
    serde_json::from_value(serde_json::Value::String(text.to_string())).ok()
}

/// An error category's stored name.
pub fn category_name(category: ErrorCategory) -> String {
    serde_json::to_value(category)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A stored error category back to the category.
pub fn parse_category(text: &str) -> Option<ErrorCategory> {
    serde_json::from_value(serde_json::Value::String(text.to_string())).ok()
}

/// The `type` of an event, as stored in its own column.
pub fn event_type(kind: &EventKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
        .unwrap_or_default()
}

/// Where an outbox message is, for people who look after a deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxStatus {
    /// Its number.
    pub id: i64,
    /// What it asks.
    pub kind: String,
    /// Whether it was delivered.
    pub delivered: bool,
    /// Failed deliveries so far.
    pub attempts: i32,
    /// Why the last delivery failed.
    pub last_error: Option<String>,
}

/// An outgoing command, committed with the step that produced it and delivered after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    /// Its number; messages are delivered in this order.
    pub id: i64,
    /// The execution whose step produced it.
    pub execution_id: ExecutionId,
    /// What it asks, e.g. `signal`.
    pub kind: String,
    /// Its JSON payload.
    pub payload: String,
    /// Failed deliveries so far.
    pub attempts: i32,
}
