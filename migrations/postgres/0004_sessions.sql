-- Browser sessions: a same-origin cookie that acts for a member, like a token with every right.

CREATE TABLE sessions (
    id          UUID PRIMARY KEY,
    member_id   UUID NOT NULL REFERENCES members (id),
    secret_hash BYTEA NOT NULL UNIQUE,
    expires_at  BIGINT NOT NULL,
    revoked_at  BIGINT,
    created_at  BIGINT NOT NULL
);
