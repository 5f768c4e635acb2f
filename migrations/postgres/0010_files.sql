-- Files: each member's stored files. The bytes live in the object store (by default the
-- `objects` folder of the data folder) under `object_key`; this row describes them.

CREATE TABLE files (
    id              UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations (id),
    owner_member_id UUID NOT NULL,
    name            TEXT NOT NULL,
    media_type      TEXT NOT NULL,
    size            BIGINT NOT NULL,
    sha256          TEXT NOT NULL,
    object_key      TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    deleted_at      BIGINT
);
CREATE INDEX files_owner ON files (owner_member_id, created_at) WHERE deleted_at IS NULL;
