-- Shared admission: permits (concurrency slots) and token buckets (requests and tokens per
-- window) per named scope of an organization, shared by every node.

CREATE TABLE limits (
    organization_id     UUID NOT NULL,
    scope               TEXT NOT NULL,
    max_concurrent      BIGINT,
    requests_per_window BIGINT,
    tokens_per_window   BIGINT,
    window_ms           BIGINT NOT NULL,
    max_wait_ms         BIGINT NOT NULL,
    -- The buckets' levels in thousandths, as of refilled_at (refilled lazily on each take).
    request_level       BIGINT NOT NULL,
    token_level         BIGINT NOT NULL,
    refilled_at         BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    PRIMARY KEY (organization_id, scope)
);

-- Who holds a permit: an execution's call slot, by generation. A row counts only while that
-- generation owns the execution with a live lease; other rows are dead and removed lazily.
CREATE TABLE limit_permits (
    organization_id UUID NOT NULL,
    scope           TEXT NOT NULL,
    execution_id    UUID NOT NULL,
    slot            TEXT NOT NULL,
    generation      BIGINT NOT NULL,
    acquired_at     BIGINT NOT NULL,
    PRIMARY KEY (organization_id, scope, execution_id, slot)
);
CREATE INDEX limit_permits_execution ON limit_permits (execution_id);
