//! Failure causes of the in-memory mode, kept apart from everything public.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use openbot_schema::ErrorId;

/// The full causes of failures, by error ID. Public events and errors carry only the ID;
/// the cause can be read here by the process that owns the runtime, and is never logged.
#[derive(Debug, Clone, Default)]
pub struct SealedErrors {
    causes: Arc<Mutex<HashMap<ErrorId, String>>>,
}

impl SealedErrors {
    /// Keeps a cause and returns its new ID.
    pub fn seal(&self, cause: String) -> ErrorId {
        let id = ErrorId::new();
        self.causes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, cause);
        id
    }

    /// The cause kept under `id`.
    pub fn open(&self, id: ErrorId) -> Option<String> {
        self.causes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
    }
}
