-- The cluster's nodes: each `openbot serve` with a private RPC listener registers itself (its
-- name, the address other nodes call it on, its incarnation, when it started) and beats its
-- heart here. A node restarted under the same name is a new incarnation: the old one's beats
-- no longer count.

CREATE TABLE nodes (
    name         TEXT PRIMARY KEY,
    incarnation  UUID NOT NULL,
    rpc_address  TEXT NOT NULL,
    started_at   BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    left_at      BIGINT
);
