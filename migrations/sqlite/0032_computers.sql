-- Computers: machines paired with the server (docs/computers.md). A machine asks for a pairing
-- (only the hashes of its code and secret are kept), a member approves the code, and the
-- machine claims its own credential with the secret (only its hash is kept). A Computer
-- belongs to its organization, and to the member who approved it unless shared. Removal
-- revokes its credential at once.

CREATE TABLE computers (
    id               BLOB PRIMARY KEY,
    organization_id  BLOB NOT NULL REFERENCES organizations (id),
    owner_member_id  BLOB REFERENCES members (id),
    name             TEXT NOT NULL,
    credential_hash  BLOB UNIQUE,
    created_at       INTEGER NOT NULL,
    paired_at        INTEGER,
    removed_at       INTEGER
);

CREATE INDEX computers_organization ON computers (organization_id, id) WHERE removed_at IS NULL;

CREATE TABLE computer_pairings (
    id           BLOB PRIMARY KEY,
    code_hash    BLOB NOT NULL UNIQUE,
    secret_hash  BLOB NOT NULL,
    name         TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    computer_id  BLOB REFERENCES computers (id),
    claimed_at   INTEGER
);

CREATE INDEX computer_pairings_expiry ON computer_pairings (expires_at);

-- A token that held every right keeps every right: it gains the new `computers` rights.
UPDATE api_tokens
    SET rights = substr(rights, 1, length(rights) - 1) || ',{"resource":"computers","action":"read"},{"resource":"computers","action":"write"}]'
    WHERE (SELECT count(DISTINCT value) FROM json_each(api_tokens.rights)) = 22;
