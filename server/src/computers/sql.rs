//! Computers and pairings on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use const_format::concatcp;
use sqlx::Row as _;
use uuid::Uuid;

use openbot_core::computer::link::OutputBatch;
use openbot_schema::OutputChunk;

use super::store::{
    Approval, ComputerRow, ComputerStore, GrantRow, KEPT_CHUNKS, NewPairing, PairingRow,
    TerminalRow,
};
use crate::store::{Millis, StoreError, both_backends};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    // Pairings that ended long ago go, so that the table keeps only what may still be used.
    const FORGET_PAIRINGS: &str = "DELETE FROM computer_pairings WHERE expires_at < $1";
    const OPEN_PAIRINGS: &str =
        "SELECT COUNT(*) AS n FROM computer_pairings WHERE computer_id IS NULL AND expires_at > $1";
    const INSERT_PAIRING: &str = "INSERT INTO computer_pairings \
             (id, code_hash, secret_hash, name, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)";
    const PAIRINGS: &str =
        "SELECT id, secret_hash, name, expires_at, computer_id FROM computer_pairings";
    const PAIRING_BY_CODE: &str = concatcp!(PAIRINGS, " WHERE code_hash = $1");
    const PAIRING: &str = concatcp!(PAIRINGS, " WHERE id = $1");
    const INSERT_COMPUTER: &str = "INSERT INTO computers \
             (id, organization_id, owner_member_id, name, created_at) VALUES ($1, $2, $3, $4, $5)";
    // Only an open pairing takes an approval: a second approval, or a late one, changes nothing.
    const APPROVE_PAIRING: &str = "UPDATE computer_pairings SET computer_id = $2, expires_at = $3 \
             WHERE id = $1 AND computer_id IS NULL AND expires_at > $4";
    const SET_CREDENTIAL: &str = "UPDATE computers SET credential_hash = $2, \
             paired_at = COALESCE(paired_at, $3) WHERE id = $1 AND removed_at IS NULL";
    const ROWS: &str = "SELECT id, organization_id, owner_member_id, name, created_at, paired_at \
             FROM computers";
    // What a member sees: its own Computers and the organization's shared ones.
    const VISIBLE: &str = " WHERE organization_id = $1 AND removed_at IS NULL \
             AND (owner_member_id IS NULL OR owner_member_id = $2)";
    const COMPUTERS_PAGE: &str = concatcp!(ROWS, VISIBLE, " AND id > $3 ORDER BY id LIMIT $4");
    const COMPUTER: &str = concatcp!(ROWS, VISIBLE, " AND id = $3");
    const REMOVE: &str = "UPDATE computers SET removed_at = $3, credential_hash = NULL \
             WHERE organization_id = $1 AND id = $2 AND removed_at IS NULL";

    // A machine of a member who was removed from the organization is refused too.
    const BY_CREDENTIAL: &str = concatcp!(
        ROWS,
        " WHERE credential_hash = $1 AND removed_at IS NULL AND (owner_member_id IS NULL \
         OR owner_member_id IN (SELECT id FROM members WHERE removed_at IS NULL))"
    );
    const GRANT: &str = "INSERT INTO computer_grants \
             (bot_id, computer_id, ask, granted_by, granted_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (bot_id) DO UPDATE SET computer_id = excluded.computer_id, \
             ask = excluded.ask, granted_by = excluded.granted_by, granted_at = excluded.granted_at";
    const REVOKE: &str = "DELETE FROM computer_grants WHERE bot_id = $1 AND computer_id = $2";
    const GRANT_OF_BOT: &str = "SELECT g.bot_id, g.computer_id, g.ask, g.granted_by, \
             g.granted_at, c.id, c.organization_id, c.owner_member_id, c.name, c.created_at, \
             c.paired_at FROM computer_grants g JOIN computers c ON c.id = g.computer_id \
             WHERE g.bot_id = $1 AND c.removed_at IS NULL";

    // Terminal output: a session saved with its newest sequence and its end, only for a
    // Computer not removed; its chunks each once; the oldest beyond the kept count go.
    const SAVE_TERMINAL: &str = "INSERT INTO computer_terminals \
             (computer_id, session_id, cwd, command, started_at, last_seq, exited, exit_code) \
             SELECT $1, $2, $3, $4, $5, $6, $7, $8 \
             WHERE EXISTS (SELECT 1 FROM computers WHERE id = $1 AND removed_at IS NULL) \
             ON CONFLICT (computer_id, session_id) DO UPDATE SET \
             last_seq = CASE WHEN excluded.last_seq > computer_terminals.last_seq \
             THEN excluded.last_seq ELSE computer_terminals.last_seq END, \
             exited = (computer_terminals.exited OR excluded.exited), \
             exit_code = COALESCE(excluded.exit_code, computer_terminals.exit_code)";
    const INSERT_OUTPUT: &str =
        "INSERT INTO computer_output (computer_id, session_id, seq, text) VALUES ";
    const TRIM_OUTPUT: &str = "DELETE FROM computer_output \
             WHERE computer_id = $1 AND session_id = $2 AND seq <= $3";
    const TERMINAL: &str = "SELECT session_id, cwd, command, started_at, last_seq, exited, \
             exit_code FROM computer_terminals WHERE computer_id = $1 AND session_id = $2";
    const OUTPUT_AFTER: &str = "SELECT seq, text FROM computer_output \
             WHERE computer_id = $1 AND session_id = $2 AND seq > $3 ORDER BY seq LIMIT $4";
    const FORGET_OUTPUT: &str = "DELETE FROM computer_output WHERE computer_id = $1";
    const FORGET_TERMINALS: &str = "DELETE FROM computer_terminals WHERE computer_id = $1";

    /// Chunks per insert statement (4 values each).
    const CHUNKS_PER_INSERT: usize = 200;

    fn computer_from(row: &Row) -> Result<ComputerRow, StoreError> {
        Ok(ComputerRow {
            id: row.try_get("id")?,
            organization_id: row.try_get("organization_id")?,
            owner_member_id: row.try_get("owner_member_id")?,
            name: row.try_get("name")?,
            created_at: row.try_get("created_at")?,
            paired_at: row.try_get("paired_at")?,
        })
    }

    fn pairing_from(row: &Row) -> Result<PairingRow, StoreError> {
        Ok(PairingRow {
            id: row.try_get("id")?,
            secret_hash: row.try_get("secret_hash")?,
            name: row.try_get("name")?,
            expires_at: row.try_get("expires_at")?,
            computer_id: row.try_get("computer_id")?,
        })
    }

    #[async_trait]
    impl ComputerStore for Store {
        async fn start_pairing(
            &self,
            pairing: &NewPairing,
            max_open: i64,
            forget_before: Millis,
        ) -> Result<bool, StoreError> {
            let now = crate::store::now_ms();
            let mut tx = self.writer().begin().await?;
            sqlx::query(FORGET_PAIRINGS)
                .bind(forget_before)
                .execute(&mut *tx)
                .await?;
            let open: i64 = sqlx::query(OPEN_PAIRINGS)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
            if open >= max_open {
                tx.rollback().await?;
                return Ok(false);
            }
            sqlx::query(INSERT_PAIRING)
                .bind(pairing.id)
                .bind(&pairing.code_hash)
                .bind(&pairing.secret_hash)
                .bind(&pairing.name)
                .bind(now)
                .bind(pairing.expires_at)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(true)
        }

        async fn pairing_by_code(
            &self,
            code_hash: &[u8],
        ) -> Result<Option<PairingRow>, StoreError> {
            let row = sqlx::query(PAIRING_BY_CODE)
                .bind(code_hash)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(pairing_from).transpose()
        }

        async fn pairing(&self, id: Uuid) -> Result<Option<PairingRow>, StoreError> {
            let row = sqlx::query(PAIRING)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(pairing_from).transpose()
        }

        async fn approve(
            &self,
            approval: &Approval,
            now: Millis,
        ) -> Result<Option<ComputerRow>, StoreError> {
            let mut tx = self.writer().begin().await?;
            sqlx::query(INSERT_COMPUTER)
                .bind(approval.computer_id)
                .bind(approval.organization_id)
                .bind(approval.owner_member_id)
                .bind(&approval.name)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            let approved = sqlx::query(APPROVE_PAIRING)
                .bind(approval.pairing_id)
                .bind(approval.computer_id)
                .bind(approval.claim_until)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if approved == 0 {
                tx.rollback().await?;
                return Ok(None);
            }
            tx.commit().await?;
            Ok(Some(ComputerRow {
                id: approval.computer_id,
                organization_id: approval.organization_id,
                owner_member_id: approval.owner_member_id,
                name: approval.name.clone(),
                created_at: now,
                paired_at: None,
            }))
        }

        async fn set_credential(
            &self,
            computer: Uuid,
            credential_hash: &[u8],
            now: Millis,
        ) -> Result<bool, StoreError> {
            let set = sqlx::query(SET_CREDENTIAL)
                .bind(computer)
                .bind(credential_hash)
                .bind(now)
                .execute(self.writer())
                .await?
                .rows_affected();
            Ok(set > 0)
        }

        async fn computers_page(
            &self,
            organization: Uuid,
            member: Uuid,
            after: Option<Uuid>,
            limit: i64,
        ) -> Result<Vec<ComputerRow>, StoreError> {
            let rows = sqlx::query(COMPUTERS_PAGE)
                .bind(organization)
                .bind(member)
                .bind(after.unwrap_or(crate::paging::FIRST_ID))
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(computer_from).collect()
        }

        async fn computer(
            &self,
            organization: Uuid,
            member: Uuid,
            id: Uuid,
        ) -> Result<Option<ComputerRow>, StoreError> {
            let row = sqlx::query(COMPUTER)
                .bind(organization)
                .bind(member)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(computer_from).transpose()
        }

        async fn remove(
            &self,
            organization: Uuid,
            id: Uuid,
            now: Millis,
        ) -> Result<bool, StoreError> {
            let mut tx = self.writer().begin().await?;
            let removed = sqlx::query(REMOVE)
                .bind(organization)
                .bind(id)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if removed > 0 {
                // Its terminals' output goes with it.
                sqlx::query(FORGET_OUTPUT)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(FORGET_TERMINALS)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(removed > 0)
        }

        async fn computer_by_credential(
            &self,
            credential_hash: &[u8],
        ) -> Result<Option<ComputerRow>, StoreError> {
            let row = sqlx::query(BY_CREDENTIAL)
                .bind(credential_hash)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(computer_from).transpose()
        }

        async fn grant(&self, grant: &GrantRow) -> Result<(), StoreError> {
            sqlx::query(GRANT)
                .bind(grant.bot_id)
                .bind(grant.computer_id)
                .bind(grant.ask)
                .bind(grant.granted_by)
                .bind(grant.granted_at)
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn revoke(&self, bot: Uuid, computer: Uuid) -> Result<bool, StoreError> {
            let removed = sqlx::query(REVOKE)
                .bind(bot)
                .bind(computer)
                .execute(self.writer())
                .await?
                .rows_affected();
            Ok(removed > 0)
        }

        async fn grant_of_bot(
            &self,
            bot: Uuid,
        ) -> Result<Option<(GrantRow, ComputerRow)>, StoreError> {
            let Some(row) = sqlx::query(GRANT_OF_BOT)
                .bind(bot)
                .fetch_optional(self.reader())
                .await?
            else {
                return Ok(None);
            };
            let grant = GrantRow {
                bot_id: row.try_get("bot_id")?,
                computer_id: row.try_get("computer_id")?,
                ask: row.try_get("ask")?,
                granted_by: row.try_get("granted_by")?,
                granted_at: row.try_get("granted_at")?,
            };
            Ok(Some((grant, computer_from(&row)?)))
        }

        async fn save_output(
            &self,
            computer: Uuid,
            batches: &[OutputBatch],
        ) -> Result<(), StoreError> {
            let mut tx = self.writer().begin().await?;
            for batch in batches {
                let session = &batch.session;
                let newest = batch.chunks.iter().map(|c| c.seq).max().unwrap_or(0);
                let newest = i64::try_from(newest).map_err(|_| {
                    StoreError::Invalid("an output sequence is out of range".into())
                })?;
                let saved = sqlx::query(SAVE_TERMINAL)
                    .bind(computer)
                    .bind(&session.id)
                    .bind(&session.cwd)
                    .bind(&session.command)
                    .bind(session.started_at.timestamp_millis())
                    .bind(newest)
                    .bind(batch.exited)
                    .bind(batch.exit_code)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if saved == 0 {
                    // The Computer was removed: nothing of it is kept.
                    continue;
                }
                for part in batch.chunks.chunks(CHUNKS_PER_INSERT) {
                    let mut sql = String::from(INSERT_OUTPUT);
                    for i in 0..part.len() {
                        if i > 0 {
                            sql.push_str(", ");
                        }
                        sql.push_str(&format!("($1, $2, ${}, ${})", 3 + 2 * i, 4 + 2 * i));
                    }
                    sql.push_str(" ON CONFLICT DO NOTHING");
                    // Built only of placeholders: no value is in the text.
                    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
                        .bind(computer)
                        .bind(&session.id);
                    for chunk in part {
                        let seq = i64::try_from(chunk.seq).map_err(|_| {
                            StoreError::Invalid("an output sequence is out of range".into())
                        })?;
                        query = query.bind(seq).bind(&chunk.text);
                    }
                    query.execute(&mut *tx).await?;
                }
                let oldest_kept = newest - KEPT_CHUNKS;
                if oldest_kept > 0 {
                    sqlx::query(TRIM_OUTPUT)
                        .bind(computer)
                        .bind(&session.id)
                        .bind(oldest_kept)
                        .execute(&mut *tx)
                        .await?;
                }
            }
            tx.commit().await?;
            Ok(())
        }

        async fn terminal(
            &self,
            computer: Uuid,
            session: &str,
        ) -> Result<Option<TerminalRow>, StoreError> {
            let row = sqlx::query(TERMINAL)
                .bind(computer)
                .bind(session)
                .fetch_optional(self.reader())
                .await?;
            row.map(|row| {
                Ok(TerminalRow {
                    session_id: row.try_get("session_id")?,
                    cwd: row.try_get("cwd")?,
                    command: row.try_get("command")?,
                    started_at: row.try_get("started_at")?,
                    last_seq: row.try_get("last_seq")?,
                    exited: row.try_get("exited")?,
                    exit_code: row.try_get("exit_code")?,
                })
            })
            .transpose()
        }

        async fn output_after(
            &self,
            computer: Uuid,
            session: &str,
            after: u64,
            limit: i64,
        ) -> Result<Vec<OutputChunk>, StoreError> {
            let after = i64::try_from(after).unwrap_or(i64::MAX);
            let rows = sqlx::query(OUTPUT_AFTER)
                .bind(computer)
                .bind(session)
                .bind(after)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter()
                .map(|row| {
                    let seq: i64 = row.try_get("seq")?;
                    Ok(OutputChunk {
                        seq: u64::try_from(seq).map_err(|_| {
                            StoreError::Invalid("a saved output sequence is negative".into())
                        })?,
                        text: row.try_get("text")?,
                    })
                })
                .collect()
        }
    }
}
