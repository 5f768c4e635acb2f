//! File descriptions, retention and the rows of file deletion on SQL, written once for
//! SQLite and PostgreSQL.

use async_trait::async_trait;
use const_format::concatcp;
use futures::future::BoxFuture;
use sqlx::{Postgres, Row as _, Sqlite, Transaction};
use uuid::Uuid;

use super::store::{FileAccess, FileRow, FileStore};
use super::writes::{MarkDeleting, RemoveFileRow, SweepRan};
use crate::store::{Millis, StoreError, TxWrite, both_backends, now_ms};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const ADD_FILE: &str = "INSERT INTO files (id, organization_id, owner_member_id, name, media_type, size, sha256, object_key, created_at, token_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";
    const FILE_OF: &str = concatcp!(
        "SELECT * FROM files WHERE id = $1 AND owner_member_id = $2 AND deleted_at IS NULL \
             AND (",
        "$3",
        Store::UUID_CAST,
        " IS NULL OR token_id = $3)"
    );
    const FILES_OF: &str = concatcp!(
        "SELECT * FROM files WHERE owner_member_id = $1 AND deleted_at IS NULL AND (",
        "$2",
        Store::UUID_CAST,
        " IS NULL OR token_id = $2) AND (created_at < $3 OR (created_at = $3 AND id < $4)) \
             ORDER BY created_at DESC, id DESC LIMIT $5"
    );
    const DELETING: &str = "SELECT deleted_at FROM files WHERE id = $1";
    const RETENTION: &str =
        "SELECT CAST(days AS BIGINT) FROM file_retention WHERE organization_id = $1";
    const PUT_RETENTION: &str = "INSERT INTO file_retention (organization_id, days, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (organization_id) DO UPDATE SET days = EXCLUDED.days, updated_at = EXCLUDED.updated_at";
    const DELETE_RETENTION: &str = "DELETE FROM file_retention WHERE organization_id = $1";
    const EXPIRED_FILES: &str = "SELECT f.* FROM files f JOIN file_retention r ON r.organization_id = f.organization_id \
             WHERE f.deleted_at IS NULL AND f.created_at < $1 - CAST(r.days AS BIGINT) * 86400000 \
             ORDER BY f.created_at, f.id LIMIT $2";
    const STRANDED_DELETIONS: &str = "SELECT * FROM files WHERE deleted_at IS NOT NULL AND deleted_at < $1 ORDER BY deleted_at, id LIMIT $2";
    const SWEPT_AT: &str = "SELECT swept_at FROM file_sweeps WHERE name = $1";
    const MARK_DELETING: &str = concatcp!(
        "UPDATE files SET deleted_at = $5 WHERE id = $1 AND deleted_at IS NULL AND (NOT $2 OR (owner_member_id = $3 AND (",
        "$4",
        Store::UUID_CAST,
        " IS NULL OR token_id = $4)))"
    );
    const REMOVE_ROW: &str = "DELETE FROM files WHERE id = $1 AND deleted_at IS NOT NULL";
    const RECORD_SWEEP: &str = "INSERT INTO file_sweeps (name, swept_at) VALUES ($1, $2) \
         ON CONFLICT (name) DO UPDATE SET swept_at = EXCLUDED.swept_at";

    fn file_row(row: &Row) -> Result<FileRow, StoreError> {
        Ok(FileRow {
            id: row.try_get("id")?,
            organization_id: row.try_get("organization_id")?,
            owner_member_id: row.try_get("owner_member_id")?,
            name: row.try_get("name")?,
            media_type: row.try_get("media_type")?,
            size: row.try_get("size")?,
            sha256: row.try_get("sha256")?,
            object_key: row.try_get("object_key")?,
            created_at: row.try_get("created_at")?,
            token_id: row.try_get("token_id")?,
        })
    }

    #[async_trait]
    impl FileStore for Store {
        async fn add_file(&self, file: &FileRow) -> Result<(), StoreError> {
            sqlx::query(ADD_FILE)
                .bind(file.id)
                .bind(file.organization_id)
                .bind(file.owner_member_id)
                .bind(&file.name)
                .bind(&file.media_type)
                .bind(file.size)
                .bind(&file.sha256)
                .bind(&file.object_key)
                .bind(file.created_at)
                .bind(file.token_id)
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn file_of(
            &self,
            access: FileAccess,
            id: Uuid,
        ) -> Result<Option<FileRow>, StoreError> {
            let row = sqlx::query(FILE_OF)
                .bind(id)
                .bind(access.owner)
                .bind(access.stored_by)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(file_row).transpose()
        }

        async fn files_of(
            &self,
            access: FileAccess,
            before: Option<crate::paging::CreatedPosition>,
            limit: i64,
        ) -> Result<Vec<FileRow>, StoreError> {
            let (before_at, before_id) = before.unwrap_or((i64::MAX, crate::paging::LAST_ID));
            let rows = sqlx::query(FILES_OF)
                .bind(access.owner)
                .bind(access.stored_by)
                .bind(before_at)
                .bind(before_id)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(file_row).collect()
        }

        async fn deleting(&self, id: Uuid) -> Result<Option<bool>, StoreError> {
            let row: Option<Option<i64>> = sqlx::query_scalar(DELETING)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            Ok(row.map(|deleted_at| deleted_at.is_some()))
        }

        async fn retention(&self, organization: Uuid) -> Result<Option<i64>, StoreError> {
            let days: Option<i64> = sqlx::query_scalar(RETENTION)
                .bind(organization)
                .fetch_optional(self.reader())
                .await?;
            Ok(days)
        }

        async fn put_retention(&self, organization: Uuid, days: i64) -> Result<(), StoreError> {
            sqlx::query(PUT_RETENTION)
                .bind(organization)
                .bind(days)
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn delete_retention(&self, organization: Uuid) -> Result<bool, StoreError> {
            let removed = sqlx::query(DELETE_RETENTION)
                .bind(organization)
                .execute(self.writer())
                .await?
                .rows_affected();
            Ok(removed > 0)
        }

        async fn expired_files(&self, now: Millis, limit: i64) -> Result<Vec<FileRow>, StoreError> {
            let rows = sqlx::query(EXPIRED_FILES)
                .bind(now)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(file_row).collect()
        }

        async fn stranded_deletions(
            &self,
            before: Millis,
            limit: i64,
        ) -> Result<Vec<FileRow>, StoreError> {
            let rows = sqlx::query(STRANDED_DELETIONS)
                .bind(before)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(file_row).collect()
        }

        async fn swept_at(&self, name: &str) -> Result<Option<Millis>, StoreError> {
            let at: Option<i64> = sqlx::query_scalar(SWEPT_AT)
                .bind(name)
                .fetch_optional(self.reader())
                .await?;
            Ok(at)
        }
    }

    /// Marks a file in use deleting (one `access` sees, or any, for the platform); returns
    /// whether it did.
    pub(super) async fn mark_deleting(
        tx: &mut Transaction<'_, Db>,
        id: Uuid,
        access: Option<FileAccess>,
    ) -> Result<bool, StoreError> {
        let marked = sqlx::query(MARK_DELETING)
            .bind(id)
            .bind(access.is_some())
            .bind(access.map(|a| a.owner))
            .bind(access.and_then(|a| a.stored_by))
            .bind(now_ms())
            .execute(&mut **tx)
            .await?
            .rows_affected();
        Ok(marked == 1)
    }

    /// Removes a file's row once its deletion removed its object (only a row marked deleting).
    pub(super) async fn remove_row(
        tx: &mut Transaction<'_, Db>,
        id: Uuid,
    ) -> Result<(), StoreError> {
        sqlx::query(REMOVE_ROW).bind(id).execute(&mut **tx).await?;
        Ok(())
    }

    /// Records that the sweep `name` ran at `at`.
    pub(super) async fn record_sweep(
        tx: &mut Transaction<'_, Db>,
        name: &str,
        at: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(RECORD_SWEEP)
            .bind(name)
            .bind(at)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }
}

impl TxWrite for MarkDeleting {
    fn on_sqlite<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Sqlite>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(
            async move { self.outcome(on_sqlite::mark_deleting(tx, self.id, self.access).await?) },
        )
    }

    fn on_postgres<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Postgres>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.outcome(on_postgres::mark_deleting(tx, self.id, self.access).await?)
        })
    }
}

impl TxWrite for RemoveFileRow {
    fn on_sqlite<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Sqlite>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(on_sqlite::remove_row(tx, self.id))
    }

    fn on_postgres<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Postgres>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(on_postgres::remove_row(tx, self.id))
    }
}

impl TxWrite for SweepRan {
    fn on_sqlite<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Sqlite>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(on_sqlite::record_sweep(tx, self.name, self.at))
    }

    fn on_postgres<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Postgres>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(on_postgres::record_sweep(tx, self.name, self.at))
    }
}
