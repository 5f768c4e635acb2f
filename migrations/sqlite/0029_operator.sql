-- The platform operator: tokens that are no member's (created with `openbot admin
-- operator-token create`), and the audit of what an operator read, such as a sealed error
-- record's cause (who, which record, when).

CREATE TABLE operator_tokens (
    id          BLOB PRIMARY KEY,
    name        TEXT NOT NULL,
    secret_hash BLOB NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

CREATE TABLE operator_audit (
    id                BLOB PRIMARY KEY,
    operator_token_id BLOB REFERENCES operator_tokens (id),
    actor             TEXT NOT NULL,
    action            TEXT NOT NULL,
    subject           TEXT NOT NULL,
    at                INTEGER NOT NULL
);

CREATE INDEX operator_audit_subject ON operator_audit (subject, at);
