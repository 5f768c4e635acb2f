//! The in-memory host: a Turn's call log, steering input and events, in memory.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use async_trait::async_trait;
use chrono::Utc;
use openbot_schema::{
    ContentPart, EventKind, Execution, ExecutionId, ExecutionKind, ExecutionState, ToolCall,
    ToolResult, TurnOutcome, Usage,
};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::sealed::SealedErrors;
use crate::error::Error;
use crate::events::EventLog;
use crate::turn::{
    CallKey, CallRecord, CallResult, CallSlot, CallStatus, Host, HostError, TurnEnd,
};

/// Runs just before the last event is published, so that what it saves (history, the next
/// Turn) is visible to anyone who sees the end.
pub(crate) type Finisher = Box<dyn FnOnce(&TurnEnd) + Send>;

/// The host of one in-memory Turn. It keeps no record after the process stops.
pub struct MemoryHost {
    log: EventLog,
    cancel: CancellationToken,
    started_at: SystemTime,
    errors: SealedErrors,
    state: Mutex<State>,
}

struct State {
    execution: Execution,
    calls: HashMap<(u32, CallSlot), CallRecord>,
    steering: Vec<Vec<ContentPart>>,
    steering_closed: bool,
    /// Tool calls the model asked for that have no result yet.
    open_calls: HashSet<String>,
    /// Host-tool calls waiting for the caller.
    waiting: HashMap<String, oneshot::Sender<ToolResult>>,
    /// Results delivered before the Turn began to wait for them.
    delivered: HashMap<String, ToolResult>,
    /// The usage of the child Turns its delegate calls ran, included in its own.
    children_usage: Usage,
    finisher: Option<Finisher>,
}

impl MemoryHost {
    /// A host for a new Turn execution, optionally of a Chat.
    pub fn new(execution: Execution, errors: SealedErrors) -> Self {
        Self {
            log: EventLog::new(execution.id),
            cancel: CancellationToken::new(),
            started_at: SystemTime::now(),
            errors,
            state: Mutex::new(State {
                execution,
                calls: HashMap::new(),
                steering: Vec::new(),
                steering_closed: false,
                open_calls: HashSet::new(),
                waiting: HashMap::new(),
                delivered: HashMap::new(),
                children_usage: Usage::default(),
                finisher: None,
            }),
        }
    }

    /// A new queued Turn execution record.
    pub fn new_execution(chat_id: Option<openbot_schema::ChatId>) -> Execution {
        let now = Utc::now();
        Execution {
            id: ExecutionId::new(),
            kind: ExecutionKind::Turn,
            state: ExecutionState::Queued,
            chat_id,
            outcome: None,
            usage: Usage::default(),
            usage_known: true,
            last_sequence: 0,
            created_at: now,
            updated_at: now,
            reason: None,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_finisher(&self, finisher: Finisher) {
        self.state().finisher = Some(finisher);
    }

    /// The execution's event log.
    pub fn log(&self) -> &EventLog {
        &self.log
    }

    /// The execution's current public view.
    pub fn execution(&self) -> Execution {
        let mut execution = self.state().execution.clone();
        execution.last_sequence = self.log.last_sequence();
        execution
    }

    /// Marks the Turn started and publishes its first event.
    pub fn start(&self, input: Vec<ContentPart>) {
        self.set_state(ExecutionState::Running);
        self.log.append(EventKind::TurnStarted { input });
    }

    fn set_state(&self, state: ExecutionState) {
        let mut guard = self.state();
        if !guard.execution.state.is_terminal() {
            guard.execution.state = state;
            guard.execution.updated_at = Utc::now();
        }
    }

    /// Asks the Turn to stop. It ends with the outcome `cancelled` once its calls stopped.
    pub fn cancel(&self) {
        let mut guard = self.state();
        if !guard.execution.state.is_terminal() {
            guard.execution.state = ExecutionState::Cancelling;
            guard.execution.updated_at = Utc::now();
        }
        drop(guard);
        self.cancel.cancel();
    }

    /// Ends a Turn that never started (queued input of a deleted or stopped Chat).
    pub fn cancel_unstarted(&self) {
        self.cancel.cancel();
        self.finish_now(TurnEnd {
            outcome: Ok(TurnOutcome::Cancelled),
            messages: Vec::new(),
            usage: Usage::default(),
        });
    }

    /// Adds input to the running Turn. Gives the input back when the Turn no longer takes
    /// input (it is ending), so the caller can queue it for a Turn of its own.
    pub fn steer(&self, input: Vec<ContentPart>) -> Result<(), Vec<ContentPart>> {
        let mut guard = self.state();
        if guard.steering_closed || guard.execution.state.is_terminal() {
            return Err(input);
        }
        guard.steering.push(input);
        Ok(())
    }

    /// Adds the usage of a child Turn (a delegate call's) to this execution's, as a server
    /// does: the execution and its `turn_ended` event count its children.
    pub(crate) fn add_child_usage(&self, usage: Usage) {
        let mut guard = self.state();
        guard.children_usage += usage;
        guard.execution.usage += usage;
    }

    /// Delivers the result of a host-tool call.
    pub fn deliver(&self, result: ToolResult) -> Result<(), Error> {
        let mut guard = self.state();
        if !guard.open_calls.remove(&result.call_id) {
            return Err(Error::conflict(format!(
                "execution {} has no open tool call `{}`",
                guard.execution.id, result.call_id
            )));
        }
        match guard.waiting.remove(&result.call_id) {
            Some(waiter) => {
                // The Turn may have stopped waiting (cancelled); then the result is not needed.
                let _ = waiter.send(result);
            }
            None => {
                guard.delivered.insert(result.call_id.clone(), result);
            }
        }
        Ok(())
    }

    fn finish_now(&self, end: TurnEnd) {
        let mut usage = end.usage;
        let finisher = {
            let mut guard = self.state();
            if guard.execution.state.is_terminal() {
                return;
            }
            guard.steering_closed = true;
            guard.waiting.clear();
            usage += guard.children_usage;
            guard.execution.usage = usage;
            guard.execution.updated_at = Utc::now();
            match &end.outcome {
                Ok(outcome) => {
                    guard.execution.outcome = Some(*outcome);
                    guard.execution.state = match outcome {
                        TurnOutcome::Cancelled => ExecutionState::Cancelled,
                        _ => ExecutionState::Completed,
                    };
                }
                Err(_) => guard.execution.state = ExecutionState::Failed,
            }
            guard.finisher.take()
        };
        if let Some(finisher) = finisher {
            finisher(&end);
        }
        let last = match end.outcome {
            Ok(outcome) => EventKind::TurnEnded { outcome, usage },
            Err(failure) => {
                let error_id = self.errors.seal(failure.cause);
                tracing::warn!(execution = %self.log.execution_id(), category = ?failure.category, %error_id, "turn failed");
                EventKind::Failed {
                    category: failure.category,
                    error_id,
                }
            }
        };
        self.log.append(last);
    }
}

#[async_trait]
impl Host for MemoryHost {
    fn execution_id(&self) -> ExecutionId {
        self.log.execution_id()
    }

    fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }

    fn started_at(&self) -> SystemTime {
        self.started_at
    }

    async fn saved_call(&self, step: u32, slot: CallSlot) -> Result<Option<CallRecord>, HostError> {
        Ok(self.state().calls.get(&(step, slot)).cloned())
    }

    async fn record_intent(&self, key: CallKey) -> Result<(), HostError> {
        self.state().calls.insert(
            (key.step, key.slot),
            CallRecord {
                key,
                status: CallStatus::Intent,
            },
        );
        Ok(())
    }

    async fn record_sending(&self, key: CallKey, events: Vec<EventKind>) -> Result<(), HostError> {
        self.state().calls.insert(
            (key.step, key.slot),
            CallRecord {
                key,
                status: CallStatus::Sending,
            },
        );
        for event in events {
            self.log.append(event);
        }
        Ok(())
    }

    async fn record_result(
        &self,
        key: CallKey,
        result: CallResult,
        events: Vec<EventKind>,
    ) -> Result<(), HostError> {
        {
            let mut guard = self.state();
            match &result {
                CallResult::Model {
                    message: openbot_schema::Message::Assistant { tool_calls, .. },
                    usage,
                } => {
                    guard
                        .open_calls
                        .extend(tool_calls.iter().map(|c| c.id.clone()));
                    match usage {
                        Some(usage) => guard.execution.usage += *usage,
                        // Unknown, which is not zero: the view says so.
                        None => guard.execution.usage_known = false,
                    }
                }
                CallResult::Tool { result } => {
                    guard.open_calls.remove(&result.call_id);
                }
                CallResult::Model { .. } => {}
            }
            guard.calls.insert(
                (key.step, key.slot),
                CallRecord {
                    key,
                    status: CallStatus::Done { result },
                },
            );
        }
        for event in events {
            self.log.append(event);
        }
        Ok(())
    }

    async fn publish(&self, event: EventKind) -> Result<(), HostError> {
        self.log.append(event);
        Ok(())
    }

    async fn take_steering(
        &self,
        _step: u32,
        last: bool,
    ) -> Result<Vec<Vec<ContentPart>>, HostError> {
        let taken = {
            let mut guard = self.state();
            let taken = std::mem::take(&mut guard.steering);
            if last && taken.is_empty() {
                guard.steering_closed = true;
            }
            taken
        };
        for input in &taken {
            self.log.append(EventKind::InputSteered {
                input: input.clone(),
            });
        }
        Ok(taken)
    }

    async fn wait_for_delivery(
        &self,
        _key: CallKey,
        call: &ToolCall,
    ) -> Result<ToolResult, HostError> {
        let receiver = {
            let mut guard = self.state();
            if let Some(result) = guard.delivered.remove(&call.id) {
                return Ok(result);
            }
            let (sender, receiver) = oneshot::channel();
            guard.waiting.insert(call.id.clone(), sender);
            guard.execution.state = ExecutionState::Waiting;
            receiver
        };
        let result = receiver.await.map_err(|_| HostError::Abandoned);
        let mut guard = self.state();
        if guard.waiting.is_empty() && guard.execution.state == ExecutionState::Waiting {
            guard.execution.state = ExecutionState::Running;
        }
        result
    }

    async fn finish(&self, end: TurnEnd) -> Result<(), HostError> {
        self.finish_now(end);
        Ok(())
    }
}
