//! The file descriptions store.

use async_trait::async_trait;
use uuid::Uuid;

use crate::store::{Millis, StoreError};

/// A stored file's description.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRow {
    /// Its ID.
    pub id: Uuid,
    /// Its organization.
    pub organization_id: Uuid,
    /// The member who stored it.
    pub owner_member_id: Uuid,
    /// Its display name.
    pub name: String,
    /// Its media type.
    pub media_type: String,
    /// Its size in bytes.
    pub size: i64,
    /// The SHA-256 of its bytes, hex.
    pub sha256: String,
    /// Where its bytes are in the object store.
    pub object_key: String,
    /// When it was stored.
    pub created_at: Millis,
    /// The token that stored it (`None`: a session, or stored before tokens were recorded).
    pub token_id: Option<Uuid>,
}

/// Whose files a reader sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileAccess {
    /// The member who owns them.
    pub owner: Uuid,
    /// Only the files this token stored, when given (a token limited to some Bots).
    pub stored_by: Option<Uuid>,
}

/// File descriptions, read through a [`FileAccess`] that is part of every query.
#[async_trait]
pub trait FileStore: Send + Sync + 'static {
    /// Stores a file's description (its bytes are already in the object store).
    async fn add_file(&self, file: &FileRow) -> Result<(), StoreError>;

    /// A file `access` sees that is not deleted.
    async fn file_of(&self, access: FileAccess, id: Uuid) -> Result<Option<FileRow>, StoreError>;

    /// Up to `limit` of the files `access` sees, newest first, after the file at `before`
    /// (its creation time and ID) when given.
    async fn files_of(
        &self,
        access: FileAccess,
        before: Option<crate::paging::CreatedPosition>,
        limit: i64,
    ) -> Result<Vec<FileRow>, StoreError>;

    /// Whether a file's row is there and being deleted: `None` when it is gone, `Some(true)`
    /// while its deletion runs, `Some(false)` for a file in use.
    async fn deleting(&self, id: Uuid) -> Result<Option<bool>, StoreError>;

    /// The organization's retention in days, if it set one.
    async fn retention(&self, organization: Uuid) -> Result<Option<i64>, StoreError>;

    /// Sets the organization's retention in days.
    async fn put_retention(&self, organization: Uuid, days: i64) -> Result<(), StoreError>;

    /// Removes the organization's retention (files are kept until deleted); returns whether
    /// it had one.
    async fn delete_retention(&self, organization: Uuid) -> Result<bool, StoreError>;

    /// Up to `limit` files in use, oldest first, that are older at `now` than their
    /// organization's retention.
    async fn expired_files(&self, now: Millis, limit: i64) -> Result<Vec<FileRow>, StoreError>;

    /// Up to `limit` files marked deleting before `before`, oldest first (rows whose
    /// deletion work never ran: marked by an older version).
    async fn stranded_deletions(
        &self,
        before: Millis,
        limit: i64,
    ) -> Result<Vec<FileRow>, StoreError>;

    /// When the sweep named `name` last ran, if it ever did.
    async fn swept_at(&self, name: &str) -> Result<Option<Millis>, StoreError>;
}
