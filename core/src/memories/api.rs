//! The memory operations of `memory://`: the generated `list_memories`, `create_memory`,
//! `get_memory`, `update_memory`, `delete_memory` and `search_memories` answered from the
//! in-process [`MemoryBook`], so code written against a server's memories runs in memory too.
//! The memory settings are answered by the in-memory Client (a helper model that learns in
//! process; embeddings are a server's).

use std::str::FromStr;

use openbot_schema::{
    BotId, CreateMemory, MemoryEvidence, MemoryFilter, MemoryPage, MemorySearch, MemoryUpdate,
};

use super::MemoryBook;
use crate::client::{ApiAnswer, ApiRequest};
use crate::error::Error;

fn parse<T: FromStr>(request: &ApiRequest, op: &str, name: &str) -> Result<T, Error> {
    let text = request.text(op, name)?;
    T::from_str(&text).map_err(|_| {
        Error::invalid_input(format!(
            "`{}` is not a valid `{name}` for {op}",
            text.chars().take(64).collect::<String>()
        ))
    })
}

/// The memory operations `memory://` answers (every other operation of the generated table
/// that no Client method declares needs a server).
pub const IN_MEMORY_OPERATIONS: &[&str] = &[
    "list_memories",
    "create_memory",
    "get_memory",
    "update_memory",
    "delete_memory",
    "search_memories",
    // Answered by the Client itself (`memory/client/learning.rs`): the helper model only.
    "get_memory_settings",
    "put_memory_settings",
];

/// Answers a memory operation of `op` for a Bot that `bot_known` knows; `None` for any other
/// operation.
pub(crate) fn answer(
    book: &MemoryBook,
    bot_known: &dyn Fn(BotId) -> bool,
    op: &str,
    request: &ApiRequest,
) -> Option<Result<ApiAnswer, Error>> {
    if !IN_MEMORY_OPERATIONS.contains(&op) || op.ends_with("_memory_settings") {
        return None;
    }
    Some(run(book, bot_known, op, request))
}

fn run(
    book: &MemoryBook,
    bot_known: &dyn Fn(BotId) -> bool,
    op: &str,
    request: &ApiRequest,
) -> Result<ApiAnswer, Error> {
    let bot: BotId = parse::<uuid::Uuid>(request, op, "id")?.into();
    if !bot_known(bot) {
        return Err(Error::not_found("bot", bot));
    }
    let memory = || parse::<uuid::Uuid>(request, op, "memory");
    match op {
        "list_memories" => {
            let limit: u32 = request.decoded(op, "limit")?.unwrap_or(50);
            if !(1..=200).contains(&limit) {
                return Err(Error::invalid_input("limit must be between 1 and 200"));
            }
            let after = request
                .decoded::<String>(op, "cursor")?
                .map(|c| uuid::Uuid::from_str(&c).map_err(|_| Error::invalid_input("a bad cursor")))
                .transpose()?;
            let filter = MemoryFilter {
                tag: request.decoded(op, "tag")?,
                status: request.decoded(op, "status")?,
            };
            let mut items = book.list(bot, &filter, after, limit as usize + 1);
            let more = items.len() > limit as usize;
            items.truncate(limit as usize);
            let next_cursor = if more {
                items.last().map(|m| m.id.to_string())
            } else {
                None
            };
            ApiAnswer::of(&MemoryPage { items, next_cursor })
        }
        "create_memory" => {
            let body: CreateMemory = request.body_as(op)?;
            let memory = book
                .create(bot, body, MemoryEvidence::default())
                .map_err(Error::invalid_input)?;
            ApiAnswer::of(&memory)
        }
        "get_memory" => {
            let id = memory()?;
            ApiAnswer::of(
                &book
                    .get(bot, id)
                    .ok_or_else(|| Error::not_found("memory", id))?,
            )
        }
        "update_memory" => {
            let id = memory()?;
            let body: MemoryUpdate = request.body_as(op)?;
            let memory = book
                .update(bot, id, body)
                .map_err(Error::invalid_input)?
                .ok_or_else(|| Error::not_found("memory", id))?;
            ApiAnswer::of(&memory)
        }
        "delete_memory" => {
            let id = memory()?;
            if book.delete(bot, id) {
                Ok(ApiAnswer::Empty)
            } else {
                Err(Error::not_found("memory", id))
            }
        }
        _ => {
            let body: MemorySearch = request.body_as(op)?;
            if body.query.trim().is_empty() {
                return Err(Error::invalid_input(
                    "the query must have 1-2000 characters",
                ));
            }
            if body.limit.is_some_and(|l| !(1..=50).contains(&l)) {
                return Err(Error::invalid_input("limit must be 1-50"));
            }
            if body.max_tokens.is_some_and(|t| !(1..=100_000).contains(&t)) {
                return Err(Error::invalid_input("max_tokens must be 1-100000"));
            }
            ApiAnswer::of(&book.search(bot, &body))
        }
    }
}
