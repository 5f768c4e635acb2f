//! The Turn workflow: runs the core Turn loop on the durable host.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tracing::Instrument as _;

use async_trait::async_trait;
use openbot_core::model::{Model, ModelSpec};
use openbot_core::turn::{HostError, TurnSpec, run_turn};
use openbot_schema::{ChatId, ErrorCategory, EventKind, ExecutionId, ExecutionState, TurnOutcome};

use super::feature::{TurnFeature, TurnPhase};
use super::host::{AccessGuard, BillingContext, DurableHost, ModelPermits};
use super::input::TurnInput;
use super::setup::PhaseSetup;
use crate::approvals::RuleStore;
use crate::engine::{EngineEnd, Next, PhaseContext, PhaseError, RunScope, Workflow};
use crate::store::{Commit, StateChange, StoreError};
use crate::work::Admission;

pub use crate::platform::EnvReader;

/// The execution kind of Turns.
pub const TURN: &str = "turn";

/// Runs Turns. Models are built from their specs once per node and shared.
///
/// A Turn's phase is set up by the shared [`PhaseSetup`] (rights, access guard, tools) and
/// then shaped by the registered [`TurnFeature`]s in their order; the workflow names no
/// capability.
pub struct TurnWorkflow {
    setup: PhaseSetup,
    registry: Option<Arc<dyn crate::models::ModelRegistryStore>>,
    features: Vec<Arc<dyn TurnFeature>>,
    admission: Option<AdmissionStores>,
    models: Mutex<HashMap<String, Arc<dyn Model>>>,
}

/// Where a Turn's admission reads the approval rules and a Chat's plan mode.
struct AdmissionStores {
    rules: Arc<dyn RuleStore>,
    chats: Arc<dyn crate::chats::ChatStore>,
}

impl TurnWorkflow {
    /// A workflow whose phases are set up by `setup`.
    pub fn new(setup: PhaseSetup) -> Self {
        Self {
            setup,
            registry: None,
            features: Vec::new(),
            admission: None,
            models: Mutex::new(HashMap::new()),
        }
    }

    /// Adds `feature`: it shapes every phase after the features added before it.
    pub fn with_feature(mut self, feature: Arc<dyn TurnFeature>) -> Self {
        self.features.push(feature);
        self
    }

    /// Reads provider settings from an organization's model registry first.
    pub fn with_model_registry(
        mut self,
        registry: Arc<dyn crate::models::ModelRegistryStore>,
    ) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Applies the organization's approval rules to each new tool call of a Turn with a saved
    /// identity, and reads a Chat's current plan mode for Turns that started in plan mode.
    pub fn with_admission(
        mut self,
        rules: Arc<dyn RuleStore>,
        chats: Arc<dyn crate::chats::ChatStore>,
    ) -> Self {
        self.admission = Some(AdmissionStores { rules, chats });
        self
    }

    /// The model a spec names, built with the organization's provider settings by the
    /// platform's key rule, shared while those settings stay the same. A scripted model is
    /// built anew for each phase: its place in the script then comes from the Chat's own
    /// history (one answer a step), never from other Chats' Turns on the same server.
    async fn model(
        &self,
        cx: &PhaseContext,
        spec: &str,
        organization: Option<uuid::Uuid>,
    ) -> Result<Arc<dyn Model>, PhaseError> {
        let (settings, version) = match (&self.registry, organization) {
            (Some(registry), Some(organization)) => {
                crate::models::organization_providers(&cx.engine, registry.as_ref(), organization)
                    .await?
            }
            _ => (Vec::new(), 0),
        };
        let cache_key = format!(
            "{}/{version}/{spec}",
            organization.map(|o| o.to_string()).unwrap_or_default()
        );
        if let Some(model) = self
            .models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&cache_key)
        {
            return Ok(Arc::clone(model));
        }
        let model =
            self.setup
                .platform()
                .model(spec, &settings)
                .map_err(|e| PhaseError::Failed {
                    category: ErrorCategory::Configuration,
                    cause: e.to_string(),
                })?;
        if matches!(ModelSpec::parse(spec), Ok(ModelSpec::Scripted { .. })) {
            return Ok(model);
        }
        self.models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(cache_key, Arc::clone(&model));
        Ok(model)
    }

    /// The Turn's saved input, its access guard (its identity's current rights checked first:
    /// restored work is checked before it does anything) and its model; the rights check and
    /// the model's provider settings are read side by side.
    async fn start_input(
        &self,
        cx: &PhaseContext,
    ) -> Result<(TurnInput, Option<AccessGuard>, Arc<dyn Model>), PhaseError> {
        let input: TurnInput = cx.input().await.map_err(PhaseError::from)?;
        // A delegated Turn spends the budgets of the Chat its tree works for.
        let chat = input.tree_chat(cx.execution.chat_id);
        let budget_bot = input
            .identity
            .as_ref()
            .map(|identity| input.budget_bot().unwrap_or(identity.bot_id));
        // A Turn with budgets is billed: each model request reserves its estimate.
        let billing = match (&input.identity, budget_bot) {
            (Some(identity), Some(bot)) if self.setup.bills() => Some(BillingContext {
                organization: identity.organization_id,
                bot: identity.bot_id.as_uuid(),
                budget_bot: bot.as_uuid(),
                chat,
                member: Some(identity.owner_member_id),
                model: input.model.clone(),
                catalog: crate::billing::catalog_price(&input.model),
            }),
            _ => None,
        };
        let budgets = chat
            .zip(budget_bot)
            .map(|(chat, bot)| (ChatId::from(chat), bot));
        let access = self.setup.access(input.identity.as_ref(), budgets, billing);
        let (access, model) =
            tokio::join!(access, self.model(cx, &input.model, input.organization_id));
        // The rights check's failure wins, as if it had run first.
        let access = access?;
        Ok((input, access, model?))
    }

    /// The phase set up and shaped by the features: the saved tools, then each feature in
    /// its order.
    async fn prepare(
        &self,
        cx: &PhaseContext,
        scope: &RunScope,
        input: Arc<TurnInput>,
        model: Arc<dyn Model>,
    ) -> Result<TurnPhase, PhaseError> {
        let (tools, retry_safe) = self
            .setup
            .tools(cx, &input.tools, input.identity.as_ref())?;
        let mut phase = TurnPhase::new(input, scope.clone(), model, tools, retry_safe);
        for feature in &self.features {
            feature.prepare(cx, &mut phase).await?;
        }
        Ok(phase)
    }
}

#[async_trait]
impl Workflow for TurnWorkflow {
    fn kind(&self) -> &'static str {
        TURN
    }

    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError> {
        Ok(if cx.execution.state.is_terminal() {
            Next::Done
        } else {
            Next::Run("loop".into())
        })
    }

    async fn run(
        &self,
        cx: &PhaseContext,
        _phase: &str,
        scope: &RunScope,
    ) -> Result<(), PhaseError> {
        // The phase's reads at its start, side by side: the Chat's history needs only the row;
        // the rights check and the model need the input.
        let chat_history = async {
            match cx.execution.chat_id {
                Some(chat) => crate::chats::chat_history(&cx.engine, chat, Some(cx.execution.id))
                    .await
                    .map(|entries| Some(entries.into_iter().map(|entry| entry.message).collect()))
                    .map_err(PhaseError::from),
                None => Ok(None),
            }
        };
        // The call log and the first input check too: the host reads them before the first
        // model request otherwise.
        let call_log = cx.engine.store.calls(cx.execution.id);
        let inputs_waiting = cx
            .engine
            .store
            .inputs_waiting(cx.execution.id, cx.generation, 1);
        let (history, started, call_log, inputs_waiting) =
            tokio::join!(chat_history, self.start_input(cx), call_log, inputs_waiting);
        let (input, access, model) = started?;
        let call_log = call_log.map_err(PhaseError::Storage)?;
        let inputs_waiting = inputs_waiting.map_err(PhaseError::Storage)?;
        let history: Vec<_> = history?.unwrap_or_else(|| input.history.clone());
        let input = Arc::new(input);
        let mut phase = self.prepare(cx, scope, Arc::clone(&input), model).await?;
        let permits = phase.take_guard::<Arc<ModelPermits>>();
        let prepared = phase.finish();
        let host = DurableHost::new(
            Arc::clone(&cx.engine),
            cx.execution.id,
            cx.generation,
            cx.execution.limit_start(),
            scope.clone(),
            Arc::clone(&cx.signals),
            prepared.retry_safe,
        )
        .with_access(access)
        .with_permits(permits)
        .with_admission(Some(Admission::new(
            Arc::clone(&cx.engine),
            &cx.execution,
            Arc::clone(&input),
            self.admission.as_ref().map(|a| Arc::clone(&a.rules)),
            self.admission.as_ref().map(|a| Arc::clone(&a.chats)),
        )))
        .with_source(input.source.clone(), cx.execution.parent_id)
        .with_end_children(prepared.end_children)
        .with_calls(call_log)
        .with_first_inputs_waiting(inputs_waiting);
        let spec = TurnSpec {
            instructions: prepared.instructions,
            model: prepared.model,
            tools: prepared.tools,
            limits: input.limits,
            history,
            input: input.input.clone(),
            max_output_tokens: input.max_output_tokens,
        };
        let agent = openbot_core::telemetry::AgentLabel {
            id: input
                .identity
                .as_ref()
                .map(|identity| identity.bot_id.to_string()),
            name: None,
            conversation: cx.execution.chat_id.map(|chat| chat.to_string()),
        };
        let run = run_turn(spec, &host)
            .instrument(openbot_core::telemetry::invoke_agent(&agent))
            .await;
        if run.is_err() {
            // A result the host held for its next commit is saved before the error goes on.
            host.settle().await;
        }
        match run {
            Ok(_) => Ok(()),
            Err(HostError::Fenced) => Err(PhaseError::Fenced),
            Err(HostError::OutcomeUnknown { key }) => Err(PhaseError::OutcomeUnknown(key)),
            Err(HostError::Closed | HostError::Abandoned) => Err(PhaseError::Cancelled),
            Err(HostError::Denied(cause)) => Err(PhaseError::Failed {
                category: ErrorCategory::Access,
                cause,
            }),
            Err(HostError::Refused { category, cause }) => {
                Err(PhaseError::Failed { category, cause })
            }
            Err(HostError::Storage(cause)) => Err(PhaseError::Storage(
                host.take_failure().unwrap_or(StoreError::Invalid(cause)),
            )),
            // The loop ends the Turn on a refused reservation; it never leaves the loop.
            Err(HostError::Declined(outcome)) => Err(PhaseError::Failed {
                category: ErrorCategory::Internal,
                cause: format!("a refused model request left the Turn loop ({outcome:?})"),
            }),
            // `run_turn` replays and takes the input; past its bound the phase is tried again.
            Err(HostError::InputArrived) => Err(PhaseError::Storage(
                host.take_failure()
                    .unwrap_or(StoreError::InputWaiting(cx.execution.id)),
            )),
        }
    }

    /// A Turn's every end releases the billing holds no result settled (a blind update:
    /// nothing to release writes nothing).
    fn ending_writes(&self, id: ExecutionId) -> crate::store::TxWrites {
        crate::store::TxWrites::one(crate::billing::Release { execution: id })
    }

    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError> {
        let usage = cx.execution.usage;
        // A delegated Turn tells its source how it ended, whoever ends it.
        let notice = if cx.execution.parent_id.is_some() {
            let input: TurnInput = cx.input().await.map_err(PhaseError::from)?;
            input.source.map(|source| {
                let how = match &end {
                    EngineEnd::Cancelled { .. } => "was cancelled".to_string(),
                    EngineEnd::Failed { category, .. } => {
                        format!("failed ({})", crate::store::category_name(*category))
                    }
                };
                crate::store::NoticeWrite {
                    target: source.notice.into(),
                    content: crate::work::notice_content(&format!(
                        "[notice] {} {how}.",
                        source.label
                    )),
                }
            })
        } else {
            None
        };
        let (events, change, handled) = match end {
            EngineEnd::Cancelled { signals } => (
                vec![EventKind::TurnEnded {
                    outcome: TurnOutcome::Cancelled,
                    usage,
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
        let commit = Commit {
            events,
            state: Some(change),
            handled_signals: handled,
            notice,
            // A hold of a model call that never got its result ends with the Turn.
            writes: self.ending_writes(cx.execution.id),
            ..Commit::default()
        };
        cx.engine
            .commit(cx.execution.id, cx.generation, commit)
            .await?;
        if let Some(parent) = cx.execution.parent_id {
            cx.engine.hub.announce(crate::engine::Wake::Signal(parent));
        }
        Ok(())
    }
}
