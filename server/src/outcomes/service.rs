//! The unknown-outcome use cases: list what waits for a decision, and decide.

use std::sync::Arc;

use openbot_core::turn::{CallKey, CallResult, CallSlot};
use openbot_schema::{
    Action, DecideOutcome, EventKind, ExecutionId, ExecutionKind, ExecutionState, Message,
    OutcomeDecision, OutcomeDecisionRecord, Resource, ToolCall, ToolResult, UnknownOutcome,
    UnknownOutcomePage,
};
use uuid::Uuid;

use crate::engine::{Engine, EngineContext, EngineError, Wake};
use crate::identity::{AccessError, Caller, Credential};
use crate::paging::Paging;
use crate::store::{
    ExecutionRow, GiveUpPayload, OutcomeDecisionRow, Resolution, StoreError, UnknownDecision,
    call_key_name, parse_call_key, stored_time,
};
use crate::turns::TURN;
use crate::work::{JobInput, TOOL_JOB};

/// The longest result text an `applied` decision may give, in bytes.
pub const MAX_RESULT: usize = 100_000;

/// The longest reason, in bytes.
const MAX_REASON: usize = 1000;

/// Why an unknown-outcome use case failed.
#[derive(Debug, thiserror::Error)]
pub enum OutcomeError {
    /// Not there, or not visible to the caller.
    #[error("{0} was not found")]
    NotFound(&'static str),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// The caller's token lacks the right.
    #[error(transparent)]
    Forbidden(#[from] AccessError),
    /// The execution does not wait for a decision on that call (another call, none, or it was
    /// decided already): nothing was written.
    #[error("{0}")]
    Conflict(String),
    /// Storage failed, or stored data could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<EngineError> for OutcomeError {
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::Store(err) => OutcomeError::Store(err),
            other => OutcomeError::Store(StoreError::Invalid(other.to_string())),
        }
    }
}

/// The unknown-outcome use cases.
#[derive(Clone)]
pub struct Outcomes {
    engine: Arc<Engine>,
}

fn record_view(row: OutcomeDecisionRow) -> Result<OutcomeDecisionRecord, StoreError> {
    let decision = OutcomeDecision::parse(&row.decision)
        .ok_or_else(|| StoreError::Invalid(format!("decision `{}`", row.decision)))?;
    Ok(OutcomeDecisionRecord {
        id: row.id,
        execution_id: row.execution_id,
        call: call_key_name(&row.key),
        decision,
        reason: row.reason,
        decided_by: row.member_id,
        token_id: row.token_id.map(Into::into),
        decided_at: stored_time(row.decided_at)?,
    })
}

/// The tool call behind a call of `row`: a tool job's one saved call, the call in the saved
/// model answer of a Turn's step, or, for a call a Code Mode program made, the call its
/// `tool_call` event published (its arguments live in the program, not in the answer).
async fn tool_call_of(
    cx: &EngineContext,
    row: &ExecutionRow,
    key: CallKey,
) -> Result<ToolCall, OutcomeError> {
    // A tool job holds its one call, whoever asked for it (a model or a program).
    if row.kind == TOOL_JOB {
        let input: JobInput = cx.open_json(row.input_record).await?;
        return Ok(input.call);
    }
    let index = match key.slot {
        CallSlot::Tool(index) => index,
        CallSlot::Code { tool, call } => return code_call_of(cx, row, key, tool, call).await,
        CallSlot::Model => {
            return Err(StoreError::Invalid(format!(
                "call {key} of {} is a model call, not a tool call",
                row.id
            ))
            .into());
        }
    };
    let model = cx
        .store
        .latest_call(row.id, key.step, CallSlot::Model)
        .await?
        .and_then(|call| call.result_record)
        .ok_or_else(|| {
            StoreError::Invalid(format!(
                "step {} of {} has no saved answer",
                key.step, row.id
            ))
        })?;
    answer_call(cx, row, key, model, index).await
}

/// Call `index` of the model answer saved in `model` for `key`'s step.
async fn answer_call(
    cx: &EngineContext,
    row: &ExecutionRow,
    key: CallKey,
    model: Uuid,
    index: u32,
) -> Result<ToolCall, OutcomeError> {
    match cx.open_json::<CallResult>(model).await? {
        CallResult::Model {
            message: Message::Assistant { tool_calls, .. },
            ..
        } => tool_calls.get(index as usize).cloned().ok_or_else(|| {
            StoreError::Invalid(format!(
                "the answer of step {} has no call {index}",
                key.step
            ))
            .into()
        }),
        _ => Err(
            StoreError::Invalid(format!("step {} of {} holds no answer", key.step, row.id)).into(),
        ),
    }
}

/// Call `call` of the program of code call `tool` in `key`'s step: the last `tool_call` event
/// of that step whose ID is the code call's ID, the index and a fingerprint (the ID the
/// program's replay compares, so a decided result is returned to the same call only).
async fn code_call_of(
    cx: &EngineContext,
    row: &ExecutionRow,
    key: CallKey,
    tool: u32,
    call: u32,
) -> Result<ToolCall, OutcomeError> {
    // A model-free code run has no model answer: its program is its one code call.
    let parent = if row.kind == crate::codemode::CODE_RUN {
        crate::codemode::CODE_CALL_ID.to_string()
    } else {
        let model = cx
            .store
            .latest_call(row.id, key.step, CallSlot::Model)
            .await?
            .and_then(|call| call.result_record)
            .ok_or_else(|| {
                StoreError::Invalid(format!(
                    "step {} of {} has no saved answer",
                    key.step, row.id
                ))
            })?;
        answer_call(cx, row, key, model, tool).await?.id
    };
    let prefix = format!("{parent}.{call}.");
    let mut found = None;
    let mut after = 0;
    loop {
        let page = cx.store.events(row.id, after, 500).await?;
        let Some(last) = page.last() else { break };
        after = last.sequence as i64;
        for event in page {
            if let EventKind::ToolCall { step, call } = event.kind
                && step == key.step
                && call.id.starts_with(&prefix)
            {
                found = Some(call);
            }
        }
    }
    found.ok_or_else(|| {
        StoreError::Invalid(format!(
            "call {key} of {} has no published tool call",
            row.id
        ))
        .into()
    })
}

impl Outcomes {
    /// The use cases on this engine.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self { engine }
    }

    fn kind_of(row: &ExecutionRow) -> Result<ExecutionKind, StoreError> {
        match row.kind.as_str() {
            TURN => Ok(ExecutionKind::Turn),
            TOOL_JOB => Ok(ExecutionKind::ToolJob),
            crate::codemode::CODE_RUN => Ok(ExecutionKind::CodeRun),
            other => Err(StoreError::Invalid(format!(
                "execution {} of kind `{other}` has no public view",
                row.id
            ))),
        }
    }

    async fn view(&self, row: ExecutionRow) -> Result<UnknownOutcome, OutcomeError> {
        let key = row.unknown_call.ok_or_else(|| {
            StoreError::Invalid(format!("execution {} waits for no known call", row.id))
        })?;
        let tool_call = tool_call_of(self.engine.context(), &row, key).await?;
        Ok(UnknownOutcome {
            execution_id: row.id,
            kind: Self::kind_of(&row)?,
            chat_id: row.chat_id.map(Into::into),
            call: call_key_name(&key),
            step: key.step,
            attempt: key.attempt,
            tool_call,
            idempotency_key: key.idempotency_key(row.id),
            waiting_since: stored_time(row.updated_at)?,
        })
    }

    /// One page of the caller's executions that wait in `outcome_unknown`, oldest first.
    /// Needs the `outcomes` read right; the Bot limit is part of the query.
    pub async fn list(
        &self,
        caller: &Caller,
        paging: &Paging<ExecutionId>,
    ) -> Result<UnknownOutcomePage, OutcomeError> {
        caller.require(Resource::Outcomes, Action::Read)?;
        let rows = self
            .engine
            .context()
            .store
            .unknown_outcomes(
                &caller.scope(),
                caller.bot_ids.as_deref(),
                paging.after,
                paging.fetch(),
            )
            .await?;
        let (rows, next_cursor) = paging.finish(rows, |row| row.id);
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            items.push(self.view(row).await?);
        }
        Ok(UnknownOutcomePage { items, next_cursor })
    }

    /// Decides the call execution `id` waits for. Needs the `outcomes` write right and an
    /// execution the caller may see (else not found). The decision must name the call the
    /// execution waits for; once it is written (with its audit entry, in one transaction) the
    /// execution is queued again: `applied` goes on with the given result and never sends the
    /// call again, `not_applied` sends it again as a new attempt, `give_up` ends it `failed`.
    /// A second decision for the same call, or one for another call, is a conflict.
    pub async fn decide(
        &self,
        caller: &Caller,
        id: ExecutionId,
        decision: DecideOutcome,
    ) -> Result<OutcomeDecisionRecord, OutcomeError> {
        caller.require(Resource::Outcomes, Action::Write)?;
        if decision
            .reason
            .as_ref()
            .is_some_and(|r| r.len() > MAX_REASON)
        {
            return Err(OutcomeError::Invalid(format!(
                "reason may have at most {MAX_REASON} characters"
            )));
        }
        match (&decision.decision, &decision.result) {
            (OutcomeDecision::Applied, None) => {
                return Err(OutcomeError::Invalid(
                    "an `applied` decision needs the call's `result`".into(),
                ));
            }
            (OutcomeDecision::Applied, Some(result)) if result.len() > MAX_RESULT => {
                return Err(OutcomeError::Invalid(format!(
                    "result may have at most {MAX_RESULT} bytes"
                )));
            }
            (OutcomeDecision::NotApplied | OutcomeDecision::GiveUp, Some(_)) => {
                return Err(OutcomeError::Invalid(
                    "only an `applied` decision takes a `result`".into(),
                ));
            }
            _ => {}
        }
        let key = parse_call_key(&decision.call).ok_or_else(|| {
            OutcomeError::Invalid("call must be a call as listed, e.g. `1/tool:0/1`".into())
        })?;
        let cx = self.engine.context();
        // Another member's work, or another Bot's for a Bot-limited token, is not found.
        let row = match cx
            .store
            .visible_execution(id, &caller.scope(), caller.bot_ids.as_deref())
            .await?
        {
            Some(row) => row,
            None => return Err(OutcomeError::NotFound("execution")),
        };
        if row.state != ExecutionState::OutcomeUnknown {
            return Err(OutcomeError::Conflict(format!(
                "the execution is {} and waits for no decision",
                row.state.as_str()
            )));
        }
        if row.unknown_call != Some(key) {
            let waiting = row
                .unknown_call
                .as_ref()
                .map(call_key_name)
                .unwrap_or_default();
            return Err(OutcomeError::Conflict(format!(
                "the execution waits for a decision on call {waiting}, not {}",
                decision.call
            )));
        }
        let resolution = match decision.decision {
            OutcomeDecision::Applied => {
                let call = tool_call_of(cx, &row, key).await?;
                let result = ToolResult::text(&call, decision.result.unwrap_or_default());
                let sealed = cx.seal_json(&CallResult::Tool {
                    result: result.clone(),
                })?;
                Resolution::Applied {
                    result: sealed,
                    events: vec![EventKind::ToolResult {
                        step: key.step,
                        result,
                    }],
                }
            }
            OutcomeDecision::NotApplied => Resolution::NotApplied,
            OutcomeDecision::GiveUp => {
                let payload = GiveUpPayload {
                    call: call_key_name(&key),
                    reason: decision
                        .reason
                        .clone()
                        .unwrap_or_else(|| "no reason given".into()),
                };
                Resolution::GiveUp {
                    payload: serde_json::to_string(&payload)
                        .map_err(|e| StoreError::Invalid(e.to_string()))?,
                }
            }
        };
        let publishes = matches!(resolution, Resolution::Applied { .. });
        let (token_id, session_id) = match caller.credential {
            Credential::Token { id } => (Some(id), None),
            Credential::Session { id } => (None, Some(id)),
        };
        let written = cx
            .store
            .decide_unknown(
                id,
                UnknownDecision {
                    id: Uuid::now_v7(),
                    key,
                    resolution,
                    member_id: caller.member.member_id,
                    token_id,
                    session_id,
                    reason: decision.reason,
                },
            )
            .await
            .map_err(|err| match err {
                StoreError::NotWaiting(_) => {
                    OutcomeError::Conflict("the call was decided meanwhile".into())
                }
                other => other.into(),
            })?;
        if publishes {
            cx.hub.announce(Wake::Events(id));
        }
        cx.hub.announce(Wake::Work);
        Ok(record_view(written)?)
    }
}
