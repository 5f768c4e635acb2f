//! The model registry on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{ModelRegistryStore, ProviderRow};
use crate::store::{SealedBlob, StoreError, both_backends, now_ms};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const PUT_PROVIDER_INSERT_SEALED_RECORDS: &str = "INSERT INTO sealed_records (id, key_id, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4, $5)";
    const PUT_PROVIDER_INSERT_MODEL_PROVIDERS: &str = "INSERT INTO model_providers (organization_id, kind, base_url, key_record, updated_at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (organization_id, kind) DO UPDATE SET base_url = EXCLUDED.base_url, key_record = EXCLUDED.key_record, \
                     updated_at = EXCLUDED.updated_at \
                 RETURNING kind, base_url, key_record, updated_at";
    const PROVIDERS: &str = "SELECT kind, base_url, key_record, updated_at FROM model_providers WHERE organization_id = $1 ORDER BY kind";
    const PROVIDERS_PAGE: &str = "SELECT kind, base_url, key_record, updated_at FROM model_providers WHERE organization_id = $1 AND kind > $2 ORDER BY kind LIMIT $3";
    const DELETE_PROVIDER: &str =
        "DELETE FROM model_providers WHERE organization_id = $1 AND kind = $2";

    fn provider_row(row: &Row) -> Result<ProviderRow, StoreError> {
        Ok(ProviderRow {
            kind: row.try_get("kind")?,
            base_url: row.try_get("base_url")?,
            key_record: row.try_get("key_record")?,
            updated_at: row.try_get("updated_at")?,
        })
    }

    #[async_trait]
    impl ModelRegistryStore for Store {
        async fn put_provider(
            &self,
            organization: Uuid,
            kind: &str,
            base_url: Option<&str>,
            key: Option<SealedBlob>,
        ) -> Result<ProviderRow, StoreError> {
            let mut tx = self.writer().begin().await?;
            let now = now_ms();
            if let Some(blob) = &key {
                sqlx::query(PUT_PROVIDER_INSERT_SEALED_RECORDS)
                    .bind(blob.id)
                    .bind(&blob.key_id)
                    .bind(&blob.nonce)
                    .bind(&blob.ciphertext)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            let row = sqlx::query(PUT_PROVIDER_INSERT_MODEL_PROVIDERS)
                .bind(organization)
                .bind(kind)
                .bind(base_url)
                .bind(key.as_ref().map(|b| b.id))
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            provider_row(&row)
        }

        async fn providers(&self, organization: Uuid) -> Result<Vec<ProviderRow>, StoreError> {
            let rows = sqlx::query(PROVIDERS)
                .bind(organization)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(provider_row).collect()
        }

        async fn providers_page(
            &self,
            organization: Uuid,
            after: Option<&str>,
            limit: i64,
        ) -> Result<Vec<ProviderRow>, StoreError> {
            // Kinds are never empty, so the empty kind is before every one.
            let rows = sqlx::query(PROVIDERS_PAGE)
                .bind(organization)
                .bind(after.unwrap_or_default())
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(provider_row).collect()
        }

        async fn delete_provider(
            &self,
            organization: Uuid,
            kind: &str,
        ) -> Result<bool, StoreError> {
            let done = sqlx::query(DELETE_PROVIDER)
                .bind(organization)
                .bind(kind)
                .execute(self.writer())
                .await?
                .rows_affected();
            Ok(done == 1)
        }
    }
}
