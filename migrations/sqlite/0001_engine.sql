-- The execution engine: executions, command keys, the call log, events, signals, timers,
-- the outbox, Turn input, and sealed records. Times are milliseconds since the Unix epoch.

CREATE TABLE executions (
    id               BLOB PRIMARY KEY,
    kind             TEXT NOT NULL,
    state            TEXT NOT NULL,
    generation       INTEGER NOT NULL DEFAULT 0,
    owner_node       TEXT,
    lease_expires_at INTEGER,
    parent_id        BLOB REFERENCES executions (id),
    scope            TEXT NOT NULL,
    chat_id          BLOB,
    input_record     BLOB NOT NULL,
    outcome          TEXT,
    failure_category TEXT,
    error_id         BLOB,
    input_tokens     INTEGER NOT NULL DEFAULT 0,
    output_tokens    INTEGER NOT NULL DEFAULT 0,
    cached_tokens    INTEGER NOT NULL DEFAULT 0,
    cost_micros      INTEGER,
    input_closed     INTEGER NOT NULL DEFAULT 0,
    input_step       INTEGER NOT NULL DEFAULT 0,
    last_sequence    INTEGER NOT NULL DEFAULT 0,
    wake_at          INTEGER, -- the durable timer: a waiting execution is claimable from then on
    unknown_call     TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
-- Work a node may claim: not ended, and either unowned or with a lapsed lease.
CREATE INDEX executions_claimable ON executions (lease_expires_at)
    WHERE state IN ('queued', 'running', 'waiting', 'cancelling');
CREATE INDEX executions_owner ON executions (owner_node) WHERE owner_node IS NOT NULL;
CREATE INDEX executions_chat ON executions (chat_id) WHERE chat_id IS NOT NULL;

CREATE TABLE command_keys (
    scope        TEXT NOT NULL,
    key          TEXT NOT NULL,
    input_digest BLOB NOT NULL,
    execution_id BLOB NOT NULL REFERENCES executions (id),
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
);

CREATE TABLE calls (
    execution_id    BLOB NOT NULL REFERENCES executions (id),
    step            INTEGER NOT NULL,
    slot            TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    status          TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    result_record   BLOB,
    has_usage       INTEGER NOT NULL DEFAULT 0,
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    cached_tokens   INTEGER NOT NULL DEFAULT 0,
    cost_micros     INTEGER,
    generation      INTEGER NOT NULL,
    late            INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (execution_id, step, slot, attempt)
);

CREATE TABLE events (
    execution_id BLOB NOT NULL REFERENCES executions (id),
    sequence     INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    payload      TEXT NOT NULL,
    at           INTEGER NOT NULL,
    PRIMARY KEY (execution_id, sequence)
);

CREATE TABLE signals (
    execution_id BLOB NOT NULL REFERENCES executions (id),
    number       INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    payload      TEXT NOT NULL DEFAULT '{}',
    created_at   INTEGER NOT NULL,
    handled_at   INTEGER,
    PRIMARY KEY (execution_id, number)
);

CREATE TABLE outbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id BLOB NOT NULL REFERENCES executions (id),
    kind         TEXT NOT NULL,
    payload      TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    delivered_at INTEGER,
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT,
    claimed_until INTEGER
);
CREATE INDEX outbox_pending ON outbox (id) WHERE delivered_at IS NULL;

CREATE TABLE turn_inputs (
    execution_id BLOB NOT NULL REFERENCES executions (id),
    position     INTEGER NOT NULL,
    content      TEXT NOT NULL,
    taken_step   INTEGER,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (execution_id, position)
);

CREATE TABLE sealed_records (
    id           BLOB PRIMARY KEY,
    execution_id BLOB,
    key_id       TEXT NOT NULL,
    nonce        BLOB NOT NULL,
    ciphertext   BLOB NOT NULL,
    created_at   INTEGER NOT NULL
);

CREATE TABLE error_records (
    id           BLOB PRIMARY KEY,
    execution_id BLOB,
    category     TEXT NOT NULL,
    key_id       TEXT NOT NULL,
    nonce        BLOB NOT NULL,
    ciphertext   BLOB NOT NULL,
    created_at   INTEGER NOT NULL
);
