-- The tool registry: each organization's HTTP tools (a declared endpoint per tool name).

CREATE TABLE http_tools (
    organization_id UUID NOT NULL REFERENCES organizations (id),
    name            TEXT NOT NULL,
    description     TEXT NOT NULL,
    input_schema    TEXT NOT NULL,
    url             TEXT NOT NULL,
    retry_safe      BOOLEAN NOT NULL,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (organization_id, name)
);
