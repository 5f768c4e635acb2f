-- Vaults: items of named fields, owned by an organization (owner_member_id NULL) or a member,
-- every field value sealed for its row (item and field name bound to the ciphertext); rules
-- say which reader may read which field. Items are referenced by ID, never by name.

CREATE TABLE vault_items (
    id              UUID PRIMARY KEY,
    organization_id UUID NOT NULL,
    owner_member_id UUID,
    name            TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
CREATE INDEX vault_items_organization ON vault_items (organization_id, id);

CREATE TABLE vault_fields (
    item_id    UUID NOT NULL,
    name       TEXT NOT NULL,
    key_id     TEXT NOT NULL,
    sealed     BYTEA NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (item_id, name)
);

-- reader_kind is open: bot and tool today, App connections and Code Mode runs next.
-- reader_scope is what the reader must still be for the rule to hold: a tool's endpoint URL
-- when the rule was added (a tool registered again on another URL no longer reads); empty for
-- a Bot.
CREATE TABLE vault_rules (
    id          UUID PRIMARY KEY,
    item_id     UUID NOT NULL,
    field       TEXT NOT NULL,
    reader_kind TEXT NOT NULL,
    reader_id   TEXT NOT NULL,
    reader_scope TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (item_id, field, reader_kind, reader_id, reader_scope)
);
CREATE INDEX vault_rules_reader ON vault_rules (item_id, reader_kind, reader_id);

-- An HTTP tool's headers and added body fields (JSON), Vault references as written.
ALTER TABLE http_tools ADD COLUMN call_template TEXT;
