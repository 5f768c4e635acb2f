-- Bots and Chats. A Chat's input is the queue of its Turn executions (executions.chat_id, in
-- ID order); an admission gate per Chat closes it to new input when it is deleted.

CREATE TABLE bots (
    id              BLOB PRIMARY KEY,
    organization_id BLOB NOT NULL REFERENCES organizations (id),
    owner_member_id BLOB NOT NULL REFERENCES members (id),
    shared          INTEGER NOT NULL,
    spec            TEXT NOT NULL,
    revision        INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    deleted_at      INTEGER
);
CREATE INDEX bots_organization ON bots (organization_id) WHERE deleted_at IS NULL;

CREATE TABLE chats (
    id         BLOB PRIMARY KEY,
    bot_id     BLOB NOT NULL REFERENCES bots (id),
    member_id  BLOB NOT NULL REFERENCES members (id),
    title      TEXT NOT NULL DEFAULT '',
    revision   INTEGER NOT NULL DEFAULT 1,
    created_at INTEGER NOT NULL,
    deleted_at INTEGER
);
CREATE INDEX chats_member ON chats (member_id) WHERE deleted_at IS NULL;

CREATE TABLE admission_gates (
    id        BLOB PRIMARY KEY,
    closed_at INTEGER
);

ALTER TABLE executions ADD COLUMN output_record BLOB;
CREATE INDEX executions_chat_order ON executions (chat_id, id) WHERE chat_id IS NOT NULL;
