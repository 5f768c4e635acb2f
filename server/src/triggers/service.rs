//! The trigger use cases: create, list, show, pause, resume and delete a member's triggers,
//! list their firings, and take a webhook delivery.
//!
//! A trigger belongs to the member who created it and sends to one of their Chats as them,
//! through the credential they created it with: that credential's current rights are checked
//! at each firing, so a revoked or expired token, a removed member or a lost right refuses the
//! firing (recorded) and pauses the trigger.

use std::sync::Arc;

use openbot_schema::{
    Action, CreateTrigger, CreatedTrigger, FiringOutcome, Resource, Trigger, TriggerFiring,
    TriggerFiringPage, TriggerKind, TriggerPage, TriggerState,
};
use uuid::Uuid;

use super::firing::{SendAs, SendError, Sent, send_as};
use super::schedule::{Schedule, ScheduleError};
use super::signature::{SignatureError, new_secret, verify};
use super::store::{FiringRow, NewTrigger, TriggerRow, TriggerStore};
use super::workflow::{ScheduleInput, schedule_submission};
use crate::chats::{ChatStore, Chats};
use crate::engine::Engine;
use crate::identity::{AccessError, Caller, IdentityStore};
use crate::paging::Paging;
use crate::store::{Millis, StoreError, TxWrites, stored_time, stored_time_opt};

/// The most characters of a trigger's text.
pub const MAX_TEXT_CHARS: usize = 4000;
/// The most characters of a webhook delivery's ID.
pub const MAX_DELIVERY_ID: usize = 200;

/// Why a trigger use case failed.
#[derive(Debug, thiserror::Error)]
pub enum TriggerError {
    /// Not there, or not the caller's.
    #[error("{0} was not found")]
    NotFound(&'static str),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// The caller's token lacks a right.
    #[error(transparent)]
    Access(#[from] AccessError),
    /// A conflict with the trigger's state.
    #[error("{0}")]
    Conflict(String),
    /// A webhook delivery whose signature was refused.
    #[error(transparent)]
    Signature(#[from] SignatureError),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<ScheduleError> for TriggerError {
    fn from(err: ScheduleError) -> Self {
        TriggerError::Invalid(err.to_string())
    }
}

/// A webhook delivery as it arrived.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// The `x-openbot-timestamp` header.
    pub timestamp: Option<&'a str>,
    /// The `x-openbot-signature` header.
    pub signature: Option<&'a str>,
    /// The `x-openbot-delivery` header.
    pub delivery_id: Option<&'a str>,
    /// The body, exactly as received.
    pub body: &'a [u8],
}

/// A delivery taken: its firing, and whether an earlier delivery with its ID was taken first.
#[derive(Debug, Clone)]
pub struct Received {
    /// The firing.
    pub firing: TriggerFiring,
    /// True for a repeated delivery ID: nothing new was sent.
    pub repeated: bool,
}

/// The public view of a trigger.
pub fn trigger_view(row: &TriggerRow) -> Result<Trigger, StoreError> {
    Ok(Trigger {
        id: row.id,
        chat_id: row.chat_id,
        kind: row.kind,
        state: row.state,
        cron: row.cron.clone(),
        time_zone: row.time_zone.clone(),
        text: row.text.clone(),
        hook_path: (row.kind == TriggerKind::Webhook).then(|| format!("/v1/hooks/{}", row.id)),
        next_fire_at: match row.state {
            TriggerState::Active => stored_time_opt(row.next_fire_at)?,
            TriggerState::Paused => None,
        },
        paused_reason: row.paused_reason.clone(),
        created_at: stored_time(row.created_at)?,
    })
}

/// The public view of a firing.
pub fn firing_view(row: FiringRow) -> Result<TriggerFiring, StoreError> {
    Ok(TriggerFiring {
        id: row.id,
        trigger_id: row.trigger_id,
        fired_at: stored_time(row.fired_at)?,
        scheduled_for: stored_time_opt(row.scheduled_for)?,
        catch_up: row.catch_up,
        delivery_id: row.delivery_id,
        outcome: row.outcome,
        reason: row.reason,
        execution_id: row.execution_id,
    })
}

fn check_text(text: Option<&str>, required: bool) -> Result<(), TriggerError> {
    match text {
        None if required => Err(TriggerError::Invalid(
            "a schedule needs the text it sends".into(),
        )),
        Some(text) if text.trim().is_empty() || text.chars().count() > MAX_TEXT_CHARS => Err(
            TriggerError::Invalid(format!("text must have 1-{MAX_TEXT_CHARS} characters")),
        ),
        _ => Ok(()),
    }
}

/// The trigger use cases.
#[derive(Clone)]
pub struct Triggers {
    engine: Arc<Engine>,
    triggers: Arc<dyn TriggerStore>,
    chat_store: Arc<dyn ChatStore>,
    chats: Chats,
    identity: Arc<dyn IdentityStore>,
}

impl Triggers {
    /// The use cases on these stores; firings send through `chats`.
    pub fn new(
        engine: Arc<Engine>,
        triggers: Arc<dyn TriggerStore>,
        chat_store: Arc<dyn ChatStore>,
        chats: Chats,
        identity: Arc<dyn IdentityStore>,
    ) -> Self {
        Self {
            engine,
            triggers,
            chat_store,
            chats,
            identity,
        }
    }

    /// Creates a trigger on one of the caller's Chats. A webhook's signing secret is in the
    /// answer only; it is stored sealed.
    pub async fn create(
        &self,
        caller: &Caller,
        new: CreateTrigger,
    ) -> Result<CreatedTrigger, TriggerError> {
        caller.require(Resource::Chats, Action::Write)?;
        self.chat_store
            .chat_of(
                caller.member.member_id,
                new.chat_id,
                caller.bot_ids.as_deref(),
            )
            .await?
            .ok_or(TriggerError::NotFound("chat"))?;
        caller
            .credential
            .for_long_lived_work("a Trigger")
            .map_err(TriggerError::Invalid)?;
        let now = self.engine.context().clock.now_ms();
        let id = Uuid::now_v7();
        let (next_fire_at, secret) = match new.kind {
            TriggerKind::Schedule => {
                check_text(new.text.as_deref(), true)?;
                let cron = new.cron.as_deref().ok_or_else(|| {
                    TriggerError::Invalid("a schedule needs a cron expression".into())
                })?;
                let schedule = Schedule::parse(cron, new.time_zone.as_deref())?;
                (schedule.next_after(now), None)
            }
            TriggerKind::Webhook => {
                check_text(new.text.as_deref(), false)?;
                if new.cron.is_some() || new.time_zone.is_some() {
                    return Err(TriggerError::Invalid(
                        "a webhook takes no cron expression or time zone".into(),
                    ));
                }
                (None, Some(new_secret()))
            }
        };
        let sealed = match &secret {
            Some(secret) => Some(
                self.engine
                    .context()
                    .keys
                    .seal(Uuid::now_v7(), secret.as_bytes())
                    .map_err(|e| StoreError::Invalid(e.to_string()))?,
            ),
            None => None,
        };
        let row = TriggerRow {
            id,
            organization_id: caller.member.organization_id,
            chat_id: new.chat_id,
            member_id: caller.member.member_id,
            credential: caller.credential,
            kind: new.kind,
            state: TriggerState::Active,
            cron: new.cron,
            time_zone: match new.kind {
                TriggerKind::Schedule => Some(new.time_zone.unwrap_or_else(|| "UTC".into())),
                TriggerKind::Webhook => None,
            },
            text: new.text,
            secret_record: None,
            execution_id: None,
            next_fire_at,
            paused_reason: None,
            created_at: now,
        };
        let stored = match row.kind {
            // The trigger and its timer in one transaction: no active trigger without the
            // work that fires it, whatever stops in between.
            TriggerKind::Schedule => {
                let input = ScheduleInput { trigger_id: id };
                let mut row = row;
                let submitted = self
                    .engine
                    .submit_writing_for(
                        schedule_submission(caller.member.organization_id, &input),
                        |execution| {
                            row.execution_id = Some(execution);
                            TxWrites::one(NewTrigger {
                                row: row.clone(),
                                secret: sealed,
                            })
                        },
                    )
                    .await
                    .map_err(|err| match err {
                        crate::engine::EngineError::Store(err) => TriggerError::Store(err),
                        other => TriggerError::Store(StoreError::Invalid(other.to_string())),
                    })?;
                row.execution_id = Some(submitted.execution_id());
                row
            }
            TriggerKind::Webhook => {
                self.triggers
                    .create_trigger(NewTrigger {
                        row,
                        secret: sealed,
                    })
                    .await?
            }
        };
        Ok(CreatedTrigger {
            trigger: trigger_view(&stored)?,
            signing_secret: secret,
        })
    }

    /// One of the caller's triggers, within its token's Bot limit (the Chat's Bot): every
    /// read and change of one goes through here.
    async fn own(&self, caller: &Caller, id: Uuid) -> Result<TriggerRow, TriggerError> {
        let row = match self.triggers.trigger(id).await? {
            Some(row) if caller.owns(row.organization_id, row.member_id) => row,
            _ => return Err(TriggerError::NotFound("trigger")),
        };
        if let Some(bots) = caller.bot_ids.as_deref() {
            let chat = self
                .chat_store
                .chat_of(caller.member.member_id, row.chat_id, Some(bots))
                .await?;
            if chat.is_none() {
                return Err(TriggerError::NotFound("trigger"));
            }
        }
        Ok(row)
    }

    /// One page of the caller's triggers, oldest first.
    pub async fn list(
        &self,
        caller: &Caller,
        paging: &Paging<Uuid>,
    ) -> Result<TriggerPage, TriggerError> {
        caller.require(Resource::Chats, Action::Read)?;
        let rows = self
            .triggers
            .triggers_of(
                caller.member.member_id,
                caller.bot_ids.as_deref(),
                paging.after,
                paging.fetch(),
            )
            .await?;
        Ok(paging.try_page(rows, |row| row.id, |row| trigger_view(&row))?)
    }

    /// One of the caller's triggers.
    pub async fn get(&self, caller: &Caller, id: Uuid) -> Result<Trigger, TriggerError> {
        caller.require(Resource::Chats, Action::Read)?;
        Ok(trigger_view(&self.own(caller, id).await?)?)
    }

    /// Pauses a trigger: it does not fire until it is resumed.
    pub async fn pause(&self, caller: &Caller, id: Uuid) -> Result<Trigger, TriggerError> {
        caller.require(Resource::Chats, Action::Write)?;
        self.own(caller, id).await?;
        let row = self
            .triggers
            .set_trigger_state(id, TriggerState::Paused, None)
            .await?
            .ok_or(TriggerError::NotFound("trigger"))?;
        Ok(trigger_view(&row)?)
    }

    /// Resumes a trigger. A schedule fires next at its first slot after now: the slots that
    /// passed while it was paused are not caught up.
    pub async fn resume(&self, caller: &Caller, id: Uuid) -> Result<Trigger, TriggerError> {
        caller.require(Resource::Chats, Action::Write)?;
        let row = self.own(caller, id).await?;
        if row.kind == TriggerKind::Schedule {
            let next = schedule_next(&row, self.engine.context().clock.now_ms())?;
            self.triggers.set_next_fire(id, next).await?;
        }
        let row = self
            .triggers
            .set_trigger_state(id, TriggerState::Active, None)
            .await?
            .ok_or(TriggerError::NotFound("trigger"))?;
        if let Some(execution) = row.execution_id {
            match self.engine.context().wake(execution).await {
                Ok(_) | Err(StoreError::Ended(_)) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(trigger_view(&row)?)
    }

    /// Deletes a trigger and ends its timer.
    pub async fn delete(&self, caller: &Caller, id: Uuid) -> Result<(), TriggerError> {
        caller.require(Resource::Chats, Action::Write)?;
        let row = self.own(caller, id).await?;
        self.triggers.delete_trigger(id).await?;
        if let Some(execution) = row.execution_id {
            match self.engine.cancel(execution).await {
                Ok(_) | Err(StoreError::Ended(_)) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(())
    }

    /// One page of a trigger's firings, newest first.
    pub async fn firings(
        &self,
        caller: &Caller,
        id: Uuid,
        paging: &Paging<Uuid>,
    ) -> Result<TriggerFiringPage, TriggerError> {
        caller.require(Resource::Chats, Action::Read)?;
        self.own(caller, id).await?;
        let rows = self
            .triggers
            .firings(id, paging.after, paging.fetch())
            .await?;
        Ok(paging.try_page(rows, |row| row.id, firing_view)?)
    }

    /// Takes a webhook delivery: checks its signature and timestamp, takes a delivery ID
    /// once (a repeat answers the first firing and sends nothing), and sends the body to the
    /// Chat as the trigger's creator, whose rights are read anew.
    pub async fn receive(
        &self,
        id: Uuid,
        delivery: Delivery<'_>,
    ) -> Result<Received, TriggerError> {
        let trigger = match self.triggers.trigger(id).await? {
            Some(row) if row.kind == TriggerKind::Webhook => row,
            _ => return Err(TriggerError::NotFound("trigger")),
        };
        let cx = self.engine.context();
        let record = trigger
            .secret_record
            .ok_or_else(|| StoreError::Invalid("a webhook without its secret".into()))?;
        let blob =
            cx.store.sealed(record).await?.ok_or_else(|| {
                StoreError::Invalid("a webhook's sealed secret is missing".into())
            })?;
        let secret = cx
            .keys
            .open(&blob)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let secret = String::from_utf8(secret)
            .map_err(|_| StoreError::Invalid("a webhook's secret is not text".into()))?;
        let now = cx.clock.now_ms();
        verify(
            &secret,
            delivery.timestamp,
            delivery.signature,
            delivery.body,
            now,
        )?;
        let delivery_id = delivery
            .delivery_id
            .filter(|d| {
                !d.is_empty()
                    && d.len() <= MAX_DELIVERY_ID
                    && d.bytes().all(|b| b.is_ascii_graphic())
            })
            .ok_or_else(|| {
                TriggerError::Invalid(format!(
                    "x-openbot-delivery must be 1-{MAX_DELIVERY_ID} visible ASCII characters"
                ))
            })?;
        if let Some(first) = self.triggers.delivery_firing(id, delivery_id).await? {
            return Ok(Received {
                firing: firing_view(first)?,
                repeated: true,
            });
        }
        if trigger.state == TriggerState::Paused {
            return Err(TriggerError::Conflict("the trigger is paused".into()));
        }
        let body = std::str::from_utf8(delivery.body)
            .map_err(|_| TriggerError::Invalid("the body must be UTF-8 text".into()))?;
        let text = match (&trigger.text, body.trim().is_empty()) {
            (Some(text), true) => text.clone(),
            (Some(text), false) => format!("{text}\n\n{body}"),
            (None, false) => body.to_string(),
            (None, true) => "(an empty webhook delivery)".to_string(),
        };
        let who = SendAs {
            organization_id: trigger.organization_id,
            member_id: trigger.member_id,
            credential: trigger.credential,
        };
        let sent = send_as(
            self.identity.as_ref(),
            &self.chats,
            who,
            trigger.chat_id,
            text,
            format!("hook:{id}:{delivery_id}"),
        )
        .await;
        let (outcome, reason, execution_id) = match sent {
            Ok(Sent::Turn(execution)) => (FiringOutcome::Sent, None, Some(execution)),
            Ok(Sent::Refused(why)) => (FiringOutcome::Refused, Some(why), None),
            Err(SendError::Conflict(why)) => return Err(TriggerError::Conflict(why)),
            Err(SendError::Store(err)) => return Err(err.into()),
        };
        let firing = self
            .triggers
            .record_firing(FiringRow {
                id: Uuid::now_v7(),
                trigger_id: id,
                fired_at: now,
                scheduled_for: None,
                catch_up: false,
                delivery_id: Some(delivery_id.to_string()),
                outcome,
                reason,
                execution_id,
            })
            .await?;
        if firing.outcome == FiringOutcome::Refused {
            self.triggers
                .set_trigger_state(id, TriggerState::Paused, firing.reason.as_deref())
                .await?;
        }
        Ok(Received {
            firing: firing_view(firing)?,
            repeated: false,
        })
    }
}

fn schedule_next(row: &TriggerRow, now: Millis) -> Result<Option<Millis>, TriggerError> {
    let schedule = Schedule::parse(
        row.cron.as_deref().unwrap_or_default(),
        row.time_zone.as_deref(),
    )?;
    Ok(schedule.next_after(now))
}
