//! One input's delivery: durable work of the organization's `channels` service, one execution
//! per platform event (its command key is the event ID, so a platform's retry finds it).
//!
//! It sends the input to the conversation's Chat as the Channel's creator (their current
//! rights decide), waits for the Turn to end (a durable timer rechecks it, with no owner
//! while waiting), and sends the reply as a saved call ([`SavedCalls`], one call-log attempt
//! per request): the input's row goes `sending` -> `writing` in the commit that saves the call
//! as `sending`, before the request leaves; then `sent` / `rejected` / back to `sending` for a
//! proven rate limit or a request that never left, committed with the call's result. A new
//! owner that finds `writing` does not know whether the platform got the reply: it records
//! `unknown` and sends nothing. Every write carries the owner's generation.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_schema::{ExecutionState, Message, SendState};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::sends::{ChannelHttp, Reply, SendOutcome};
use super::service::{ChannelSecrets, open_secrets};
use super::sql::{BeginWrite, EndMessage, RetryLater};
use super::store::{ChannelRow, ChannelStore, MessageRow, Stage};
use crate::engine::{
    EngineEnd, Next, PhaseContext, PhaseError, RunScope, SavedCalls, Submission, Workflow,
};
use crate::identity::{ServiceIdentity, ServiceOwner};
use crate::store::{CallPhase, Commit, Millis, StoreError, TxWrite, TxWrites};
use crate::triggers::{FiringStores, SendAs, SendError, Sent, send_as};
use openbot_core::turn::{CallKey, CallSlot};

/// The execution kind of input deliveries.
pub const CHANNEL_DELIVERY: &str = "channel_delivery";
/// How often a delivery may try a request that never left before it gives up (rejected).
pub const MAX_ATTEMPTS: i64 = 8;

/// The saved input of a delivery: the same for every retry of the platform's event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryInput {
    /// The Channel.
    pub channel_id: Uuid,
    /// The platform's ID of the input.
    pub event_id: String,
}

/// The service that runs an organization's Channels.
pub fn channels_service(organization: Uuid) -> ServiceIdentity {
    ServiceIdentity {
        owner: ServiceOwner::Organization(organization),
        name: "channels".into(),
    }
}

/// The submission of a delivery.
pub fn delivery_submission(
    organization: Uuid,
    input: &DeliveryInput,
) -> Submission<'_, DeliveryInput> {
    let key = format!("channel-input:{}:{}", input.channel_id, input.event_id);
    Submission::new(
        CHANNEL_DELIVERY,
        channels_service(organization).scope(),
        input,
    )
    .with_key(key)
}

/// How long a delivery waits before it looks at its Turn again: short for a young Turn,
/// up to five seconds for a long one.
fn recheck_after(now: Millis, since: Millis) -> Millis {
    ((now - since) / 10).clamp(100, 5_000)
}

/// The wait before another try of a request that never left.
fn backoff(attempts: i64) -> Millis {
    1_000i64.saturating_mul(1 << attempts.clamp(0, 6))
}

/// The reply's request `attempt` (from 1) in the delivery's call log.
fn reply_call(attempt: i64) -> Result<CallKey, StoreError> {
    let attempt = u32::try_from(attempt)
        .map_err(|_| StoreError::Invalid(format!("a reply's attempt {attempt} is out of range")))?;
    Ok(CallKey {
        step: 1,
        slot: CallSlot::Tool(0),
        attempt,
    })
}

/// What a reply request came to: the call's saved result, and what it does to the input's row.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
enum ReplyResult {
    /// The platform took it: its message ID.
    Sent { id: String },
    /// Refused for good, or given up on.
    Rejected { why: String },
    /// The answer was lost: it may have been posted (never sent again).
    Unknown { why: String },
    /// It never left, or a proven rate limit: sent again at `at`.
    Retry { at: Millis, why: String },
}

impl ReplyResult {
    fn write(&self, message_id: Uuid) -> Arc<dyn TxWrite> {
        let end = |state, id: Option<&String>, why: Option<&String>| -> Arc<dyn TxWrite> {
            Arc::new(EndMessage {
                message_id,
                state,
                platform_message_id: id.cloned(),
                error: why.cloned(),
            })
        };
        match self {
            Self::Sent { id } => end(SendState::Sent, Some(id), None),
            Self::Rejected { why } => end(SendState::Rejected, None, Some(why)),
            Self::Unknown { why } => end(SendState::Unknown, None, Some(why)),
            Self::Retry { at, why } => Arc::new(RetryLater {
                message_id,
                at: *at,
                error: why.clone(),
            }),
        }
    }
}

/// Runs deliveries.
pub struct DeliveryWorkflow {
    channels: Arc<dyn ChannelStore>,
    stores: FiringStores,
    http: ChannelHttp,
}

impl DeliveryWorkflow {
    /// A workflow over these stores, sending through `http`.
    pub fn new(channels: Arc<dyn ChannelStore>, stores: FiringStores, http: ChannelHttp) -> Self {
        Self {
            channels,
            stores,
            http,
        }
    }

    async fn parts(
        &self,
        cx: &PhaseContext,
    ) -> Result<Option<(ChannelRow, MessageRow)>, PhaseError> {
        let input: DeliveryInput = cx.input().await.map_err(PhaseError::from)?;
        let Some(channel) = self.channels.channel(input.channel_id).await? else {
            return Ok(None);
        };
        let message = self
            .channels
            .message(input.channel_id, &input.event_id)
            .await?;
        Ok(message.map(|m| (channel, m)))
    }

    async fn open_text(&self, cx: &PhaseContext, record: Uuid) -> Result<String, PhaseError> {
        let blob = cx
            .engine
            .store
            .sealed(record)
            .await?
            .ok_or_else(|| StoreError::Invalid("a channel message's text is missing".into()))?;
        let bytes = cx
            .engine
            .keys
            .open(&blob)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        Ok(String::from_utf8(bytes).map_err(|e| StoreError::Invalid(e.to_string()))?)
    }

    /// Sends the input to the conversation's Chat (created on its first input).
    async fn start(
        &self,
        cx: &PhaseContext,
        channel: &ChannelRow,
        message: &MessageRow,
    ) -> Result<(), PhaseError> {
        let chat = match self
            .channels
            .conversation_chat(channel.id, &message.conversation)
            .await?
        {
            Some(chat) => chat,
            None => {
                // The Chat first, then its mapping: two first inputs at once may each make a
                // Chat, and the mapping keeps one (the other stays empty).
                let made = self
                    .stores
                    .chats
                    .create_chat(
                        channel.member_id,
                        channel.bot_id,
                        openbot_schema::ChatId::new(),
                    )
                    .await?;
                self.channels
                    .map_conversation(channel.id, &message.conversation, made.id)
                    .await?
            }
        };
        let text = self.open_text(cx, message.text_record).await?;
        let who = SendAs {
            organization_id: channel.organization_id,
            member_id: channel.member_id,
            credential: channel.credential,
        };
        let sent = send_as(
            self.stores.identity.as_ref(),
            &self.stores.chats(cx),
            who,
            chat,
            text,
            format!("channel:{}:{}", channel.id, message.event_id),
        )
        .await;
        match sent {
            Ok(Sent::Turn(turn)) => self.channels.set_answering(message.id, chat, turn).await?,
            Ok(Sent::Refused(why)) | Err(SendError::Conflict(why)) => {
                tracing::info!(channel = %channel.id, "channel input refused: the creator may no longer send");
                end_message(cx, EndMessage::unsent(message.id, SendState::Refused, &why)).await?;
            }
            Err(SendError::Store(err)) => return Err(err.into()),
        }
        Ok(())
    }

    /// Saves the reply of the ended Turn: its last answer's text, or a safe note of its
    /// failure (category and error ID only).
    async fn reply(&self, cx: &PhaseContext, message: &MessageRow) -> Result<(), PhaseError> {
        let Some(turn) = message.turn_id else {
            return Ok(());
        };
        let row = cx.engine.store.execution(turn).await?;
        let mut text = String::new();
        if let Some(output) = row.output_record {
            let messages: Vec<Message> = cx
                .engine
                .open_json(output)
                .await
                .map_err(PhaseError::from)?;
            if let Some(last) = messages
                .iter()
                .rev()
                .find(|m| matches!(m, Message::Assistant { .. }) && !m.text().trim().is_empty())
            {
                text = last.text();
            }
        }
        if text.trim().is_empty() {
            text = match (row.failure_category, row.error_id) {
                (Some(category), Some(error)) => format!(
                    "The Bot could not answer ({}, error {error}).",
                    serde_json::to_value(category)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_else(|| "failure".into())
                ),
                _ => "The Bot gave no answer.".into(),
            };
        }
        let blob = cx
            .engine
            .keys
            .seal(Uuid::now_v7(), text.as_bytes())
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.channels.set_reply(message.id, blob).await?;
        Ok(())
    }

    /// One request with the reply, as a saved call ([`SavedCalls`]): `sending` (the row to
    /// `writing`) commits before the request leaves, its result with what it does to the row.
    async fn send(
        &self,
        cx: &PhaseContext,
        channel: &ChannelRow,
        message: &MessageRow,
        scope: &RunScope,
    ) -> Result<(), PhaseError> {
        let Some(record) = message.reply_record else {
            return Ok(());
        };
        let text = self.open_text(cx, record).await?;
        let secrets: ChannelSecrets = open_secrets(&cx.engine, channel.secret_record).await?;
        if !scope.gate_open() {
            return Err(PhaseError::Cancelled);
        }
        let attempts = message.attempts + 1;
        let key = reply_call(attempts)?;
        let calls = SavedCalls::of(cx);
        let sending = Commit {
            calls: vec![calls.write(key, CallPhase::Sending, None, None)],
            writes: TxWrites::one(BeginWrite {
                message_id: message.id,
            }),
            ..Commit::default()
        };
        match calls.commit(sending).await {
            // Not waiting to be sent (another owner took it first): nothing is sent.
            Err(StoreError::Refused(_)) => return Ok(()),
            other => other?,
        }
        let outcome = self
            .http
            .send(&Reply {
                kind: channel.kind,
                base: &channel.api_base_url,
                token: &secrets.bot_token,
                to: &message.reply_to,
                thread: message.reply_thread.as_deref(),
                text: &text,
            })
            .await;
        let now = cx.engine.clock.now_ms();
        let result = match outcome {
            SendOutcome::Sent(id) => ReplyResult::Sent { id },
            SendOutcome::Rejected(why) => ReplyResult::Rejected { why },
            SendOutcome::Unknown(why) => {
                tracing::warn!(channel = %channel.id, message = %message.id, "a channel send's outcome is unknown; it is not sent again");
                ReplyResult::Unknown { why }
            }
            SendOutcome::RetryAfter(_, why) | SendOutcome::NotSent(why)
                if attempts >= MAX_ATTEMPTS =>
            {
                ReplyResult::Rejected {
                    why: format!("gave up after {attempts} attempts: {why}"),
                }
            }
            SendOutcome::RetryAfter(wait, why) => ReplyResult::Retry {
                at: now + wait,
                why,
            },
            SendOutcome::NotSent(why) => ReplyResult::Retry {
                at: now + backoff(attempts),
                why,
            },
        };
        let write = result.write(message.id);
        let (phase, result) = match result {
            ReplyResult::Unknown { .. } => (CallPhase::Unknown, None),
            known => (CallPhase::Done, Some(cx.engine.seal_json(&known)?)),
        };
        let call = calls.write(key, phase, result, None);
        let saved = Commit {
            calls: vec![call.clone()],
            writes: TxWrites(vec![write]),
            ..Commit::default()
        };
        match calls.commit(saved).await {
            // Lost the work while the request was out: the new owner finds `writing` and
            // records `unknown`; what this owner learned is kept in the call log.
            Err(StoreError::Fenced(_)) if phase == CallPhase::Done => {
                calls.save_late(call, TxWrites::default()).await?;
                Err(PhaseError::Fenced)
            }
            other => Ok(other?),
        }
    }

    async fn finish(&self, cx: &PhaseContext, state: ExecutionState) -> Result<(), PhaseError> {
        cx.engine
            .commit(
                cx.execution.id,
                cx.generation,
                Commit::job_ended(state, Vec::new()),
            )
            .await?;
        Ok(())
    }
}

/// Ends an input's delivery, as the delivery's current owner.
async fn end_message(cx: &PhaseContext, end: EndMessage) -> Result<(), PhaseError> {
    let commit = Commit {
        writes: TxWrites::one(end),
        ..Commit::default()
    };
    Ok(SavedCalls::of(cx).commit(commit).await?)
}

/// Tells a removing Channel's removal to look again: one of its deliveries ended.
pub(crate) async fn nudge_removal(
    cx: &PhaseContext,
    channels: &dyn ChannelStore,
    channel_id: Uuid,
) -> Result<(), PhaseError> {
    if let Some(channel) = channels.channel(channel_id).await?
        && let Some(removal) = channel.removal_execution_id
    {
        match cx.engine.wake(removal).await {
            Ok(_) | Err(StoreError::Ended(_)) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

#[async_trait]
impl Workflow for DeliveryWorkflow {
    fn kind(&self) -> &'static str {
        CHANNEL_DELIVERY
    }

    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError> {
        if cx.execution.state.is_terminal() {
            return Ok(Next::Done);
        }
        let Some((_, message)) = self.parts(cx).await? else {
            return Ok(Next::Run("end".into()));
        };
        let now = cx.engine.clock.now_ms();
        Ok(match message.stage {
            Stage::Received => Next::Run("start".into()),
            Stage::Answering => {
                let Some(turn) = message.turn_id else {
                    return Ok(Next::Run("end".into()));
                };
                let row = cx.engine.store.execution(turn).await?;
                if row.state.is_terminal() {
                    Next::Run("reply".into())
                } else {
                    Next::Wait {
                        until: Some(now + recheck_after(now, row.created_at)),
                    }
                }
            }
            Stage::Sending => match message.retry_at {
                Some(at) if at > now => Next::Wait { until: Some(at) },
                _ => Next::Run("send".into()),
            },
            Stage::Writing => Next::Run("lost".into()),
            Stage::Ended => Next::Run("end".into()),
        })
    }

    async fn run(
        &self,
        cx: &PhaseContext,
        phase: &str,
        scope: &RunScope,
    ) -> Result<(), PhaseError> {
        let Some((channel, message)) = self.parts(cx).await? else {
            return self.finish(cx, ExecutionState::Completed).await;
        };
        match phase {
            "start" => self.start(cx, &channel, &message).await,
            "reply" => self.reply(cx, &message).await,
            "send" => self.send(cx, &channel, &message, scope).await,
            "lost" => {
                // A request was on its way when its owner stopped: it may have been posted.
                let calls = SavedCalls::of(cx);
                let unknown = Commit {
                    calls: vec![calls.write(
                        reply_call(message.attempts)?,
                        CallPhase::Unknown,
                        None,
                        None,
                    )],
                    writes: TxWrites::one(EndMessage::unsent(
                        message.id,
                        SendState::Unknown,
                        "the server stopped while the reply was being sent",
                    )),
                    ..Commit::default()
                };
                Ok(calls.commit(unknown).await?)
            }
            _ => {
                self.finish(cx, ExecutionState::Completed).await?;
                nudge_removal(cx, self.channels.as_ref(), channel.id).await
            }
        }
    }

    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError> {
        // An input whose delivery is cancelled or failed ends with it: its reply stays as far
        // as it got (a request on its way is unknown), so a removal does not wait for ever.
        if let Some((channel, message)) = self.parts(cx).await? {
            let (state, why) = match message.stage {
                Stage::Writing => (
                    SendState::Unknown,
                    "the delivery ended while the reply was being sent",
                ),
                _ => (
                    SendState::Rejected,
                    "the delivery ended before the reply was sent",
                ),
            };
            if message.stage != Stage::Ended {
                end_message(cx, EndMessage::unsent(message.id, state, why)).await?;
            }
            nudge_removal(cx, self.channels.as_ref(), channel.id).await?;
        }
        cx.commit_plain_end(end).await
    }
}
