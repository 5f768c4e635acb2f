//! Memory: a Bot's memories with their evidence, owner separation, durable learning and recall
//! (the capability; `openbot_core::memory` is the unrelated in-memory runtime).
//!
//! - `store.rs` / `sql.rs`: the rows (content and embedding sealed; owner, status, tags and
//!   evidence in the clear for the SQL filters) and the one body of their SQL for both databases.
//! - `seal.rs`: where the sealed parts are bound (the memory's ID).
//! - `service.rs`: the use cases (list, search, edit, delete, settings) and a Turn's tools.
//! - `embeddings.rs`: the organization's embeddings model (OpenAI's `/v1/embeddings` format).
//! - `recall.rs`: what a Turn recalls before its model requests.
//! - `learning.rs`: the `memory_learning` workflow that learns after a Turn.
//! - `work_reader.rs`: who a Turn's tools and a learning act as (shared memories only with the
//!   API's rights).

mod embeddings;
mod learning;
mod recall;
mod seal;
mod service;
mod sql;
mod store;
mod turn;
mod work_reader;

pub use embeddings::{EmbedError, Embedder};
pub use learning::{
    LEARNING, LearningInput, LearningResult, MemoryLearningWorkflow, learning_child,
};
pub use recall::{TurnMemory, turn_memory};
pub use service::{Memories, MemoryError};
pub use store::{BotMemory, MemoryOp, MemoryQuery, MemoryRow, MemoryStore, Reader};
pub use turn::MemoryFeature;
pub use work_reader::work_reader;
