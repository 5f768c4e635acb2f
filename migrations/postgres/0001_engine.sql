-- The execution engine: executions, command keys, the call log, events, signals, timers,
-- the outbox, Turn input, and sealed records. Times are milliseconds since the Unix epoch.

CREATE TABLE executions (
    id               UUID PRIMARY KEY,
    kind             TEXT NOT NULL,
    state            TEXT NOT NULL,
    generation       BIGINT NOT NULL DEFAULT 0,
    owner_node       TEXT,
    lease_expires_at BIGINT,
    parent_id        UUID REFERENCES executions (id),
    scope            TEXT NOT NULL,
    chat_id          UUID,
    input_record     UUID NOT NULL,
    outcome          TEXT,
    failure_category TEXT,
    error_id         UUID,
    input_tokens     BIGINT NOT NULL DEFAULT 0,
    output_tokens    BIGINT NOT NULL DEFAULT 0,
    cached_tokens    BIGINT NOT NULL DEFAULT 0,
    cost_micros      BIGINT,
    input_closed     BOOLEAN NOT NULL DEFAULT FALSE,
    input_step       INTEGER NOT NULL DEFAULT 0,
    last_sequence    BIGINT NOT NULL DEFAULT 0,
    wake_at          BIGINT, -- the durable timer: a waiting execution is claimable from then on
    unknown_call     TEXT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
-- Work a node may claim: not ended, and either unowned or with a lapsed lease.
CREATE INDEX executions_claimable ON executions (lease_expires_at)
    WHERE state IN ('queued', 'running', 'waiting', 'cancelling');
CREATE INDEX executions_owner ON executions (owner_node) WHERE owner_node IS NOT NULL;
CREATE INDEX executions_chat ON executions (chat_id) WHERE chat_id IS NOT NULL;

CREATE TABLE command_keys (
    scope        TEXT NOT NULL,
    key          TEXT NOT NULL,
    input_digest BYTEA NOT NULL,
    execution_id UUID NOT NULL REFERENCES executions (id),
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (scope, key)
);

CREATE TABLE calls (
    execution_id    UUID NOT NULL REFERENCES executions (id),
    step            INTEGER NOT NULL,
    slot            TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    status          TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    result_record   UUID,
    has_usage       BOOLEAN NOT NULL DEFAULT FALSE,
    input_tokens    BIGINT NOT NULL DEFAULT 0,
    output_tokens   BIGINT NOT NULL DEFAULT 0,
    cached_tokens   BIGINT NOT NULL DEFAULT 0,
    cost_micros     BIGINT,
    generation      BIGINT NOT NULL,
    late            BOOLEAN NOT NULL DEFAULT FALSE,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (execution_id, step, slot, attempt)
);

CREATE TABLE events (
    execution_id UUID NOT NULL REFERENCES executions (id),
    sequence     BIGINT NOT NULL,
    kind         TEXT NOT NULL,
    payload      TEXT NOT NULL,
    at           BIGINT NOT NULL,
    PRIMARY KEY (execution_id, sequence)
);

CREATE TABLE signals (
    execution_id UUID NOT NULL REFERENCES executions (id),
    number       BIGINT NOT NULL,
    kind         TEXT NOT NULL,
    payload      TEXT NOT NULL DEFAULT '{}',
    created_at   BIGINT NOT NULL,
    handled_at   BIGINT,
    PRIMARY KEY (execution_id, number)
);

CREATE TABLE outbox (
    id           BIGSERIAL PRIMARY KEY,
    execution_id UUID NOT NULL REFERENCES executions (id),
    kind         TEXT NOT NULL,
    payload      TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    delivered_at BIGINT,
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT,
    claimed_until BIGINT
);
CREATE INDEX outbox_pending ON outbox (id) WHERE delivered_at IS NULL;

CREATE TABLE turn_inputs (
    execution_id UUID NOT NULL REFERENCES executions (id),
    position     INTEGER NOT NULL,
    content      TEXT NOT NULL,
    taken_step   INTEGER,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (execution_id, position)
);

CREATE TABLE sealed_records (
    id           UUID PRIMARY KEY,
    execution_id UUID,
    key_id       TEXT NOT NULL,
    nonce        BYTEA NOT NULL,
    ciphertext   BYTEA NOT NULL,
    created_at   BIGINT NOT NULL
);

CREATE TABLE error_records (
    id           UUID PRIMARY KEY,
    execution_id UUID,
    category     TEXT NOT NULL,
    key_id       TEXT NOT NULL,
    nonce        BYTEA NOT NULL,
    ciphertext   BYTEA NOT NULL,
    created_at   BIGINT NOT NULL
);
