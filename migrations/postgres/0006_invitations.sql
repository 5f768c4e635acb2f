-- Invitations: a one-time secret that makes a person a member of an organization.

CREATE TABLE invitations (
    id              UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations (id),
    email           TEXT NOT NULL,
    role            TEXT NOT NULL,
    secret_hash     BYTEA NOT NULL UNIQUE,
    invited_by      UUID NOT NULL REFERENCES members (id),
    expires_at      BIGINT NOT NULL,
    accepted_at     BIGINT,
    revoked_at      BIGINT,
    created_at      BIGINT NOT NULL
);
CREATE INDEX invitations_organization ON invitations (organization_id);
