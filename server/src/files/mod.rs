//! Files: bytes a member stores on the server. The bytes live in an object store (by default a
//! folder of the data folder, `objects/`); the database keeps each file's description, its
//! owner, the token that stored it and where its bytes are. Lists and reads are the owner's
//! alone; files have no Bot, so a token limited to some Bots reaches only the files it stored.

mod model_source;
mod service;
mod sql;
mod store;

pub use service::{FileError, Files, MAX_FILE_BYTES, local_objects, s3_objects};
pub use store::{FileAccess, FileRow, FileStore};
