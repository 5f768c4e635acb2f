//! A reminder's timer: a detached child of the Turn whose `remind` call set it. It waits with
//! no owner until its time (its wake time is the durable timer, so it survives restarts and is
//! taken over like any work), then sends its text to the Chat as the Turn's identity, whose
//! rights are read anew. Cancelled with its Chat's tree when the Chat is deleted.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_schema::{ExecutionState, ReminderState};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::store::{ReminderRow, ReminderStore};
use crate::engine::{EngineEnd, Next, PhaseContext, PhaseError, RunScope, Workflow};
use crate::identity::ExecutionIdentity;
use crate::store::{Commit, StoreError};
use crate::triggers::{FiringStores, SendAs, SendError, Sent, send_as};

/// The execution kind of reminder timers.
pub const REMINDER: &str = "reminder";

/// The saved input of a reminder's timer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReminderInput {
    /// The reminder.
    pub reminder_id: Uuid,
    /// The identity of the Turn that set it: its text is sent as this identity.
    pub identity: ExecutionIdentity,
}

/// Runs reminder timers.
pub struct ReminderWorkflow {
    reminders: Arc<dyn ReminderStore>,
    stores: FiringStores,
}

impl ReminderWorkflow {
    /// A workflow over these stores.
    pub fn new(reminders: Arc<dyn ReminderStore>, stores: FiringStores) -> Self {
        Self { reminders, stores }
    }

    async fn input(&self, cx: &PhaseContext) -> Result<ReminderInput, PhaseError> {
        cx.input().await.map_err(PhaseError::from)
    }

    async fn row(&self, cx: &PhaseContext) -> Result<(ReminderInput, ReminderRow), PhaseError> {
        let input = self.input(cx).await?;
        let row = self
            .reminders
            .reminder(input.reminder_id)
            .await?
            .ok_or_else(|| {
                StoreError::Invalid(format!("reminder {} is missing", input.reminder_id))
            })?;
        Ok((input, row))
    }

    async fn deliver(&self, cx: &PhaseContext) -> Result<(), PhaseError> {
        let (input, row) = self.row(cx).await?;
        if row.state != ReminderState::Pending {
            return Ok(());
        }
        let text: String = {
            let blob = cx
                .engine
                .store
                .sealed(row.text_record)
                .await?
                .ok_or_else(|| StoreError::Invalid("a reminder's text is missing".into()))?;
            let bytes = cx
                .engine
                .keys
                .open(&blob)
                .map_err(|e| StoreError::Invalid(e.to_string()))?;
            String::from_utf8(bytes).map_err(|e| StoreError::Invalid(e.to_string()))?
        };
        let who = SendAs {
            organization_id: input.identity.organization_id,
            member_id: input.identity.actor_member_id,
            credential: input.identity.credential,
        };
        let sent = send_as(
            self.stores.identity.as_ref(),
            &self.stores.chats(cx),
            who,
            row.chat_id,
            format!("Reminder: {text}"),
            format!("reminder:{}", row.id),
        )
        .await;
        match sent {
            Ok(Sent::Turn(turn)) => {
                self.reminders
                    .finish_reminder(row.id, ReminderState::Delivered, Some(turn))
                    .await?;
            }
            Ok(Sent::Refused(why)) | Err(SendError::Conflict(why)) => {
                tracing::info!(reminder = %row.id, "reminder refused at its time: {why}");
                self.reminders
                    .finish_reminder(row.id, ReminderState::Refused, None)
                    .await?;
            }
            Err(SendError::Store(err)) => return Err(err.into()),
        }
        Ok(())
    }
}

#[async_trait]
impl Workflow for ReminderWorkflow {
    fn kind(&self) -> &'static str {
        REMINDER
    }

    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError> {
        if cx.execution.state.is_terminal() {
            return Ok(Next::Done);
        }
        let (_, row) = self.row(cx).await?;
        Ok(match row.state {
            ReminderState::Pending if row.due_at > cx.engine.clock.now_ms() => Next::Wait {
                until: Some(row.due_at),
            },
            ReminderState::Pending => Next::Run("deliver".into()),
            _ => Next::Run("end".into()),
        })
    }

    async fn run(
        &self,
        cx: &PhaseContext,
        phase: &str,
        _scope: &RunScope,
    ) -> Result<(), PhaseError> {
        if phase == "deliver" {
            self.deliver(cx).await?;
        }
        let (_, row) = self.row(cx).await?;
        let state = match row.state {
            ReminderState::Cancelled => ExecutionState::Cancelled,
            ReminderState::Pending => return Ok(()),
            _ => ExecutionState::Completed,
        };
        cx.engine
            .commit(
                cx.execution.id,
                cx.generation,
                Commit::job_ended(state, Vec::new()),
            )
            .await?;
        Ok(())
    }

    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError> {
        let input = self.input(cx).await?;
        let commit = match end {
            EngineEnd::Cancelled { signals } => {
                // A cancel (a person's, or the Chat's deletion) that came before delivery.
                self.reminders
                    .finish_reminder(input.reminder_id, ReminderState::Cancelled, None)
                    .await?;
                Commit::job_ended(ExecutionState::Cancelled, signals)
            }
            EngineEnd::Failed { category, cause } => cx.failed_commit(category, &cause)?,
        };
        cx.engine
            .commit(cx.execution.id, cx.generation, commit)
            .await?;
        Ok(())
    }
}
