//! A schedule's timer: one execution per schedule trigger, of the organization's `triggers`
//! service, that waits without an owner until the next slot (its wake time is the durable
//! timer; no node scans for due triggers), fires, and waits for the slot after.
//!
//! Missed slots: a node that was down (or a timer claimed late) finds its slot passed. It fires
//! once for the first missed slot, marked `catch_up`, and then waits for the first slot after
//! now: one catch-up firing per trigger, never one per missed slot.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_schema::{ExecutionState, FiringOutcome, TriggerState};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::firing::{SendAs, SendError, Sent, send_as};
use super::schedule::{MIN_INTERVAL_MS, Schedule};
use super::store::{FiringRow, TriggerRow, TriggerStore};
use crate::bots::BotStore;
use crate::chats::{ChatStore, Chats};
use crate::engine::{EngineEnd, Next, PhaseContext, PhaseError, RunScope, Submission, Workflow};
use crate::identity::{IdentityStore, ServiceIdentity, ServiceOwner};
use crate::store::Commit;

/// The execution kind of schedule timers.
pub const TRIGGER_SCHEDULE: &str = "trigger_schedule";

/// The saved input of a schedule's timer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleInput {
    /// The trigger.
    pub trigger_id: Uuid,
}

/// The service that runs an organization's triggers.
pub fn triggers_service(organization: Uuid) -> ServiceIdentity {
    ServiceIdentity {
        owner: ServiceOwner::Organization(organization),
        name: "triggers".into(),
    }
}

/// The submission of a schedule's timer: one per trigger.
pub fn schedule_submission(
    organization: Uuid,
    input: &ScheduleInput,
) -> Submission<'_, ScheduleInput> {
    Submission::new(
        TRIGGER_SCHEDULE,
        triggers_service(organization).scope(),
        input,
    )
    .with_key(format!("trigger-schedule:{}", input.trigger_id))
}

/// What a firing needs to reach a Chat.
#[derive(Clone)]
pub struct FiringStores {
    /// Triggers and firings.
    pub triggers: Arc<dyn TriggerStore>,
    /// Current rights.
    pub identity: Arc<dyn IdentityStore>,
    /// Chats.
    pub chats: Arc<dyn ChatStore>,
    /// Bots.
    pub bots: Arc<dyn BotStore>,
    /// Where the Turns' tools come from ([`crate::node::tool_routing`]).
    pub routing: crate::chats::ToolRouting,
}

impl FiringStores {
    /// The Chat use cases on a phase's engine.
    pub fn chats(&self, cx: &PhaseContext) -> Chats {
        Chats::on_context(
            Arc::clone(&cx.engine),
            Arc::clone(&self.chats),
            Arc::clone(&self.bots),
            self.routing.clone(),
        )
    }
}

/// Runs schedule timers.
pub struct ScheduleWorkflow {
    stores: FiringStores,
}

impl ScheduleWorkflow {
    /// A workflow that fires the schedules in `stores`.
    pub fn new(stores: FiringStores) -> Self {
        Self { stores }
    }

    async fn input(&self, cx: &PhaseContext) -> Result<ScheduleInput, PhaseError> {
        cx.input().await.map_err(PhaseError::from)
    }

    async fn trigger(&self, cx: &PhaseContext) -> Result<Option<TriggerRow>, PhaseError> {
        let input = self.input(cx).await?;
        Ok(self.stores.triggers.trigger(input.trigger_id).await?)
    }

    async fn fire(&self, cx: &PhaseContext, trigger: &TriggerRow) -> Result<(), PhaseError> {
        let Some(slot) = trigger.next_fire_at else {
            return Ok(());
        };
        let schedule = match schedule_of(trigger) {
            Ok(schedule) => schedule,
            Err(why) => {
                self.stores
                    .triggers
                    .set_trigger_state(trigger.id, TriggerState::Paused, Some(&why))
                    .await?;
                return Ok(());
            }
        };
        let now = cx.engine.clock.now_ms();
        // Late by more than a slot's minimum spacing, or with a later slot also passed: the
        // slots in between were missed while no node ran, and this one firing stands for them.
        let catch_up = now - slot > MIN_INTERVAL_MS
            || schedule.next_after(slot).is_some_and(|next| next <= now);
        let who = SendAs {
            organization_id: trigger.organization_id,
            member_id: trigger.member_id,
            credential: trigger.credential,
        };
        let sent = send_as(
            self.stores.identity.as_ref(),
            &self.stores.chats(cx),
            who,
            trigger.chat_id,
            trigger.text.clone().unwrap_or_default(),
            format!("trigger:{}:{slot}", trigger.id),
        )
        .await;
        let (outcome, reason, execution_id) = match sent {
            Ok(Sent::Turn(id)) => (FiringOutcome::Sent, None, Some(id)),
            Ok(Sent::Refused(why)) => (FiringOutcome::Refused, Some(why), None),
            Err(SendError::Store(err)) => return Err(err.into()),
            Err(SendError::Conflict(why)) => (FiringOutcome::Refused, Some(why), None),
        };
        let firing = self
            .stores
            .triggers
            .record_firing(FiringRow {
                id: Uuid::now_v7(),
                trigger_id: trigger.id,
                fired_at: now,
                scheduled_for: Some(slot),
                catch_up,
                delivery_id: None,
                outcome,
                reason: reason.clone(),
                execution_id,
            })
            .await?;
        if firing.outcome == FiringOutcome::Refused {
            let why = firing
                .reason
                .as_deref()
                .unwrap_or("the creator may no longer send");
            tracing::info!(trigger = %trigger.id, "trigger refused at firing; paused");
            self.stores
                .triggers
                .set_trigger_state(trigger.id, TriggerState::Paused, Some(why))
                .await?;
        }
        self.stores
            .triggers
            .set_next_fire(trigger.id, schedule.next_after(now))
            .await?;
        Ok(())
    }

    async fn plan(&self, cx: &PhaseContext, trigger: &TriggerRow) -> Result<(), PhaseError> {
        match schedule_of(trigger) {
            Ok(schedule) => {
                let next = schedule.next_after(cx.engine.clock.now_ms());
                if next.is_none() {
                    self.stores
                        .triggers
                        .set_trigger_state(
                            trigger.id,
                            TriggerState::Paused,
                            Some("the schedule fires no more"),
                        )
                        .await?;
                }
                self.stores.triggers.set_next_fire(trigger.id, next).await?;
            }
            Err(why) => {
                self.stores
                    .triggers
                    .set_trigger_state(trigger.id, TriggerState::Paused, Some(&why))
                    .await?;
            }
        }
        Ok(())
    }
}

fn schedule_of(trigger: &TriggerRow) -> Result<Schedule, String> {
    let cron = trigger.cron.as_deref().unwrap_or_default();
    Schedule::parse(cron, trigger.time_zone.as_deref()).map_err(|e| e.to_string())
}

#[async_trait]
impl Workflow for ScheduleWorkflow {
    fn kind(&self) -> &'static str {
        TRIGGER_SCHEDULE
    }

    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError> {
        if cx.execution.state.is_terminal() {
            return Ok(Next::Done);
        }
        let Some(trigger) = self.trigger(cx).await? else {
            return Ok(Next::Run("end".into()));
        };
        if trigger.state == TriggerState::Paused {
            // Waits, with no wake time, for a resume's signal.
            return Ok(Next::Wait { until: None });
        }
        Ok(match trigger.next_fire_at {
            None => Next::Run("plan".into()),
            Some(at) if at <= cx.engine.clock.now_ms() => Next::Run("fire".into()),
            Some(at) => Next::Wait { until: Some(at) },
        })
    }

    async fn run(
        &self,
        cx: &PhaseContext,
        phase: &str,
        _scope: &RunScope,
    ) -> Result<(), PhaseError> {
        match phase {
            "end" => {
                cx.engine
                    .commit(
                        cx.execution.id,
                        cx.generation,
                        Commit::job_ended(ExecutionState::Completed, Vec::new()),
                    )
                    .await?;
            }
            _ => {
                let Some(trigger) = self.trigger(cx).await? else {
                    return Ok(());
                };
                if phase == "fire" {
                    self.fire(cx, &trigger).await?;
                } else {
                    self.plan(cx, &trigger).await?;
                }
            }
        }
        Ok(())
    }

    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError> {
        cx.commit_plain_end(end).await
    }
}
