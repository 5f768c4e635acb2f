//! The model-free run's use case: submit the run as a `code_run` execution under its command
//! key, then wait (bounded) for its saved result.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use openbot_schema::{
    Action, BotId, CodeRun, CodeRunError as RunError, CodeRunResult, ErrorCategory, EventKind,
    ExecutionId, ExecutionState, Resource,
};
use sha2::{Digest, Sha256};

use super::workflow::{CODE_RUN, CodeRunInput};
use crate::chats::{ChatError, Chats};
use crate::engine::{Engine, EngineError, Submission};
use crate::identity::{Caller, ExecutionIdentity};
use crate::platform::Platform;
use crate::store::{ExecutionRow, StoreError};

/// How much longer than the run's wall time the route waits for its end before it answers
/// `202` with the execution to observe.
const WAIT_MARGIN: Duration = Duration::from_secs(10);

/// Why a program could not be run (its own failures are in the result).
#[derive(Debug, thiserror::Error)]
pub enum CodeRunError {
    /// The Bot or its tools could not be read, or the caller may not use them.
    #[error(transparent)]
    Chat(#[from] ChatError),
    /// The caller's token lacks the right.
    #[error("{0}")]
    Forbidden(String),
    /// The command key was used for another request.
    #[error("command key `{0}` was used for other input")]
    Conflict(String),
    /// The run could not be stored or read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<EngineError> for CodeRunError {
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::Store(StoreError::CommandKeyConflict(key)) => Self::Conflict(key),
            EngineError::Store(err) => Self::Store(err),
            other => Self::Store(StoreError::Invalid(other.to_string())),
        }
    }
}

/// What the route answers: the run's result, and whether the run had ended (`false`: the
/// bounded wait ran out, and the result only names the execution).
#[derive(Debug)]
pub struct CodeRunAnswer {
    /// Whether the run ended.
    pub ended: bool,
    /// Its result, with its execution.
    pub result: CodeRunResult,
}

/// What a run's command key stands for: its kind, its Bot and its program (not the Bot's
/// tools or rules at the time, so a retry after a change still finds its run).
fn run_digest(bot: BotId, code: &str) -> Vec<u8> {
    let mut digest = Sha256::new();
    digest.update(CODE_RUN.as_bytes());
    digest.update([0]);
    digest.update(bot.to_string().as_bytes());
    digest.update([0]);
    digest.update(code.as_bytes());
    digest.finalize().to_vec()
}

/// Runs `run.code` against the tools of Bot `bot_id` with Code Mode's limits, with no model
/// and no Turn, as a `code_run` execution: the caller needs the right to chat (`chats` write)
/// and may use the Bot; each call is checked against the tool's schema and the approval rules
/// (a call that would ask for approval is refused), goes out through the outbound policy and
/// is saved in the run's call log. With a command key, a retry answers the first run's
/// execution and result and sends nothing again; another program or Bot under the same key
/// is a conflict. Waits for the run's end up to its wall time plus a margin.
pub async fn run_program(
    engine: &Arc<Engine>,
    chats: &Chats,
    platform: &Platform,
    caller: &Caller,
    bot_id: BotId,
    run: CodeRun,
) -> Result<CodeRunAnswer, CodeRunError> {
    caller
        .require(Resource::Chats, Action::Write)
        .map_err(|e| CodeRunError::Forbidden(e.to_string()))?;
    let digest = run_digest(bot_id, &run.code);
    let store = &engine.context().store;
    // A retry of a recorded run answers that run, before any other check can refuse it (a
    // Bot since changed): nothing is submitted or sent again.
    let existing = match run.command_key.as_deref() {
        Some(key) => match store.command_key(&caller.scope(), key).await? {
            Some(row) if row.input_digest != digest => {
                return Err(CodeRunError::Conflict(key.into()));
            }
            Some(row) => Some(row.execution_id),
            None => None,
        },
        None => None,
    };
    let id = match existing {
        Some(id) => id,
        None => {
            let (bot, tools) = chats.bot_tools(caller, bot_id).await?;
            let input = CodeRunInput {
                bot_id: bot.id,
                code: run.code,
                tools,
                identity: ExecutionIdentity::for_turn(caller, caller.member.member_id, bot.id),
            };
            let submission = Submission::new(CODE_RUN, caller.scope(), &input)
                .with_optional_key(run.command_key)
                .with_events(vec![EventKind::ToolCall {
                    step: 1,
                    call: input.call(),
                }]);
            engine.submit_as(submission, digest).await?.execution_id()
        }
    };
    let bound = Duration::from_millis(platform.code_limits().wall_ms) + WAIT_MARGIN;
    wait_for(engine, id, bound).await
}

/// Waits up to `bound` for run `id` to end, then answers what it saved.
async fn wait_for(
    engine: &Arc<Engine>,
    id: ExecutionId,
    bound: Duration,
) -> Result<CodeRunAnswer, CodeRunError> {
    let row = engine.execution(id).await?;
    // An ended run, or one that waits for a decision on a lost write, is answered at once.
    if row.state.is_terminal() || row.state == ExecutionState::OutcomeUnknown {
        return answer_of(engine, row).await;
    }
    // From the run's last event on: the stream ends after the execution's last event; a run
    // that waits (a pause) keeps it open until the bound.
    let mut events = engine.observe(id, row.last_sequence.max(0) as u64);
    let waited = tokio::time::timeout(bound, async {
        while let Some(event) = events.next().await {
            // A lost write waits for a person's decision: answer now with the execution.
            if matches!(event?.kind, EventKind::CallOutcomeUnknown { .. }) {
                break;
            }
        }
        Ok::<(), StoreError>(())
    })
    .await;
    if let Ok(Err(err)) = waited {
        return Err(err.into());
    }
    let row = engine.execution(id).await?;
    answer_of(engine, row).await
}

fn unfinished(id: ExecutionId, code: &str, message: String) -> CodeRunResult {
    CodeRunResult {
        ok: false,
        value: None,
        error: Some(RunError {
            code: code.into(),
            message,
        }),
        console: Vec::new(),
        tool_calls: 0,
        execution_id: Some(id),
    }
}

async fn answer_of(engine: &Arc<Engine>, row: ExecutionRow) -> Result<CodeRunAnswer, CodeRunError> {
    let id = row.id;
    let result = match row.state {
        ExecutionState::Completed => {
            let output = row.output_record.ok_or_else(|| {
                StoreError::Invalid(format!("the completed code run {id} has no output"))
            })?;
            let mut result: CodeRunResult = engine
                .context()
                .open_json(output)
                .await
                .map_err(CodeRunError::from)?;
            result.execution_id = Some(id);
            result
        }
        ExecutionState::Failed => {
            let category = row.failure_category.unwrap_or(ErrorCategory::Internal);
            let error = row
                .error_id
                .map(|e| format!(", error {e}"))
                .unwrap_or_default();
            unfinished(
                id,
                "code_mode.run_failed",
                format!(
                    "the run failed ({}{error})",
                    crate::store::category_name(category)
                ),
            )
        }
        ExecutionState::Cancelled => {
            unfinished(id, "code_mode.cancelled", "the run was cancelled".into())
        }
        ExecutionState::Interrupted => unfinished(
            id,
            "code_mode.interrupted",
            format!(
                "the run was interrupted: {}",
                row.reason.as_deref().unwrap_or("no reason saved")
            ),
        ),
        ExecutionState::OutcomeUnknown => {
            return Ok(CodeRunAnswer {
                ended: false,
                result: unfinished(
                    id,
                    "code_mode.outcome_unknown",
                    format!(
                        "a write of the program was maybe sent and its answer was lost: the run \
                         waits for a decision (GET /v1/unknown-outcomes, POST \
                         /v1/executions/{id}/outcome), then send the request again with the \
                         same command key for its result"
                    ),
                ),
            });
        }
        state => {
            return Ok(CodeRunAnswer {
                ended: false,
                result: unfinished(
                    id,
                    "code_mode.running",
                    format!(
                        "the run has not ended yet (state `{}`): read its events at \
                         /v1/executions/{id}/events, or send the request again with the same \
                         command key for its result",
                        state.as_str()
                    ),
                ),
            });
        }
    };
    Ok(CodeRunAnswer {
        ended: true,
        result,
    })
}
