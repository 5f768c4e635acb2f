//! The memory use cases: list, search, edit and delete a Bot's memories as a member; recall and
//! the model tools of a Turn; the organization's memory settings. Content is opened only for
//! the rows the store's filtered read returned.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::memories::{
    Candidate, DEFAULT_RECALL_TOKENS, ForgetArgs, MemoryTools, RecallArgs, RememberArgs,
    TermDigest, check_content, check_tags, select_within_budget,
};
use openbot_core::tool::ToolError;
use openbot_schema::{
    Action, BotId, ChatId, CreateMemory, ExecutionId, Memory, MemoryEvidence, MemoryFilter,
    MemoryHit, MemoryPage, MemorySearch, MemorySearchResult, MemorySettings, MemoryStatus,
    MemoryUpdate, Resource,
};
use uuid::Uuid;

use super::embeddings::{Embedder, parse_spec};
use super::seal::{open_content, open_digest, open_embedding, seal_content, seal_embedding};
use super::store::{MemoryOp, MemoryQuery, MemoryRow, MemoryStore, Reader};
use crate::bots::BotStore;
use crate::identity::Caller;
use crate::paging::Paging;
use crate::sealed::{KeyRing, SealError, SealedValue};
use crate::store::{StoreError, stored_time};

/// How many of the newest matching memories recall ranks at most.
const RECALL_CANDIDATES: i64 = 200;

/// A memory use case that failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// No such Bot or memory for this caller.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// The caller may not do this.
    #[error("{0}")]
    Forbidden(String),

    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A sealed part could not be sealed or opened.
    #[error(transparent)]
    Sealed(#[from] SealError),
}

impl From<crate::identity::AccessError> for MemoryError {
    fn from(err: crate::identity::AccessError) -> Self {
        Self::Forbidden(err.to_string())
    }
}

/// The memory use cases.
#[derive(Clone)]
pub struct Memories {
    store: Arc<dyn MemoryStore>,
    bots: Option<Arc<dyn BotStore>>,
    keys: KeyRing,
    embedder: Embedder,
}

impl Memories {
    /// The use cases over `store`, checking Bots in `bots`, sealing with `keys`.
    pub fn new(
        store: Arc<dyn MemoryStore>,
        bots: Arc<dyn BotStore>,
        keys: KeyRing,
        embedder: Embedder,
    ) -> Self {
        Self {
            store,
            bots: Some(bots),
            keys,
            embedder,
        }
    }

    /// The use cases of work that acts with a saved identity instead of a caller (learning,
    /// a Turn's tools): no Bot checks of a caller.
    pub fn for_learning(store: Arc<dyn MemoryStore>, keys: KeyRing, embedder: Embedder) -> Self {
        Self {
            store,
            bots: None,
            keys,
            embedder,
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn MemoryStore> {
        &self.store
    }

    /// The caller as a reader of a Bot it may see, once its token holds the `bots` right of
    /// `action`.
    async fn reader(
        &self,
        caller: &Caller,
        bot: BotId,
        action: Action,
    ) -> Result<Reader, MemoryError> {
        caller.require(Resource::Bots, action)?;
        let bots = self.bots.as_ref().ok_or(MemoryError::NotFound("bot"))?;
        let row = bots
            .visible_bot(caller, bot)
            .await?
            .ok_or(MemoryError::NotFound("bot"))?;
        Ok(Reader {
            organization_id: caller.member.organization_id,
            bot_id: bot,
            member_id: caller.member.member_id,
            may_change_shared: caller.is_admin() || row.owner_member_id == caller.member.member_id,
        })
    }

    /// Opens a row the store's filtered read returned.
    pub(crate) fn open(&self, row: MemoryRow) -> Result<Memory, MemoryError> {
        let content = open_content(&self.keys, row.id, &row.content)?;
        Ok(Memory {
            id: row.id,
            bot_id: row.bot_id,
            owner_member_id: row.owner_member_id,
            content,
            tags: row.tags,
            // A status this build does not know is bad stored data, never a silent default.
            status: MemoryStatus::parse(&row.status).ok_or_else(|| {
                StoreError::Invalid(format!("memory {} has an unknown status", row.id))
            })?,
            evidence: MemoryEvidence {
                chat_id: row.evidence_chat_id.map(ChatId::from),
                execution_id: row.evidence_execution_id.map(ExecutionId::from),
                message: row.evidence_message.and_then(|m| u32::try_from(m).ok()),
            },
            created_at: stored_time(row.created_at)?,
            updated_at: stored_time(row.updated_at)?,
        })
    }

    /// A Bot's memories the caller may read, oldest first, one page.
    pub async fn list(
        &self,
        caller: &Caller,
        bot: BotId,
        filter: &MemoryFilter,
        paging: &Paging<Uuid>,
    ) -> Result<MemoryPage, MemoryError> {
        let reader = self.reader(caller, bot, Action::Read).await?;
        let rows = self
            .store
            .memories(
                &reader,
                &MemoryQuery {
                    status: filter.status.map(|s| s.as_str().to_string()),
                    tags: filter.tag.iter().cloned().collect(),
                    after: paging.after,
                    limit: paging.fetch(),
                    ..MemoryQuery::default()
                },
            )
            .await?;
        let (rows, next) = paging.finish(rows, |row| row.id);
        let items = rows
            .into_iter()
            .map(|row| self.open(row))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(MemoryPage {
            items,
            next_cursor: next,
        })
    }

    /// One memory the caller may read.
    pub async fn get(&self, caller: &Caller, bot: BotId, id: Uuid) -> Result<Memory, MemoryError> {
        let reader = self.reader(caller, bot, Action::Read).await?;
        let row = self
            .store
            .memory(&reader, id)
            .await?
            .ok_or(MemoryError::NotFound("memory"))?;
        self.open(row)
    }

    /// Writes a memory by hand: the caller's private one, or a shared one (the Bot's owner or
    /// an admin only).
    pub async fn create(
        &self,
        caller: &Caller,
        bot: BotId,
        request: CreateMemory,
    ) -> Result<Memory, MemoryError> {
        let reader = self.reader(caller, bot, Action::Write).await?;
        if !request.private && !reader.may_change_shared {
            return Err(MemoryError::Forbidden(
                "only the Bot's owner and admins write shared memories; write a private one".into(),
            ));
        }
        let id = Uuid::now_v7();
        let row = self
            .new_row(
                &reader,
                id,
                &request.content,
                &request.tags,
                request.private.then_some(caller.member.member_id),
                MemoryEvidence::default(),
            )
            .await?;
        self.store
            .apply(&reader, &[MemoryOp::Insert(Box::new(row))])
            .await?;
        self.get(caller, bot, id).await
    }

    /// A new memory row: checked, sealed, embedded when the organization has an embeddings model.
    pub(crate) async fn new_row(
        &self,
        reader: &Reader,
        id: Uuid,
        content: &str,
        tags: &[String],
        owner: Option<Uuid>,
        evidence: MemoryEvidence,
    ) -> Result<MemoryRow, MemoryError> {
        check_content(content).map_err(MemoryError::Invalid)?;
        let tags = check_tags(tags).map_err(MemoryError::Invalid)?;
        let embedding = self.embed_one(reader.organization_id, id, content).await?;
        let sealed = seal_content(&self.keys, id, content)?;
        Ok(MemoryRow {
            id,
            bot_id: reader.bot_id,
            owner_member_id: owner,
            status: MemoryStatus::Active.as_str().into(),
            tags,
            evidence_chat_id: evidence.chat_id.map(|c| c.as_uuid()),
            evidence_execution_id: evidence.execution_id.map(|e| e.as_uuid()),
            evidence_message: evidence.message.map(i64::from),
            content: sealed.content,
            digest: Some(sealed.digest),
            embedding,
            created_at: 0,
            updated_at: 0,
        })
    }

    /// The sealed embedding of a memory's content, when the organization has an embeddings
    /// model and it answers; a failing endpoint leaves the memory without one (keyword recall
    /// still finds it).
    async fn embed_one(
        &self,
        organization: Uuid,
        id: Uuid,
        content: &str,
    ) -> Result<Option<(SealedValue, String)>, MemoryError> {
        let (Some(spec), _) = self.store.settings(organization).await? else {
            return Ok(None);
        };
        match self.embedder.embed(organization, &spec, &[content]).await {
            Ok(mut vectors) => {
                let vector = vectors.pop().unwrap_or_default();
                Ok(Some((seal_embedding(&self.keys, id, &vector)?, spec)))
            }
            Err(err) => {
                tracing::warn!(memory = %id, error = %err, "a memory was stored without its embedding");
                Ok(None)
            }
        }
    }

    /// Changes a memory the caller may change. Tags and status changes keep the content's
    /// ciphertext; a content change seals the new content (and embeds it again).
    pub async fn update(
        &self,
        caller: &Caller,
        bot: BotId,
        id: Uuid,
        update: MemoryUpdate,
    ) -> Result<Memory, MemoryError> {
        let reader = self.reader(caller, bot, Action::Write).await?;
        let tags = update
            .tags
            .as_deref()
            .map(check_tags)
            .transpose()
            .map_err(MemoryError::Invalid)?;
        let content = match &update.content {
            Some(content) => {
                check_content(content).map_err(MemoryError::Invalid)?;
                let embedding = self.embed_one(reader.organization_id, id, content).await?;
                Some((seal_content(&self.keys, id, content)?, embedding))
            }
            None => None,
        };
        let changed = self
            .store
            .apply(
                &reader,
                &[MemoryOp::Update {
                    id,
                    content,
                    tags,
                    status: update.status.map(|s| s.as_str().to_string()),
                }],
            )
            .await?;
        if changed.first().copied().unwrap_or(0) == 0 {
            return Err(self.missing(&reader, id).await);
        }
        self.get(caller, bot, id).await
    }

    /// Not found when the reader cannot read it; forbidden when it can but may not change it.
    async fn missing(&self, reader: &Reader, id: Uuid) -> MemoryError {
        match self.store.memory(reader, id).await {
            Ok(Some(_)) => MemoryError::Forbidden(
                "only the Bot's owner and admins change shared memories".into(),
            ),
            Ok(None) => MemoryError::NotFound("memory"),
            Err(err) => MemoryError::Store(err),
        }
    }

    /// Deletes a memory the caller may change, with its evidence.
    pub async fn delete(&self, caller: &Caller, bot: BotId, id: Uuid) -> Result<(), MemoryError> {
        let reader = self.reader(caller, bot, Action::Write).await?;
        let changed = self
            .store
            .apply(&reader, &[MemoryOp::Delete { id }])
            .await?;
        if changed.first().copied().unwrap_or(0) == 0 {
            return Err(self.missing(&reader, id).await);
        }
        Ok(())
    }

    /// Searches the caller's readable active memories of a Bot.
    pub async fn search(
        &self,
        caller: &Caller,
        bot: BotId,
        search: &MemorySearch,
    ) -> Result<MemorySearchResult, MemoryError> {
        if search.query.trim().is_empty() || search.query.chars().count() > 2000 {
            return Err(MemoryError::Invalid(
                "the query must have 1-2000 characters".into(),
            ));
        }
        let limit = search.limit.unwrap_or(10);
        if !(1..=50).contains(&limit) {
            return Err(MemoryError::Invalid("limit must be 1-50".into()));
        }
        let budget = search.max_tokens.unwrap_or(DEFAULT_RECALL_TOKENS);
        if !(1..=100_000).contains(&budget) {
            return Err(MemoryError::Invalid("max_tokens must be 1-100000".into()));
        }
        let tags = check_tags(&search.tags).map_err(MemoryError::Invalid)?;
        let reader = self.reader(caller, bot, Action::Read).await?;
        self.ranked(&reader, &search.query, &tags, budget, limit as usize)
            .await
    }

    /// The reader's best active memories for `query` within `budget` tokens: the store's
    /// filtered read first (rights, owner, tags, status), then keyword and vector ranking of
    /// what it returned, in Rust.
    pub(crate) async fn ranked(
        &self,
        reader: &Reader,
        query: &str,
        tags: &[String],
        budget: u32,
        limit: usize,
    ) -> Result<MemorySearchResult, MemoryError> {
        let rows = self
            .store
            .memories(
                reader,
                &MemoryQuery {
                    status: Some(MemoryStatus::Active.as_str().into()),
                    tags: tags.to_vec(),
                    newest_first: true,
                    limit: RECALL_CANDIDATES,
                    ..MemoryQuery::default()
                },
            )
            .await?;
        if rows.is_empty() {
            return Ok(MemorySearchResult {
                items: Vec::new(),
                embeddings: false,
            });
        }
        let (spec, _) = self.store.settings(reader.organization_id).await?;
        let query_vector = match &spec {
            Some(spec) => match self
                .embedder
                .embed(reader.organization_id, spec, &[query])
                .await
            {
                Ok(mut vectors) => vectors.pop(),
                Err(err) => {
                    tracing::warn!(error = %err, "recall ranks by keyword only: no query embedding");
                    None
                }
            },
            None => None,
        };
        // Ranking reads each candidate's digest, never its content: only the selected
        // memories are opened (a memory from before digests is opened to rank it).
        let mut candidates = Vec::with_capacity(rows.len());
        // Each candidate as it stands: still sealed, or opened to rank it.
        let mut held: Vec<Option<Result<Memory, MemoryRow>>> = Vec::with_capacity(rows.len());
        for row in rows {
            // An embedding counts only from the model that embedded the query.
            let embedding = match (&row.embedding, &spec, &query_vector) {
                (Some((value, model)), Some(spec), Some(_)) if model == spec => {
                    Some(open_embedding(&self.keys, row.id, value)?)
                }
                _ => None,
            };
            let id = row.id;
            let (digest, row) = match &row.digest {
                Some(value) => (open_digest(&self.keys, id, value)?, Err(row)),
                None => {
                    let memory = self.open(row)?;
                    (TermDigest::of(&memory.content), Ok(memory))
                }
            };
            candidates.push(Candidate {
                id,
                digest,
                embedding,
            });
            held.push(Some(row));
        }
        let selected =
            select_within_budget(query, query_vector.as_deref(), &candidates, budget, limit);
        let mut items = Vec::with_capacity(selected.len());
        for s in selected {
            let memory = match held[s.index].take() {
                Some(Ok(memory)) => memory,
                Some(Err(row)) => self.open(row)?,
                // Each candidate is selected once at most.
                None => continue,
            };
            items.push(MemoryHit {
                memory,
                score: s.score,
            });
        }
        Ok(MemorySearchResult {
            items,
            embeddings: query_vector.is_some(),
        })
    }

    /// The caller's organization's memory settings (the `models` read right).
    pub async fn settings(&self, caller: &Caller) -> Result<MemorySettings, MemoryError> {
        caller.require(Resource::Models, Action::Read)?;
        self.settings_of(caller.member.organization_id).await
    }

    async fn settings_of(&self, organization: Uuid) -> Result<MemorySettings, MemoryError> {
        let (embeddings_model, helper_model) = self.store.settings(organization).await?;
        Ok(MemorySettings {
            embeddings_model,
            helper_model,
        })
    }

    /// Sets the caller's organization's memory settings: an owner or admin with the `models`
    /// write right and no Bot limit (they reach every Bot). Each model spec must parse and
    /// pass `allowed` (the platform's catalog) before anything is saved.
    pub async fn put_settings(
        &self,
        caller: &Caller,
        settings: &MemorySettings,
        allowed: impl Fn(&str) -> Result<(), String>,
    ) -> Result<MemorySettings, MemoryError> {
        caller.require(Resource::Models, Action::Write)?;
        caller.require_whole_organization()?;
        if !caller.is_admin() {
            return Err(MemoryError::Forbidden(
                "only an owner or admin may change memory settings".into(),
            ));
        }
        let organization = caller.member.organization_id;
        for spec in settings
            .embeddings_model
            .iter()
            .chain(&settings.helper_model)
        {
            allowed(spec).map_err(MemoryError::Invalid)?;
        }
        if let Some(spec) = &settings.embeddings_model {
            parse_spec(spec).map_err(|e| MemoryError::Invalid(e.to_string()))?;
        }
        if let Some(spec) = &settings.helper_model {
            openbot_core::model::ModelSpec::parse(spec)
                .map_err(|e| MemoryError::Invalid(e.to_string()))?;
        }
        self.store
            .put_settings(
                organization,
                settings.embeddings_model.as_deref(),
                settings.helper_model.as_deref(),
            )
            .await?;
        self.settings_of(organization).await
    }

    /// The model tools of one Turn, acting as the Turn's Chat member.
    pub fn tools(
        &self,
        reader: Reader,
        execution: ExecutionId,
        chat: Option<ChatId>,
    ) -> Arc<dyn MemoryTools> {
        Arc::new(TurnTools {
            memories: self.clone(),
            reader,
            execution,
            chat,
        })
    }
}

/// The memory tools of one Turn.
struct TurnTools {
    memories: Memories,
    reader: Reader,
    execution: ExecutionId,
    chat: Option<ChatId>,
}

fn tool_error(err: MemoryError) -> ToolError {
    match err {
        MemoryError::Invalid(message) | MemoryError::Forbidden(message) => ToolError::new(message),
        MemoryError::NotFound(what) => ToolError::new(format!("{what} not found")),
        // Storage and sealing causes stay private: the model learns only that it failed.
        _ => ToolError::new("memory is unavailable right now"),
    }
}

/// The memory a tool call's idempotency key writes: the same key, the same ID, so a call sent
/// again writes nothing new.
pub(crate) fn keyed_id(execution: ExecutionId, key: &str) -> Uuid {
    use sha2::Digest as _;
    let digest = sha2::Sha256::new()
        .chain_update(execution.as_uuid().as_bytes())
        .chain_update(key.as_bytes())
        .finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

#[async_trait]
impl MemoryTools for TurnTools {
    async fn remember(&self, key: &str, args: RememberArgs) -> Result<Uuid, ToolError> {
        // The same rule as writing by hand; the store refuses such a row too.
        if args.shared && !self.reader.may_change_shared {
            return Err(ToolError::new(
                "only the Bot's owner and admins write shared memories; remember it privately",
            ));
        }
        let id = keyed_id(self.execution, key);
        let row = self
            .memories
            .new_row(
                &self.reader,
                id,
                &args.content,
                &args.tags,
                (!args.shared).then_some(self.reader.member_id),
                MemoryEvidence {
                    chat_id: self.chat,
                    execution_id: Some(self.execution),
                    message: None,
                },
            )
            .await
            .map_err(tool_error)?;
        self.memories
            .store
            .apply(&self.reader, &[MemoryOp::Insert(Box::new(row))])
            .await
            .map_err(|e| tool_error(e.into()))?;
        Ok(id)
    }

    async fn recall(&self, args: RecallArgs) -> Result<Vec<(Uuid, String)>, ToolError> {
        let tags = check_tags(&args.tags).map_err(ToolError::new)?;
        let found = self
            .memories
            .ranked(&self.reader, &args.query, &tags, DEFAULT_RECALL_TOKENS, 10)
            .await
            .map_err(tool_error)?;
        Ok(found
            .items
            .into_iter()
            .map(|hit| (hit.memory.id, hit.memory.content))
            .collect())
    }

    async fn forget(&self, args: ForgetArgs) -> Result<bool, ToolError> {
        let changed = self
            .memories
            .store
            .apply(
                &self.reader,
                &[MemoryOp::Update {
                    id: args.id,
                    content: None,
                    tags: None,
                    status: Some(MemoryStatus::Retired.as_str().into()),
                }],
            )
            .await
            .map_err(|e| tool_error(e.into()))?;
        Ok(changed.first().copied().unwrap_or(0) == 1)
    }
}
