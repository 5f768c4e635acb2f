-- The model registry: each organization's provider settings, with the API key sealed.

CREATE TABLE model_providers (
    organization_id UUID NOT NULL REFERENCES organizations (id),
    kind            TEXT NOT NULL,
    base_url        TEXT,
    key_record      UUID,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (organization_id, kind)
);
