//! Memories: what a Bot keeps past one conversation (the capability; not to be confused with
//! [`crate::memory`], the in-memory runtime behind `memory://`).
//!
//! The rules both hosts share live here, so the server and `memory://` rank, select, learn and
//! offer tools the same way: keyword ranking and cosine similarity (`rank.rs`), selection within
//! a token budget and how the selection joins a model request (`select.rs`), the strict JSON a
//! helper model answers with when it learns (`learning.rs`), the model tools `remember`,
//! `recall` and `forget` (`tools.rs`), and the in-process memory book of `memory://`
//! (`book.rs`).

mod api;
mod book;
mod learning;
mod rank;
mod select;
mod tools;

pub use api::IN_MEMORY_OPERATIONS;
pub(crate) use api::answer;
pub use book::MemoryBook;
pub use learning::{
    CheckedPlan, LEARNING_INSTRUCTIONS, LearnedChange, LearnedMemory, LearningError, LearningPlan,
    PlanRights, RefusedOperation, learning_input, parse_plan,
};
pub use rank::{TermDigest, cosine, digest_scores, keyword_scores, term_hash, terms};
pub use select::{
    Candidate, DEFAULT_RECALL_TOKENS, Selected, recall_instructions, select_within_budget,
};
pub use tools::{
    FORGET, ForgetArgs, MemoryTools, RECALL, REMEMBER, RecallArgs, RememberArgs, memory_tool_set,
    tool_definitions,
};

/// The most characters of a memory's content.
pub const MAX_CONTENT_CHARS: usize = 4000;
/// The most tags of a memory.
pub const MAX_TAGS: usize = 16;
/// The most characters of a tag.
pub const MAX_TAG_CHARS: usize = 64;

/// Checks a memory's content: 1-4000 characters.
pub fn check_content(content: &str) -> Result<(), String> {
    let n = content.trim().chars().count();
    if n == 0 || content.chars().count() > MAX_CONTENT_CHARS {
        return Err(format!(
            "a memory's content must have 1-{MAX_CONTENT_CHARS} characters"
        ));
    }
    Ok(())
}

/// Checks tags: up to 16, each 1-64 characters with no control characters, none twice.
/// Returns them as they are kept (trimmed, in order).
pub fn check_tags(tags: &[String]) -> Result<Vec<String>, String> {
    if tags.len() > MAX_TAGS {
        return Err(format!("a memory has at most {MAX_TAGS} tags"));
    }
    let mut out: Vec<String> = Vec::with_capacity(tags.len());
    for tag in tags {
        let tag = tag.trim();
        if tag.is_empty()
            || tag.chars().count() > MAX_TAG_CHARS
            || tag.chars().any(char::is_control)
        {
            return Err(format!(
                "a tag must have 1-{MAX_TAG_CHARS} characters and no control characters"
            ));
        }
        if out.iter().any(|t| t == tag) {
            return Err(format!("the tag `{tag}` is given twice"));
        }
        out.push(tag.to_string());
    }
    Ok(out)
}
