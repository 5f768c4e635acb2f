//! The file use cases: store, list, read and delete a member's files. A token limited to some
//! Bots reaches only the files it stored itself.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use chrono::DateTime;
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use openbot_schema::{Action, FileId, Resource, StoredFile, StoredFilePage};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::store::{FileAccess, FileRow, FileStore};
use crate::identity::{AccessError, Caller, Credential};
use crate::paging::{CreatedPosition, Paging};
use crate::store::{StoreError, now_ms};

/// The largest file the server stores: 20 MiB.
pub const MAX_FILE_BYTES: usize = 20 * 1024 * 1024;

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
}

fn view(row: &FileRow) -> StoredFile {
    StoredFile {
        id: FileId::from(row.id),
        name: row.name.clone(),
        media_type: row.media_type.clone(),
        size: row.size.max(0) as u64,
        sha256: row.sha256.clone(),
        created_at: DateTime::from_timestamp_millis(row.created_at).unwrap_or_default(),
    }
}

fn check_name(name: &str) -> Result<(), FileError> {
    let valid = (1..=255).contains(&name.chars().count())
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control);
    if valid {
        Ok(())
    } else {
        Err(FileError::Invalid(
            "a file name has 1-255 characters and no slash or control character".into(),
        ))
    }
}

fn check_media_type(media_type: &str) -> Result<(), FileError> {
    let valid = media_type.len() <= 255
        && media_type.split_once('/').is_some_and(|(kind, sub)| {
            !kind.is_empty()
                && !sub.is_empty()
                && media_type
                    .bytes()
                    .all(|b| b.is_ascii_graphic() || b == b' ')
        });
    if valid {
        Ok(())
    } else {
        Err(FileError::Invalid(format!(
            "`{}` is not a media type such as text/plain",
            media_type.chars().take(80).collect::<String>()
        )))
    }
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
    /// The use cases on an object store and the descriptions' store.
    pub fn new(objects: Arc<dyn ObjectStore>, store: Arc<dyn FileStore>) -> Self {
        Self { objects, store }
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
        check_name(name)?;
        check_media_type(media_type)?;
        if bytes.len() > MAX_FILE_BYTES {
            return Err(FileError::Invalid(format!(
                "a file has at most {MAX_FILE_BYTES} bytes"
            )));
        }
        let id = Uuid::now_v7();
        let key = format!("org-{}/{id}", caller.member.organization_id);
        let sha256: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
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
        Ok(view(&row))
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
        Ok(view(&self.row(caller, id).await?))
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
        Ok((view(&row), bytes))
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
        Ok(paging.page(rows, |row| (row.created_at, row.id), |row| view(&row)))
    }

    /// Deletes a file of the caller: its description first (it is gone at once), then its
    /// bytes.
    pub async fn delete(&self, caller: &Caller, id: FileId) -> Result<(), FileError> {
        caller.require(Resource::Chats, Action::Write)?;
        let row = self
            .store
            .delete_file(access(caller), id.as_uuid())
            .await?
            .ok_or(FileError::NotFound)?;
        match self
            .objects
            .delete(&ObjectPath::from(row.object_key.as_str()))
            .await
        {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }
}
