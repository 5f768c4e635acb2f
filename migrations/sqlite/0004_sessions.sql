-- Browser sessions: a same-origin cookie that acts for a member, like a token with every right.

CREATE TABLE sessions (
    id          BLOB PRIMARY KEY,
    member_id   BLOB NOT NULL REFERENCES members (id),
    secret_hash BLOB NOT NULL UNIQUE,
    expires_at  INTEGER NOT NULL,
    revoked_at  INTEGER,
    created_at  INTEGER NOT NULL
);
