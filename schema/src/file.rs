//! Files: bytes a member stores on the server, referenced from messages by their ID.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ids::FileId;
use crate::message::FileRef;

/// A stored file's description (its bytes are read separately).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct StoredFile {
    /// Its ID.
    pub id: FileId,
    /// Its display name.
    pub name: String,
    /// Its media type, e.g. `image/png`.
    pub media_type: String,
    /// Its size in bytes.
    pub size: u64,
    /// The SHA-256 of its bytes, hex.
    pub sha256: String,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
}

impl StoredFile {
    /// A reference to this file for a message's content.
    pub fn reference(&self) -> FileRef {
        FileRef {
            id: self.id,
            media_type: self.media_type.clone(),
            name: Some(self.name.clone()),
            url: None,
        }
    }
}

/// An organization's file retention: files older than `days` are deleted (their bytes and
/// their description) by the retention sweep. Without it, files are kept until deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct FileRetention {
    /// The retention in days; absent when files are kept until deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub days: Option<u32>,
}

/// Sets an organization's file retention.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct PutFileRetention {
    /// Files older than this many days are deleted: 1-36500.
    #[schema(minimum = 1, maximum = 36500)]
    pub days: u32,
}
