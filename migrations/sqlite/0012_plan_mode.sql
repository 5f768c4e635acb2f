-- Plan mode: a Chat whose Bot may only propose a plan until a person approves one.

ALTER TABLE chats ADD COLUMN plan_mode INTEGER NOT NULL DEFAULT 0;
