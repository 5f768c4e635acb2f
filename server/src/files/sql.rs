//! File descriptions on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{FileAccess, FileRow, FileStore};
use crate::store::{StoreError, now_ms, sql_store};

sql_store! {
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
        sqlx::query(
            "INSERT INTO files (id, organization_id, owner_member_id, name, media_type, size, sha256, object_key, created_at, token_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
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
        .execute(self.pool())
        .await?;
        Ok(())
    }

    async fn file_of(&self, access: FileAccess, id: Uuid) -> Result<Option<FileRow>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT * FROM files WHERE id = $1 AND owner_member_id = $2 AND deleted_at IS NULL \
             AND (",
            uuid_param!("$3"),
            " IS NULL OR token_id = $3)"
        ))
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
        let rows = sqlx::query(concat!(
            "SELECT * FROM files WHERE owner_member_id = $1 AND deleted_at IS NULL AND (",
            uuid_param!("$2"),
            " IS NULL OR token_id = $2) AND (created_at < $3 OR (created_at = $3 AND id < $4)) \
             ORDER BY created_at DESC, id DESC LIMIT $5"
        ))
        .bind(access.owner)
        .bind(access.stored_by)
        .bind(before_at)
        .bind(before_id)
        .bind(limit)
        .fetch_all(self.reader())
        .await?;
        rows.iter().map(file_row).collect()
    }

    async fn delete_file(
        &self,
        access: FileAccess,
        id: Uuid,
    ) -> Result<Option<FileRow>, StoreError> {
        let row = sqlx::query(concat!(
            "UPDATE files SET deleted_at = $4 WHERE id = $1 AND owner_member_id = $2 AND deleted_at IS NULL AND (",
            uuid_param!("$3"),
            " IS NULL OR token_id = $3) RETURNING *"
        ))
        .bind(id)
        .bind(access.owner)
        .bind(access.stored_by)
        .bind(now_ms())
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(file_row).transpose()
    }
}
}
