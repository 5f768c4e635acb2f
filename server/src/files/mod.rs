//! Files: bytes a member stores on the server. The bytes live in an object store (by default a
//! folder of the data folder, `objects/`); the database keeps each file's description, its
//! owner, the token that stored it and where its bytes are. Lists and reads are the owner's
//! alone; files have no Bot, so a token limited to some Bots reaches only the files it stored.
//!
//! Deleting is durable cross-store work (`deletion`): the row is hidden with its work in one
//! transaction, the object goes (retried until the store says it is gone), then the row.
//! Each organization may set a retention in days; a scheduled sweep (`retention`) starts the
//! deletion of older files.

mod deletion;
mod model_source;
mod retention;
mod service;
mod sql;
mod store;
mod turn;
mod writes;

pub use deletion::{
    FILE_DELETION, FileDeletionInput, FileDeletionWorkflow, Started, file_deletion_service,
    start_deletion,
};
pub use model_source::FileReader;
pub use retention::{
    FILE_RETENTION_SWEEP, MAX_RETENTION_DAYS, RetentionSweepWorkflow, STRANDED_AFTER_MS,
    SWEEP_INTERVAL, SweepReport, ensure_sweep, retention_service, sweep,
};
pub use service::{FileError, Files, MAX_FILE_BYTES, local_objects, s3_objects};
pub use store::{FileAccess, FileRow, FileStore};
pub use turn::FilesFeature;
pub use writes::MarkDeleting;
