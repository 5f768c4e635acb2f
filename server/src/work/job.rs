//! The `tool_job` workflow: one saved tool call run in its own execution.
//!
//! A background tool's call starts a job at once; a call that needs approval starts a job that
//! waits for its request's decision. The job runs the call exactly once through the same call
//! log as a Turn (so a takeover replays a saved result and never repeats a write it cannot
//! prove safe), and ends together with its notice to the work that started it.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::turn::HostError;
use openbot_schema::{
    ApprovalState, BotId, ChatId, ErrorCategory, EventKind, ExecutionState, ToolCall, ToolResult,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::notice::{job_finished, notice_content};
use crate::engine::{EngineEnd, Next, PhaseContext, PhaseError, RunScope, Wake, Workflow};
use crate::identity::ExecutionIdentity;
use crate::store::{
    Commit, NoticeTarget, NoticeWrite, RequestDecision, StateChange, StoreError, now_ms,
};
use crate::turns::{DurableHost, PhaseSetup, SavedNoticeTarget, SavedTool};

/// The execution kind of tool jobs.
pub const TOOL_JOB: &str = "tool_job";

/// The saved input of a tool job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobInput {
    /// The tool, as the Turn saved it.
    pub tool: SavedTool,
    /// The call, with its arguments.
    pub call: ToolCall,
    /// The identity of the Turn that asked; its current rights bound the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<ExecutionIdentity>,
    /// The organization.
    #[serde(default)]
    pub organization_id: Option<Uuid>,
    /// Where the result goes.
    pub notice: SavedNoticeTarget,
    /// The approval request the call waits for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<Uuid>,
    /// The Chat and Bot whose budgets the tree spends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<(Option<Uuid>, BotId)>,
    /// Whether a Code Mode program made the call: its arguments' Vault references open at
    /// the send, as the program's own calls' do.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_code: bool,
}

/// Runs tool jobs.
pub struct ToolJobWorkflow {
    setup: PhaseSetup,
}

impl ToolJobWorkflow {
    /// A workflow whose phases are set up by `setup` (rights, Vault, Apps, the tool).
    pub fn new(setup: PhaseSetup) -> Self {
        Self { setup }
    }
}

async fn input_of(cx: &PhaseContext) -> Result<JobInput, PhaseError> {
    cx.input().await.map_err(PhaseError::from)
}

/// Closes a request in the name of the platform (no member decided).
fn platform(state: ApprovalState, reason: &str) -> RequestDecision {
    RequestDecision {
        state: state.as_str().into(),
        member_id: Uuid::nil(),
        reason: Some(reason.into()),
        notice: None,
        writes: Default::default(),
    }
}

impl ToolJobWorkflow {
    /// Commits the job's end with its notice, then wakes the work the notice went to.
    async fn end_with(
        &self,
        cx: &PhaseContext,
        input: &JobInput,
        change: StateChange,
        events: Vec<EventKind>,
        handled_signals: Vec<i64>,
        notice: Option<String>,
    ) -> Result<(), PhaseError> {
        let target: NoticeTarget = input.notice.into();
        let commit = Commit {
            events,
            state: Some(change),
            handled_signals,
            notice: notice.map(|text| NoticeWrite {
                target,
                content: notice_content(&text),
            }),
            ..Commit::default()
        };
        cx.engine
            .commit(cx.execution.id, cx.generation, commit)
            .await?;
        if let Some(parent) = cx.execution.parent_id {
            cx.engine.hub.announce(Wake::Signal(parent));
        }
        Ok(())
    }

    async fn run_call(
        &self,
        cx: &PhaseContext,
        scope: &RunScope,
        input: &JobInput,
    ) -> Result<(), PhaseError> {
        // A tool job sends no model request: nothing to bill.
        let budgets = input
            .budget
            .and_then(|(chat, bot)| chat.map(|chat| (ChatId::from(chat), bot)));
        let access = self
            .setup
            .access(input.identity.as_ref(), budgets, None)
            .await?;
        let (tools, retry_safe) = self.setup.tools(
            cx,
            std::slice::from_ref(&input.tool),
            input.identity.as_ref(),
        )?;
        let tools = Arc::new(tools);
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
        .with_known_call(1, 0, &input.call.name);
        let cancel = scope.cancellation();
        // A cancelled job stops waiting for its call (as a Turn does): it ends `cancelled`.
        let run = tokio::select! {
            run = async {
                if input.from_code {
                    tools.run_program_call(&host, 1, 0, &input.call, &cancel).await
                } else {
                    tools.run_call(&host, 1, 0, &input.call, &cancel).await
                }
            } => run,
            _ = cancel.cancelled() => return Err(PhaseError::Cancelled),
        };
        let result: ToolResult = match run {
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
            // A tool job sends no model request: nothing to decline.
            Err(HostError::Declined(outcome)) => {
                return Err(PhaseError::Failed {
                    category: ErrorCategory::Internal,
                    cause: format!("a tool job's send was refused ({outcome:?})"),
                });
            }
            // A tool job never ends a Turn: no input check, no input to arrive.
            Err(HostError::InputArrived) => {
                return Err(PhaseError::Storage(StoreError::Invalid(
                    "input arrived for a tool job".into(),
                )));
            }
            Err(HostError::Storage(cause)) => {
                return Err(PhaseError::Storage(
                    host.take_failure().unwrap_or(StoreError::Invalid(cause)),
                ));
            }
        };
        let output = cx.engine.seal_json(&result).map_err(PhaseError::from)?;
        let change = StateChange {
            state: ExecutionState::Completed,
            outcome: None,
            failure: None,
            wake_at: None,
            unknown_call: None,
            output: Some(output),
            release: true,
            reason: None,
        };
        let notice = job_finished(&input.tool.definition.name, &input.call.id, &result);
        self.end_with(
            cx,
            input,
            change,
            vec![EventKind::JobEnded {
                state: ExecutionState::Completed,
            }],
            Vec::new(),
            Some(notice),
        )
        .await
    }

    /// Ends a job whose call will never run (denied, expired, revoked; or an approved plan,
    /// which has nothing to run).
    async fn close(
        &self,
        cx: &PhaseContext,
        input: &JobInput,
        state: ApprovalState,
    ) -> Result<(), PhaseError> {
        let notice = (state == ApprovalState::Expired).then(|| {
            format!(
                "[notice] The approval request for the call `{}` ({}) expired; the call did not run.",
                input.call.name, input.call.id
            )
        });
        // An approved plan did what it asked (plan mode is off); any other closed request's
        // call never ran.
        let end = if state == ApprovalState::Approved {
            ExecutionState::Completed
        } else {
            ExecutionState::Cancelled
        };
        self.end_with(
            cx,
            input,
            StateChange {
                state: end,
                ..StateChange::ended(ExecutionState::Cancelled)
            },
            vec![EventKind::JobEnded { state: end }],
            Vec::new(),
            notice,
        )
        .await
    }
}

#[async_trait]
impl Workflow for ToolJobWorkflow {
    fn kind(&self) -> &'static str {
        TOOL_JOB
    }

    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError> {
        if cx.execution.state.is_terminal() {
            return Ok(Next::Done);
        }
        let input = input_of(cx).await?;
        let Some(request_id) = input.request_id else {
            return Ok(Next::Run("call".into()));
        };
        let request = cx
            .engine
            .store
            .request(request_id)
            .await?
            .ok_or(StoreError::RequestNotFound(request_id))?;
        Ok(match ApprovalState::parse(&request.state) {
            Some(ApprovalState::Pending) if now_ms() < request.expires_at => Next::Wait {
                until: Some(request.expires_at),
            },
            Some(ApprovalState::Pending) => Next::Run("expire".into()),
            // An approved plan has nothing to run: the decision switched plan mode off.
            Some(ApprovalState::Approved) if input.tool.route == crate::turns::ToolRoute::Plan => {
                Next::Run("close:approved".into())
            }
            Some(ApprovalState::Approved) => Next::Run("call".into()),
            Some(other) => Next::Run(format!("close:{}", other.as_str())),
            None => {
                return Err(PhaseError::Storage(StoreError::Invalid(format!(
                    "request {request_id} is in the unknown state `{}`",
                    request.state
                ))));
            }
        })
    }

    async fn run(
        &self,
        cx: &PhaseContext,
        phase: &str,
        scope: &RunScope,
    ) -> Result<(), PhaseError> {
        let input = input_of(cx).await?;
        match phase {
            "call" => self.run_call(cx, scope, &input).await,
            "expire" => {
                let request_id = input
                    .request_id
                    .ok_or_else(|| StoreError::Invalid("no request to expire".into()))?;
                match cx
                    .engine
                    .store
                    .decide_request(
                        request_id,
                        platform(ApprovalState::Expired, "no decision in time"),
                    )
                    .await
                {
                    // Decided meanwhile, or closed now: `next` reads which.
                    Ok(_) | Err(StoreError::RequestClosed(_)) => Ok(()),
                    Err(err) => Err(err.into()),
                }
            }
            closed => {
                let state = closed
                    .strip_prefix("close:")
                    .and_then(ApprovalState::parse)
                    .unwrap_or(ApprovalState::Denied);
                self.close(cx, &input, state).await
            }
        }
    }

    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError> {
        let input = input_of(cx).await?;
        match end {
            EngineEnd::Cancelled { signals } => {
                if let Some(request_id) = input.request_id {
                    match cx
                        .engine
                        .store
                        .decide_request(
                            request_id,
                            platform(ApprovalState::Cancelled, "the work was cancelled"),
                        )
                        .await
                    {
                        Ok(_) | Err(StoreError::RequestClosed(_)) => {}
                        Err(err) => return Err(err.into()),
                    }
                }
                let notice = format!(
                    "[notice] The tool call `{}` ({}) was cancelled.",
                    input.call.name, input.call.id
                );
                self.end_with(
                    cx,
                    &input,
                    StateChange::ended(ExecutionState::Cancelled),
                    vec![EventKind::JobEnded {
                        state: ExecutionState::Cancelled,
                    }],
                    signals,
                    Some(notice),
                )
                .await
            }
            EngineEnd::Failed { category, cause } => {
                let failed = cx.failed_end(category, &cause)?;
                let error_id = failed.error_id;
                let notice = format!(
                    "[notice] The tool call `{}` ({}) could not run ({}, error {error_id}).",
                    input.call.name,
                    input.call.id,
                    crate::store::category_name(category)
                );
                self.end_with(
                    cx,
                    &input,
                    failed.change,
                    vec![failed.event],
                    Vec::new(),
                    Some(notice),
                )
                .await
            }
        }
    }
}
