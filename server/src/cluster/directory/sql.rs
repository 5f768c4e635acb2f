//! The `resources` table on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use const_format::concatcp;
use sqlx::Row as _;
use uuid::Uuid;

use super::{CloseResult, ResourceRow, ResourceStore};
use crate::store::{StoreError, both_backends};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const REGISTER: &str = "INSERT INTO resources (id, kind, scope, owner_node, owner_incarnation, \
             execution_id, phase, lease_until, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
    const RENEW: &str = "UPDATE resources SET lease_until = $3 \
             WHERE id = $1 AND owner_incarnation = $2 AND close_outcome IS NULL";
    // The first saved result wins: a later close (a retry, a late one) changes nothing.
    const SAVE_CLOSE: &str = "UPDATE resources SET close_outcome = $3, close_error_id = $4, closed_at = $5 \
             WHERE id = $1 AND owner_incarnation = $2 AND close_outcome IS NULL";
    const ROWS: &str = "SELECT id, kind, scope, owner_node, owner_incarnation, execution_id, \
             phase, lease_until, close_outcome, close_error_id, closed_at, created_at FROM resources";
    const RESOURCE: &str = concatcp!(ROWS, " WHERE id = $1");
    const OF_SCOPE: &str = concatcp!(ROWS, " WHERE scope = $1 ORDER BY created_at, id");
    const OF_EXECUTION: &str = concatcp!(ROWS, " WHERE execution_id = $1 ORDER BY created_at, id");

    fn resource_from(row: &Row) -> Result<ResourceRow, StoreError> {
        let outcome: Option<String> = row.try_get("close_outcome")?;
        let error_id: Option<Uuid> = row.try_get("close_error_id")?;
        let closed_at: Option<i64> = row.try_get("closed_at")?;
        let closed = match (outcome.as_deref(), error_id, closed_at) {
            (None, None, None) => None,
            (Some("closed"), None, Some(at)) => Some(CloseResult::Closed { at }),
            (Some("failed"), Some(error_id), Some(at)) => {
                Some(CloseResult::Failed { error_id, at })
            }
            _ => {
                return Err(StoreError::Invalid(
                    "a resource's close result is not one this build knows".into(),
                ));
            }
        };
        Ok(ResourceRow {
            id: row.try_get("id")?,
            kind: row.try_get("kind")?,
            scope: row.try_get("scope")?,
            owner_node: row.try_get("owner_node")?,
            owner_incarnation: row.try_get("owner_incarnation")?,
            execution_id: row.try_get("execution_id")?,
            phase: row.try_get("phase")?,
            lease_until: row.try_get("lease_until")?,
            closed,
            created_at: row.try_get("created_at")?,
        })
    }

    #[async_trait]
    impl ResourceStore for Store {
        async fn register_resource(&self, row: &ResourceRow) -> Result<(), StoreError> {
            sqlx::query(REGISTER)
                .bind(row.id)
                .bind(&row.kind)
                .bind(&row.scope)
                .bind(&row.owner_node)
                .bind(row.owner_incarnation)
                .bind(row.execution_id)
                .bind(&row.phase)
                .bind(row.lease_until)
                .bind(row.created_at)
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn renew_resource(
            &self,
            id: Uuid,
            incarnation: Uuid,
            lease_until: i64,
        ) -> Result<bool, StoreError> {
            let done = sqlx::query(RENEW)
                .bind(id)
                .bind(incarnation)
                .bind(lease_until)
                .execute(self.writer())
                .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn save_close(
            &self,
            id: Uuid,
            incarnation: Uuid,
            result: &CloseResult,
        ) -> Result<bool, StoreError> {
            let (outcome, error_id, at) = match result {
                CloseResult::Closed { at } => ("closed", None, *at),
                CloseResult::Failed { error_id, at } => ("failed", Some(*error_id), *at),
            };
            let done = sqlx::query(SAVE_CLOSE)
                .bind(id)
                .bind(incarnation)
                .bind(outcome)
                .bind(error_id)
                .bind(at)
                .execute(self.writer())
                .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn resource(&self, id: Uuid) -> Result<Option<ResourceRow>, StoreError> {
            let row = sqlx::query(RESOURCE)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(resource_from).transpose()
        }

        async fn resources_of_execution(
            &self,
            execution: Uuid,
        ) -> Result<Vec<ResourceRow>, StoreError> {
            let rows = sqlx::query(OF_EXECUTION)
                .bind(execution)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(resource_from).collect()
        }

        async fn resources_of_scope(&self, scope: &str) -> Result<Vec<ResourceRow>, StoreError> {
            let rows = sqlx::query(OF_SCOPE)
                .bind(scope)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(resource_from).collect()
        }
    }
}
