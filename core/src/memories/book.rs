//! The memory book of `memory://`: a Bot's memories in this process, not durable (gone when
//! the process stops). The same operations and tools as the server, with one member (the
//! process), so every memory is readable by it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use chrono::Utc;
use openbot_schema::{
    BotId, CreateMemory, Memory, MemoryEvidence, MemoryFilter, MemoryHit, MemorySearch,
    MemorySearchResult, MemoryStatus, MemoryUpdate,
};

use super::rank::TermDigest;
use super::select::{Candidate, DEFAULT_RECALL_TOKENS, select_within_budget};
use super::tools::{ForgetArgs, MemoryTools, RecallArgs, RememberArgs};
use super::{check_content, check_tags};
use crate::tool::ToolError;

#[derive(Default)]
struct Shelves {
    memories: Vec<Memory>,
    /// Which memory a tool call's idempotency key wrote.
    keys: HashMap<String, uuid::Uuid>,
    /// Each Chat's learning cursor: how many history entries learning has taken.
    cursors: HashMap<openbot_schema::ChatId, usize>,
}

/// Every Bot's memories of one in-memory Client.
#[derive(Clone, Default)]
pub struct MemoryBook {
    shelves: Arc<Mutex<Shelves>>,
}

impl MemoryBook {
    /// An empty book.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shelves> {
        self.shelves.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes a memory of `bot`.
    pub fn create(
        &self,
        bot: BotId,
        request: CreateMemory,
        evidence: MemoryEvidence,
    ) -> Result<Memory, String> {
        check_content(&request.content)?;
        let tags = check_tags(&request.tags)?;
        let now = Utc::now();
        let memory = Memory {
            id: uuid::Uuid::now_v7(),
            bot_id: bot,
            owner_member_id: None,
            content: request.content,
            tags,
            status: MemoryStatus::Active,
            evidence,
            created_at: now,
            updated_at: now,
        };
        self.lock().memories.push(memory.clone());
        Ok(memory)
    }

    /// `bot`'s memories, oldest first, after `after`, at most `limit`, filtered.
    pub fn list(
        &self,
        bot: BotId,
        filter: &MemoryFilter,
        after: Option<uuid::Uuid>,
        limit: usize,
    ) -> Vec<Memory> {
        self.lock()
            .memories
            .iter()
            .filter(|m| m.bot_id == bot && after.is_none_or(|a| m.id > a))
            .filter(|m| filter.status.is_none_or(|s| m.status == s))
            .filter(|m| filter.tag.as_ref().is_none_or(|t| m.tags.contains(t)))
            .take(limit)
            .cloned()
            .collect()
    }

    /// One memory of `bot`.
    pub fn get(&self, bot: BotId, id: uuid::Uuid) -> Option<Memory> {
        self.lock()
            .memories
            .iter()
            .find(|m| m.bot_id == bot && m.id == id)
            .cloned()
    }

    /// Searches `bot`'s active memories by keyword (no embeddings in process).
    pub fn search(&self, bot: BotId, search: &MemorySearch) -> MemorySearchResult {
        let candidates: Vec<Memory> = self
            .lock()
            .memories
            .iter()
            .rev()
            .filter(|m| m.bot_id == bot && m.status == MemoryStatus::Active)
            .filter(|m| search.tags.iter().all(|t| m.tags.contains(t)))
            .cloned()
            .collect();
        let ranked: Vec<Candidate> = candidates
            .iter()
            .map(|m| Candidate {
                id: m.id,
                digest: TermDigest::of(&m.content),
                embedding: None,
            })
            .collect();
        let selected = select_within_budget(
            &search.query,
            None,
            &ranked,
            search.max_tokens.unwrap_or(DEFAULT_RECALL_TOKENS),
            search.limit.unwrap_or(10) as usize,
        );
        MemorySearchResult {
            items: selected
                .into_iter()
                .map(|s| MemoryHit {
                    memory: candidates[s.index].clone(),
                    score: s.score,
                })
                .collect(),
            embeddings: false,
        }
    }

    /// Changes a memory of `bot`; `None` when there is none.
    pub fn update(
        &self,
        bot: BotId,
        id: uuid::Uuid,
        update: MemoryUpdate,
    ) -> Result<Option<Memory>, String> {
        if let Some(content) = &update.content {
            check_content(content)?;
        }
        let tags = update.tags.as_deref().map(check_tags).transpose()?;
        let mut shelves = self.lock();
        let Some(memory) = shelves
            .memories
            .iter_mut()
            .find(|m| m.bot_id == bot && m.id == id)
        else {
            return Ok(None);
        };
        if let Some(content) = update.content {
            memory.content = content;
        }
        if let Some(tags) = tags {
            memory.tags = tags;
        }
        if let Some(status) = update.status {
            memory.status = status;
        }
        memory.updated_at = Utc::now();
        Ok(Some(memory.clone()))
    }

    /// Deletes a memory of `bot`; whether there was one.
    pub fn delete(&self, bot: BotId, id: uuid::Uuid) -> bool {
        let mut shelves = self.lock();
        let before = shelves.memories.len();
        shelves
            .memories
            .retain(|m| !(m.bot_id == bot && m.id == id));
        before != shelves.memories.len()
    }

    /// The active memories `bot` recalls for `query` before a model request, within `budget`.
    pub fn recall(&self, bot: BotId, query: &str, budget: u32) -> Vec<(uuid::Uuid, String)> {
        self.search(
            bot,
            &MemorySearch {
                query: query.to_string(),
                tags: Vec::new(),
                limit: Some(20),
                max_tokens: Some(budget),
            },
        )
        .items
        .into_iter()
        .map(|hit| (hit.memory.id, hit.memory.content))
        .collect()
    }

    /// A Chat's learning cursor: how many of its history entries learning has taken.
    pub fn cursor(&self, chat: openbot_schema::ChatId) -> usize {
        self.lock().cursors.get(&chat).copied().unwrap_or(0)
    }

    /// `bot`'s newest active memories, at most `limit`: what a helper model is shown.
    pub fn active(&self, bot: BotId, limit: usize) -> Vec<(uuid::Uuid, String)> {
        self.lock()
            .memories
            .iter()
            .rev()
            .filter(|m| m.bot_id == bot && m.status == MemoryStatus::Active)
            .take(limit)
            .map(|m| (m.id, m.content.clone()))
            .collect()
    }

    /// Applies a checked learning plan for `bot` learned from `chat`'s history entries `from`
    /// to `to`, at once under the book's lock: the cursor moves by compare-and-set (when it
    /// is no longer at `from`, other learning got further and nothing of this plan is
    /// applied), then the memories are written. Whether it was applied.
    pub fn apply_plan(
        &self,
        bot: BotId,
        chat: openbot_schema::ChatId,
        (from, to): (usize, usize),
        plan: &super::CheckedPlan,
        evidence: MemoryEvidence,
    ) -> bool {
        let mut shelves = self.lock();
        let at = shelves.cursors.get(&chat).copied().unwrap_or(0);
        if at != from || to <= from {
            return false;
        }
        shelves.cursors.insert(chat, to);
        let now = Utc::now();
        for (_, add) in &plan.add {
            shelves.memories.push(Memory {
                id: uuid::Uuid::now_v7(),
                bot_id: bot,
                owner_member_id: None,
                content: add.content.clone(),
                tags: add.tags.iter().map(|t| t.trim().to_string()).collect(),
                status: MemoryStatus::Active,
                evidence: evidence.clone(),
                created_at: now,
                updated_at: now,
            });
        }
        for memory in shelves.memories.iter_mut().filter(|m| m.bot_id == bot) {
            if let Some(change) = plan.change.iter().find(|c| c.id == memory.id) {
                if let Some(content) = &change.content {
                    memory.content = content.clone();
                }
                if let Some(tags) = &change.tags {
                    memory.tags = tags.iter().map(|t| t.trim().to_string()).collect();
                }
                memory.updated_at = now;
            }
            if plan.retire.contains(&memory.id) {
                memory.status = MemoryStatus::Retired;
                memory.updated_at = now;
            }
        }
        true
    }

    /// The tool backend of one Turn of `bot` (its evidence: `execution`).
    pub fn tools(
        &self,
        bot: BotId,
        execution: openbot_schema::ExecutionId,
    ) -> Arc<dyn MemoryTools> {
        Arc::new(BookTools {
            book: self.clone(),
            bot,
            execution,
        })
    }
}

struct BookTools {
    book: MemoryBook,
    bot: BotId,
    execution: openbot_schema::ExecutionId,
}

#[async_trait]
impl MemoryTools for BookTools {
    async fn remember(&self, key: &str, args: RememberArgs) -> Result<uuid::Uuid, ToolError> {
        if let Some(id) = self.book.lock().keys.get(key) {
            return Ok(*id);
        }
        let memory = self
            .book
            .create(
                self.bot,
                CreateMemory {
                    content: args.content,
                    tags: args.tags,
                    private: !args.shared,
                },
                MemoryEvidence {
                    chat_id: None,
                    execution_id: Some(self.execution),
                    message: None,
                },
            )
            .map_err(ToolError::new)?;
        self.book.lock().keys.insert(key.to_string(), memory.id);
        Ok(memory.id)
    }

    async fn recall(&self, args: RecallArgs) -> Result<Vec<(uuid::Uuid, String)>, ToolError> {
        Ok(self
            .book
            .search(
                self.bot,
                &MemorySearch {
                    query: args.query,
                    tags: args.tags,
                    limit: Some(10),
                    max_tokens: Some(DEFAULT_RECALL_TOKENS),
                },
            )
            .items
            .into_iter()
            .map(|hit| (hit.memory.id, hit.memory.content))
            .collect())
    }

    async fn forget(&self, args: ForgetArgs) -> Result<bool, ToolError> {
        self.book
            .update(
                self.bot,
                args.id,
                MemoryUpdate {
                    status: Some(MemoryStatus::Retired),
                    ..MemoryUpdate::default()
                },
            )
            .map(|m| m.is_some())
            .map_err(ToolError::new)
    }
}
