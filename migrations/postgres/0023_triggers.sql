-- Triggers (schedules and webhooks that send input to a Chat as their creator), their
-- firings, and reminders (a Bot's own timers). A schedule's next firing is the wake time of
-- its timer execution; these rows say what fires and what fired.

CREATE TABLE triggers (
    id              UUID PRIMARY KEY,
    organization_id UUID NOT NULL,
    chat_id         UUID NOT NULL,
    member_id       UUID NOT NULL,
    credential      TEXT NOT NULL,
    kind            TEXT NOT NULL,
    state           TEXT NOT NULL,
    cron            TEXT,
    time_zone       TEXT,
    text            TEXT,
    secret_record   UUID,
    execution_id    UUID,
    next_fire_at    BIGINT,
    paused_reason   TEXT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    deleted_at      BIGINT
);
CREATE INDEX triggers_member ON triggers (member_id, id) WHERE deleted_at IS NULL;
CREATE INDEX triggers_chat ON triggers (chat_id) WHERE deleted_at IS NULL;

CREATE TABLE trigger_firings (
    id            UUID PRIMARY KEY,
    trigger_id    UUID NOT NULL REFERENCES triggers (id),
    fired_at      BIGINT NOT NULL,
    scheduled_for BIGINT,
    catch_up      BOOLEAN NOT NULL DEFAULT FALSE,
    delivery_id   TEXT,
    outcome       TEXT NOT NULL,
    reason        TEXT,
    execution_id  UUID
);
-- A slot fires once, a delivery is taken once.
CREATE UNIQUE INDEX trigger_firings_slot ON trigger_firings (trigger_id, scheduled_for);
CREATE UNIQUE INDEX trigger_firings_delivery ON trigger_firings (trigger_id, delivery_id);
CREATE INDEX trigger_firings_list ON trigger_firings (trigger_id, id);

CREATE TABLE reminders (
    id                     UUID PRIMARY KEY,
    organization_id        UUID NOT NULL,
    chat_id                UUID NOT NULL,
    execution_id           UUID NOT NULL,
    source_execution_id    UUID NOT NULL,
    due_at                 BIGINT NOT NULL,
    text_record            UUID NOT NULL,
    state                  TEXT NOT NULL,
    delivered_execution_id UUID,
    created_at             BIGINT NOT NULL,
    updated_at             BIGINT NOT NULL
);
CREATE INDEX reminders_chat ON reminders (chat_id, due_at, id);
CREATE UNIQUE INDEX reminders_execution ON reminders (execution_id);
