//! The rows file deletion writes inside engine transactions: the mark that hides a file, in
//! the transaction that submits its deletion work; the removal of its row, in the commit that
//! ends that work (after its object is gone); the time of a sweep, with the sweep's commit.

use std::sync::atomic::{AtomicBool, Ordering};

use uuid::Uuid;

use super::store::FileAccess;
use crate::store::StoreError;

/// Marks a file in use deleting, or refuses the transaction (nothing is submitted) when no
/// such file is there: gone, being deleted already, or not one `access` sees.
#[derive(Debug)]
pub struct MarkDeleting {
    /// The file.
    pub id: Uuid,
    /// Whose file it must be; `None` for the platform (retention).
    pub access: Option<FileAccess>,
    missing: AtomicBool,
}

impl MarkDeleting {
    /// The mark of `id`, as `access` sees it.
    pub fn new(id: Uuid, access: Option<FileAccess>) -> Self {
        Self {
            id,
            access,
            missing: AtomicBool::new(false),
        }
    }

    /// Whether the mark refused its transaction because the file was not there.
    pub fn missing(&self) -> bool {
        self.missing.load(Ordering::SeqCst)
    }

    pub(super) fn outcome(&self, marked: bool) -> Result<(), StoreError> {
        if marked {
            return Ok(());
        }
        self.missing.store(true, Ordering::SeqCst);
        Err(StoreError::Refused("the file is not there".into()))
    }
}

/// Removes a deleting file's row (its object is gone).
#[derive(Debug)]
pub struct RemoveFileRow {
    /// The file.
    pub id: Uuid,
}

/// Records when a sweep ran.
#[derive(Debug)]
pub struct SweepRan {
    /// The sweep's name.
    pub name: &'static str,
    /// When (ms).
    pub at: i64,
}
