-- Shared admission: permits (concurrency slots) and token buckets (requests and tokens per
-- window) per named scope of an organization, shared by every node.

CREATE TABLE limits (
    organization_id     BLOB NOT NULL,
    scope               TEXT NOT NULL,
    max_concurrent      INTEGER,
    requests_per_window INTEGER,
    tokens_per_window   INTEGER,
    window_ms           INTEGER NOT NULL,
    max_wait_ms         INTEGER NOT NULL,
    -- The buckets' levels in thousandths, as of refilled_at (refilled lazily on each take).
    request_level       INTEGER NOT NULL,
    token_level         INTEGER NOT NULL,
    refilled_at         INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    PRIMARY KEY (organization_id, scope)
);

-- Who holds a permit: an execution's call slot, by generation. A row counts only while that
-- generation owns the execution with a live lease; other rows are dead and removed lazily.
CREATE TABLE limit_permits (
    organization_id BLOB NOT NULL,
    scope           TEXT NOT NULL,
    execution_id    BLOB NOT NULL,
    slot            TEXT NOT NULL,
    generation      INTEGER NOT NULL,
    acquired_at     INTEGER NOT NULL,
    PRIMARY KEY (organization_id, scope, execution_id, slot)
);
CREATE INDEX limit_permits_execution ON limit_permits (execution_id);
