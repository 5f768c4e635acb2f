-- Invitations: a one-time secret that makes a person a member of an organization.

CREATE TABLE invitations (
    id              BLOB PRIMARY KEY,
    organization_id BLOB NOT NULL REFERENCES organizations (id),
    email           TEXT NOT NULL,
    role            TEXT NOT NULL,
    secret_hash     BLOB NOT NULL UNIQUE,
    invited_by      BLOB NOT NULL REFERENCES members (id),
    expires_at      INTEGER NOT NULL,
    accepted_at     INTEGER,
    revoked_at      INTEGER,
    created_at      INTEGER NOT NULL
);
CREATE INDEX invitations_organization ON invitations (organization_id);
