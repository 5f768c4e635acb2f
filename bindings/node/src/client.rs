//! The native client: the core `Client` trait, method for method, with JSON values in the
//! schema's wire format. The TypeScript layer checks argument types and builds its classes
//! (`Client`, `Bot`, `Chat`, `Execution`) on top.

use std::str::FromStr;
use std::sync::Arc;

use futures::StreamExt;
use napi::Env;
use napi::bindgen_prelude::{Either, PromiseRaw, Result};
use napi_derive::napi;
use openbot_core::{Client, Error};
use openbot_schema::{
    ApprovalState, BotSpec, BotUpdate, DecideApproval, DecideOutcome, ErrorCode, SendInput,
    ToolResult,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::answer::answer;
use crate::error;
use crate::stream::EventStream;

/// A connected client, in either mode.
#[napi]
pub struct NativeClient {
    inner: Arc<dyn Client>,
}

impl NativeClient {
    /// Wraps a core client.
    pub fn new(inner: Arc<dyn Client>) -> Self {
        Self { inner }
    }
}

/// Reads an ID from JavaScript.
fn id<T: FromStr>(kind: &str, value: &str) -> Result<T> {
    T::from_str(value).map_err(|_| {
        error::invalid_input(format!(
            "`{}` is not a {kind} ID",
            value.chars().take(64).collect::<String>()
        ))
    })
}

/// Reads a schema value from JavaScript; a mismatch is bad input that says what is wrong.
fn from_js<T: DeserializeOwned>(what: &str, value: Value) -> Result<T> {
    serde_json::from_value(value).map_err(|e| error::invalid_input(format!("invalid {what}: {e}")))
}

/// Writes a schema value for JavaScript.
fn to_js<T: Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| {
        error::to_js(Error::new(
            ErrorCode::RequestFailed,
            format!("a value could not be encoded: {e}"),
        ))
    })
}

/// An approval request's ID from JavaScript (a UUID; `T` is the type the core takes).
fn request_id<T: FromStr>(value: &str) -> Result<T> {
    T::from_str(value).map_err(|_| {
        error::invalid_input(format!(
            "`{}` is not an approval request ID",
            value.chars().take(64).collect::<String>()
        ))
    })
}

/// An approval state from JavaScript: its wire name (`pending`, `approved`, ...).
fn approval_state(state: &str) -> Result<ApprovalState> {
    ApprovalState::parse(state).ok_or_else(|| {
        error::invalid_input(format!(
            "`{}` is not an approval state: use pending, approved, denied, expired, revoked or cancelled",
            state.chars().take(64).collect::<String>()
        ))
    })
}

/// A page size from JavaScript: a whole number from 1 (the server says how many at most).
fn page_limit(limit: Option<f64>) -> Result<Option<u32>> {
    match limit {
        None => Ok(None),
        Some(l) if l >= 1.0 && l.fract() == 0.0 && l <= f64::from(u32::MAX) => Ok(Some(l as u32)),
        Some(l) => Err(error::invalid_input(format!(
            "`limit` must be a whole number from 1, not {l}"
        ))),
    }
}

/// A cursor from JavaScript: a whole number from 0.
fn cursor(after: Option<f64>) -> Result<u64> {
    match after {
        None => Ok(0),
        Some(a) if a >= 0.0 && a.fract() == 0.0 && a <= 9_007_199_254_740_991.0 => Ok(a as u64),
        Some(a) => Err(error::invalid_input(format!(
            "`after` must be a whole number from 0, not {a}"
        ))),
    }
}

#[napi]
impl NativeClient {
    /// Creates a Bot from a `BotSpec`.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn create_bot<'env>(
        &self,
        env: &'env Env,
        spec: Value,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let spec: BotSpec = from_js("Bot spec", spec)?;
            let bot = inner.create_bot(spec).await.map_err(error::to_js)?;
            to_js(&bot)
        })
    }

    /// Reads a Bot.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn get_bot<'env>(
        &self,
        env: &'env Env,
        id_: String,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let bot = inner
                .get_bot(id("Bot", &id_)?)
                .await
                .map_err(error::to_js)?;
            to_js(&bot)
        })
    }

    /// Lists the Bots, oldest first.
    #[napi(ts_return_type = "Array<any> | Promise<Array<any>>")]
    pub fn list_bots<'env>(
        &self,
        env: &'env Env,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let bots = inner.list_bots().await.map_err(error::to_js)?;
            to_js(&bots)
        })
    }

    /// Changes a Bot with a `BotUpdate`.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn update_bot<'env>(
        &self,
        env: &'env Env,
        id_: String,
        update: Value,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let update: BotUpdate = from_js("Bot update", update)?;
            let bot = inner
                .update_bot(id("Bot", &id_)?, update)
                .await
                .map_err(error::to_js)?;
            to_js(&bot)
        })
    }

    /// Deletes a Bot that has no Chats left.
    #[napi(ts_return_type = "void | Promise<void>")]
    pub fn delete_bot<'env>(
        &self,
        env: &'env Env,
        id_: String,
    ) -> Result<Either<(), PromiseRaw<'env, ()>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            inner
                .delete_bot(id("Bot", &id_)?)
                .await
                .map_err(error::to_js)
        })
    }

    /// Creates a Chat with a Bot.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn create_chat<'env>(
        &self,
        env: &'env Env,
        bot_id: String,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let chat = inner
                .create_chat(id("Bot", &bot_id)?)
                .await
                .map_err(error::to_js)?;
            to_js(&chat)
        })
    }

    /// Reads a Chat.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn get_chat<'env>(
        &self,
        env: &'env Env,
        id_: String,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let chat = inner
                .get_chat(id("Chat", &id_)?)
                .await
                .map_err(error::to_js)?;
            to_js(&chat)
        })
    }

    /// Sends a `SendInput`; answers with its `SendReceipt`.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn send<'env>(
        &self,
        env: &'env Env,
        chat_id: String,
        input: Value,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let input: SendInput = from_js("input", input)?;
            let receipt = inner
                .send(id("Chat", &chat_id)?, input)
                .await
                .map_err(error::to_js)?;
            to_js(&receipt)
        })
    }

    /// Sends a `SendInput` that joins the running Turn; answers with its `SendReceipt`.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn steer<'env>(
        &self,
        env: &'env Env,
        chat_id: String,
        input: Value,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let input: SendInput = from_js("input", input)?;
            let receipt = inner
                .steer(id("Chat", &chat_id)?, input)
                .await
                .map_err(error::to_js)?;
            to_js(&receipt)
        })
    }

    /// Stops the Chat's running Turn.
    #[napi(ts_return_type = "void | Promise<void>")]
    pub fn stop<'env>(
        &self,
        env: &'env Env,
        chat_id: String,
    ) -> Result<Either<(), PromiseRaw<'env, ()>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            inner
                .stop(id("Chat", &chat_id)?)
                .await
                .map_err(error::to_js)
        })
    }

    /// Deletes a Chat once its Turns ended.
    #[napi(ts_return_type = "void | Promise<void>")]
    pub fn delete_chat<'env>(
        &self,
        env: &'env Env,
        chat_id: String,
    ) -> Result<Either<(), PromiseRaw<'env, ()>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            inner
                .delete_chat(id("Chat", &chat_id)?)
                .await
                .map_err(error::to_js)
        })
    }

    /// The Chat's `ChatEntry` list, oldest first.
    #[napi(ts_return_type = "Array<any> | Promise<Array<any>>")]
    pub fn history<'env>(
        &self,
        env: &'env Env,
        chat_id: String,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let entries = inner
                .history(id("Chat", &chat_id)?)
                .await
                .map_err(error::to_js)?;
            to_js(&entries)
        })
    }

    /// Reads an `Execution`.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn get_execution<'env>(
        &self,
        env: &'env Env,
        id_: String,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let execution = inner
                .get_execution(id("execution", &id_)?)
                .await
                .map_err(error::to_js)?;
            to_js(&execution)
        })
    }

    /// The execution's events after sequence `after` (0 by default).
    #[napi(ts_return_type = "EventStream | Promise<EventStream>")]
    pub fn observe<'env>(
        &self,
        env: &'env Env,
        id_: String,
        after: Option<f64>,
    ) -> Result<Either<EventStream, PromiseRaw<'env, EventStream>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let stream = inner
                .observe(id("execution", &id_)?, cursor(after)?)
                .await
                .map_err(error::to_js)?;
            Ok(EventStream::new(stream))
        })
    }

    /// Waits for an execution's end in Rust, with no event crossing into JavaScript on the
    /// way; answers with `{ execution, last_event }`: the final `Execution` and its last
    /// event (`turn_ended`, `job_ended` or `failed`).
    #[napi(
        ts_return_type = "{ execution: any, last_event: any } | Promise<{ execution: any, last_event: any }>"
    )]
    pub fn wait_execution<'env>(
        &self,
        env: &'env Env,
        id_: String,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let id = id("execution", &id_)?;
            let now = inner.get_execution(id).await.map_err(error::to_js)?;
            // An ended execution's last event is its last sequence: read only that one.
            let after = if now.state.is_terminal() {
                now.last_sequence.saturating_sub(1)
            } else {
                now.last_sequence
            };
            let mut events = inner.observe(id, after).await.map_err(error::to_js)?;
            let mut last = None;
            while let Some(event) = events.next().await {
                last = Some(event.map_err(error::to_js)?);
            }
            let execution = inner.get_execution(id).await.map_err(error::to_js)?;
            to_js(&json!({ "execution": execution, "last_event": last }))
        })
    }

    /// Asks an execution to stop; answers with its `Execution`.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn cancel_execution<'env>(
        &self,
        env: &'env Env,
        id_: String,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let execution = inner
                .cancel_execution(id("execution", &id_)?)
                .await
                .map_err(error::to_js)?;
            to_js(&execution)
        })
    }

    /// Pauses an execution: it sends nothing new until resumed (state `waiting`); answers with
    /// its `Execution`. Only a server pauses: in memory this is `invalid_input`.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn pause_execution<'env>(
        &self,
        env: &'env Env,
        id_: String,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let execution = inner
                .pause_execution(id("execution", &id_)?)
                .await
                .map_err(error::to_js)?;
            to_js(&execution)
        })
    }

    /// Resumes a paused execution; answers with its `Execution`. In memory `invalid_input`.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn resume_execution<'env>(
        &self,
        env: &'env Env,
        id_: String,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let execution = inner
                .resume_execution(id("execution", &id_)?)
                .await
                .map_err(error::to_js)?;
            to_js(&execution)
        })
    }

    /// A Chat's plan mode, `{ enabled }` (always off in memory).
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn plan_mode<'env>(
        &self,
        env: &'env Env,
        chat_id: String,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let mode = inner
                .plan_mode(id("Chat", &chat_id)?)
                .await
                .map_err(error::to_js)?;
            to_js(&mode)
        })
    }

    /// Turns a Chat's plan mode on or off; answers with the `{ enabled }` now in force. In plan
    /// mode the Bot may only call `propose_plan`. Only a server has plan mode: turning it on in
    /// memory is `invalid_input`.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn set_plan_mode<'env>(
        &self,
        env: &'env Env,
        chat_id: String,
        enabled: bool,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let mode = inner
                .set_plan_mode(id("Chat", &chat_id)?, enabled)
                .await
                .map_err(error::to_js)?;
            to_js(&mode)
        })
    }

    /// Delivers a `ToolResult` the execution waits for.
    #[napi(ts_return_type = "void | Promise<void>")]
    pub fn deliver_tool_result<'env>(
        &self,
        env: &'env Env,
        id_: String,
        result: Value,
    ) -> Result<Either<(), PromiseRaw<'env, ()>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let result: ToolResult = from_js("tool result", result)?;
            inner
                .deliver_tool_result(id("execution", &id_)?, result)
                .await
                .map_err(error::to_js)
        })
    }

    /// The `ApprovalRequest`s the caller may decide, newest first; with `state` (a wire name
    /// such as `pending`) only those in that state. In memory nothing asks for approval, so the
    /// list is empty. An unknown state is `invalid_input` and nothing is sent.
    #[napi(ts_return_type = "Array<any> | Promise<Array<any>>")]
    pub fn list_approvals<'env>(
        &self,
        env: &'env Env,
        state: Option<String>,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let state = state.as_deref().map(approval_state).transpose()?;
            let requests = inner.list_approvals(state).await.map_err(error::to_js)?;
            to_js(&requests)
        })
    }

    /// Decides a pending approval request with a `DecideApproval` (`{ decision, reason? }`);
    /// answers with the `ApprovalRequest` as decided. Approved, its call runs once in its own
    /// execution; denied, it never runs. A request that is not pending is `conflict`; an
    /// unknown one (always, in memory) `not_found`.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn decide_approval<'env>(
        &self,
        env: &'env Env,
        id_: String,
        decision: Value,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let decision: DecideApproval = from_js("decision", decision)?;
            let request = inner
                .decide_approval(request_id(&id_)?, decision)
                .await
                .map_err(error::to_js)?;
            to_js(&request)
        })
    }

    /// The caller's executions that wait in `outcome_unknown` for a decision, oldest first:
    /// an `UnknownOutcomePage` (`{ items, next_cursor? }`) of up to `limit` (the server's
    /// default 50, at most 200) after `cursor`. In memory no call's answer is lost, so the page
    /// is empty. A `limit` that is not a whole number from 1 is `invalid_input`.
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn list_unknown_outcomes<'env>(
        &self,
        env: &'env Env,
        limit: Option<f64>,
        cursor: Option<String>,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let page = inner
                .list_unknown_outcomes(page_limit(limit)?, cursor)
                .await
                .map_err(error::to_js)?;
            to_js(&page)
        })
    }

    /// Decides the call an execution in `outcome_unknown` waits for with a `DecideOutcome`
    /// (`{ call, decision, result?, reason? }`); answers with the `OutcomeDecisionRecord`.
    /// `applied` saves `result` as the call's result, `not_applied` sends the call again,
    /// `give_up` ends the execution `failed`. Another call or a second decision is `conflict`;
    /// in memory it is `invalid_input` (only a server has unknown outcomes).
    #[napi(ts_return_type = "any | Promise<any>")]
    pub fn decide_outcome<'env>(
        &self,
        env: &'env Env,
        id_: String,
        decision: Value,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let decision: DecideOutcome = from_js("outcome decision", decision)?;
            let record = inner
                .decide_outcome(id("execution", &id_)?, decision)
                .await
                .map_err(error::to_js)?;
            to_js(&record)
        })
    }

    /// Closes the client; later calls fail with the code `closed`.
    #[napi]
    pub async fn close(&self) {
        self.inner.close().await;
    }
}
