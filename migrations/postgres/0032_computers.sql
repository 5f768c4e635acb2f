-- Computers: machines paired with the server (docs/computers.md). A machine asks for a pairing
-- (only the hashes of its code and secret are kept), a member approves the code, and the
-- machine claims its own credential with the secret (only its hash is kept). A Computer
-- belongs to its organization, and to the member who approved it unless shared. Removal
-- revokes its credential at once.

CREATE TABLE computers (
    id               UUID PRIMARY KEY,
    organization_id  UUID NOT NULL REFERENCES organizations (id),
    owner_member_id  UUID REFERENCES members (id),
    name             TEXT NOT NULL,
    credential_hash  BYTEA UNIQUE,
    created_at       BIGINT NOT NULL,
    paired_at        BIGINT,
    removed_at       BIGINT
);

CREATE INDEX computers_organization ON computers (organization_id, id) WHERE removed_at IS NULL;

CREATE TABLE computer_pairings (
    id           UUID PRIMARY KEY,
    code_hash    BYTEA NOT NULL UNIQUE,
    secret_hash  BYTEA NOT NULL,
    name         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    computer_id  UUID REFERENCES computers (id),
    claimed_at   BIGINT
);

CREATE INDEX computer_pairings_expiry ON computer_pairings (expires_at);

-- A token that held every right keeps every right: it gains the new `computers` rights.
UPDATE api_tokens
    SET rights = (rights::jsonb || '[{"resource":"computers","action":"read"},{"resource":"computers","action":"write"}]'::jsonb)::text
    WHERE (SELECT count(DISTINCT e) FROM jsonb_array_elements(api_tokens.rights::jsonb) AS e) = 22;
