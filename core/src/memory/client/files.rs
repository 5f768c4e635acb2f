//! Files in memory: upload, list, read and delete, with the server's limits
//! ([`crate::files`]) and its description of a file. The bytes live in this process only.

use bytes::Bytes;
use openbot_schema::{ErrorCode, FileId, StoredFile};

use super::MemoryClient;
use crate::client::ApiBytes;
use crate::error::Error;
use crate::files::{FileRuleError, check_upload, new_file};

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
