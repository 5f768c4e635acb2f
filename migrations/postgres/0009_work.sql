-- Child work, notices, approval requests and rules, background and delegate tools.

-- A child the parent waits for before it ends (a delegated Turn); detached children (tool
-- jobs) may outlive their parent.
ALTER TABLE executions ADD COLUMN attached BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX executions_parent ON executions (parent_id) WHERE parent_id IS NOT NULL;

-- A notice that reached a Chat when none of its Turns took input: it adds history after the
-- Chat execution `after_execution` and starts no Turn.
CREATE TABLE chat_notices (
    id              BIGSERIAL PRIMARY KEY,
    chat_id         UUID NOT NULL,
    after_execution UUID,
    source_id       UUID NOT NULL REFERENCES executions (id),
    content         TEXT NOT NULL,
    created_at      BIGINT NOT NULL
);
CREATE INDEX chat_notices_chat ON chat_notices (chat_id, id);

-- A decision a child execution waits for. The request, its waiting execution and the call
-- that asked for it are written in one transaction.
CREATE TABLE requests (
    id                  UUID PRIMARY KEY,
    kind                TEXT NOT NULL,
    execution_id        UUID NOT NULL REFERENCES executions (id),
    source_execution_id UUID NOT NULL REFERENCES executions (id),
    organization_id     UUID NOT NULL,
    owner_member_id     UUID NOT NULL,
    chat_id             UUID,
    bot_id              UUID NOT NULL,
    payload             TEXT NOT NULL,
    state               TEXT NOT NULL,
    created_at          BIGINT NOT NULL,
    expires_at          BIGINT NOT NULL,
    decided_at          BIGINT,
    decided_by          UUID,
    reason              TEXT
);
CREATE INDEX requests_organization ON requests (organization_id, state, created_at);

-- Every decision, written with it: a decision whose audit entry fails is rolled back.
CREATE TABLE request_audit (
    id          BIGSERIAL PRIMARY KEY,
    request_id  UUID NOT NULL REFERENCES requests (id),
    member_id   UUID NOT NULL,
    decision    TEXT NOT NULL,
    reason      TEXT,
    at          BIGINT NOT NULL
);

CREATE TABLE approval_rules (
    id               UUID PRIMARY KEY,
    organization_id  UUID NOT NULL REFERENCES organizations (id),
    tool             TEXT NOT NULL,
    arguments        TEXT,
    action           TEXT NOT NULL,
    bot_id           UUID,
    member_id        UUID,
    expires_after_ms BIGINT NOT NULL,
    created_at       BIGINT NOT NULL
);
CREATE INDEX approval_rules_organization ON approval_rules (organization_id);

ALTER TABLE http_tools ADD COLUMN background BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE delegate_tools (
    organization_id UUID NOT NULL REFERENCES organizations (id),
    name            TEXT NOT NULL,
    description     TEXT NOT NULL,
    bot_id          UUID NOT NULL,
    limits          TEXT NOT NULL,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (organization_id, name)
);
