//! The cluster: the nodes of one deployment, which know each other from the `nodes` table and
//! call each other over private, authenticated RPC (docs/cluster.md).
//!
//! A node with an RPC listener (`--rpc-bind`) registers itself at start (its name, a new
//! incarnation, the address other nodes call it on) and beats its heart while it runs; it
//! marks itself gone when it stops. Whether a node is alive is read from its last beat, and is
//! never taken as proof that what it owned was released: a silent node may still be running.
//! The RPC itself is in [`rpc`]: signed requests a member can neither forge nor replay, with
//! deadlines, request IDs and typed failures.

pub mod directory;
pub mod rpc;
mod sql;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

use crate::store::StoreError;

/// How often a node beats its heart.
pub const HEARTBEAT: Duration = Duration::from_secs(2);

/// A node is taken as alive while its last beat is younger than this (three beats).
pub const ALIVE_FOR: Duration = Duration::from_secs(6);

/// One node as registered in the `nodes` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecord {
    /// Its name (`--node-name`), unique among running nodes.
    pub name: String,
    /// This start of it: a node restarted under the same name is a new incarnation.
    pub incarnation: Uuid,
    /// Where other nodes call it (`host:port`).
    pub rpc_address: String,
    /// When it started (ms since the epoch).
    pub started_at: i64,
    /// Its last heartbeat (ms since the epoch).
    pub heartbeat_at: i64,
    /// When it said it stopped, if it did.
    pub left_at: Option<i64>,
}

impl NodeRecord {
    /// The node as the operator reads it at `now_ms`; a stored time out of range is
    /// [`StoreError::Invalid`].
    pub fn view(&self, now_ms: i64) -> Result<openbot_schema::ClusterNode, StoreError> {
        use crate::store::{stored_time, stored_time_opt};
        Ok(openbot_schema::ClusterNode {
            name: self.name.clone(),
            incarnation: self.incarnation,
            rpc_address: self.rpc_address.clone(),
            started_at: stored_time(self.started_at)?,
            heartbeat_at: stored_time(self.heartbeat_at)?,
            left_at: stored_time_opt(self.left_at)?,
            alive: self.alive(now_ms),
        })
    }

    /// Whether it counts as alive at `now_ms`: it has not left and beat within [`ALIVE_FOR`].
    pub fn alive(&self, now_ms: i64) -> bool {
        self.left_at.is_none() && now_ms - self.heartbeat_at < ALIVE_FOR.as_millis() as i64
    }
}

/// The `nodes` table.
#[async_trait]
pub trait NodeStore: Send + Sync {
    /// Registers `node` under its name, replacing an earlier incarnation of the same name.
    async fn register_node(&self, node: &NodeRecord) -> Result<(), StoreError>;

    /// Records a heartbeat of incarnation `incarnation` of `name` at `at`. Returns `false`,
    /// changing nothing, when the name now belongs to another incarnation (or left): the caller
    /// is a replaced node and must stop acting as that node.
    async fn beat(&self, name: &str, incarnation: Uuid, at: i64) -> Result<bool, StoreError>;

    /// Marks incarnation `incarnation` of `name` as gone at `at`.
    async fn leave(&self, name: &str, incarnation: Uuid, at: i64) -> Result<(), StoreError>;

    /// Every registered node, by name.
    async fn nodes(&self) -> Result<Vec<NodeRecord>, StoreError>;

    /// The node registered under `name`, if any.
    async fn node(&self, name: &str) -> Result<Option<NodeRecord>, StoreError>;
}

/// Registers the cluster's store with the capabilities' features, where the node's start and
/// the operator's routes find it ([`store`]).
pub fn register(
    features: crate::features::Features,
    store: Arc<dyn NodeStore>,
) -> crate::features::Features {
    features.with(store)
}

/// The cluster's store, as [`register`] left it.
pub fn store(features: &crate::features::Features) -> Option<&Arc<dyn NodeStore>> {
    features.get::<Arc<dyn NodeStore>>()
}

/// This node's place in the cluster while it runs: registered, beating its heart.
pub struct Membership {
    /// This node as registered.
    pub node: NodeRecord,
    store: Arc<dyn NodeStore>,
    stop: tokio_util::sync::CancellationToken,
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Membership {
    /// Registers this node (incarnation `incarnation` of `name`, a new one per start, called
    /// at `rpc_address`) and beats
    /// its heart every [`HEARTBEAT`] until [`Membership::leave`]. When its name is taken by
    /// a newer incarnation, it stops beating and says so in the log.
    pub async fn join(
        store: Arc<dyn NodeStore>,
        name: &str,
        incarnation: Uuid,
        rpc_address: &str,
    ) -> Result<Self, StoreError> {
        let now = crate::store::now_ms();
        let node = NodeRecord {
            name: name.to_string(),
            incarnation,
            rpc_address: rpc_address.to_string(),
            started_at: now,
            heartbeat_at: now,
            left_at: None,
        };
        store.register_node(&node).await?;
        let stop = tokio_util::sync::CancellationToken::new();
        let (beating, stopped) = (Arc::clone(&store), stop.clone());
        let (name, incarnation) = (node.name.clone(), node.incarnation);
        crate::telemetry::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(HEARTBEAT) => {}
                    () = stopped.cancelled() => return,
                }
                match beating
                    .beat(&name, incarnation, crate::store::now_ms())
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::error!(
                            node = %name,
                            "this node's name was registered again by another start; it no longer beats its heart"
                        );
                        return;
                    }
                    Err(err) => tracing::warn!(
                        error_kind = crate::engine::store_error_kind(&err),
                        "a heartbeat failed"
                    ),
                }
            }
        });
        Ok(Self { node, store, stop })
    }

    /// Stops beating and marks this node gone, so the others stop calling it at once.
    pub async fn leave(self) -> Result<(), StoreError> {
        self.stop.cancel();
        self.store
            .leave(
                &self.node.name,
                self.node.incarnation,
                crate::store::now_ms(),
            )
            .await
    }
}
