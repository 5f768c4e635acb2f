-- Computer grants: which Bot works on which Computer (docs/computers.md). A Bot has at most
-- one Computer; `ask` says whether its calls that change the machine wait for a person's
-- approval (on unless the granting member turned it off).

CREATE TABLE computer_grants (
    bot_id       UUID PRIMARY KEY,
    computer_id  UUID NOT NULL REFERENCES computers (id),
    ask          BOOLEAN NOT NULL,
    granted_by   UUID NOT NULL REFERENCES members (id),
    granted_at   BIGINT NOT NULL
);

CREATE INDEX computer_grants_computer ON computer_grants (computer_id);
