-- Bots and Chats. A Chat's input is the queue of its Turn executions (executions.chat_id, in
-- ID order); an admission gate per Chat closes it to new input when it is deleted.

CREATE TABLE bots (
    id              UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations (id),
    owner_member_id UUID NOT NULL REFERENCES members (id),
    shared          BOOLEAN NOT NULL,
    spec            TEXT NOT NULL,
    revision        BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    deleted_at      BIGINT
);
CREATE INDEX bots_organization ON bots (organization_id) WHERE deleted_at IS NULL;

CREATE TABLE chats (
    id         UUID PRIMARY KEY,
    bot_id     UUID NOT NULL REFERENCES bots (id),
    member_id  UUID NOT NULL REFERENCES members (id),
    title      TEXT NOT NULL DEFAULT '',
    revision   BIGINT NOT NULL DEFAULT 1,
    created_at BIGINT NOT NULL,
    deleted_at BIGINT
);
CREATE INDEX chats_member ON chats (member_id) WHERE deleted_at IS NULL;

CREATE TABLE admission_gates (
    id        UUID PRIMARY KEY,
    closed_at BIGINT
);

ALTER TABLE executions ADD COLUMN output_record UUID;
CREATE INDEX executions_chat_order ON executions (chat_id, id) WHERE chat_id IS NOT NULL;
