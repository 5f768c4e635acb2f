-- OAuth for App connections (docs/apps-oauth.md): where a connection signs in, its pending
-- browser steps, the grants token answers gave, and the shared grant-use table (spec F11).
-- Keyed by the connection ID; the foreign key to app_connections comes with the Apps merge.

-- One row per connection that signs in with OAuth: its authorization server, the client
-- OpenBot is there, and the grant it holds now.
CREATE TABLE oauth_connections (
    connection_id     BLOB PRIMARY KEY,
    organization_id   BLOB NOT NULL REFERENCES organizations (id),
    resource          TEXT NOT NULL,
    issuer            TEXT NOT NULL,
    metadata          TEXT NOT NULL,
    client_id         TEXT NOT NULL,
    client_registered INTEGER NOT NULL,
    secret_key_id     TEXT,
    secret_sealed     BLOB,
    redirect_uri      TEXT NOT NULL,
    scope             TEXT,
    status            TEXT NOT NULL,
    grant_id          BLOB,
    reason            TEXT,
    created_by        BLOB NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);

-- A browser step: the state's hash (the state itself is never stored), the PKCE verifier
-- sealed, the client and redirect URI it was begun with, who began it, when it expires and when (and by which exchange) it was used.
CREATE TABLE oauth_flows (
    id              BLOB PRIMARY KEY,
    connection_id   BLOB NOT NULL,
    organization_id BLOB NOT NULL,
    member_id       BLOB NOT NULL,
    state_hash      BLOB NOT NULL UNIQUE,
    verifier_key_id TEXT NOT NULL,
    verifier_sealed BLOB NOT NULL,
    client_id       TEXT NOT NULL,
    redirect_uri    TEXT NOT NULL,
    expires_at      INTEGER NOT NULL,
    used_at         INTEGER,
    execution_id    BLOB,
    created_at      INTEGER NOT NULL
);

CREATE INDEX oauth_flows_connection ON oauth_flows (connection_id);

-- Every token answer's grant, installed or not: the metadata of the server that issued it (its
-- refresh and revocation go there only), its tokens sealed for the row, the call that got it,
-- and its state (installed, unused, released, revoked).
CREATE TABLE oauth_grants (
    id               BLOB PRIMARY KEY,
    connection_id    BLOB NOT NULL,
    organization_id  BLOB NOT NULL,
    issuer           TEXT NOT NULL,
    client_id        TEXT NOT NULL,
    metadata         TEXT NOT NULL,
    tokens_key_id    TEXT,
    tokens_sealed    BLOB,
    expires_at       INTEGER,
    rotation         INTEGER NOT NULL,
    source_execution BLOB NOT NULL,
    source_call      TEXT NOT NULL,
    state            TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);

CREATE INDEX oauth_grants_connection ON oauth_grants (connection_id);

-- The shared grant-use table: who holds an authorization (kind `hold`: a connection or a
-- developer test), pending grant sends (`send`) and revocations (`revocation`, owned by the
-- organization's cleanup service, with its saved result). Cleanup reads the grant scope
-- (issuer, client) here and never opens another holder's secrets.
CREATE TABLE grant_uses (
    id              BLOB PRIMARY KEY,
    organization_id BLOB NOT NULL,
    issuer          TEXT NOT NULL,
    client_id       TEXT NOT NULL,
    kind            TEXT NOT NULL,
    holder_kind     TEXT NOT NULL,
    holder_id       BLOB NOT NULL,
    grant_id        BLOB,
    execution_id    BLOB,
    state           TEXT NOT NULL,
    result          TEXT,
    owner_scope     TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);

CREATE INDEX grant_uses_scope ON grant_uses (issuer, client_id, kind, state);
CREATE INDEX grant_uses_holder ON grant_uses (holder_id, kind, state);

-- One row per grant scope (issuer, client): grant sends, installation and cleanup lock it.
CREATE TABLE grant_scopes (
    issuer    TEXT NOT NULL,
    client_id TEXT NOT NULL,
    locked_at INTEGER NOT NULL,
    PRIMARY KEY (issuer, client_id)
);
