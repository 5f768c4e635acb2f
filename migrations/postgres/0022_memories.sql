-- Memories of a Bot (server/src/memories/): sealed content with its owner, status, tags and
-- evidence in the clear, so that reads filter on them in SQL before any content is opened.

CREATE TABLE memories (
    id                    UUID PRIMARY KEY,
    organization_id       UUID NOT NULL,
    bot_id                UUID NOT NULL,
    -- NULL: shared by every member of the Bot; else this member's private memory.
    owner_member_id       UUID,
    status                TEXT NOT NULL,
    -- The tags as a JSON array, for display; memory_tags is what queries filter on.
    tags                  TEXT NOT NULL,
    evidence_chat_id      UUID,
    evidence_execution_id UUID,
    evidence_message      BIGINT,
    -- The content, sealed for this row (nonce and ciphertext) under key_id.
    key_id                TEXT NOT NULL,
    sealed                BYTEA NOT NULL,
    -- The embedding (little-endian f32s), sealed for this row, and the model that made it.
    embedding_key_id      TEXT,
    embedding             BYTEA,
    embedding_model       TEXT,
    created_at            BIGINT NOT NULL,
    updated_at            BIGINT NOT NULL
);
CREATE INDEX memories_bot ON memories (bot_id, id);

CREATE TABLE memory_tags (
    memory_id UUID NOT NULL,
    tag       TEXT NOT NULL,
    PRIMARY KEY (memory_id, tag)
);
CREATE INDEX memory_tags_tag ON memory_tags (tag, memory_id);

-- A Bot's memory lock: every change takes this row alone (an UPDATE of its generation) in its
-- transaction; the generation grows by one with each change.
CREATE TABLE memory_locks (
    bot_id     UUID PRIMARY KEY,
    generation BIGINT NOT NULL
);

-- How far learning got in each Chat: the number of history entries learned from. Only ever
-- moved forward (compare-and-set).
CREATE TABLE memory_cursors (
    chat_id         UUID PRIMARY KEY,
    bot_id          UUID NOT NULL,
    learned_through BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);

-- An organization's memory settings: its embeddings model and helper model.
CREATE TABLE memory_settings (
    organization_id  UUID PRIMARY KEY,
    embeddings_model TEXT,
    helper_model     TEXT,
    updated_at       BIGINT NOT NULL
);
