-- Budgets: spending caps on all Turns of an organization, a Bot or a Chat.

CREATE TABLE budgets (
    organization_id UUID NOT NULL REFERENCES organizations (id),
    scope           TEXT NOT NULL,
    target_id       UUID NOT NULL,
    max_cost_micros BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (organization_id, scope, target_id)
);

CREATE INDEX chats_bot ON chats (bot_id);
