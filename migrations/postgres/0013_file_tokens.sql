-- The token that stored each file: a token limited to some Bots sees only the files it stored
-- (files have no Bot). Files stored before this, or with a session, have none.

ALTER TABLE files ADD COLUMN token_id UUID;
