-- Pausing work: a paused execution waits without a wake time until it is resumed; the time
-- it spent paused does not count against its time limit.

ALTER TABLE executions ADD COLUMN paused_at INTEGER;
ALTER TABLE executions ADD COLUMN paused_ms INTEGER NOT NULL DEFAULT 0;
