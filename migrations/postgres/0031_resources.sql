-- The resource directory: every physical resource a node holds for an execution's phase (an
-- MCP stdio process, an MCP HTTP session; later a Computer socket, a live provider session),
-- registered before its connection starts. Only its owner (node and incarnation) can close
-- it; each close saves its result here (closed, or failed with the error ID of its sealed
-- cause), so a caller whose reply was lost reads it. A row whose lease ran out with no saved
-- close result is unknown, never released.

CREATE TABLE resources (
    id                UUID PRIMARY KEY,
    kind              TEXT NOT NULL,
    scope             TEXT NOT NULL,
    owner_node        TEXT NOT NULL,
    owner_incarnation UUID NOT NULL,
    execution_id      UUID,
    phase             TEXT,
    lease_until       BIGINT NOT NULL,
    close_outcome     TEXT,
    close_error_id    UUID,
    closed_at         BIGINT,
    created_at        BIGINT NOT NULL,
    CHECK (close_outcome IS NULL OR close_outcome IN ('closed', 'failed')),
    CHECK ((close_outcome = 'failed') = (close_error_id IS NOT NULL))
);

CREATE INDEX resources_scope ON resources (scope, created_at);
CREATE INDEX resources_owner ON resources (owner_node, owner_incarnation) WHERE close_outcome IS NULL;
