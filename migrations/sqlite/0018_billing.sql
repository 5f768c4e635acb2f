-- Billing: prices, credits, and one usage record per model call (its billing identity).

-- An organization's price for a model spec, replacing the built-in catalog's.
CREATE TABLE model_prices (
    organization_id                 BLOB NOT NULL REFERENCES organizations (id),
    model                           TEXT NOT NULL,
    input_micros_per_million        INTEGER NOT NULL,
    output_micros_per_million       INTEGER NOT NULL,
    cached_input_micros_per_million INTEGER NOT NULL,
    updated_at                      INTEGER NOT NULL,
    PRIMARY KEY (organization_id, model)
);

-- An organization on credits: its balance (grants minus charges), kept with the ledger.
CREATE TABLE credit_accounts (
    organization_id BLOB PRIMARY KEY REFERENCES organizations (id),
    balance_micros  INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);

-- Grants and charges. A charge names its model call: at most one per call.
CREATE TABLE credit_ledger (
    id              BLOB PRIMARY KEY,
    organization_id BLOB NOT NULL REFERENCES organizations (id),
    kind            TEXT NOT NULL,
    amount_micros   INTEGER NOT NULL,
    execution_id    BLOB,
    call_key        TEXT,
    member_id       BLOB,
    note            TEXT,
    created_at      INTEGER NOT NULL,
    UNIQUE (execution_id, call_key)
);

CREATE INDEX credit_ledger_organization ON credit_ledger (organization_id, created_at);

-- One row per model call sent: the reservation (state held, its estimate and the price in
-- force when it was sent), then the confirmed usage and cost (settled), or no usage
-- (unknown: the estimate stays, nothing is charged), or a released hold (the call ended
-- otherwise, or a newer owner took over). Estimates stay in their own columns; a call with
-- no reservation has NULL estimates.
CREATE TABLE usage_records (
    execution_id           BLOB NOT NULL,
    call_key               TEXT NOT NULL,
    generation             INTEGER NOT NULL,
    organization_id        BLOB NOT NULL,
    bot_id                 BLOB NOT NULL,
    budget_bot_id          BLOB NOT NULL,
    chat_id                BLOB,
    member_id              BLOB,
    model                  TEXT NOT NULL,
    input_price            INTEGER,
    output_price           INTEGER,
    cached_price           INTEGER,
    estimate_input_tokens  INTEGER,
    estimate_output_tokens INTEGER,
    estimate_micros        INTEGER,
    state                  TEXT NOT NULL,
    input_tokens           INTEGER,
    output_tokens          INTEGER,
    cached_tokens          INTEGER,
    cost_micros            INTEGER,
    created_at             INTEGER NOT NULL,
    settled_at             INTEGER,
    PRIMARY KEY (execution_id, call_key)
);

CREATE INDEX usage_records_organization ON usage_records (organization_id, created_at);
-- Holds are few (one per call in flight): budgets and credits sum them through these.
CREATE INDEX usage_records_held_organization ON usage_records (organization_id) WHERE state = 'held';
CREATE INDEX usage_records_held_bot ON usage_records (budget_bot_id) WHERE state = 'held';
CREATE INDEX usage_records_held_chat ON usage_records (chat_id) WHERE state = 'held';
CREATE INDEX usage_records_held_execution ON usage_records (execution_id) WHERE state = 'held';

-- The confirmed cost of every organization, Bot (of the Chat a call's tree works for) and
-- Chat so far, added in the transaction that settles each call (a call settles once), so a
-- reservation reads its budgets' spending in one row each instead of summing history.
CREATE TABLE usage_totals (
    scope          TEXT NOT NULL,
    target_id      BLOB NOT NULL,
    settled_micros INTEGER NOT NULL,
    PRIMARY KEY (scope, target_id)
);

-- Model calls saved before this migration, as settled records, so that budgets keep their
-- spending: those of Turns with a Chat (a delegated Turn saved before had none here).
INSERT INTO usage_records (execution_id, call_key, generation, organization_id, bot_id, budget_bot_id,
        chat_id, member_id, model, state, input_tokens, output_tokens, cached_tokens, cost_micros,
        created_at, settled_at)
    SELECT c.execution_id, CAST(c.step AS TEXT) || '/model/' || CAST(c.attempt AS TEXT), c.generation,
        b.organization_id, b.id, b.id, ch.id, ch.member_id, COALESCE(json_extract(b.spec, '$.model'), ''), 'settled',
        c.input_tokens, c.output_tokens, c.cached_tokens, COALESCE(c.cost_micros, 0), c.created_at, c.updated_at
    FROM calls c
    JOIN executions e ON e.id = c.execution_id
    JOIN chats ch ON ch.id = e.chat_id
    JOIN bots b ON b.id = ch.bot_id
    WHERE c.slot = 'model' AND c.status = 'done' AND c.has_usage;

INSERT INTO usage_totals (scope, target_id, settled_micros)
    SELECT 'organization', organization_id, CAST(SUM(cost_micros) AS BIGINT) FROM usage_records
    WHERE state = 'settled' GROUP BY organization_id;

INSERT INTO usage_totals (scope, target_id, settled_micros)
    SELECT 'bot', budget_bot_id, CAST(SUM(cost_micros) AS BIGINT) FROM usage_records
    WHERE state = 'settled' GROUP BY budget_bot_id;

INSERT INTO usage_totals (scope, target_id, settled_micros)
    SELECT 'chat', chat_id, CAST(SUM(cost_micros) AS BIGINT) FROM usage_records
    WHERE state = 'settled' AND chat_id IS NOT NULL GROUP BY chat_id;
