-- Unknown outcomes: a person's decision on a call whose result was lost, and its audit entry.

-- Every decision, written in the transaction of the state change it makes: a decision whose
-- audit entry fails is rolled back. One decision per call.
CREATE TABLE outcome_decisions (
    id            UUID PRIMARY KEY,
    execution_id  UUID NOT NULL REFERENCES executions (id),
    call_key      TEXT NOT NULL,
    decision      TEXT NOT NULL,
    member_id     UUID NOT NULL,
    token_id      UUID,
    session_id    UUID,
    reason        TEXT,
    result_record UUID,
    decided_at    BIGINT NOT NULL,
    UNIQUE (execution_id, call_key)
);

-- What waits for a decision, per scope, in ID order (the list's pages).
CREATE INDEX executions_unknown ON executions (scope, id) WHERE state = 'outcome_unknown';

-- A token that held every right keeps every right: it gains the new `outcomes` rights.
UPDATE api_tokens
    SET rights = (rights::jsonb || '[{"resource":"outcomes","action":"read"},{"resource":"outcomes","action":"write"}]'::jsonb)::text
    WHERE (SELECT count(DISTINCT e) FROM jsonb_array_elements(api_tokens.rights::jsonb) AS e) = 10;
