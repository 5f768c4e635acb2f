//! The file use cases: store, list, read and delete a member's files, and the organization's
//! file retention. A token limited to some
//! Bots reaches only the files it stored itself.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use openbot_schema::{
    Action, FileId, FileRetention, PutFileRetention, Resource, StoredFile, StoredFilePage,
};
use uuid::Uuid;

use super::deletion::{Started, start_deletion};
use super::retention::MAX_RETENTION_DAYS;
use super::store::{FileAccess, FileRow, FileStore};
use super::writes::MarkDeleting;
use crate::engine::{EngineContext, EngineError};
use crate::identity::{AccessError, Caller, Credential};
use crate::paging::{CreatedPosition, Paging};
use crate::store::{StoreError, now_ms, stored_time};

/// How long deleting a file waits for its object and row to go before it answers.
pub const DELETE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The largest file the server stores: 20 MiB (the rule of both modes, in core).
pub use openbot_core::files::MAX_FILE_BYTES;

/// Why a file use case failed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Not there, or not the caller's.
    #[error("file was not found")]
    NotFound,
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// The caller's token lacks a right.
    #[error(transparent)]
    Forbidden(#[from] AccessError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The object store failed; the cause is for the sealed error record only.
    #[error("object store: {0}")]
    Objects(String),
}

impl From<object_store::Error> for FileError {
    fn from(err: object_store::Error) -> Self {
        match err {
            object_store::Error::NotFound { .. } => FileError::NotFound,
            other => FileError::Objects(other.to_string()),
        }
    }
}

/// The object store in a folder of this machine (created when missing): the embedded
/// default, `<data-dir>/objects`.
pub fn local_objects(folder: &Path) -> Result<Arc<dyn ObjectStore>, FileError> {
    std::fs::create_dir_all(folder)
        .map_err(|e| FileError::Objects(format!("{}: {e}", folder.display())))?;
    Ok(Arc::new(LocalFileSystem::new_with_prefix(folder)?))
}

/// The object store in an S3 bucket (or an S3-compatible server's): `s3://bucket/prefix`, with
/// credentials, region and endpoint from the standard `AWS_*` variables. The prefix keeps a
/// deployment's objects apart from anything else in the bucket.
pub fn s3_objects(url: &str) -> Result<Arc<dyn ObjectStore>, FileError> {
    let (bucket, prefix) = url
        .strip_prefix("s3://")
        .map(|rest| rest.split_once('/').unwrap_or((rest, "")))
        .filter(|(bucket, _)| !bucket.is_empty())
        .ok_or_else(|| {
            FileError::Invalid(format!("objects URL `{url}` must be s3://bucket/prefix"))
        })?;
    let bucket = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .build()?;
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        return Ok(Arc::new(bucket));
    }
    Ok(Arc::new(object_store::prefix::PrefixStore::new(
        bucket,
        ObjectPath::from(prefix),
    )))
}

/// The file use cases.
#[derive(Clone)]
pub struct Files {
    pub(super) objects: Arc<dyn ObjectStore>,
    pub(super) store: Arc<dyn FileStore>,
    engine: Arc<EngineContext>,
}

fn view(row: &FileRow) -> Result<StoredFile, StoreError> {
    Ok(StoredFile {
        id: FileId::from(row.id),
        name: row.name.clone(),
        media_type: row.media_type.clone(),
        size: row.size.max(0) as u64,
        sha256: row.sha256.clone(),
        created_at: stored_time(row.created_at)?,
    })
}

/// The files a caller sees: its member's. Files have no Bot, so a token limited to some Bots
/// sees only the files it stored itself, never the member's others.
pub(super) fn access(caller: &Caller) -> FileAccess {
    let stored_by = caller.bot_ids.as_ref().map(|_| match caller.credential {
        Credential::Token { id } => id,
        // Sessions are never limited to Bots; should one be, no file names it, so it sees none.
        Credential::Session { .. } => Uuid::nil(),
    });
    FileAccess {
        owner: caller.member.member_id,
        stored_by,
    }
}

impl Files {
    /// The use cases on an object store and the descriptions' store; deletions run as work
    /// of `engine`.
    pub fn new(
        objects: Arc<dyn ObjectStore>,
        store: Arc<dyn FileStore>,
        engine: Arc<EngineContext>,
    ) -> Self {
        Self {
            objects,
            store,
            engine,
        }
    }

    /// Stores a file of the caller. The bytes are written first, so a description never
    /// names bytes that are not there.
    pub async fn upload(
        &self,
        caller: &Caller,
        name: &str,
        media_type: &str,
        bytes: Bytes,
    ) -> Result<StoredFile, FileError> {
        caller.require(Resource::Chats, Action::Write)?;
        // The one check of an upload, shared with the in-memory Client.
        openbot_core::files::check_upload(name, media_type, bytes.len())
            .map_err(|e| FileError::Invalid(e.to_string()))?;
        let id = Uuid::now_v7();
        let key = format!("org-{}/{id}", caller.member.organization_id);
        let sha256 = openbot_core::files::sha256_hex(&bytes);
        let row = FileRow {
            id,
            organization_id: caller.member.organization_id,
            owner_member_id: caller.member.member_id,
            name: name.to_string(),
            media_type: media_type.to_string(),
            size: bytes.len() as i64,
            sha256,
            object_key: key.clone(),
            created_at: now_ms(),
            token_id: match caller.credential {
                Credential::Token { id } => Some(id),
                Credential::Session { .. } => None,
            },
        };
        // A store that answers "not found" to a write lacks its bucket or folder: a fault of the
        // deployment, not a missing file.
        self.objects
            .put(&ObjectPath::from(key), bytes.into())
            .await
            .map_err(|err| FileError::Objects(err.to_string()))?;
        self.store.add_file(&row).await?;
        Ok(view(&row)?)
    }

    async fn row(&self, caller: &Caller, id: FileId) -> Result<FileRow, FileError> {
        caller.require(Resource::Chats, Action::Read)?;
        self.store
            .file_of(access(caller), id.as_uuid())
            .await?
            .ok_or(FileError::NotFound)
    }

    /// A file of the caller.
    pub async fn get(&self, caller: &Caller, id: FileId) -> Result<StoredFile, FileError> {
        Ok(view(&self.row(caller, id).await?)?)
    }

    /// A file of the caller with its bytes.
    pub async fn content(
        &self,
        caller: &Caller,
        id: FileId,
    ) -> Result<(StoredFile, Bytes), FileError> {
        let row = self.row(caller, id).await?;
        let bytes = self
            .objects
            .get(&ObjectPath::from(row.object_key.as_str()))
            .await?
            .bytes()
            .await?;
        Ok((view(&row)?, bytes))
    }

    /// One page of the caller's files, newest first.
    pub async fn list(
        &self,
        caller: &Caller,
        paging: &Paging<CreatedPosition>,
    ) -> Result<StoredFilePage, FileError> {
        caller.require(Resource::Chats, Action::Read)?;
        let rows = self
            .store
            .files_of(access(caller), paging.after, paging.fetch())
            .await?;
        Ok(paging.try_page(rows, |row| (row.created_at, row.id), |row| view(&row))?)
    }

    /// Deletes a file of the caller: it is hidden at once (its row marked deleting in the
    /// transaction that submits its deletion work), and the work removes its object, then its
    /// row (see `deletion`). Waits up to `DELETE_WAIT` for the work to end (it goes on
    /// either way, also across a restart). A file already being deleted is not found.
    pub async fn delete(&self, caller: &Caller, id: FileId) -> Result<(), FileError> {
        caller.require(Resource::Chats, Action::Write)?;
        let row = self
            .store
            .file_of(access(caller), id.as_uuid())
            .await?
            .ok_or(FileError::NotFound)?;
        let mark = MarkDeleting::new(row.id, Some(access(caller)));
        match start_deletion(&self.engine, &row, Some(mark)).await {
            Ok(Started::Started(deletion)) => {
                let deadline = tokio::time::Instant::now() + DELETE_WAIT;
                while tokio::time::Instant::now() < deadline
                    && !self
                        .engine
                        .store
                        .execution(deletion)
                        .await?
                        .state
                        .is_terminal()
                {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Ok(())
            }
            Ok(Started::Already(_) | Started::Missing) => Err(FileError::NotFound),
            Err(EngineError::Store(err)) => Err(FileError::Store(err)),
            Err(other) => Err(FileError::Store(StoreError::Invalid(other.to_string()))),
        }
    }

    fn check_retention_rights(caller: &Caller, action: Action) -> Result<(), FileError> {
        caller.require(Resource::Chats, action)?;
        if action == Action::Write && !caller.is_admin() {
            return Err(FileError::Forbidden(AccessError {
                action: "change",
                resource: "the file retention (it needs the owner or admin role)",
            }));
        }
        // Retention deletes the whole organization's files: a token limited to some Bots
        // changes none of it.
        if action == Action::Write {
            caller.require_whole_organization()?;
        }
        Ok(())
    }

    /// The caller's organization's file retention.
    pub async fn retention(&self, caller: &Caller) -> Result<FileRetention, FileError> {
        Self::check_retention_rights(caller, Action::Read)?;
        let days = self
            .store
            .retention(caller.member.organization_id)
            .await?
            .and_then(|days| u32::try_from(days).ok());
        Ok(FileRetention { days })
    }

    /// Sets the organization's file retention (owner or admin): from the next sweep on,
    /// files older than `days` are deleted.
    pub async fn put_retention(
        &self,
        caller: &Caller,
        request: PutFileRetention,
    ) -> Result<FileRetention, FileError> {
        Self::check_retention_rights(caller, Action::Write)?;
        let days = i64::from(request.days);
        if !(1..=MAX_RETENTION_DAYS).contains(&days) {
            return Err(FileError::Invalid(format!(
                "days must be between 1 and {MAX_RETENTION_DAYS}"
            )));
        }
        self.store
            .put_retention(caller.member.organization_id, days)
            .await?;
        Ok(FileRetention {
            days: Some(request.days),
        })
    }

    /// Removes the organization's file retention (owner or admin): files are kept until
    /// deleted. Not found when it had none.
    pub async fn delete_retention(&self, caller: &Caller) -> Result<(), FileError> {
        Self::check_retention_rights(caller, Action::Write)?;
        if self
            .store
            .delete_retention(caller.member.organization_id)
            .await?
        {
            Ok(())
        } else {
            Err(FileError::NotFound)
        }
    }
}
