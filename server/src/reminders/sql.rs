//! The reminder store on SQL, written once for SQLite and PostgreSQL, and the reminder's rows
//! in the transaction of the tool call that set it.

use async_trait::async_trait;
use openbot_schema::{ChatId, ExecutionId, ReminderState};
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{ReminderRow, ReminderStore};
use crate::store::{Millis, SealedBlob, StoreError, both_backends, now_ms, tx_write};

macro_rules! reminder_columns {
    () => {
        "id, organization_id, chat_id, execution_id, source_execution_id, due_at, text_record, \
     state, delivered_execution_id, created_at"
    };
}

pub(crate) fn state_text(state: ReminderState) -> &'static str {
    match state {
        ReminderState::Pending => "pending",
        ReminderState::Delivered => "delivered",
        ReminderState::Cancelled => "cancelled",
        ReminderState::Refused => "refused",
    }
}

fn state_of(text: &str) -> Result<ReminderState, StoreError> {
    match text {
        "pending" => Ok(ReminderState::Pending),
        "delivered" => Ok(ReminderState::Delivered),
        "cancelled" => Ok(ReminderState::Cancelled),
        "refused" => Ok(ReminderState::Refused),
        other => Err(StoreError::Invalid(format!("reminder state `{other}`"))),
    }
}

/// A new reminder: its row and its sealed text, written in the transaction that saves the
/// `remind` call's result and starts its timer.
#[derive(Debug)]
pub struct NewReminder {
    /// The row (state `pending`).
    pub row: ReminderRow,
    /// The sealed text (its ID is `row.text_record`).
    pub text: SealedBlob,
}

tx_write!(NewReminder, |this, tx| {
    let row = &this.row;
    sqlx::query("INSERT INTO sealed_records (id, key_id, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4, $5)")
        .bind(this.text.id)
        .bind(&this.text.key_id)
        .bind(&this.text.nonce)
        .bind(&this.text.ciphertext)
        .bind(row.created_at)
        .execute(&mut **tx)
        .await?;
    sqlx::query(
        "INSERT INTO reminders (id, organization_id, chat_id, execution_id, source_execution_id, due_at, text_record, \
             state, delivered_execution_id, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL, $9, $9)",
    )
    .bind(row.id)
    .bind(row.organization_id)
    .bind(row.chat_id.as_uuid())
    .bind(row.execution_id.as_uuid())
    .bind(row.source_execution_id.as_uuid())
    .bind(row.due_at)
    .bind(row.text_record)
    .bind(state_text(row.state))
    .bind(row.created_at)
    .execute(&mut **tx)
    .await?;
    Ok(())
});

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const REMINDER: &str = concat!(
        "SELECT ",
        reminder_columns!(),
        " FROM reminders WHERE id = $1"
    );
    const REMINDER_OF_EXECUTION: &str = concat!(
        "SELECT ",
        reminder_columns!(),
        " FROM reminders WHERE execution_id = $1"
    );
    const REMINDERS_OF_CHAT: &str = concat!(
        "SELECT ",
        reminder_columns!(),
        " FROM reminders WHERE chat_id = $1 \
               AND (due_at > $2 OR (due_at = $2 AND id > $3)) \
             ORDER BY due_at, id LIMIT $4"
    );
    const FINISH_REMINDER: &str = "UPDATE reminders SET state = $2, delivered_execution_id = $3, updated_at = $4 \
             WHERE id = $1 AND state = 'pending'";

    fn reminder_row(row: &Row) -> Result<ReminderRow, StoreError> {
        Ok(ReminderRow {
            id: row.try_get("id")?,
            organization_id: row.try_get("organization_id")?,
            chat_id: ChatId::from(row.try_get::<Uuid, _>("chat_id")?),
            execution_id: ExecutionId::from(row.try_get::<Uuid, _>("execution_id")?),
            source_execution_id: ExecutionId::from(row.try_get::<Uuid, _>("source_execution_id")?),
            due_at: row.try_get("due_at")?,
            text_record: row.try_get("text_record")?,
            state: state_of(&row.try_get::<String, _>("state")?)?,
            delivered_execution_id: row
                .try_get::<Option<Uuid>, _>("delivered_execution_id")?
                .map(ExecutionId::from),
            created_at: row.try_get("created_at")?,
        })
    }

    #[async_trait]
    impl ReminderStore for Store {
        async fn reminder(&self, id: Uuid) -> Result<Option<ReminderRow>, StoreError> {
            let row = sqlx::query(REMINDER)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(reminder_row).transpose()
        }

        async fn reminder_of_execution(
            &self,
            execution_id: ExecutionId,
        ) -> Result<Option<ReminderRow>, StoreError> {
            let row = sqlx::query(REMINDER_OF_EXECUTION)
                .bind(execution_id.as_uuid())
                .fetch_optional(self.writer())
                .await?;
            row.as_ref().map(reminder_row).transpose()
        }

        async fn reminders_of_chat(
            &self,
            chat_id: ChatId,
            after: Option<(Millis, Uuid)>,
            limit: i64,
        ) -> Result<Vec<ReminderRow>, StoreError> {
            let (due, id) = after.unwrap_or((i64::MIN, crate::paging::FIRST_ID));
            let rows = sqlx::query(REMINDERS_OF_CHAT)
                .bind(chat_id.as_uuid())
                .bind(due)
                .bind(id)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(reminder_row).collect()
        }

        async fn finish_reminder(
            &self,
            id: Uuid,
            state: ReminderState,
            delivered: Option<ExecutionId>,
        ) -> Result<bool, StoreError> {
            let done = sqlx::query(FINISH_REMINDER)
                .bind(id)
                .bind(state_text(state))
                .bind(delivered.map(|e| e.as_uuid()))
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(done.rows_affected() > 0)
        }
    }
}
