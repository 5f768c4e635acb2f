//! Learning as durable work: after a Turn of a Bot with memory completes, its end commit
//! starts a `memory_learning` execution (a detached child, so it never holds up the Chat). The
//! workflow reads the Chat's history after the Chat's learning cursor, asks a helper model
//! (the organization's helper model or the Bot's, through the model registry) what to add,
//! change or retire, and commits the checked plan in the commit that ends the execution.
//!
//! - The helper call is a model call of this execution's call log, sent by the durable host
//!   with its guards: the shared permits of its scopes, the saved identity's current rights,
//!   and billing (a reservation in its `sending` commit, settled with its answer). A retry or
//!   a new owner replays the saved answer and never asks again.
//! - No lock is held while the model runs. The plan is applied by [`super::sql::MemoryWrite`]
//!   in the ending commit: it takes the Bot's memory lock alone, moves the Chat's cursor by
//!   compare-and-set from where this run read it (learning that got further wins; then
//!   nothing of this plan is applied), and writes memories whose IDs come from this execution
//!   and their place in the plan, so a plan is applied once however often the commit is tried.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::memories::{
    LEARNING_INSTRUCTIONS, PlanRights, RefusedOperation, learning_input, parse_plan,
};
use openbot_core::turn::{
    CallKey, CallRecord, CallResult, CallSlot, Host, HostError, RequestEstimate, ToolSet, TurnEnd,
    TurnSpec, run_turn,
};
use openbot_schema::{
    ContentPart, ErrorCategory, EventKind, ExecutionId, ExecutionState, Limits, Message, ToolCall,
    ToolResult, TurnOutcome,
};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::service::keyed_id;
use super::sql::MemoryWrite;
use super::store::{MemoryOp, MemoryQuery, MemoryStore};
use crate::engine::{EngineEnd, Next, PhaseContext, PhaseError, RunScope, Workflow};
use crate::identity::ExecutionIdentity;
use crate::platform::Platform;
use crate::sealed::KeyRing;
use crate::store::{ChildStart, Commit, NewChild, NewExecution, Scope, StateChange, StoreError};
use crate::turns::{AccessGuard, BillingContext, DurableHost, ModelPermits};

/// The execution kind of learning.
pub const LEARNING: &str = "memory_learning";

/// The shared-limit scope every helper call of learning takes besides a model call's own.
pub const MEMORY_SCOPE: &str = "memory";

/// The most memories the helper model is shown (the member's own, newest first).
const SHOWN: i64 = 50;

/// What a learning execution learns from, saved sealed as its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearningInput {
    /// The ended Turn's identity: its organization, Chat member, credential and Bot.
    pub identity: ExecutionIdentity,
    /// The Chat.
    pub chat_id: uuid::Uuid,
    /// The Turn that ended.
    pub turn: ExecutionId,
}

/// What a learning did, saved sealed as its execution's output: how many operations of its
/// plan it applied, and each one it refused with the reason (an operation the Chat's member
/// may not do: another member's or an unreadable memory, a shared one without the right).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LearningResult {
    /// Memories added.
    pub added: usize,
    /// Memories changed.
    pub changed: usize,
    /// Memories retired.
    pub retired: usize,
    /// The operations not applied.
    pub refused: Vec<RefusedOperation>,
}

/// The learning child a completed Turn's end commit starts (queued, detached, no Chat queue
/// of its own, admitted only while the Chat is open).
pub fn learning_child(
    keys: &KeyRing,
    scope: Scope,
    input: &LearningInput,
) -> Result<NewChild, StoreError> {
    Ok(NewChild {
        execution: NewExecution::sealed(keys, LEARNING, scope, input)?
            .behind_gate(Some(input.chat_id)),
        start: ChildStart::Queued,
        attached: false,
        request: None,
    })
}

/// Runs learning.
pub struct MemoryLearningWorkflow {
    platform: Platform,
    memories: Arc<dyn MemoryStore>,
    registry: Arc<dyn crate::models::ModelRegistryStore>,
    /// The phase setup on restore shared with the Turn and the tool job: the rights check and
    /// the access guard of the helper call.
    setup: crate::turns::PhaseSetup,
    limits: crate::limits::Limits,
}

impl MemoryLearningWorkflow {
    /// Learning on `database`, reaching models as `platform` allows, restored with `setup`
    /// (the node's, on that database).
    pub fn new(
        platform: Platform,
        database: &crate::node::Database,
        setup: crate::turns::PhaseSetup,
    ) -> Self {
        Self {
            platform,
            memories: Arc::clone(&database.memories),
            registry: Arc::clone(&database.models),
            setup,
            limits: crate::limits::Limits::new(Arc::clone(&database.limits)),
        }
    }

    async fn end_with(
        &self,
        cx: &PhaseContext,
        writes: crate::store::TxWrites,
        result: &LearningResult,
    ) -> Result<(), PhaseError> {
        let usage = cx.engine.store.execution(cx.execution.id).await?.usage;
        let output = cx
            .engine
            .seal_json(result)
            .map_err(|e| PhaseError::Storage(StoreError::Invalid(e.to_string())))?;
        let commit = Commit {
            events: vec![EventKind::TurnEnded {
                outcome: TurnOutcome::Completed,
                usage,
            }],
            state: Some(StateChange {
                state: ExecutionState::Completed,
                outcome: Some(TurnOutcome::Completed),
                failure: None,
                wake_at: None,
                unknown_call: None,
                output: Some(output),
                release: true,
                reason: None,
            }),
            writes,
            ..Commit::default()
        };
        cx.engine
            .commit(cx.execution.id, cx.generation, commit)
            .await?;
        Ok(())
    }
}

fn failed(category: ErrorCategory, cause: impl Into<String>) -> PhaseError {
    PhaseError::Failed {
        category,
        cause: cause.into(),
    }
}

fn memory_failed(err: super::MemoryError) -> PhaseError {
    match err {
        super::MemoryError::Store(err) => PhaseError::Storage(err),
        other => failed(ErrorCategory::Internal, other.to_string()),
    }
}

#[allow(clippy::too_many_lines)] // split by the Turn feature interface (issue 33)
#[async_trait]
impl Workflow for MemoryLearningWorkflow {
    fn kind(&self) -> &'static str {
        LEARNING
    }

    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError> {
        Ok(if cx.execution.state.is_terminal() {
            Next::Done
        } else {
            Next::Run("learn".into())
        })
    }

    async fn run(
        &self,
        cx: &PhaseContext,
        _phase: &str,
        scope: &RunScope,
    ) -> Result<(), PhaseError> {
        let input: LearningInput = cx.input().await.map_err(PhaseError::from)?;
        let identity = input.identity.clone();
        let chat = openbot_schema::ChatId::from(input.chat_id);
        // The saved identity's current rights first, as every restored phase checks them.
        let access = self
            .setup
            .access(Some(&identity), Some((chat, identity.bot_id)), None)
            .await?
            .ok_or_else(|| {
                failed(
                    ErrorCategory::Internal,
                    "memory learning runs only on a node with a database",
                )
            })?;
        let bot = match self.memories.bot_memory(identity.bot_id).await? {
            Some(bot) if bot.on => bot,
            // Memory was switched off (or the Bot deleted) since the Turn: nothing to learn.
            _ => {
                return self
                    .end_with(cx, Default::default(), &LearningResult::default())
                    .await;
            }
        };
        let bot_model = bot.model;
        // The Chat's member with its current rights: shared memories only as the API allows.
        let reader =
            super::work_reader(&identity, Some(access.store.as_ref()), bot.owner_member_id).await?;
        let from = self.memories.cursor(input.chat_id).await?;
        let history: Vec<Message> = crate::chats::chat_history(&cx.engine, input.chat_id, None)
            .await
            .map_err(PhaseError::from)?
            .into_iter()
            .map(|entry| entry.message)
            .collect();
        let to = history.len() as i64;
        if to <= from {
            return self
                .end_with(cx, Default::default(), &LearningResult::default())
                .await;
        }
        let fresh = &history[usize::try_from(from).unwrap_or(0)..];
        // The memories the helper may change: the member's own active ones.
        let shown_rows = self
            .memories
            .memories(
                &reader,
                &MemoryQuery {
                    status: Some("active".into()),
                    own_only: true,
                    newest_first: true,
                    limit: SHOWN,
                    ..MemoryQuery::default()
                },
            )
            .await?;
        let service = self.service(cx);
        let mut shown = Vec::with_capacity(shown_rows.len());
        for row in shown_rows {
            let memory = service.open(row).map_err(memory_failed)?;
            shown.push((memory.id, memory.content));
        }
        let known: HashSet<uuid::Uuid> = shown.iter().map(|(id, _)| *id).collect();
        let (settings_embeddings, helper) =
            self.memories.settings(identity.organization_id).await?;
        let _ = settings_embeddings;
        let model_spec = helper.unwrap_or(bot_model);
        let (providers, _) = crate::models::organization_providers(
            &cx.engine,
            self.registry.as_ref(),
            identity.organization_id,
        )
        .await?;
        let model = self
            .platform
            .model(&model_spec, &providers)
            .map_err(|e| failed(ErrorCategory::Configuration, e.to_string()))?;

        // The helper call: this execution's call log, permits, rights and billing.
        let permits = ModelPermits::new(
            self.limits.clone(),
            identity.organization_id,
            cx.execution.id,
            cx.generation,
            {
                // Helper calls also share the `memory` scope, so an operator can bound learning
                // apart from Turns.
                let mut scopes =
                    crate::limits::model_scopes(&model_spec, Some(identity.bot_id.as_uuid()));
                scopes.push(MEMORY_SCOPE.into());
                scopes
            },
            scope.clone(),
        )
        .await;
        let access = AccessGuard {
            billing: Some(BillingContext {
                organization: identity.organization_id,
                bot: identity.bot_id.as_uuid(),
                budget_bot: identity.bot_id.as_uuid(),
                chat: Some(input.chat_id),
                member: Some(identity.owner_member_id),
                model: model_spec.clone(),
                catalog: crate::billing::catalog_price(&model_spec),
            }),
            ..access
        };
        let durable = DurableHost::new(
            Arc::clone(&cx.engine),
            cx.execution.id,
            cx.generation,
            cx.execution.limit_start(),
            scope.clone(),
            Arc::clone(&cx.signals),
            Default::default(),
        )
        .with_access(Some(access))
        .with_permits(Some(permits));
        let host = AnswerHost {
            inner: &durable,
            end: std::sync::Mutex::new(None),
        };
        let spec = TurnSpec {
            instructions: LEARNING_INSTRUCTIONS.into(),
            model,
            tools: Arc::new(ToolSet::new()),
            limits: Limits {
                max_steps: Some(1),
                ..Limits::default()
            },
            history: Vec::new(),
            input: vec![ContentPart::text(learning_input(&shown, fresh))],
            max_output_tokens: Some(2000),
        };
        let run = run_turn(spec, &host).await;
        // The answer the host held for its next commit goes to the call log first.
        durable.settle().await;
        if let Err(err) = run {
            return Err(host_failed(err, &durable));
        }
        let end = host
            .end
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .ok_or_else(|| {
                failed(
                    ErrorCategory::Internal,
                    "the helper call ended without an end",
                )
            })?;
        match end.outcome {
            Ok(TurnOutcome::Completed) => {}
            Ok(outcome) => {
                return Err(failed(
                    ErrorCategory::ModelProvider,
                    format!("the helper call ended {outcome:?}"),
                ));
            }
            Err(failure) => return Err(failed(failure.category, failure.cause)),
        }
        let answer: String = end
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Assistant { content, .. } => Some(
                    content
                        .iter()
                        .filter_map(|p| match p {
                            ContentPart::Text { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect::<String>(),
                ),
                _ => None,
            })
            .unwrap_or_default();
        let rights = PlanRights {
            changeable: known,
            may_share: reader.may_change_shared,
        };
        let plan = parse_plan(&answer, &rights)
            .map_err(|e| failed(ErrorCategory::ModelProvider, e.to_string()))?;
        let result = LearningResult {
            added: plan.add.len(),
            changed: plan.change.len(),
            retired: plan.retire.len(),
            refused: plan.refused.clone(),
        };
        if !result.refused.is_empty() {
            // The count and kinds only: the reasons stay in the sealed result.
            tracing::info!(
                refused = result.refused.len(),
                "learning refused operations its member may not do"
            );
        }

        let mut ops = vec![MemoryOp::Cursor {
            chat_id: input.chat_id,
            from,
            to,
        }];
        let evidence = openbot_schema::MemoryEvidence {
            chat_id: Some(chat),
            execution_id: Some(input.turn),
            message: u32::try_from(to - 1).ok(),
        };
        for (index, add) in &plan.add {
            // Keyed by its place in the answer, so a refused one before it changes no ID.
            let id = keyed_id(cx.execution.id, &format!("add:{index}"));
            let row = service
                .new_row(
                    &reader,
                    id,
                    &add.content,
                    &add.tags,
                    (!add.shared).then_some(identity.owner_member_id),
                    evidence.clone(),
                )
                .await
                .map_err(memory_failed)?;
            ops.push(MemoryOp::Insert(Box::new(row)));
        }
        for change in &plan.change {
            let content = match &change.content {
                Some(content) => Some((
                    super::seal::seal_content(&cx.engine.keys, change.id, content)
                        .map_err(|e| failed(ErrorCategory::Internal, e.to_string()))?,
                    None,
                )),
                None => None,
            };
            ops.push(MemoryOp::Update {
                id: change.id,
                content,
                tags: change.tags.clone(),
                status: None,
            });
        }
        for id in &plan.retire {
            ops.push(MemoryOp::Update {
                id: *id,
                content: None,
                tags: None,
                status: Some("retired".into()),
            });
        }
        self.end_with(
            cx,
            crate::store::TxWrites::one(MemoryWrite { reader, ops }),
            &result,
        )
        .await
    }

    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError> {
        let (events, change, handled) = match end {
            EngineEnd::Cancelled { signals } => (
                vec![EventKind::TurnEnded {
                    outcome: TurnOutcome::Cancelled,
                    usage: cx.execution.usage,
                }],
                StateChange {
                    state: ExecutionState::Cancelled,
                    outcome: Some(TurnOutcome::Cancelled),
                    failure: None,
                    wake_at: None,
                    unknown_call: None,
                    output: None,
                    release: true,
                    reason: None,
                },
                signals,
            ),
            EngineEnd::Failed { category, cause } => {
                let failed = cx.failed_end(category, &cause)?;
                (vec![failed.event], failed.change, Vec::new())
            }
        };
        cx.engine
            .commit(
                cx.execution.id,
                cx.generation,
                Commit {
                    events,
                    state: Some(change),
                    handled_signals: handled,
                    // A hold of a helper call that never got its answer ends with the execution.
                    writes: crate::store::TxWrites::one(crate::billing::Release {
                        execution: cx.execution.id,
                    }),
                    ..Commit::default()
                },
            )
            .await?;
        Ok(())
    }
}

impl MemoryLearningWorkflow {
    fn service(&self, cx: &PhaseContext) -> super::Memories {
        super::Memories::for_learning(
            Arc::clone(&self.memories),
            cx.engine.keys.clone(),
            super::Embedder::new(
                self.platform.clone(),
                Arc::clone(&self.registry),
                Arc::clone(&cx.engine),
            ),
        )
    }
}

fn host_failed(err: HostError, host: &DurableHost) -> PhaseError {
    match err {
        HostError::Fenced => PhaseError::Fenced,
        HostError::OutcomeUnknown { key } => PhaseError::OutcomeUnknown(key),
        HostError::Closed | HostError::Abandoned => PhaseError::Cancelled,
        HostError::Denied(cause) => failed(ErrorCategory::Access, cause),
        HostError::Refused { category, cause } => failed(category, cause),
        HostError::Declined(outcome) => failed(
            ErrorCategory::ModelProvider,
            format!("the helper call was declined ({outcome:?})"),
        ),
        HostError::Storage(cause) => {
            PhaseError::Storage(host.take_failure().unwrap_or(StoreError::Invalid(cause)))
        }
        HostError::InputArrived => {
            failed(ErrorCategory::Internal, "input arrived at a helper call")
        }
    }
}

/// The durable host for one helper call, except that the call's end is kept for the workflow
/// instead of ending the execution: the workflow ends it itself, with the plan applied in the
/// same commit.
struct AnswerHost<'a> {
    inner: &'a DurableHost,
    end: std::sync::Mutex<Option<TurnEnd>>,
}

#[async_trait]
impl Host for AnswerHost<'_> {
    fn execution_id(&self) -> ExecutionId {
        self.inner.execution_id()
    }
    fn cancellation(&self) -> CancellationToken {
        self.inner.cancellation()
    }
    fn started_at(&self) -> std::time::SystemTime {
        self.inner.started_at()
    }
    async fn budget_exhausted(&self) -> Result<bool, HostError> {
        self.inner.budget_exhausted().await
    }
    async fn admit_tool(
        &self,
        key: CallKey,
        call: &ToolCall,
    ) -> Result<Option<ToolResult>, HostError> {
        self.inner.admit_tool(key, call).await
    }
    async fn saved_call(&self, step: u32, slot: CallSlot) -> Result<Option<CallRecord>, HostError> {
        self.inner.saved_call(step, slot).await
    }
    async fn record_intent(&self, key: CallKey) -> Result<(), HostError> {
        self.inner.record_intent(key).await
    }
    async fn record_sending(&self, key: CallKey, events: Vec<EventKind>) -> Result<(), HostError> {
        self.inner.record_sending(key, events).await
    }
    async fn record_model_sending(
        &self,
        key: CallKey,
        events: Vec<EventKind>,
        estimate: RequestEstimate,
    ) -> Result<(), HostError> {
        self.inner.record_model_sending(key, events, estimate).await
    }
    async fn record_result(
        &self,
        key: CallKey,
        result: CallResult,
        events: Vec<EventKind>,
    ) -> Result<(), HostError> {
        self.inner.record_result(key, result, events).await
    }
    async fn record_answer(
        &self,
        key: CallKey,
        result: CallResult,
        events: Vec<EventKind>,
        intents: Vec<CallKey>,
    ) -> Result<(), HostError> {
        self.inner.record_answer(key, result, events, intents).await
    }
    async fn publish(&self, event: EventKind) -> Result<(), HostError> {
        self.inner.publish(event).await
    }
    async fn take_steering(
        &self,
        _step: u32,
        _last: bool,
    ) -> Result<Vec<Vec<ContentPart>>, HostError> {
        // A helper call takes no input after its start.
        Ok(Vec::new())
    }
    async fn wait_for_delivery(
        &self,
        key: CallKey,
        call: &ToolCall,
    ) -> Result<ToolResult, HostError> {
        self.inner.wait_for_delivery(key, call).await
    }
    async fn finish(&self, end: TurnEnd) -> Result<(), HostError> {
        *self
            .end
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(end);
        Ok(())
    }
}
