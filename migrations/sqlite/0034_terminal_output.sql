-- Terminal output of paired machines, kept on the server (docs/computers.md): the agent sends
-- each session's output to the node holding its link, which saves it in batches. A chunk is
-- kept once by its sequence (a new link sends a session's output again); a session keeps its
-- newest chunks only. Removing the Computer deletes both.

CREATE TABLE computer_terminals (
    computer_id  BLOB NOT NULL REFERENCES computers (id),
    session_id   TEXT NOT NULL,
    cwd          TEXT NOT NULL,
    command      TEXT NOT NULL,
    started_at   INTEGER NOT NULL,
    last_seq     INTEGER NOT NULL,
    exited       INTEGER NOT NULL,
    exit_code    INTEGER,
    PRIMARY KEY (computer_id, session_id)
);

CREATE TABLE computer_output (
    computer_id  BLOB NOT NULL,
    session_id   TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    text         TEXT NOT NULL,
    PRIMARY KEY (computer_id, session_id, seq),
    FOREIGN KEY (computer_id, session_id) REFERENCES computer_terminals (computer_id, session_id)
);
