//! The trigger store on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use openbot_schema::{ChatId, ExecutionId, FiringOutcome, TriggerKind, TriggerState};
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{FiringRow, NewTrigger, TriggerRow, TriggerStore};
use crate::identity::Credential;
use crate::store::{StoreError, both_backends, now_ms};

macro_rules! trigger_columns {
    () => {
        "id, organization_id, chat_id, member_id, credential, kind, state, cron, time_zone, text, \
     secret_record, execution_id, next_fire_at, paused_reason, created_at"
    };
}

macro_rules! firing_columns {
    () => {
        "id, trigger_id, fired_at, scheduled_for, catch_up, delivery_id, outcome, reason, execution_id"
    };
}

/// A trigger's kind as stored.
pub(crate) fn kind_text(kind: TriggerKind) -> &'static str {
    match kind {
        TriggerKind::Schedule => "schedule",
        TriggerKind::Webhook => "webhook",
    }
}

fn kind_of(text: &str) -> Result<TriggerKind, StoreError> {
    match text {
        "schedule" => Ok(TriggerKind::Schedule),
        "webhook" => Ok(TriggerKind::Webhook),
        other => Err(StoreError::Invalid(format!("trigger kind `{other}`"))),
    }
}

fn state_text(state: TriggerState) -> &'static str {
    match state {
        TriggerState::Active => "active",
        TriggerState::Paused => "paused",
    }
}

fn state_of(text: &str) -> Result<TriggerState, StoreError> {
    match text {
        "active" => Ok(TriggerState::Active),
        "paused" => Ok(TriggerState::Paused),
        other => Err(StoreError::Invalid(format!("trigger state `{other}`"))),
    }
}

fn outcome_text(outcome: FiringOutcome) -> &'static str {
    match outcome {
        FiringOutcome::Sent => "sent",
        FiringOutcome::Refused => "refused",
    }
}

fn outcome_of(text: &str) -> Result<FiringOutcome, StoreError> {
    match text {
        "sent" => Ok(FiringOutcome::Sent),
        "refused" => Ok(FiringOutcome::Refused),
        other => Err(StoreError::Invalid(format!("firing outcome `{other}`"))),
    }
}

fn credential_text(credential: &Credential) -> Result<String, StoreError> {
    serde_json::to_string(credential).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const INSERT_TRIGGER_INSERT_SEALED_RECORDS: &str = "INSERT INTO sealed_records (id, key_id, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4, $5)";
    const INSERT_TRIGGER_INSERT_TRIGGERS: &str = concat!(
        "INSERT INTO triggers (id, organization_id, chat_id, member_id, credential, kind, state, cron, time_zone, text, \
                 secret_record, execution_id, next_fire_at, paused_reason, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15) RETURNING ",
        trigger_columns!()
    );
    const TRIGGER: &str = concat!(
        "SELECT ",
        trigger_columns!(),
        " FROM triggers WHERE id = $1 AND deleted_at IS NULL"
    );
    const TRIGGERS_OF: &str = concat!(
        "SELECT ",
        trigger_columns!(),
        " FROM triggers WHERE member_id = $1 AND deleted_at IS NULL AND id > $2 \
             AND ($4 IS NULL OR EXISTS (SELECT 1 FROM chats c WHERE c.id = triggers.chat_id AND ",
        in_bot_limit!("c.bot_id", "$4"),
        ")) \
             ORDER BY id LIMIT $3"
    );
    const SET_TRIGGER_EXECUTION: &str =
        "UPDATE triggers SET execution_id = $2, updated_at = $3 WHERE id = $1";
    const SET_TRIGGER_STATE: &str = concat!(
        "UPDATE triggers SET state = $2, paused_reason = $3, updated_at = $4 \
             WHERE id = $1 AND deleted_at IS NULL RETURNING ",
        trigger_columns!()
    );
    const SET_NEXT_FIRE: &str =
        "UPDATE triggers SET next_fire_at = $2, updated_at = $3 WHERE id = $1";
    const DELETE_TRIGGER: &str =
        "UPDATE triggers SET deleted_at = $2, updated_at = $2 WHERE id = $1 AND deleted_at IS NULL";
    const RECORD_FIRING_INSERT_TRIGGER_FIRINGS: &str = concat!(
        "INSERT INTO trigger_firings (",
        firing_columns!(),
        ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT DO NOTHING RETURNING ",
        firing_columns!()
    );
    const RECORD_FIRING_SELECT_TRIGGER_FIRINGS: &str = concat!(
        "SELECT ",
        firing_columns!(),
        " FROM trigger_firings WHERE trigger_id = $1 \
             AND (scheduled_for = $2 OR delivery_id = $3) ORDER BY id LIMIT 1"
    );
    const DELIVERY_FIRING: &str = concat!(
        "SELECT ",
        firing_columns!(),
        " FROM trigger_firings WHERE trigger_id = $1 AND delivery_id = $2"
    );
    const FIRINGS: &str = concat!(
        "SELECT ",
        firing_columns!(),
        " FROM trigger_firings WHERE trigger_id = $1 AND id < $2 \
             ORDER BY id DESC LIMIT $3"
    );

    fn trigger_row(row: &Row) -> Result<TriggerRow, StoreError> {
        let credential: String = row.try_get("credential")?;
        Ok(TriggerRow {
            id: row.try_get("id")?,
            organization_id: row.try_get("organization_id")?,
            chat_id: ChatId::from(row.try_get::<Uuid, _>("chat_id")?),
            member_id: row.try_get("member_id")?,
            credential: serde_json::from_str(&credential)
                .map_err(|e| StoreError::Invalid(format!("trigger credential: {e}")))?,
            kind: kind_of(&row.try_get::<String, _>("kind")?)?,
            state: state_of(&row.try_get::<String, _>("state")?)?,
            cron: row.try_get("cron")?,
            time_zone: row.try_get("time_zone")?,
            text: row.try_get("text")?,
            secret_record: row.try_get("secret_record")?,
            execution_id: row
                .try_get::<Option<Uuid>, _>("execution_id")?
                .map(ExecutionId::from),
            next_fire_at: row.try_get("next_fire_at")?,
            paused_reason: row.try_get("paused_reason")?,
            created_at: row.try_get("created_at")?,
        })
    }

    fn firing_row(row: &Row) -> Result<FiringRow, StoreError> {
        Ok(FiringRow {
            id: row.try_get("id")?,
            trigger_id: row.try_get("trigger_id")?,
            fired_at: row.try_get("fired_at")?,
            scheduled_for: row.try_get("scheduled_for")?,
            catch_up: row.try_get("catch_up")?,
            delivery_id: row.try_get("delivery_id")?,
            outcome: outcome_of(&row.try_get::<String, _>("outcome")?)?,
            reason: row.try_get("reason")?,
            execution_id: row
                .try_get::<Option<Uuid>, _>("execution_id")?
                .map(ExecutionId::from),
        })
    }

    /// Inserts a trigger with its sealed secret in `tx`: the one insert of a trigger, in a
    /// transaction of its own or in the one that submits its schedule (`NewTrigger` as a
    /// `TxWrite`).
    pub(super) async fn insert_trigger(
        tx: &mut sqlx::Transaction<'_, Db>,
        new: &NewTrigger,
    ) -> Result<TriggerRow, StoreError> {
        let now = now_ms();
        if let Some(blob) = &new.secret {
            sqlx::query(INSERT_TRIGGER_INSERT_SEALED_RECORDS)
                .bind(blob.id)
                .bind(&blob.key_id)
                .bind(&blob.nonce)
                .bind(&blob.ciphertext)
                .bind(now)
                .execute(&mut **tx)
                .await?;
        }
        let row = &new.row;
        let stored = sqlx::query(INSERT_TRIGGER_INSERT_TRIGGERS)
            .bind(row.id)
            .bind(row.organization_id)
            .bind(row.chat_id.as_uuid())
            .bind(row.member_id)
            .bind(credential_text(&row.credential)?)
            .bind(kind_text(row.kind))
            .bind(state_text(row.state))
            .bind(&row.cron)
            .bind(&row.time_zone)
            .bind(&row.text)
            .bind(new.secret.as_ref().map(|b| b.id))
            .bind(row.execution_id.map(|e| e.as_uuid()))
            .bind(row.next_fire_at)
            .bind(&row.paused_reason)
            .bind(row.created_at)
            .fetch_one(&mut **tx)
            .await?;
        trigger_row(&stored)
    }

    #[async_trait]
    impl TriggerStore for Store {
        async fn create_trigger(&self, new: NewTrigger) -> Result<TriggerRow, StoreError> {
            let mut tx = self.writer().begin().await?;
            let stored = insert_trigger(&mut tx, &new).await?;
            tx.commit().await?;
            Ok(stored)
        }

        async fn trigger(&self, id: Uuid) -> Result<Option<TriggerRow>, StoreError> {
            let row = sqlx::query(TRIGGER)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(trigger_row).transpose()
        }

        async fn triggers_of(
            &self,
            member_id: Uuid,
            bot_ids: Option<&[openbot_schema::BotId]>,
            after: Option<Uuid>,
            limit: i64,
        ) -> Result<Vec<TriggerRow>, StoreError> {
            let rows = sqlx::query(TRIGGERS_OF)
                .bind(member_id)
                .bind(after.unwrap_or(crate::paging::FIRST_ID))
                .bind(limit)
                .bind(crate::store::bot_limit_json(bot_ids)?)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(trigger_row).collect()
        }

        async fn set_trigger_execution(
            &self,
            id: Uuid,
            execution_id: ExecutionId,
        ) -> Result<(), StoreError> {
            sqlx::query(SET_TRIGGER_EXECUTION)
                .bind(id)
                .bind(execution_id.as_uuid())
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn set_trigger_state(
            &self,
            id: Uuid,
            state: TriggerState,
            reason: Option<&str>,
        ) -> Result<Option<TriggerRow>, StoreError> {
            let row = sqlx::query(SET_TRIGGER_STATE)
                .bind(id)
                .bind(state_text(state))
                .bind(reason)
                .bind(now_ms())
                .fetch_optional(self.writer())
                .await?;
            row.as_ref().map(trigger_row).transpose()
        }

        async fn set_next_fire(&self, id: Uuid, at: Option<i64>) -> Result<(), StoreError> {
            sqlx::query(SET_NEXT_FIRE)
                .bind(id)
                .bind(at)
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn delete_trigger(&self, id: Uuid) -> Result<bool, StoreError> {
            let done = sqlx::query(DELETE_TRIGGER)
                .bind(id)
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(done.rows_affected() > 0)
        }

        async fn record_firing(&self, firing: FiringRow) -> Result<FiringRow, StoreError> {
            let inserted = sqlx::query(RECORD_FIRING_INSERT_TRIGGER_FIRINGS)
                .bind(firing.id)
                .bind(firing.trigger_id)
                .bind(firing.fired_at)
                .bind(firing.scheduled_for)
                .bind(firing.catch_up)
                .bind(&firing.delivery_id)
                .bind(outcome_text(firing.outcome))
                .bind(&firing.reason)
                .bind(firing.execution_id.map(|e| e.as_uuid()))
                .fetch_optional(self.writer())
                .await?;
            if let Some(row) = inserted {
                return firing_row(&row);
            }
            // The slot or the delivery was recorded before: that firing stands.
            let row = sqlx::query(RECORD_FIRING_SELECT_TRIGGER_FIRINGS)
                .bind(firing.trigger_id)
                .bind(firing.scheduled_for)
                .bind(&firing.delivery_id)
                .fetch_one(self.writer())
                .await?;
            firing_row(&row)
        }

        async fn delivery_firing(
            &self,
            trigger_id: Uuid,
            delivery_id: &str,
        ) -> Result<Option<FiringRow>, StoreError> {
            let row = sqlx::query(DELIVERY_FIRING)
                .bind(trigger_id)
                .bind(delivery_id)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(firing_row).transpose()
        }

        async fn firings(
            &self,
            trigger_id: Uuid,
            before: Option<Uuid>,
            limit: i64,
        ) -> Result<Vec<FiringRow>, StoreError> {
            let rows = sqlx::query(FIRINGS)
                .bind(trigger_id)
                .bind(before.unwrap_or(Uuid::max()))
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(firing_row).collect()
        }
    }
}

impl crate::store::TxWrite for NewTrigger {
    fn on_sqlite<'a, 'c>(
        &'a self,
        tx: &'a mut sqlx::Transaction<'c, sqlx::Sqlite>,
    ) -> futures::future::BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { on_sqlite::insert_trigger(tx, self).await.map(|_| ()) })
    }

    fn on_postgres<'a, 'c>(
        &'a self,
        tx: &'a mut sqlx::Transaction<'c, sqlx::Postgres>,
    ) -> futures::future::BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { on_postgres::insert_trigger(tx, self).await.map(|_| ()) })
    }
}
