-- OAuth setups belong to App Connections (docs/apps.md, "Connect with OAuth"): a foreign key
-- from oauth_connections, oauth_flows and oauth_grants to app_connections. App Connections are
-- never deleted (removing one marks it `removed` and hands its grant to the organization's
-- cleanup service in the same transaction), so the keys use the default NO ACTION: a delete
-- of a Connection that still has OAuth rows is refused rather than cascading them away. The
-- grant-use table (grant_uses) keeps no key to app_connections: its holders are Connections or
-- developer tests, and a cleanup row must outlive whatever it cleans up.
--
-- OAuth rows of no App Connection could only be made before sign-in began at an App (they
-- belong to no App and nothing can use them); they are dropped.
CREATE TABLE oauth_connections_new (
    connection_id     BLOB PRIMARY KEY REFERENCES app_connections (id),
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
INSERT INTO oauth_connections_new SELECT * FROM oauth_connections WHERE connection_id IN (SELECT id FROM app_connections);
DROP TABLE oauth_connections;
ALTER TABLE oauth_connections_new RENAME TO oauth_connections;

CREATE TABLE oauth_flows_new (
    id              BLOB PRIMARY KEY,
    connection_id   BLOB NOT NULL REFERENCES app_connections (id),
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
INSERT INTO oauth_flows_new SELECT * FROM oauth_flows WHERE connection_id IN (SELECT id FROM app_connections);
DROP TABLE oauth_flows;
ALTER TABLE oauth_flows_new RENAME TO oauth_flows;
CREATE INDEX oauth_flows_connection ON oauth_flows (connection_id);

CREATE TABLE oauth_grants_new (
    id               BLOB PRIMARY KEY,
    connection_id    BLOB NOT NULL REFERENCES app_connections (id),
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
INSERT INTO oauth_grants_new SELECT * FROM oauth_grants WHERE connection_id IN (SELECT id FROM app_connections);
DROP TABLE oauth_grants;
ALTER TABLE oauth_grants_new RENAME TO oauth_grants;
CREATE INDEX oauth_grants_connection ON oauth_grants (connection_id);
