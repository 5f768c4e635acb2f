-- File retention per organization, and file deletion as durable work. A file row whose
-- `deleted_at` is set is being deleted: hidden at once, removed only after its object (the
-- `file_deletion` work that was submitted in the same transaction removes both).

CREATE TABLE file_retention (
    organization_id BLOB PRIMARY KEY REFERENCES organizations (id),
    days            INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);

-- The retention sweep reads each organization's files by age.
CREATE INDEX files_age ON files (organization_id, created_at) WHERE deleted_at IS NULL;
-- The sweep also picks up rows left deleting without their work (marked before this version).
CREATE INDEX files_deleting ON files (deleted_at) WHERE deleted_at IS NOT NULL;

-- When each scheduled sweep last ran (the retention sweep's durable timer counts from it).
CREATE TABLE file_sweeps (
    name     TEXT PRIMARY KEY,
    swept_at INTEGER NOT NULL
);
