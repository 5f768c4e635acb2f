-- The platform operator: tokens that are no member's (created with `openbot admin
-- operator-token create`), and the audit of what an operator read, such as a sealed error
-- record's cause (who, which record, when).

CREATE TABLE operator_tokens (
    id          UUID PRIMARY KEY,
    name        TEXT NOT NULL,
    secret_hash BYTEA NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);

CREATE TABLE operator_audit (
    id                UUID PRIMARY KEY,
    operator_token_id UUID REFERENCES operator_tokens (id),
    actor             TEXT NOT NULL,
    action            TEXT NOT NULL,
    subject           TEXT NOT NULL,
    at                BIGINT NOT NULL
);

CREATE INDEX operator_audit_subject ON operator_audit (subject, at);
