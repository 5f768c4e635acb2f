//! The durable host: the Turn loop's call log, input and events in the database, every write
//! checked against this owner's generation. Each concern has its own part:
//!
//! - `call_log`: this owner's copy of the call log and the saved results read through it;
//! - `guards`: the chain of checks before an outside send (the phase's gate, current rights),
//!   and the budget check before a model request;
//! - `held`: the one commit path: writes held for the next commit (a step's last result, a
//!   final answer), the text not yet committed, fault labels, and lost replies;
//! - `permits`: shared permits and rate limits taken before each model request;
//! - `text`: text deltas committed in batches, or taken by the next commit;
//! - `results`: a result saved with the child work admitted for its call, an answer with its
//!   calls' intents, held while its save retries, kept as a late result after a takeover;
//! - `delivery`: host tools, whose results a caller delivers;
//! - `children`: waiting for attached children, and a delegated Turn's notice to its source;
//! - `end`: the Turn's end, saved in one commit;
//! - `billing`: a model request's reservation, its settlement and the release of a hold.

mod billing;
mod call_log;
mod children;
mod delivery;
mod end;
mod guards;
mod held;
mod permits;
mod results;
mod text;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use async_trait::async_trait;
use openbot_core::turn::{
    CallKey, CallRecord, CallResult, CallSlot, CallStatus, Host, HostError, TurnEnd,
};
use openbot_schema::{BotId, ChatId, ContentPart, EventKind, ExecutionId, ToolCall, ToolResult};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::faults::{FaultPoint, fault, labels};
use super::input::SourceLink;
use crate::budgets::BudgetStore;
use crate::engine::{EngineContext, RunScope, Wake};
use crate::store::{CallPhase, Commit, StoreError};
use crate::work::{Admission, Admitted};
pub(crate) use billing::BillingContext;
pub(crate) use guards::AccessGuard;
use guards::{CurrentRights, OpenGate, SendGuard};
use held::Held;
pub(crate) use permits::ModelPermits;
use permits::{PermitCheck, model_tokens};

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
    /// Text deltas on their way to a commit (see `text`).
    text: text::TextBatches,
    /// This owner's copy of the call log and what it learned of its calls (see `call_log`).
    log: call_log::CallLog,
    /// The checks before each outside send, in order (see `guards`).
    guards: Vec<Box<dyn SendGuard>>,
    /// The budgets the Turn spends: the store, its tree's Chat, that Chat's Bot, the
    /// organization.
    budgets: Option<(Arc<dyn BudgetStore>, ChatId, BotId, Uuid)>,
    /// The shared permits its model requests take, if limits apply to it (see `permits`).
    permits: Option<Arc<ModelPermits>>,
    /// The last storage error, kept typed for the engine's retry rule.
    failure: Arc<Mutex<Option<StoreError>>>,
    /// Decides new tool calls and keeps what it admitted until the call's result commits.
    admissions: Admissions,
    /// What the Turn's end does (see `end`).
    ending: end::Ending,
    /// A call whose tool is known without a model answer (a tool job's one call): step,
    /// index and tool name.
    known_call: Option<(u32, u32, String)>,
    /// Billing of the Turn's model calls (see `billing`).
    billing: billing::Billing,
    /// Writes held for the next commit (see `held`).
    held: Mutex<Held>,
    /// The phase start's answer to whether input waits for step 1, read beside its other
    /// start reads; the Turn's first input check uses it once instead of reading again.
    first_inputs_waiting: Mutex<Option<bool>>,
}

/// The host's part for admission: what decides each new tool call (rules, background and
/// delegate tools), if the Turn has any, and the child work admitted for a call, committed
/// with the call's result.
#[derive(Default)]
struct Admissions {
    decider: Option<Admission>,
    admitted: Mutex<HashMap<CallKey, Admitted>>,
}

impl DurableHost {
    /// The saved-call primitive this owner writes its call log through: made from the host's
    /// own execution and generation, so the host keeps no second copy of them.
    fn calls(&self) -> crate::engine::SavedCalls {
        crate::engine::SavedCalls::new(Arc::clone(&self.cx), self.id, self.generation)
    }

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
        let text = text::TextBatches::start(&cx, id, generation, &failure);
        Self {
            cx,
            id,
            generation,
            started_at,
            guards: vec![Box::new(OpenGate(scope.clone()))],
            scope,
            signals,
            retry_safe,
            text,
            log: call_log::CallLog::default(),
            budgets: None,
            permits: None,
            failure,
            admissions: Admissions::default(),
            ending: end::Ending::default(),
            known_call: None,
            billing: billing::Billing::default(),
            held: Mutex::new(Held::default()),
            first_inputs_waiting: Mutex::new(None),
        }
    }

    /// Gives the Turn's first input check (step 1) the answer the phase's start read
    /// (`ChatQueueStore::inputs_waiting` for step 1): input that arrives after that read is taken by a
    /// later step, as after any check.
    pub(crate) fn with_first_inputs_waiting(self, waiting: bool) -> Self {
        *self
            .first_inputs_waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(waiting);
        self
    }

    /// Starts `children` in the commit that ends the Turn, when it completes (not when it
    /// fails or is cancelled).
    pub(crate) fn with_end_children(mut self, children: Vec<crate::store::NewChild>) -> Self {
        self.ending.end_children = children;
        self
    }

    /// Names the tool of call `index` of `step` when no model answer holds it (a tool job),
    /// so a lost answer of a retry-safe tool is sent again after a takeover.
    pub(crate) fn with_known_call(mut self, step: u32, index: u32, tool: &str) -> Self {
        self.known_call = Some((step, index, tool.to_string()));
        self
    }

    /// Decides each new tool call with `admission` first.
    pub(crate) fn with_admission(mut self, admission: Option<Admission>) -> Self {
        self.admissions.decider = admission;
        self
    }

    /// Sends the Turn's answer to its source when it ends (a delegated Turn).
    pub(crate) fn with_source(
        mut self,
        source: Option<SourceLink>,
        parent: Option<ExecutionId>,
    ) -> Self {
        self.ending.source = source.zip(parent);
        self
    }

    /// Checks the Turn's saved identity's current rights before each outside send, and its
    /// budgets before each model request.
    pub(crate) fn with_access(mut self, access: Option<AccessGuard>) -> Self {
        if let Some(access) = access {
            self.budgets = access
                .budgets
                .map(|(store, chat, bot)| (store, chat, bot, access.identity.organization_id));
            self.billing.context = access.billing;
            self.guards.push(Box::new(CurrentRights {
                identity: access.identity,
                store: access.store,
            }));
        }
        self
    }

    /// Takes room in shared limits before each model request: right after the phase's gate,
    /// so the checks after it (current rights) read their facts after the wait, just before
    /// the send.
    pub(crate) fn with_permits(mut self, permits: Option<Arc<ModelPermits>>) -> Self {
        if let Some(permits) = permits {
            let at = self.guards.len().min(1);
            self.guards
                .insert(at, Box::new(PermitCheck(Arc::clone(&permits))));
            self.permits = Some(permits);
        }
        self
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
            StoreError::InputWaiting(_) => HostError::InputArrived,
            other => HostError::Storage(other.to_string()),
        };
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(err);
        host_error
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

    fn tool_retry_safe(&self, name: &str) -> bool {
        self.retry_safe.get(name).copied().unwrap_or(false)
    }

    async fn saved_call(&self, step: u32, slot: CallSlot) -> Result<Option<CallRecord>, HostError> {
        // A result held for the next commit is saved as far as the loop is concerned.
        if let Some((key, result)) = self.held_result(step, slot) {
            return Ok(Some(CallRecord {
                key,
                status: CallStatus::Done { result },
            }));
        }
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
        self.budget_spent().await
    }

    async fn admit_tool(
        &self,
        key: CallKey,
        call: &ToolCall,
    ) -> Result<Option<ToolResult>, HostError> {
        let Some(admission) = &self.admissions.decider else {
            return Ok(None);
        };
        let Some(admitted) = admission.admit(key, call).await.map_err(|e| self.fail(e))? else {
            return Ok(None);
        };
        let result = admitted.result.clone();
        self.admissions
            .admitted
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
        // A tool call's intent was saved with the model answer that asked for it
        // (`record_answer`), a retry-safe tool's call even as `sending`: it is in the call log,
        // and there is nothing more to write.
        let saved = self
            .saved_row(key.step, key.slot)
            .await?
            .is_some_and(|row| {
                row.key == key && matches!(row.phase, CallPhase::Intent | CallPhase::Sending)
            });
        if !saved {
            let call = self.calls().write(key, CallPhase::Intent, None, None);
            self.commit(
                Commit {
                    calls: vec![call],
                    ..Commit::default()
                },
                &[labels::TOOL_INTENT],
                None,
            )
            .await?;
        }
        if matches!(key.slot, CallSlot::Tool(_)) {
            fault(FaultPoint::AfterToolIntent);
        }
        Ok(())
    }

    async fn record_sending(&self, key: CallKey, events: Vec<EventKind>) -> Result<(), HostError> {
        self.send(key, events, crate::store::TxWrites::default())
            .await?;
        if matches!(key.slot, CallSlot::Tool(_)) {
            fault(FaultPoint::AfterToolSending);
        }
        Ok(())
    }

    async fn record_model_sending(
        &self,
        key: CallKey,
        events: Vec<EventKind>,
        estimate: openbot_core::turn::RequestEstimate,
    ) -> Result<(), HostError> {
        self.send_model(key, events, estimate).await
    }

    async fn record_result(
        &self,
        key: CallKey,
        result: CallResult,
        events: Vec<EventKind>,
    ) -> Result<(), HostError> {
        let used = model_tokens(&result);
        let saved = self.save_result(key, result, events, Vec::new()).await;
        self.release_model_permit(key, used).await;
        saved
    }

    async fn record_answer(
        &self,
        key: CallKey,
        result: CallResult,
        events: Vec<EventKind>,
        intents: Vec<CallKey>,
    ) -> Result<(), HostError> {
        let used = model_tokens(&result);
        let saved = self.save_result(key, result, events, intents).await;
        self.release_model_permit(key, used).await;
        saved
    }

    async fn publish(&self, event: EventKind) -> Result<(), HostError> {
        if let EventKind::TextDelta {
            step,
            attempt,
            text,
        } = event
        {
            return self.send_delta(step, attempt, text);
        }
        self.commit(
            Commit {
                events: vec![event],
                ..Commit::default()
            },
            &[labels::STATE],
            None,
        )
        .await
    }

    async fn take_steering(
        &self,
        step: u32,
        last: bool,
    ) -> Result<Vec<Vec<ContentPart>>, HostError> {
        if last {
            self.wait_for_children().await?;
        }
        let read_at_start = match (step, last) {
            (1, false) => self
                .first_inputs_waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
            _ => None,
        };
        if read_at_start == Some(false) {
            self.ending
                .closing
                .store(false, std::sync::atomic::Ordering::SeqCst);
            return Ok(Vec::new());
        }
        // Held results and text go before any input this check takes (its events follow
        // theirs); most checks find nothing waiting and write nothing, so only a read first.
        if self.unsaved() {
            let waiting = self
                .cx
                .store
                .inputs_waiting(self.id, self.generation, step)
                .await
                .map_err(|e| self.fail(e))?;
            if !waiting {
                self.ending
                    .closing
                    .store(last, std::sync::atomic::Ordering::SeqCst);
                return Ok(Vec::new());
            }
            self.flush().await?;
        }
        // The last check writes nothing when no input waits: the Turn's end closes the input in
        // its own commit, which is refused if input arrived meanwhile (`Commit::close_input`).
        let inputs = self
            .cx
            .store
            .take_inputs(self.id, self.generation, step, false)
            .await
            .map_err(|e| self.fail(e))?;
        self.ending.closing.store(
            last && inputs.is_empty(),
            std::sync::atomic::Ordering::SeqCst,
        );
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
        self.wait_delivered(key, call).await
    }

    async fn finish(&self, end: TurnEnd) -> Result<(), HostError> {
        self.finish_turn(end).await
    }
}
