-- Apps: MCP servers an organization registered, and the Connections it opened to them.

-- An App; a removed one keeps its row (saved calls that name it fail with a clear result) and
-- frees its name.
CREATE TABLE apps (
    id              BLOB PRIMARY KEY,
    organization_id BLOB NOT NULL REFERENCES organizations (id),
    name            TEXT NOT NULL,
    transport       TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    removed_at      INTEGER
);

CREATE UNIQUE INDEX apps_live_name ON apps (organization_id, name) WHERE removed_at IS NULL;

-- A Connection: auth none|manual|oauth, status ready|needs_sign_in|removed, a revision that
-- grows with each change of credentials or status, manual header values sealed for this row,
-- and the tools its last discovery found.
CREATE TABLE app_connections (
    id                 BLOB PRIMARY KEY,
    app_id             BLOB NOT NULL REFERENCES apps (id),
    organization_id    BLOB NOT NULL REFERENCES organizations (id),
    auth               TEXT NOT NULL,
    status             TEXT NOT NULL,
    revision           INTEGER NOT NULL,
    header_names       TEXT NOT NULL,
    credentials_key_id TEXT,
    credentials        BLOB,
    tools              TEXT,
    discovered_at      INTEGER,
    created_by         BLOB,
    created_at         INTEGER NOT NULL
);

CREATE INDEX app_connections_app ON app_connections (app_id, created_at);
