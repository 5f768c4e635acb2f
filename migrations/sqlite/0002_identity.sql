-- Identity: organizations, accounts, members with roles, and API tokens with rights.

CREATE TABLE bootstrap (
    singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
    created_at INTEGER NOT NULL
);

CREATE TABLE organizations (
    id         BLOB PRIMARY KEY,
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE accounts (
    id         BLOB PRIMARY KEY,
    email      TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE members (
    id              BLOB PRIMARY KEY,
    organization_id BLOB NOT NULL REFERENCES organizations (id),
    account_id      BLOB NOT NULL REFERENCES accounts (id),
    role            TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    removed_at      INTEGER,
    UNIQUE (organization_id, account_id)
);

CREATE TABLE api_tokens (
    id           BLOB PRIMARY KEY,
    member_id    BLOB NOT NULL REFERENCES members (id),
    name         TEXT NOT NULL,
    secret_hash  BLOB NOT NULL UNIQUE,
    rights       TEXT NOT NULL,
    bot_ids      TEXT,
    expires_at   INTEGER,
    revoked_at   INTEGER,
    created_at   INTEGER NOT NULL
);
CREATE INDEX api_tokens_member ON api_tokens (member_id);
