-- Identity: organizations, accounts, members with roles, and API tokens with rights.

CREATE TABLE bootstrap (
    singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
    created_at BIGINT NOT NULL
);

CREATE TABLE organizations (
    id         UUID PRIMARY KEY,
    name       TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE accounts (
    id         UUID PRIMARY KEY,
    email      TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE members (
    id              UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations (id),
    account_id      UUID NOT NULL REFERENCES accounts (id),
    role            TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    removed_at      BIGINT,
    UNIQUE (organization_id, account_id)
);

CREATE TABLE api_tokens (
    id           UUID PRIMARY KEY,
    member_id    UUID NOT NULL REFERENCES members (id),
    name         TEXT NOT NULL,
    secret_hash  BYTEA NOT NULL UNIQUE,
    rights       TEXT NOT NULL,
    bot_ids      TEXT,
    expires_at   BIGINT,
    revoked_at   BIGINT,
    created_at   BIGINT NOT NULL
);
CREATE INDEX api_tokens_member ON api_tokens (member_id);
