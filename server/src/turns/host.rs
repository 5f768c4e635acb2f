//! The durable host: the Turn loop's call log, input and events in the database, every write
//! checked against this owner's generation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use openbot_core::turn::{
    CallKey, CallRecord, CallResult, CallSlot, CallStatus, Host, HostError, TurnEnd,
};
use openbot_schema::{
    BotId, ChatId, ContentPart, ErrorId, EventKind, ExecutionId, ExecutionState, Message, ToolCall,
    ToolResult, TurnOutcome,
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::delivery::DeliveredResult;
use super::faults::{FaultPoint, fault};
use super::input::SourceLink;
use crate::budgets::BudgetStore;
use crate::engine::{EngineContext, RunScope, Wake};
use crate::identity::{ExecutionIdentity, IdentityCheckError, IdentityStore};
use crate::store::{CallPhase, CallRow, CallWrite, Commit, NoticeWrite, StateChange, StoreError};
use crate::work::{Admission, Admitted, notice_content};

/// A Turn's saved identity and where its current rights are read.
pub(crate) struct AccessGuard {
    pub(crate) identity: ExecutionIdentity,
    pub(crate) store: Arc<dyn IdentityStore>,
    /// The budgets the Turn spends: those of the Chat its tree works for and that Chat's Bot.
    pub(crate) budgets: Option<(Arc<dyn BudgetStore>, ChatId, BotId)>,
}

/// How long a waiting host tool re-reads its call without a wake-up.
const DELIVERY_POLL: Duration = Duration::from_secs(2);

/// How long a known result is held while its save is retried (the spec's F03: the provider is
/// not called again). When it is spent the phase fails on storage: an unsafe write then waits
/// in `outcome_unknown` for a person's decision.
pub const RESULT_SAVE_BUDGET: Duration = Duration::from_secs(120);

/// The host of one Turn execution for one owner (generation).
pub struct DurableHost {
    cx: Arc<EngineContext>,
    id: ExecutionId,
    generation: i64,
    started_at: SystemTime,
    scope: RunScope,
    signals: Arc<tokio::sync::Notify>,
    /// Tool names whose endpoints deduplicate by idempotency key.
    retry_safe: HashMap<String, bool>,
    text: mpsc::UnboundedSender<TextMessage>,
    text_state: Arc<TextState>,
    /// This owner's copy of the call log: read once per phase, then kept current by its own
    /// writes (no one else writes this execution's calls while it owns it).
    calls: Mutex<Option<HashMap<(u32, CallSlot), CallRow>>>,
    /// The saved identity whose current rights bound every outside send, if the Turn has one.
    access: Option<AccessGuard>,
    /// The signals that delivered each waiting call's result; handled when the result is saved.
    delivered: Mutex<HashMap<CallKey, Vec<i64>>>,
    /// The last storage error, kept typed for the engine's retry rule.
    failure: Arc<Mutex<Option<StoreError>>>,
    /// Decides new tool calls (rules, background and delegate tools), if the Turn has any.
    admission: Option<Admission>,
    /// Child work admitted for a call, committed with the call's result.
    admitted: Mutex<HashMap<CallKey, Admitted>>,
    /// For a delegated Turn: where its answer goes when it ends, and its parent to wake.
    source: Option<(SourceLink, ExecutionId)>,
    /// A call whose tool is known without a model answer (a tool job's one call): step,
    /// index and tool name.
    known_call: Option<(u32, u32, String)>,
}

/// How often a Turn that waits for its attached children re-reads them without a wake-up.
const CHILDREN_POLL: Duration = Duration::from_millis(500);

/// What the host and its flush task share about text not yet committed.
#[derive(Default)]
struct TextState {
    /// Deltas sent to the flush task and not yet committed (or given up).
    unflushed: AtomicUsize,
    /// Why flushing stopped, once it did.
    broken: Mutex<Option<HostError>>,
}

enum TextMessage {
    Delta {
        step: u32,
        attempt: u32,
        text: String,
    },
    Barrier(oneshot::Sender<Result<(), HostError>>),
}

impl DurableHost {
    /// A host for `generation`'s run of execution `id`.
    pub fn new(
        cx: Arc<EngineContext>,
        id: ExecutionId,
        generation: i64,
        started_at: SystemTime,
        scope: RunScope,
        signals: Arc<tokio::sync::Notify>,
        retry_safe: HashMap<String, bool>,
    ) -> Self {
        let failure = Arc::new(Mutex::new(None));
        let (text, receiver) = mpsc::unbounded_channel();
        let text_state = Arc::new(TextState::default());
        tokio::spawn(flush_text(
            Arc::clone(&cx),
            id,
            generation,
            receiver,
            Arc::clone(&failure),
            Arc::clone(&text_state),
        ));
        Self {
            cx,
            id,
            generation,
            started_at,
            scope,
            signals,
            retry_safe,
            text,
            text_state,
            calls: Mutex::new(None),
            delivered: Mutex::new(HashMap::new()),
            access: None,
            failure,
            admission: None,
            admitted: Mutex::new(HashMap::new()),
            source: None,
            known_call: None,
        }
    }

    /// Names the tool of call `index` of `step` when no model answer holds it (a tool job),
    /// so a lost answer of a retry-safe tool is sent again after a takeover.
    pub(crate) fn with_known_call(mut self, step: u32, index: u32, tool: &str) -> Self {
        self.known_call = Some((step, index, tool.to_string()));
        self
    }

    /// Decides each new tool call with `admission` first.
    pub(crate) fn with_admission(mut self, admission: Option<Admission>) -> Self {
        self.admission = admission;
        self
    }

    /// Sends the Turn's answer to its source when it ends (a delegated Turn).
    pub(crate) fn with_source(
        mut self,
        source: Option<SourceLink>,
        parent: Option<ExecutionId>,
    ) -> Self {
        self.source = source.zip(parent);
        self
    }

    /// Waits while the Turn has attached children (delegated Turns) that have not ended: their
    /// notices come in as input. Returns at once when it has none.
    async fn wait_for_children(&self) -> Result<(), HostError> {
        let open = |this: &Self| {
            let store = Arc::clone(&this.cx.store);
            let id = this.id;
            async move { store.open_children(id, true).await }
        };
        if open(self).await.map_err(|e| self.fail(e))?.is_empty() {
            return Ok(());
        }
        self.commit(Commit {
            state: Some(StateChange {
                state: ExecutionState::Waiting,
                ..waiting_free()
            }),
            ..Commit::default()
        })
        .await?;
        let cancelled = self.scope.cancellation();
        loop {
            let notified = self.signals.notified();
            if !self.scope.gate_open() {
                return Err(HostError::Closed);
            }
            if open(self).await.map_err(|e| self.fail(e))?.is_empty() {
                break;
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(CHILDREN_POLL) => {}
                _ = cancelled.cancelled() => return Err(HostError::Abandoned),
            }
        }
        self.commit(Commit {
            state: Some(waiting_free()),
            ..Commit::default()
        })
        .await
    }

    /// The notice a delegated Turn sends its source when it ends.
    fn source_notice(&self, end: &TurnEnd) -> Option<NoticeWrite> {
        let (source, _) = self.source.as_ref()?;
        let text = match &end.outcome {
            Ok(outcome) => format!(
                "[notice] {} ended ({}). Its answer:\n{}",
                source.label,
                crate::store::outcome_name(*outcome),
                crate::work::final_answer(&end.messages)
            ),
            Err(failure) => format!(
                "[notice] {} failed ({}).",
                source.label,
                crate::store::category_name(failure.category)
            ),
        };
        Some(NoticeWrite {
            target: source.notice.into(),
            content: notice_content(&text),
        })
    }

    /// Checks `access` before each outside send.
    pub(crate) fn with_access(mut self, access: Option<AccessGuard>) -> Self {
        self.access = access;
        self
    }

    /// Fails with [`HostError::Denied`] when the Turn's identity lost the right to go on;
    /// a failed read of the rights fails too, rather than sending on old rights.
    async fn check_access(&self) -> Result<(), HostError> {
        let Some(access) = &self.access else {
            return Ok(());
        };
        match access.identity.check_current(access.store.as_ref()).await {
            Ok(()) => Ok(()),
            Err(IdentityCheckError::Denied(why)) => Err(HostError::Denied(why)),
            Err(IdentityCheckError::Store(err)) => Err(self.fail(err)),
        }
    }

    /// The storage error behind the last [`HostError::Storage`], if any.
    pub fn take_failure(&self) -> Option<StoreError> {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn fail(&self, err: StoreError) -> HostError {
        let host_error = match &err {
            StoreError::Fenced(_) => HostError::Fenced,
            StoreError::Ended(_) => HostError::Closed,
            other => HostError::Storage(other.to_string()),
        };
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(err);
        host_error
    }

    /// Waits until every text delta sent so far is committed.
    async fn barrier(&self) -> Result<(), HostError> {
        // Nothing sent and not yet committed: no round trip to the flush task.
        if self.text_state.unflushed.load(Ordering::SeqCst) == 0 {
            let broken = self
                .text_state
                .broken
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            return broken.map_or(Ok(()), Err);
        }
        let (ack, done) = oneshot::channel();
        self.text
            .send(TextMessage::Barrier(ack))
            .map_err(|_| HostError::Closed)?;
        done.await.map_err(|_| HostError::Closed)?
    }

    /// The latest row of a call slot, as `Store::latest_call` answers it, from this owner's
    /// copy of the call log.
    async fn saved_row(&self, step: u32, slot: CallSlot) -> Result<Option<CallRow>, HostError> {
        let loaded = self
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        if !loaded {
            let rows = self
                .cx
                .store
                .calls(self.id)
                .await
                .map_err(|e| self.fail(e))?;
            let mut map = HashMap::new();
            for row in rows {
                keep_latest(&mut map, row);
            }
            let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
            if calls.is_none() {
                *calls = Some(map);
            }
        }
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(calls
            .as_ref()
            .and_then(|map| map.get(&(step, slot)).cloned()))
    }

    /// Notes a call this owner committed.
    fn remember(&self, call: &CallWrite) {
        if let Some(map) = self
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            let row = CallRow {
                key: call.key,
                phase: call.phase,
                idempotency_key: call.idempotency_key.clone(),
                result_record: call.result.as_ref().map(|blob| blob.id),
                usage: call.usage,
                generation: self.generation,
                late: false,
            };
            keep_latest(map, row);
        }
    }

    async fn commit(&self, commit: Commit) -> Result<(), HostError> {
        let calls = commit.calls.clone();
        self.cx
            .commit(self.id, self.generation, commit)
            .await
            .map_err(|e| self.fail(e))?;
        for call in &calls {
            self.remember(call);
        }
        Ok(())
    }

    /// Commits a step that saves a known result. A passing storage failure does not drop the
    /// result: it is held and its commit retried with the storage backoff (100 ms to 5 s) for
    /// up to [`RESULT_SAVE_BUDGET`]. Before each retry the call log is read, since a commit whose
    /// reply was lost may have landed: a saved result of this owner means it did.
    async fn commit_known_result(&self, key: CallKey, commit: Commit) -> Result<(), StoreError> {
        let deadline = tokio::time::Instant::now() + RESULT_SAVE_BUDGET;
        let mut backoff = crate::engine::Backoff::new();
        loop {
            match self
                .cx
                .commit(self.id, self.generation, commit.clone())
                .await
            {
                Ok(_) => return Ok(()),
                Err(err) if err.is_transient() && tokio::time::Instant::now() < deadline => {}
                Err(err) => return Err(err),
            }
            // The cause stays out of the log: it may carry stored text.
            tracing::warn!(
                execution = %self.id,
                "a known result could not be saved; holding it and trying again"
            );
            tokio::time::sleep(backoff.next_delay()).await;
            if let Ok(Some(row)) = self.cx.store.latest_call(self.id, key.step, key.slot).await
                && row.key == key
                && row.phase == CallPhase::Done
                && row.generation == self.generation
                && !row.late
            {
                return Ok(());
            }
        }
    }

    fn idempotency_key(&self, key: CallKey) -> String {
        key.idempotency_key(self.id)
    }

    async fn open_result(&self, row: &CallRow) -> Result<CallResult, HostError> {
        let record = row.result_record.ok_or_else(|| {
            self.fail(StoreError::Invalid(format!(
                "call {} is done without a result",
                row.key
            )))
        })?;
        self.open_sealed(record).await
    }

    /// Opens a sealed JSON record of this execution; a failure is this host's failure.
    async fn open_sealed<T: serde::de::DeserializeOwned>(
        &self,
        record: uuid::Uuid,
    ) -> Result<T, HostError> {
        self.cx.open_json(record).await.map_err(|e| match e {
            crate::engine::EngineError::Store(err) => self.fail(err),
            other => self.fail(StoreError::Invalid(other.to_string())),
        })
    }

    /// Whether the tool called in `slot` of `step` may be sent again with the same key.
    async fn tool_is_retry_safe(&self, step: u32, index: u32) -> Result<bool, HostError> {
        if let Some((known_step, known_index, name)) = &self.known_call
            && (*known_step, *known_index) == (step, index)
        {
            return Ok(self.retry_safe.get(name).copied().unwrap_or(false));
        }
        let Some(model) = self.saved_row(step, CallSlot::Model).await? else {
            return Ok(false);
        };
        let CallResult::Model {
            message: Message::Assistant { tool_calls, .. },
            ..
        } = self.open_result(&model).await?
        else {
            return Ok(false);
        };
        Ok(tool_calls
            .get(index as usize)
            .and_then(|call| self.retry_safe.get(&call.name))
            .copied()
            .unwrap_or(false))
    }

    /// The first result delivered for `call`, if any. Every delivery for it is noted, to be
    /// handled when the result is saved.
    async fn take_delivery(
        &self,
        key: CallKey,
        call: &ToolCall,
    ) -> Result<Option<ToolResult>, HostError> {
        let signals = self
            .cx
            .store
            .pending_signals(self.id)
            .await
            .map_err(|e| self.fail(e))?;
        let mut numbers = Vec::new();
        let mut record = None;
        for signal in &signals {
            if let Some(delivered) = DeliveredResult::from_signal(signal)
                && delivered.call_id == call.id
            {
                numbers.push(signal.number);
                record.get_or_insert(delivered.record);
            }
        }
        let Some(record) = record else {
            return Ok(None);
        };
        let delivered: ToolResult = self.open_sealed(record).await?;
        self.delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, numbers);
        // The call's own ID and name, whatever the caller sent.
        Ok(Some(ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            ..delivered
        }))
    }

    /// The cancel signals not yet handled; the end of a cancelled Turn handles them.
    async fn pending_cancels(&self) -> Vec<i64> {
        match self.cx.store.pending_signals(self.id).await {
            Ok(signals) => signals
                .into_iter()
                .filter(|s| s.kind == "cancel")
                .map(|s| s.number)
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

#[async_trait]
impl Host for DurableHost {
    fn execution_id(&self) -> ExecutionId {
        self.id
    }

    fn cancellation(&self) -> CancellationToken {
        self.scope.cancellation()
    }

    fn started_at(&self) -> SystemTime {
        self.started_at
    }

    async fn saved_call(&self, step: u32, slot: CallSlot) -> Result<Option<CallRecord>, HostError> {
        let Some(row) = self.saved_row(step, slot).await? else {
            return Ok(None);
        };
        let status = match row.phase {
            CallPhase::Done => CallStatus::Done {
                result: self.open_result(&row).await?,
            },
            CallPhase::Intent => CallStatus::Intent,
            CallPhase::Unknown => CallStatus::Unknown,
            CallPhase::Sending => match slot {
                // A tool whose endpoint deduplicates may be sent again under the same key.
                CallSlot::Tool(index) if self.tool_is_retry_safe(step, index).await? => {
                    CallStatus::Intent
                }
                _ => CallStatus::Sending,
            },
        };
        Ok(Some(CallRecord {
            key: row.key,
            status,
        }))
    }

    async fn budget_exhausted(&self) -> Result<bool, HostError> {
        let Some(AccessGuard {
            identity,
            budgets: Some((budgets, chat, bot)),
            ..
        }) = &self.access
        else {
            return Ok(false);
        };
        match budgets
            .exhausted(identity.organization_id, *bot, *chat)
            .await
        {
            Ok(None) => Ok(false),
            Ok(Some(exhausted)) => {
                tracing::info!(execution = %self.id, scope = exhausted.scope.as_str(), "a budget is used up; the Turn ends");
                Ok(true)
            }
            Err(err) => Err(self.fail(err)),
        }
    }

    async fn admit_tool(
        &self,
        key: CallKey,
        call: &ToolCall,
    ) -> Result<Option<ToolResult>, HostError> {
        let Some(admission) = &self.admission else {
            return Ok(None);
        };
        let Some(admitted) = admission.admit(key, call).await.map_err(|e| self.fail(e))? else {
            return Ok(None);
        };
        let result = admitted.result.clone();
        self.admitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, admitted);
        Ok(Some(result))
    }

    async fn record_intent(&self, key: CallKey) -> Result<(), HostError> {
        // A model request writes nothing outside: its `sending` record (with its start event)
        // is the first one it needs, and a lost answer is simply asked for again. Skipping
        // the intent saves one transaction per model step.
        if key.slot == CallSlot::Model {
            return Ok(());
        }
        self.barrier().await?;
        let call = CallWrite {
            key,
            phase: CallPhase::Intent,
            idempotency_key: self.idempotency_key(key),
            result: None,
            usage: None,
        };
        self.commit(Commit {
            calls: vec![call],
            ..Commit::default()
        })
        .await?;
        if matches!(key.slot, CallSlot::Tool(_)) {
            fault(FaultPoint::AfterToolIntent);
        }
        Ok(())
    }

    async fn record_sending(&self, key: CallKey, events: Vec<EventKind>) -> Result<(), HostError> {
        if !self.scope.gate_open() {
            return Err(HostError::Closed);
        }
        self.check_access().await?;
        self.barrier().await?;
        let call = CallWrite {
            key,
            phase: CallPhase::Sending,
            idempotency_key: self.idempotency_key(key),
            result: None,
            usage: None,
        };
        self.commit(Commit {
            calls: vec![call],
            events,
            ..Commit::default()
        })
        .await?;
        if matches!(key.slot, CallSlot::Tool(_)) {
            fault(FaultPoint::AfterToolSending);
        }
        Ok(())
    }

    async fn record_result(
        &self,
        key: CallKey,
        result: CallResult,
        events: Vec<EventKind>,
    ) -> Result<(), HostError> {
        self.barrier().await?;
        let usage = match &result {
            CallResult::Model { usage, .. } => *usage,
            CallResult::Tool { .. } => None,
        };
        let sealed = self
            .cx
            .seal_json(&result)
            .map_err(|e| self.fail(StoreError::Invalid(e.to_string())))?;
        let call = CallWrite {
            key,
            phase: CallPhase::Done,
            idempotency_key: self.idempotency_key(key),
            result: Some(sealed),
            usage,
        };
        let handled_signals = self
            .delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key)
            .unwrap_or_default();
        let (children, events) = match self
            .admitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key)
        {
            Some(admitted) => {
                let mut all = events;
                all.extend(admitted.events);
                (admitted.children, all)
            }
            None => (Vec::new(), events),
        };
        let commit = Commit {
            calls: vec![call.clone()],
            events,
            usage,
            handled_signals,
            children,
            ..Commit::default()
        };
        match self.commit_known_result(key, commit).await {
            Ok(()) => {
                self.remember(&call);
                if matches!(key.slot, CallSlot::Tool(_)) {
                    fault(FaultPoint::AfterToolResult);
                }
                Ok(())
            }
            Err(StoreError::Fenced(_)) => {
                // A late result: kept in the call log, never published by this old owner.
                if let Err(err) = self
                    .cx
                    .store
                    .save_late_result(self.id, self.generation, call)
                    .await
                {
                    tracing::warn!(execution = %self.id, error = %err, "could not save a late result");
                } else {
                    self.cx.hub.announce(Wake::Work);
                }
                Err(self.fail(StoreError::Fenced(self.id)))
            }
            // The Chat was deleted: its tree starts nothing new, and this Turn stops.
            Err(StoreError::AdmissionClosed) => Err(HostError::Denied(
                "the Chat was deleted: it admits no new work".into(),
            )),
            Err(err) => Err(self.fail(err)),
        }
    }

    async fn publish(&self, event: EventKind) -> Result<(), HostError> {
        if let EventKind::TextDelta {
            step,
            attempt,
            text,
        } = event
        {
            self.text_state.unflushed.fetch_add(1, Ordering::SeqCst);
            return self
                .text
                .send(TextMessage::Delta {
                    step,
                    attempt,
                    text,
                })
                .map_err(|_| HostError::Closed);
        }
        self.barrier().await?;
        self.commit(Commit {
            events: vec![event],
            ..Commit::default()
        })
        .await
    }

    async fn take_steering(
        &self,
        step: u32,
        last: bool,
    ) -> Result<Vec<Vec<ContentPart>>, HostError> {
        self.barrier().await?;
        if last {
            self.wait_for_children().await?;
        }
        let inputs = self
            .cx
            .store
            .take_inputs(self.id, self.generation, step, last)
            .await
            .map_err(|e| self.fail(e))?;
        if !inputs.is_empty() {
            self.cx.hub.announce(Wake::Events(self.id));
        }
        inputs
            .iter()
            .map(|text| {
                serde_json::from_str(text)
                    .map_err(|e| self.fail(StoreError::Invalid(format!("turn input: {e}"))))
            })
            .collect()
    }

    async fn wait_for_delivery(
        &self,
        key: CallKey,
        call: &ToolCall,
    ) -> Result<ToolResult, HostError> {
        let waiting = StateChange {
            state: ExecutionState::Waiting,
            outcome: None,
            failure: None,
            wake_at: None,
            unknown_call: None,
            output: None,
            release: false,
            reason: None,
        };
        self.commit(Commit {
            state: Some(waiting),
            ..Commit::default()
        })
        .await?;
        let cancelled = self.scope.cancellation();
        loop {
            let notified = self.signals.notified();
            if !self.scope.gate_open() {
                // Paused: stop waiting here; a resumed owner waits again.
                return Err(HostError::Closed);
            }
            if let Some(result) = self.take_delivery(key, call).await? {
                let running = StateChange {
                    state: ExecutionState::Running,
                    ..waiting_free()
                };
                self.commit(Commit {
                    state: Some(running),
                    ..Commit::default()
                })
                .await?;
                return Ok(result);
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(DELIVERY_POLL) => {}
                _ = cancelled.cancelled() => return Err(HostError::Abandoned),
            }
            tracing::trace!(execution = %self.id, call = %call.id, "still waiting for a delivered result");
        }
    }

    async fn finish(&self, end: TurnEnd) -> Result<(), HostError> {
        self.barrier().await?;
        let (state, outcome, failure, event) = match &end.outcome {
            Ok(outcome) => {
                let state = if *outcome == TurnOutcome::Cancelled {
                    ExecutionState::Cancelled
                } else {
                    ExecutionState::Completed
                };
                (
                    state,
                    Some(*outcome),
                    None,
                    EventKind::TurnEnded {
                        outcome: *outcome,
                        // The saved total: the Turn's own usage and its children's.
                        usage: self
                            .cx
                            .store
                            .execution(self.id)
                            .await
                            .map_err(|e| self.fail(e))?
                            .usage,
                    },
                )
            }
            Err(failure) => {
                let blob = self
                    .cx
                    .keys
                    .seal(uuid::Uuid::now_v7(), failure.cause.as_bytes())
                    .map_err(|e| self.fail(StoreError::Invalid(e.to_string())))?;
                let error_id = ErrorId::from(blob.id);
                tracing::warn!(execution = %self.id, category = ?failure.category, %error_id, "turn failed");
                (
                    ExecutionState::Failed,
                    None,
                    Some((failure.category, blob)),
                    EventKind::Failed {
                        category: failure.category,
                        error_id,
                    },
                )
            }
        };
        let handled_signals = if state == ExecutionState::Cancelled {
            self.pending_cancels().await
        } else {
            Vec::new()
        };
        let notice = self.source_notice(&end);
        // The Turn's messages, kept for its Chat's history.
        let output = self
            .cx
            .seal_json(&end.messages)
            .map_err(|e| self.fail(StoreError::Invalid(e.to_string())))?;
        let change = StateChange {
            state,
            outcome,
            failure,
            wake_at: None,
            unknown_call: None,
            output: Some(output),
            release: true,
            reason: None,
        };
        self.commit(Commit {
            events: vec![event],
            state: Some(change),
            handled_signals,
            notice,
            ..Commit::default()
        })
        .await?;
        if let Some((_, parent)) = &self.source {
            self.cx.hub.announce(Wake::Signal(*parent));
        }
        Ok(())
    }
}

fn waiting_free() -> StateChange {
    StateChange {
        state: ExecutionState::Running,
        outcome: None,
        failure: None,
        wake_at: None,
        unknown_call: None,
        output: None,
        release: false,
        reason: None,
    }
}

/// Commits text deltas in small batches: whatever arrived while the last batch was being
/// committed goes out as one event per step and attempt. A barrier waits for all before it.
async fn flush_text(
    cx: Arc<EngineContext>,
    id: ExecutionId,
    generation: i64,
    mut receiver: mpsc::UnboundedReceiver<TextMessage>,
    failure: Arc<Mutex<Option<StoreError>>>,
    state: Arc<TextState>,
) {
    let mut broken: Option<HostError> = None;
    while let Some(first) = receiver.recv().await {
        let mut batch = vec![first];
        while let Ok(next) = receiver.try_recv() {
            batch.push(next);
        }
        let mut events: Vec<EventKind> = Vec::new();
        let mut acks = Vec::new();
        let deltas = batch
            .iter()
            .filter(|m| matches!(m, TextMessage::Delta { .. }))
            .count();
        for message in batch {
            match message {
                TextMessage::Delta {
                    step,
                    attempt,
                    text,
                } => match events.last_mut() {
                    Some(EventKind::TextDelta {
                        step: s,
                        attempt: a,
                        text: joined,
                    }) if *s == step && *a == attempt => {
                        joined.push_str(&text);
                    }
                    _ => events.push(EventKind::TextDelta {
                        step,
                        attempt,
                        text,
                    }),
                },
                TextMessage::Barrier(ack) => acks.push(ack),
            }
        }
        if !events.is_empty() && broken.is_none() {
            match cx
                .commit(
                    id,
                    generation,
                    Commit {
                        events,
                        ..Commit::default()
                    },
                )
                .await
            {
                Ok(_) => {}
                Err(err) => {
                    broken = Some(match &err {
                        StoreError::Fenced(_) => HostError::Fenced,
                        StoreError::Ended(_) => HostError::Closed,
                        other => HostError::Storage(other.to_string()),
                    });
                    *failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(err);
                }
            }
        }
        if let Some(err) = &broken {
            *state.broken.lock().unwrap_or_else(PoisonError::into_inner) = Some(err.clone());
        }
        state.unflushed.fetch_sub(deltas, Ordering::SeqCst);
        for ack in acks {
            let _ = ack.send(match &broken {
                Some(err) => Err(err.clone()),
                None => Ok(()),
            });
        }
    }
}

/// Keeps, per call slot, the row `Store::latest_call` would answer: a saved result wins, then the
/// highest attempt.
fn keep_latest(map: &mut HashMap<(u32, CallSlot), CallRow>, row: CallRow) {
    let slot = (row.key.step, row.key.slot);
    let replace = match map.get(&slot) {
        None => true,
        Some(current) => {
            let done = |r: &CallRow| r.phase == CallPhase::Done;
            match (done(current), done(&row)) {
                (false, true) => true,
                (true, false) => false,
                _ => {
                    row.key.attempt >= current.key.attempt
                        && !(done(current) && current.key.attempt == row.key.attempt)
                }
            }
        }
    };
    if replace {
        map.insert(slot, row);
    }
}
