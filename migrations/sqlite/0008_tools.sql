-- The tool registry: each organization's HTTP tools (a declared endpoint per tool name).

CREATE TABLE http_tools (
    organization_id BLOB NOT NULL REFERENCES organizations (id),
    name            TEXT NOT NULL,
    description     TEXT NOT NULL,
    input_schema    TEXT NOT NULL,
    url             TEXT NOT NULL,
    retry_safe      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (organization_id, name)
);
