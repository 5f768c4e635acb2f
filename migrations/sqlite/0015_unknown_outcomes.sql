-- Unknown outcomes: a person's decision on a call whose result was lost, and its audit entry.

-- Every decision, written in the transaction of the state change it makes: a decision whose
-- audit entry fails is rolled back. One decision per call.
CREATE TABLE outcome_decisions (
    id            BLOB PRIMARY KEY,
    execution_id  BLOB NOT NULL REFERENCES executions (id),
    call_key      TEXT NOT NULL,
    decision      TEXT NOT NULL,
    member_id     BLOB NOT NULL,
    token_id      BLOB,
    session_id    BLOB,
    reason        TEXT,
    result_record BLOB,
    decided_at    INTEGER NOT NULL,
    UNIQUE (execution_id, call_key)
);

-- What waits for a decision, per scope, in ID order (the list's pages).
CREATE INDEX executions_unknown ON executions (scope, id) WHERE state = 'outcome_unknown';

-- A token that held every right keeps every right: it gains the new `outcomes` rights.
UPDATE api_tokens
    SET rights = substr(rights, 1, length(rights) - 1) || ',{"resource":"outcomes","action":"read"},{"resource":"outcomes","action":"write"}]'
    WHERE (SELECT count(DISTINCT value) FROM json_each(api_tokens.rights)) = 10;
