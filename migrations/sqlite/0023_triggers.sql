-- Triggers (schedules and webhooks that send input to a Chat as their creator), their
-- firings, and reminders (a Bot's own timers). A schedule's next firing is the wake time of
-- its timer execution; these rows say what fires and what fired.

CREATE TABLE triggers (
    id              BLOB PRIMARY KEY,
    organization_id BLOB NOT NULL,
    chat_id         BLOB NOT NULL,
    member_id       BLOB NOT NULL,
    credential      TEXT NOT NULL,
    kind            TEXT NOT NULL,
    state           TEXT NOT NULL,
    cron            TEXT,
    time_zone       TEXT,
    text            TEXT,
    secret_record   BLOB,
    execution_id    BLOB,
    next_fire_at    INTEGER,
    paused_reason   TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    deleted_at      INTEGER
);
CREATE INDEX triggers_member ON triggers (member_id, id) WHERE deleted_at IS NULL;
CREATE INDEX triggers_chat ON triggers (chat_id) WHERE deleted_at IS NULL;

CREATE TABLE trigger_firings (
    id            BLOB PRIMARY KEY,
    trigger_id    BLOB NOT NULL REFERENCES triggers (id),
    fired_at      INTEGER NOT NULL,
    scheduled_for INTEGER,
    catch_up      INTEGER NOT NULL DEFAULT 0,
    delivery_id   TEXT,
    outcome       TEXT NOT NULL,
    reason        TEXT,
    execution_id  BLOB
);
-- A slot fires once, a delivery is taken once.
CREATE UNIQUE INDEX trigger_firings_slot ON trigger_firings (trigger_id, scheduled_for);
CREATE UNIQUE INDEX trigger_firings_delivery ON trigger_firings (trigger_id, delivery_id);
CREATE INDEX trigger_firings_list ON trigger_firings (trigger_id, id);

CREATE TABLE reminders (
    id                     BLOB PRIMARY KEY,
    organization_id        BLOB NOT NULL,
    chat_id                BLOB NOT NULL,
    execution_id           BLOB NOT NULL,
    source_execution_id    BLOB NOT NULL,
    due_at                 INTEGER NOT NULL,
    text_record            BLOB NOT NULL,
    state                  TEXT NOT NULL,
    delivered_execution_id BLOB,
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL
);
CREATE INDEX reminders_chat ON reminders (chat_id, due_at, id);
CREATE UNIQUE INDEX reminders_execution ON reminders (execution_id);
