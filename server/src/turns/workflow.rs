//! The Turn workflow: runs the core Turn loop on the durable host.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use openbot_core::model::{Model, ModelSpec};
use openbot_core::turn::{HostError, ToolSet, TurnSpec, run_turn};
use openbot_schema::{ChatId, ErrorCategory, EventKind, ExecutionId, ExecutionState, TurnOutcome};

use super::host::{AccessGuard, BillingContext, DurableHost, ModelPermits};
use super::input::{SavedTool, ToolRoute, TurnInput};
use crate::approvals::RuleStore;
use crate::budgets::BudgetStore;
use crate::engine::{EngineEnd, Next, PhaseContext, PhaseError, RunScope, Workflow};
use crate::identity::{IdentityCheckError, IdentityStore};
use crate::store::{Commit, StateChange, StoreError};
use crate::tools::{TemplateParts, ToolVault};
use crate::work::Admission;
use openbot_core::tool::HttpTool;

pub use crate::platform::EnvReader;
use crate::platform::Platform;

/// The execution kind of Turns.
pub const TURN: &str = "turn";

/// Runs Turns. Models are built from their specs once per node and shared.
pub struct TurnWorkflow {
    platform: Platform,
    registry: Option<Arc<dyn crate::models::ModelRegistryStore>>,
    identity: Option<Arc<dyn IdentityStore>>,
    budgets: Option<Arc<dyn BudgetStore>>,
    rules: Option<Arc<dyn RuleStore>>,
    chats: Option<Arc<dyn crate::chats::ChatStore>>,
    limits: Option<crate::limits::Limits>,
    memories: Option<Arc<dyn crate::memories::MemoryStore>>,
    vaults: Option<Arc<dyn crate::vaults::VaultStore>>,
    files: Option<crate::files::FileReader>,
    models: Mutex<HashMap<String, Arc<dyn Model>>>,
    http: reqwest::Client,
    apps: Option<Arc<dyn crate::apps::AppStore>>,
    credentials: Option<Arc<dyn crate::apps::ConnectionCredentials>>,
    oauth: Option<Arc<dyn crate::apps::oauth::OAuthStore>>,
}

impl Default for TurnWorkflow {
    fn default() -> Self {
        Self::new(Platform::default())
    }
}

impl TurnWorkflow {
    /// A workflow that builds models and reaches tools as `platform` allows.
    pub fn new(platform: Platform) -> Self {
        Self {
            http: platform.tool_client(),
            platform,
            registry: None,
            identity: None,
            budgets: None,
            rules: None,
            chats: None,
            limits: None,
            memories: None,
            vaults: None,
            files: None,
            models: Mutex::new(HashMap::new()),
            apps: None,
            credentials: None,
            oauth: None,
        }
    }

    /// Calls App tools through the Connections in `apps`.
    pub fn with_apps(mut self, apps: Arc<dyn crate::apps::AppStore>) -> Self {
        self.apps = Some(apps);
        self
    }

    /// Asks `credentials` what a Connection sends (default: none and manual credentials,
    /// opened with the engine's key ring).
    pub fn with_credentials(
        mut self,
        credentials: Arc<dyn crate::apps::ConnectionCredentials>,
    ) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// Gives OAuth Connections their tokens from the OAuth service over `oauth` (refreshed
    /// as the engine's own work when expired).
    pub fn with_oauth(mut self, oauth: Arc<dyn crate::apps::oauth::OAuthStore>) -> Self {
        self.oauth = Some(oauth);
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

    /// Checks the current rights of each Turn's saved identity against `identity`.
    pub fn with_identity(mut self, identity: Arc<dyn IdentityStore>) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Enforces the budgets of each Turn's organization, Bot and Chat before its model
    /// requests (for Turns with a saved identity and a Chat).
    pub fn with_budgets(mut self, budgets: Arc<dyn BudgetStore>) -> Self {
        self.budgets = Some(budgets);
        self
    }

    /// Takes shared permits and rate limits before each model request of a Turn of an
    /// organization (scopes: the organization, the provider kind, the Bot).
    pub fn with_limits(mut self, limits: crate::limits::Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Gives Turns of Bots with memory their recalled memories and memory tools, and starts
    /// their learning when they complete.
    pub fn with_memories(mut self, memories: Arc<dyn crate::memories::MemoryStore>) -> Self {
        self.memories = Some(memories);
        self
    }

    /// Opens the Vault references of HTTP tools from `vaults` as each call is sent.
    pub fn with_vaults(mut self, vaults: Arc<dyn crate::vaults::VaultStore>) -> Self {
        self.vaults = Some(vaults);
        self
    }

    /// Sends the files a Turn's messages attach to its model, read from `files` as the
    /// Turn's member (only that member's files).
    pub fn with_files(mut self, files: crate::files::FileReader) -> Self {
        self.files = Some(files);
        self
    }

    /// Reads a Chat's current plan mode for Turns that started in plan mode.
    pub fn with_chats(mut self, chats: Arc<dyn crate::chats::ChatStore>) -> Self {
        self.chats = Some(chats);
        self
    }

    /// Applies the organization's approval rules to each new tool call of a Turn with a saved
    /// identity.
    pub fn with_rules(mut self, rules: Arc<dyn RuleStore>) -> Self {
        self.rules = Some(rules);
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
        let model = self
            .platform
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
        let access = async {
            Ok::<_, PhaseError>(match (&input.identity, &self.identity) {
                (Some(identity), Some(store)) => {
                    // Restored work is checked before it does anything.
                    identity
                        .check_current(store.as_ref())
                        .await
                        .map_err(|err| match err {
                            IdentityCheckError::Denied(cause) => PhaseError::Failed {
                                category: ErrorCategory::Access,
                                cause,
                            },
                            IdentityCheckError::Store(err) => PhaseError::Storage(err),
                        })?;
                    // A delegated Turn spends the budgets of the Chat its tree works for.
                    let chat = input.tree_chat(cx.execution.chat_id);
                    let bot = input.budget_bot().unwrap_or(identity.bot_id);
                    // A Turn with budgets is billed: each model request reserves its estimate.
                    let billing = self.budgets.as_ref().map(|_| BillingContext {
                        organization: identity.organization_id,
                        bot: identity.bot_id.as_uuid(),
                        budget_bot: bot.as_uuid(),
                        chat,
                        member: Some(identity.owner_member_id),
                        model: input.model.clone(),
                        catalog: crate::billing::catalog_price(&input.model),
                    });
                    Some(AccessGuard {
                        identity: identity.clone(),
                        store: Arc::clone(store),
                        budgets: self.budgets.as_ref().and_then(|budgets| {
                            chat.map(|chat| (Arc::clone(budgets), ChatId::from(chat), bot))
                        }),
                        billing,
                    })
                }
                // A server checks every Turn's rights and budgets: work it cannot check (no
                // saved identity) is refused, never run unchecked.
                (None, Some(_)) => return Err(unchecked_work()),
                (_, None) => None,
            })
        };
        let (access, model) =
            tokio::join!(access, self.model(cx, &input.model, input.organization_id));
        // The rights check's failure wins, as if it had run first.
        let access = access?;
        Ok((input, access, model?))
    }
}

/// The failure of work with no saved identity on a node that checks identities.
pub(crate) fn unchecked_work() -> PhaseError {
    PhaseError::Failed {
        category: ErrorCategory::Access,
        cause: "the work has no saved identity, so its rights and budgets cannot be checked; \
                submit it through the API with a token"
            .into(),
    }
}

/// Where a Turn's (or tool job's) HTTP tools open Vault references: as its saved identity's
/// organization, member and Bot. Work without an identity opens none.
pub(crate) fn tool_vault(
    cx: &PhaseContext,
    vaults: Option<&Arc<dyn crate::vaults::VaultStore>>,
    identity: Option<&crate::identity::ExecutionIdentity>,
) -> Option<ToolVault> {
    let (vaults, identity) = (vaults?, identity?);
    Some(ToolVault {
        opener: crate::vaults::VaultOpener::new(Arc::clone(vaults), cx.engine.keys.clone()),
        organization: identity.organization_id,
        member: identity.owner_member_id,
        bot: identity.bot_id,
    })
}

/// The tool set of saved tools: each with its route's handler (HTTP tools call their endpoint;
/// host tools wait for a delivered result; delegate and background calls are answered at
/// admission and never reach a handler), and which tools may be sent again after a lost answer.
///
/// An HTTP tool's Vault references open with `vault` as each call is sent.
pub fn saved_tool_set(
    saved: &[SavedTool],
    code_mode: bool,
    http: &reqwest::Client,
    outbound: &Arc<openbot_core::outbound::OutboundPolicy>,
    vault: Option<&ToolVault>,
    apps: Option<&Arc<crate::apps::Apps>>,
) -> Result<(Arc<ToolSet>, HashMap<String, bool>), String> {
    let mut set = ToolSet::new();
    let mut retry_safe = HashMap::new();
    for tool in saved {
        let handler: Option<openbot_core::tool::SharedTool> = match &tool.route {
            ToolRoute::Host | ToolRoute::Delegate(_) | ToolRoute::Plan | ToolRoute::Remind => {
                // Waiting again for a delivered result repeats nothing outside: the caller
                // answers a call once, by its ID, and the first answer wins. A delegate call
                // starts its child in the same commit as its result.
                retry_safe.insert(tool.definition.name.clone(), true);
                None
            }
            ToolRoute::Http {
                url,
                retry_safe: safe,
                template,
                ..
            } => {
                retry_safe.insert(tool.definition.name.clone(), *safe);
                let mut handler = HttpTool::new(
                    tool.definition.clone(),
                    url.clone(),
                    http.clone(),
                    Arc::clone(outbound),
                );
                // With a Vault, also for an empty template: a program's call may carry
                // references in its arguments.
                if !template.is_empty() || vault.is_some() {
                    handler = handler.with_parts(Arc::new(TemplateParts {
                        template: template.clone(),
                        vault: vault.cloned(),
                        url: url.clone(),
                    }));
                }
                Some(Arc::new(handler))
            }
            ToolRoute::App(route) => {
                // Sent again after a lost result only when the tool says it is read-only or
                // idempotent; then with the same request ID.
                retry_safe.insert(tool.definition.name.clone(), route.retry_safe());
                let apps = apps.ok_or_else(|| {
                    format!(
                        "the App tool `{}` needs the App store",
                        tool.definition.name
                    )
                })?;
                Some(Arc::new(crate::apps::tool::AppTool::new(
                    (**route).clone(),
                    Arc::clone(apps),
                    vault.cloned(),
                )))
            }
        };
        set.insert(tool.definition.clone(), handler)
            .map_err(|e| e.to_string())?;
    }
    if code_mode {
        set.enable_code_mode(openbot_core::codemode::Limits::default());
    }
    Ok((Arc::new(set), retry_safe))
}

#[allow(clippy::too_many_lines)] // split by the Turn feature interface (issue 33)
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
        // The model reads attached files as the Turn's member, at each request.
        let model = match (&self.files, &input.identity) {
            (Some(files), Some(identity)) => openbot_core::model::WithFiles::wrap(
                &input.model,
                model,
                files.source_for(identity.owner_member_id),
            ),
            _ => model,
        };
        let history: Vec<_> = history?.unwrap_or_else(|| input.history.clone());
        let vault = tool_vault(cx, self.vaults.as_ref(), input.identity.as_ref());
        // The OAuth service is built only for a phase that may call an App tool.
        let calls_apps = input
            .tools
            .iter()
            .any(|t| matches!(t.route, ToolRoute::App(_)));
        let credentials = self.credentials.clone().or_else(|| {
            calls_apps
                .then(|| {
                    crate::apps::phase_credentials(self.oauth.as_ref(), &cx.engine, &self.platform)
                })
                .flatten()
        });
        let apps = crate::apps::phase_apps(
            self.apps.as_ref(),
            credentials.as_ref(),
            &cx.engine.keys,
            &self.platform,
            self.limits.clone().map(|limits| crate::apps::AppPermits {
                limits,
                generation: cx.generation,
            }),
        );
        let (mut tools, mut retry_safe) = saved_tool_set(
            &input.tools,
            // Code Mode is switched on below, once the memory tools are in the set too.
            false,
            &self.http,
            self.platform.outbound(),
            vault.as_ref(),
            apps.as_ref(),
        )
        .map_err(|cause| PhaseError::Failed {
            category: ErrorCategory::Configuration,
            cause,
        })?;
        // A Bot with memory: recalled memories join the instructions, the memory tools join
        // the tools, and a completed Turn starts its learning in its end commit.
        let mut instructions = input.instructions.clone();
        let mut end_children = Vec::new();
        if let (true, Some(store), Some(identity)) = (input.memory, &self.memories, &input.identity)
        {
            let memories = crate::memories::Memories::for_learning(
                Arc::clone(store),
                cx.engine.keys.clone(),
                crate::memories::Embedder::new(
                    self.platform.clone(),
                    self.registry.clone().ok_or_else(|| PhaseError::Failed {
                        category: ErrorCategory::Configuration,
                        cause: "memory needs the model registry".into(),
                    })?,
                    Arc::clone(&cx.engine),
                ),
            );
            let chat = cx.execution.chat_id.map(ChatId::from);
            let memory = crate::memories::turn_memory(
                &memories,
                identity,
                self.identity.as_deref(),
                cx.execution.id,
                chat,
                &instructions,
                &input.input,
            )
            .await
            .map_err(|err| match err {
                crate::memories::MemoryError::Store(err) => PhaseError::Storage(err),
                crate::memories::MemoryError::Forbidden(cause) => PhaseError::Failed {
                    category: ErrorCategory::Access,
                    cause,
                },
                other => PhaseError::Failed {
                    category: ErrorCategory::Internal,
                    cause: other.to_string(),
                },
            })?;
            if let Some(memory) = memory {
                instructions = memory.instructions;
                let set = Arc::get_mut(&mut tools).ok_or_else(|| PhaseError::Failed {
                    category: ErrorCategory::Internal,
                    cause: "the tool set is shared".into(),
                })?;
                for tool in memory.tools {
                    let name = tool.definition().name.clone();
                    set.add(tool).map_err(|e| PhaseError::Failed {
                        category: ErrorCategory::Configuration,
                        cause: e.to_string(),
                    })?;
                    // `remember` writes one memory per call key; `recall` reads; `forget` retires.
                    retry_safe.insert(name, true);
                }
                if let Some(chat_id) = cx.execution.chat_id {
                    end_children.push(
                        crate::memories::learning_child(
                            &cx.engine.keys,
                            cx.execution.scope.clone(),
                            &crate::memories::LearningInput {
                                identity: identity.clone(),
                                chat_id,
                                turn: cx.execution.id,
                            },
                        )
                        .map_err(PhaseError::Storage)?,
                    );
                }
            }
        }
        if input.code_mode {
            let set = Arc::get_mut(&mut tools).ok_or_else(|| PhaseError::Failed {
                category: ErrorCategory::Internal,
                cause: "the tool set is shared".into(),
            })?;
            set.enable_code_mode(self.platform.code_limits());
        }
        let permits = match (&self.limits, input.organization_id) {
            (Some(limits), Some(organization)) => {
                let bot = input.identity.as_ref().map(|i| i.bot_id.as_uuid());
                Some(
                    ModelPermits::new(
                        limits.clone(),
                        organization,
                        cx.execution.id,
                        cx.generation,
                        crate::limits::model_scopes(&input.model, bot),
                        scope.clone(),
                    )
                    .await,
                )
            }
            _ => None,
        };
        let started_at = cx.execution.limit_start();
        let host = DurableHost::new(
            Arc::clone(&cx.engine),
            cx.execution.id,
            cx.generation,
            started_at,
            scope.clone(),
            Arc::clone(&cx.signals),
            retry_safe,
        )
        .with_access(access)
        .with_permits(permits)
        .with_admission(Some(Admission::new(
            Arc::clone(&cx.engine),
            &cx.execution,
            Arc::new(input.clone()),
            self.rules.clone(),
            self.chats.clone(),
        )))
        .with_source(input.source.clone(), cx.execution.parent_id)
        .with_end_children(end_children)
        .with_calls(call_log)
        .with_first_inputs_waiting(inputs_waiting);
        let spec = TurnSpec {
            instructions,
            model,
            tools,
            limits: input.limits,
            history,
            input: input.input,
            max_output_tokens: input.max_output_tokens,
        };
        let run = run_turn(spec, &host).await;
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
