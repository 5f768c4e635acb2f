-- Sealed rows: the payloads of events, Turn input (steering input and notices), Chat notices
-- and requests are sealed with the key ring, each for its own row. `key_id` names the key and
-- `sealed` holds the nonce and ciphertext; the old clear-text column is left empty. A row
-- with no `key_id` was written in clear text by an older build: it is read as it is, and
-- `openbot migrate` seals it (a migration file has no keys).

ALTER TABLE events ADD COLUMN key_id TEXT;
ALTER TABLE events ADD COLUMN sealed BYTEA;

ALTER TABLE turn_inputs ADD COLUMN key_id TEXT;
ALTER TABLE turn_inputs ADD COLUMN sealed BYTEA;

ALTER TABLE chat_notices ADD COLUMN key_id TEXT;
ALTER TABLE chat_notices ADD COLUMN sealed BYTEA;

ALTER TABLE requests ADD COLUMN key_id TEXT;
ALTER TABLE requests ADD COLUMN sealed BYTEA;

-- The clear-text rows `openbot migrate` still has to seal; empty once it ran, and new rows
-- never enter them.
CREATE INDEX events_clear ON events (execution_id, sequence) WHERE key_id IS NULL;
CREATE INDEX turn_inputs_clear ON turn_inputs (execution_id, position) WHERE key_id IS NULL;
CREATE INDEX chat_notices_clear ON chat_notices (id) WHERE key_id IS NULL;
CREATE INDEX requests_clear ON requests (id) WHERE key_id IS NULL;
