//! Files in memory: upload, list, read and delete, with the server's limits
//! ([`crate::files`]) and its description of a file. The bytes live in this process only.
//! Files attached to a message reach the model as on a server: checked when the message is
//! sent ([`attach_stored`]: stored, and of a type and size the Bot's provider takes), read by
//! the Turn's model requests through [`crate::model::WithFiles`] from these bytes.

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use bytes::Bytes;
use openbot_schema::{ContentPart, ErrorCode, FileId, StoredFile};

use super::{Inner, MemoryClient, State};
use crate::client::ApiBytes;
use crate::error::Error;
use crate::files::{FileRuleError, check_upload, new_file};
use crate::model::{FileBytes, FileReadError, FileSource, attach_stored, file_format_of};

impl MemoryClient {
    /// Stores a file of `bytes` under `name` with its media type.
    pub(super) fn upload_file(
        &self,
        name: &str,
        media_type: &str,
        bytes: Vec<u8>,
    ) -> Result<StoredFile, Error> {
        check_upload(name, media_type, bytes.len()).map_err(|e| match e {
            FileRuleError::TooLarge => Error::new(ErrorCode::PayloadTooLarge, e.to_string()),
            FileRuleError::Invalid(message) => Error::invalid_input(message),
        })?;
        let file = new_file(name, media_type, &bytes);
        let mut state = self.state()?;
        let order = state.next_file;
        state.next_file += 1;
        state
            .files
            .insert(order, (file.clone(), Bytes::from(bytes)));
        Ok(file)
    }

    /// The stored files with their order numbers, newest first.
    pub(super) fn files(&self) -> Result<Vec<(u64, StoredFile)>, Error> {
        Ok(self
            .state()?
            .files
            .iter()
            .rev()
            .map(|(order, (file, _))| (*order, file.clone()))
            .collect())
    }

    fn file_entry(&self, id: FileId) -> Result<(u64, StoredFile, Bytes), Error> {
        self.state()?
            .files
            .iter()
            .find(|(_, (file, _))| file.id == id)
            .map(|(order, (file, bytes))| (*order, file.clone(), bytes.clone()))
            .ok_or_else(|| Error::not_found("file", id))
    }

    /// A stored file's description.
    pub(super) fn get_file(&self, id: FileId) -> Result<StoredFile, Error> {
        self.file_entry(id).map(|(_, file, _)| file)
    }

    /// A stored file's bytes with its media type.
    pub(super) fn file_content(&self, id: FileId) -> Result<ApiBytes, Error> {
        let (_, file, bytes) = self.file_entry(id)?;
        Ok(ApiBytes {
            data: bytes.to_vec(),
            content_type: file.media_type,
        })
    }

    /// Deletes a stored file and its bytes.
    pub(super) fn delete_file(&self, id: FileId) -> Result<(), Error> {
        let (order, _, _) = self.file_entry(id)?;
        self.state()?.files.remove(&order);
        Ok(())
    }
}

impl State {
    /// Checks the files `content` attaches for a message to a Bot of model `spec`, as a
    /// server does: each must be stored (else `not_found`) and of a type and size the provider
    /// takes (else `invalid_input`, saying which file and why); each reference is set from the
    /// stored description, so the model reads the stored bytes.
    pub(super) fn check_attached(
        &self,
        spec: &str,
        content: &mut [ContentPart],
    ) -> Result<(), Error> {
        let format = file_format_of(spec);
        for part in content.iter_mut() {
            let ContentPart::File { file } = part else {
                continue;
            };
            let (stored, _) = self
                .files
                .values()
                .find(|(stored, _)| stored.id == file.id)
                .ok_or_else(|| Error::not_found("file", file.id))?;
            attach_stored(format, file, &stored.name, &stored.media_type, stored.size)
                .map_err(Error::invalid_input)?;
        }
        Ok(())
    }
}

/// Where the Turns of this process read the files their messages attach: the stored bytes,
/// as they are when a request is sent (a file deleted since is not found).
pub(super) struct MemoryFiles(pub(super) Weak<Inner>);

impl MemoryFiles {
    /// The files of `inner`.
    pub(super) fn of(inner: &Arc<Inner>) -> Arc<dyn FileSource> {
        Arc::new(Self(Arc::downgrade(inner)))
    }
}

#[async_trait]
impl FileSource for MemoryFiles {
    async fn read(&self, id: FileId) -> Result<FileBytes, FileReadError> {
        let inner = self.0.upgrade().ok_or_else(|| FileReadError::Failed {
            id,
            cause: "the in-memory runtime is closed".into(),
        })?;
        let state = inner.lock();
        state
            .files
            .values()
            .find(|(stored, _)| stored.id == id)
            .map(|(stored, bytes)| FileBytes {
                media_type: stored.media_type.clone(),
                bytes: bytes.clone(),
            })
            .ok_or(FileReadError::NotFound(id))
    }
}
