//! The `code_run` workflow: a model-free program run (`POST /v1/bots/{id}/code-runs`) as an
//! execution of its own, like any other work.
//!
//! The run is the code call at position 0 of step 1 of its execution: each call its program
//! makes goes through the common call log (`CallSlot::Code { tool: 0, call: n }`: intent,
//! sending, result, with `tool_call` / `tool_result` events), its fixed time is saved when it
//! first starts, and its result is saved as the code call's result and as the execution's
//! output. A takeover or a restart runs the program again from the start: saved calls are
//! answered from the log, a call that was maybe sent and cannot be repeated safely waits in
//! `outcome_unknown` (decided like any call, `server/src/outcomes`), and a saved result is
//! returned without running anything.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::tool::CheckedSchema;
use openbot_core::turn::{CODE_TOOL, HostError, ProgramCallCheck};
use openbot_schema::{
    BotId, CodeRunError as RunError, CodeRunResult, ContentPart, ErrorCategory, EventKind,
    ExecutionState, RuleAction, ToolCall, ToolResult,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::approvals::{RuleRow, RuleStore, verdict};
use crate::engine::{EngineEnd, Next, PhaseContext, PhaseError, RunScope, Workflow};
use crate::identity::ExecutionIdentity;
use crate::store::{Commit, StateChange, StoreError};
use crate::turns::{DurableHost, PhaseSetup, SavedTool, ToolRoute};

/// The execution kind of model-free code runs.
pub const CODE_RUN: &str = "code_run";

/// The ID of the code call a run's program is: its calls' IDs are `code_run.<n>.<fingerprint>`.
pub const CODE_CALL_ID: &str = "code_run";

/// The saved input of a code run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeRunInput {
    /// The Bot whose tools the program calls.
    pub bot_id: BotId,
    /// The program.
    pub code: String,
    /// The Bot's tools as the request saw them: a later change of the Bot does not change a
    /// saved call.
    pub tools: Vec<SavedTool>,
    /// Who asked; its current rights bound every send.
    pub identity: ExecutionIdentity,
}

impl CodeRunInput {
    /// The code call the program runs as.
    pub fn call(&self) -> ToolCall {
        ToolCall {
            id: CODE_CALL_ID.into(),
            name: CODE_TOOL.into(),
            arguments: json!({"code": self.code}),
        }
    }
}

/// What a model-free run may call: HTTP tools that are not background, allowed by the approval
/// rules without asking. Every other call is refused before the call log, with the codes the
/// run always answered (`tool.not_found`, `tool.invalid_arguments`, `tool.denied`,
/// `tool.needs_approval`, `tool.needs_turn`).
struct DirectCalls {
    tools: Vec<SavedTool>,
    rules: Vec<RuleRow>,
    bot: BotId,
    member: uuid::Uuid,
}

fn refused(code: &str, message: impl Into<String>) -> Option<(String, String)> {
    Some((code.into(), message.into()))
}

impl ProgramCallCheck for DirectCalls {
    fn refuse(&self, call: &ToolCall) -> Option<(String, String)> {
        let name = &call.name;
        let Some(tool) = self.tools.iter().find(|t| &t.definition.name == name) else {
            return refused("tool.not_found", format!("there is no tool named {name:?}"));
        };
        match CheckedSchema::new(tool.definition.clone()) {
            Ok(schema) => {
                if let Err(err) = schema.check(&call.arguments) {
                    return refused("tool.invalid_arguments", err.to_string());
                }
            }
            Err(err) => return refused("tool.invalid_definition", err.to_string()),
        }
        match verdict(&self.rules, call, self.bot, self.member).action {
            RuleAction::Allow => {}
            RuleAction::Deny => {
                return refused("tool.denied", "the approval rules do not allow this call");
            }
            RuleAction::Ask => {
                return refused(
                    "tool.needs_approval",
                    "this call needs approval: run it in a Turn of a Chat",
                );
            }
        }
        if runs_here(tool) {
            None
        } else {
            refused(
                "tool.needs_turn",
                format!("`{name}` runs only in a Turn of a Chat"),
            )
        }
    }
}

fn runs_here(tool: &SavedTool) -> bool {
    matches!(
        tool.route,
        ToolRoute::Http {
            background: false,
            ..
        }
    )
}

/// What the program's code call result says, as the route answers it.
fn run_result(result: &ToolResult) -> CodeRunResult {
    let text: String = result
        .output
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text { text } => Some(text.as_str()),
            ContentPart::File { .. } | ContentPart::Media { .. } => None,
        })
        .collect();
    serde_json::from_str::<CodeRunResult>(&text).unwrap_or_else(|_| CodeRunResult {
        ok: false,
        value: None,
        // The sandbox could not run (its text says so); never a program's own result.
        error: Some(RunError {
            code: "code_mode.unavailable".into(),
            message: text,
        }),
        console: Vec::new(),
        tool_calls: 0,
        execution_id: None,
    })
}

/// Runs model-free code runs.
pub struct CodeRunWorkflow {
    setup: PhaseSetup,
    rules: Arc<dyn RuleStore>,
}

impl CodeRunWorkflow {
    /// A workflow whose phases are set up by `setup` (the saved identity's rights, the Vault,
    /// the tools), reading the approval rules from `rules`.
    pub fn new(setup: PhaseSetup, rules: Arc<dyn RuleStore>) -> Self {
        Self { setup, rules }
    }

    async fn run_program(
        &self,
        cx: &PhaseContext,
        scope: &RunScope,
        input: &CodeRunInput,
    ) -> Result<(), PhaseError> {
        let identity = &input.identity;
        // A code run sends no model request: nothing to bill, no budget.
        let access = self.setup.access(Some(identity), None, None).await?;
        // The rules as they are now: a call not yet made is checked by the current rules.
        let rules = self.rules.rules(identity.organization_id).await?;
        // Only HTTP tools that are not background get a handler; the others stay declared (a
        // program may name them) and are refused before the call log.
        let declared: Vec<SavedTool> = input
            .tools
            .iter()
            .map(|tool| {
                if runs_here(tool) {
                    tool.clone()
                } else {
                    SavedTool {
                        route: ToolRoute::Host,
                        ..tool.clone()
                    }
                }
            })
            .collect();
        let (mut tools, retry_safe) = self.setup.tools(cx, &declared, Some(identity))?;
        tools.enable_code_mode(self.setup.platform().code_limits());
        tools.check_program_calls(Arc::new(DirectCalls {
            tools: input.tools.clone(),
            rules,
            bot: input.bot_id,
            member: identity.actor_member_id,
        }));
        let tools = Arc::new(tools);
        let host = DurableHost::new(
            Arc::clone(&cx.engine),
            cx.execution.id,
            cx.generation,
            cx.execution.limit_start(),
            scope.clone(),
            Arc::clone(&cx.signals),
            retry_safe,
        )
        .with_access(access);
        let cancel = scope.cancellation();
        let call = input.call();
        let run = tokio::select! {
            run = tools.run_call(&host, 1, 0, &call, &cancel) => run,
            _ = cancel.cancelled() => return Err(PhaseError::Cancelled),
        };
        let result = match run {
            Ok(result) => result,
            Err(HostError::Fenced) => return Err(PhaseError::Fenced),
            Err(HostError::OutcomeUnknown { key }) => return Err(PhaseError::OutcomeUnknown(key)),
            Err(HostError::Closed | HostError::Abandoned) => return Err(PhaseError::Cancelled),
            Err(HostError::Denied(cause)) => {
                return Err(PhaseError::Failed {
                    category: ErrorCategory::Access,
                    cause,
                });
            }
            Err(HostError::Refused { category, cause }) => {
                return Err(PhaseError::Failed { category, cause });
            }
            Err(err @ (HostError::Declined(_) | HostError::InputArrived)) => {
                return Err(PhaseError::Storage(StoreError::Invalid(format!(
                    "a code run cannot {err}"
                ))));
            }
            Err(HostError::Storage(cause)) => {
                return Err(PhaseError::Storage(
                    host.take_failure().unwrap_or(StoreError::Invalid(cause)),
                ));
            }
        };
        let output = cx
            .engine
            .seal_json(&run_result(&result))
            .map_err(PhaseError::from)?;
        let commit = Commit {
            events: vec![EventKind::JobEnded {
                state: ExecutionState::Completed,
            }],
            state: Some(StateChange {
                state: ExecutionState::Completed,
                output: Some(output),
                ..StateChange::ended(ExecutionState::Completed)
            }),
            ..Commit::default()
        };
        cx.engine
            .commit(cx.execution.id, cx.generation, commit)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl Workflow for CodeRunWorkflow {
    fn kind(&self) -> &'static str {
        CODE_RUN
    }

    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError> {
        Ok(if cx.execution.state.is_terminal() {
            Next::Done
        } else {
            Next::Run("run".into())
        })
    }

    async fn run(
        &self,
        cx: &PhaseContext,
        _phase: &str,
        scope: &RunScope,
    ) -> Result<(), PhaseError> {
        let input: CodeRunInput = cx.input().await.map_err(PhaseError::from)?;
        self.run_program(cx, scope, &input).await
    }

    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError> {
        cx.commit_plain_end(end).await
    }
}
