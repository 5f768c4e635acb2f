//! Files the model reads, on the server: the check when a message that attaches files is sent
//! (each file the caller's, of a type and size the Bot's provider takes), and the
//! [`FileSource`] a Turn reads them from when it sends its model requests (only files of the
//! Turn's member).

use std::sync::Arc;

use async_trait::async_trait;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use openbot_core::model::{FileBytes, FileReadError, FileSource, attach_stored, file_format_of};
use openbot_schema::{ContentPart, FileId};
use uuid::Uuid;

use super::service::{FileError, Files, access};
use super::store::{FileAccess, FileStore};
use crate::identity::Caller;

impl Files {
    /// Checks the files `content` attaches as the caller sends it to a Bot of model `spec`:
    /// each must be a file the caller may read (else `NotFound`) of a type and size that
    /// provider takes (else `Invalid`, saying which file and why). Each reference is set from
    /// the stored description (its media type and name) without a URL, so the model reads the
    /// stored bytes, never a URL the caller gave.
    pub async fn check_attached(
        &self,
        caller: &Caller,
        spec: &str,
        content: &mut [ContentPart],
    ) -> Result<(), FileError> {
        let format = file_format_of(spec);
        for part in content.iter_mut() {
            let ContentPart::File { file } = part else {
                continue;
            };
            let row = self
                .store
                .file_of(access(caller), file.id.as_uuid())
                .await?
                .ok_or(FileError::NotFound)?;
            attach_stored(
                format,
                file,
                &row.name,
                &row.media_type,
                row.size.max(0) as u64,
            )
            .map_err(FileError::Invalid)?;
        }
        Ok(())
    }
}

/// What Turns read the files their messages attach from: the rows and the object store.
#[derive(Clone)]
pub struct FileReader {
    objects: Arc<dyn ObjectStore>,
    store: Arc<dyn FileStore>,
}

impl FileReader {
    /// Reads rows from `store` and bytes from `objects`.
    pub fn new(objects: Arc<dyn ObjectStore>, store: Arc<dyn FileStore>) -> Self {
        Self { objects, store }
    }

    /// Where a Turn of `member` reads the files its messages attach: that member's files only.
    pub fn source_for(&self, member: Uuid) -> Arc<dyn FileSource> {
        Arc::new(MemberFiles {
            files: self.clone(),
            member,
        })
    }
}

/// The files of one member, for a Turn's model requests.
struct MemberFiles {
    files: FileReader,
    member: Uuid,
}

#[async_trait]
impl FileSource for MemberFiles {
    async fn read(&self, id: FileId) -> Result<FileBytes, FileReadError> {
        let failed = |cause: String| FileReadError::Failed { id, cause };
        let seen = FileAccess {
            owner: self.member,
            stored_by: None,
        };
        let row = self
            .files
            .store
            .file_of(seen, id.as_uuid())
            .await
            .map_err(|e| failed(e.to_string()))?
            .ok_or(FileReadError::NotFound(id))?;
        let bytes = self
            .files
            .objects
            .get(&ObjectPath::from(row.object_key.as_str()))
            .await
            .map_err(|e| match e {
                object_store::Error::NotFound { .. } => FileReadError::NotFound(id),
                other => failed(other.to_string()),
            })?
            .bytes()
            .await
            .map_err(|e| failed(e.to_string()))?;
        Ok(FileBytes {
            media_type: row.media_type,
            bytes,
        })
    }
}
