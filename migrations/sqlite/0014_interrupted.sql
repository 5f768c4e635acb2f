-- Why an execution was interrupted: work that cannot be rebuilt (a retired workflow kind, a
-- saved record that no longer decodes, a spent retry budget) ends `interrupted` with a reason
-- a person can read. Engine-made text only: never a cause, a secret or stored content.

ALTER TABLE executions ADD COLUMN reason TEXT;
