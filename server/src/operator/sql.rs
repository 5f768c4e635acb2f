//! The operator's tables on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use sqlx::Row as _;
use uuid::Uuid;

use super::{AuditEntry, ErrorRecordRow, OperatorStore, OperatorToken};
use crate::store::{SealedBlob, StoreError, both_backends, now_ms};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const CREATE_OPERATOR_TOKEN: &str =
        "INSERT INTO operator_tokens (id, name, secret_hash, created_at) VALUES ($1, $2, $3, $4)";
    const OPERATOR_TOKEN_BY_HASH: &str =
        "SELECT id, name FROM operator_tokens WHERE secret_hash = $1 AND revoked_at IS NULL";
    const ERROR_RECORD_ROW: &str = "SELECT id, execution_id, category, key_id, nonce, ciphertext, created_at \
             FROM error_records WHERE id = $1";
    const WRITE_AUDIT: &str = "INSERT INTO operator_audit (id, operator_token_id, actor, action, subject, at) \
             VALUES ($1, $2, $3, $4, $5, $6)";
    const AUDIT_OF: &str = "SELECT id, operator_token_id, actor, action, subject, at FROM operator_audit \
             WHERE subject = $1 ORDER BY at, id";

    #[async_trait]
    impl OperatorStore for Store {
        async fn create_operator_token(
            &self,
            id: Uuid,
            name: &str,
            secret_hash: &[u8],
        ) -> Result<(), StoreError> {
            sqlx::query(CREATE_OPERATOR_TOKEN)
                .bind(id)
                .bind(name)
                .bind(secret_hash)
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn operator_token_by_hash(
            &self,
            secret_hash: &[u8],
        ) -> Result<Option<OperatorToken>, StoreError> {
            let row = sqlx::query(OPERATOR_TOKEN_BY_HASH)
                .bind(secret_hash)
                .fetch_optional(self.writer())
                .await?;
            row.map(|row| {
                Ok(OperatorToken {
                    id: row.try_get("id")?,
                    name: row.try_get("name")?,
                })
            })
            .transpose()
        }

        async fn error_record_row(&self, id: Uuid) -> Result<Option<ErrorRecordRow>, StoreError> {
            let row = sqlx::query(ERROR_RECORD_ROW)
                .bind(id)
                .fetch_optional(self.writer())
                .await?;
            row.map(|row| {
                Ok(ErrorRecordRow {
                    category: row.try_get("category")?,
                    execution_id: row.try_get("execution_id")?,
                    created_at: row.try_get("created_at")?,
                    blob: SealedBlob {
                        id: row.try_get("id")?,
                        key_id: row.try_get("key_id")?,
                        nonce: row.try_get("nonce")?,
                        ciphertext: row.try_get("ciphertext")?,
                    },
                })
            })
            .transpose()
        }

        async fn write_audit(&self, entry: &AuditEntry) -> Result<(), StoreError> {
            sqlx::query(WRITE_AUDIT)
                .bind(entry.id)
                .bind(entry.operator_token_id)
                .bind(&entry.actor)
                .bind(&entry.action)
                .bind(&entry.subject)
                .bind(entry.at)
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn audit_of(&self, subject: &str) -> Result<Vec<AuditEntry>, StoreError> {
            let rows = sqlx::query(AUDIT_OF)
                .bind(subject)
                .fetch_all(self.writer())
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(AuditEntry {
                        id: row.try_get("id")?,
                        operator_token_id: row.try_get("operator_token_id")?,
                        actor: row.try_get("actor")?,
                        action: row.try_get("action")?,
                        subject: row.try_get("subject")?,
                        at: row.try_get("at")?,
                    })
                })
                .collect()
        }
    }
}
