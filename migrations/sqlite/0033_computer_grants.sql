-- Computer grants: which Bot works on which Computer (docs/computers.md). A Bot has at most
-- one Computer; `ask` says whether its calls that change the machine wait for a person's
-- approval (on unless the granting member turned it off).

CREATE TABLE computer_grants (
    bot_id       BLOB PRIMARY KEY,
    computer_id  BLOB NOT NULL REFERENCES computers (id),
    ask          INTEGER NOT NULL,
    granted_by   BLOB NOT NULL REFERENCES members (id),
    granted_at   INTEGER NOT NULL
);

CREATE INDEX computer_grants_computer ON computer_grants (computer_id);
