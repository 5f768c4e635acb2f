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

    /// Marks a file `access` sees deleted; returns it when it was there.
    async fn delete_file(
        &self,
        access: FileAccess,
        id: Uuid,
    ) -> Result<Option<FileRow>, StoreError>;
}
