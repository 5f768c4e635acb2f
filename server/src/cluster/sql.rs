//! The `nodes` table on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use const_format::concatcp;
use sqlx::Row as _;
use uuid::Uuid;

use super::{NodeRecord, NodeStore};
use crate::store::{StoreError, both_backends};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const REGISTER_NODE: &str = "INSERT INTO nodes (name, incarnation, rpc_address, started_at, heartbeat_at, left_at) \
             VALUES ($1, $2, $3, $4, $5, NULL) \
             ON CONFLICT (name) DO UPDATE SET incarnation = excluded.incarnation, \
                 rpc_address = excluded.rpc_address, started_at = excluded.started_at, \
                 heartbeat_at = excluded.heartbeat_at, left_at = NULL";
    const BEAT: &str = "UPDATE nodes SET heartbeat_at = $3 \
             WHERE name = $1 AND incarnation = $2 AND left_at IS NULL";
    const LEAVE: &str = "UPDATE nodes SET left_at = $3 WHERE name = $1 AND incarnation = $2";
    const ROWS: &str =
        "SELECT name, incarnation, rpc_address, started_at, heartbeat_at, left_at FROM nodes";
    const NODES: &str = concatcp!(ROWS, " ORDER BY name");
    const NODE: &str = concatcp!(ROWS, " WHERE name = $1");

    fn node_from(row: &Row) -> Result<NodeRecord, StoreError> {
        Ok(NodeRecord {
            name: row.try_get("name")?,
            incarnation: row.try_get::<Uuid, _>("incarnation")?,
            rpc_address: row.try_get("rpc_address")?,
            started_at: row.try_get("started_at")?,
            heartbeat_at: row.try_get("heartbeat_at")?,
            left_at: row.try_get("left_at")?,
        })
    }

    #[async_trait]
    impl NodeStore for Store {
        async fn register_node(&self, node: &NodeRecord) -> Result<(), StoreError> {
            sqlx::query(REGISTER_NODE)
                .bind(&node.name)
                .bind(node.incarnation)
                .bind(&node.rpc_address)
                .bind(node.started_at)
                .bind(node.heartbeat_at)
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn beat(&self, name: &str, incarnation: Uuid, at: i64) -> Result<bool, StoreError> {
            let done = sqlx::query(BEAT)
                .bind(name)
                .bind(incarnation)
                .bind(at)
                .execute(self.writer())
                .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn leave(&self, name: &str, incarnation: Uuid, at: i64) -> Result<(), StoreError> {
            sqlx::query(LEAVE)
                .bind(name)
                .bind(incarnation)
                .bind(at)
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn nodes(&self) -> Result<Vec<NodeRecord>, StoreError> {
            let rows = sqlx::query(NODES).fetch_all(self.reader()).await?;
            rows.iter().map(node_from).collect()
        }

        async fn node(&self, name: &str) -> Result<Option<NodeRecord>, StoreError> {
            let row = sqlx::query(NODE)
                .bind(name)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(node_from).transpose()
        }
    }
}
