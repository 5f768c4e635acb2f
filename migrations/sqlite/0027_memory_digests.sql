-- A memory's content digest (server/src/memories/seal.rs): its terms' hashes and counts and its
-- estimated tokens, sealed for its row like the content. Recall ranks candidates by their
-- digests and opens only the content of the memories it selects. NULL for a memory written
-- before this version: its content is opened to rank it, as before.
ALTER TABLE memories ADD COLUMN digest_key_id TEXT;
ALTER TABLE memories ADD COLUMN digest BLOB;
