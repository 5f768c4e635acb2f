//! The resource directory: one table of the physical resources nodes hold (a process, a
//! session, a socket), each registered before its connection starts, owned by one node's
//! incarnation under a lease, and closed only by that owner, which saves each close's result.
//!
//! The rules (spec: "Each physical lease keeps its close result in the database ..."):
//! - any node asks for a close through [`Directory::close`]; it is routed to the owner over
//!   RPC, and what comes back is the owner's saved result, never a guess;
//! - a lost reply, an owner that cannot be reached, a node that is not alive: none is proof of
//!   release. The answer is then what the database says: the saved result if there is one,
//!   else still open (lease running) or [`ResourceStatus::Unknown`] (lease ran out, nothing
//!   saved);
//! - the owner closes on request, when its lease is lost, and when it cannot check its lease
//!   for a whole lease; a failed close saves an error ID whose full cause is sealed in the
//!   error records, and keeps it after the owner stops;
//! - the first saved result wins: a later close, or a late one from an old incarnation,
//!   changes nothing.

mod sql;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use uuid::Uuid;

use super::NodeStore;
use super::rpc::{NodeClient, OperationError, Operations};
use crate::sealed::KeyRing;
use crate::store::{StoreError, now_ms};

/// The RPC operation that asks an owner to close one of its resources.
pub const CLOSE: &str = "resource.close";

/// How long a node's lease on a resource runs without renewal (renewed every third of it).
pub const LEASE: Duration = Duration::from_secs(15);

/// How long a close routed to the owner waits for its answer before reading the saved row.
pub const CLOSE_DEADLINE: Duration = Duration::from_secs(10);

/// How a close ended, as saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseResult {
    /// Closed.
    Closed {
        /// When (ms since the epoch).
        at: i64,
    },
    /// The close failed; the full cause is sealed under `error_id`.
    Failed {
        /// The error ID of the sealed cause.
        error_id: Uuid,
        /// When (ms since the epoch).
        at: i64,
    },
}

/// One row of the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRow {
    /// Its ID.
    pub id: Uuid,
    /// What it is (`mcp.stdio`, `mcp.http`, ...).
    pub kind: String,
    /// What it belongs to, as cleanup waits for it (an App connection, a Chat, ...).
    pub scope: String,
    /// The node that holds it.
    pub owner_node: String,
    /// That node's incarnation: only it may close the resource or save its result.
    pub owner_incarnation: Uuid,
    /// The execution whose phase opened it, if any.
    pub execution_id: Option<Uuid>,
    /// That phase.
    pub phase: Option<String>,
    /// Until when the owner's lease runs (ms since the epoch).
    pub lease_until: i64,
    /// Its saved close result, if one was saved.
    pub closed: Option<CloseResult>,
    /// When it was registered.
    pub created_at: i64,
}

/// What is known about a resource's release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceStatus {
    /// Held, and its owner's lease runs.
    Open,
    /// Closed, as its owner saved.
    Closed,
    /// Its close failed, as its owner saved; the cause is sealed under `error_id`.
    Failed {
        /// The error ID.
        error_id: Uuid,
    },
    /// Its owner's lease ran out with no close result saved: it may still be held. Never
    /// taken as released.
    Unknown,
}

impl ResourceRow {
    /// The resource as the operator reads it at `now_ms`; a stored time out of range is
    /// [`StoreError::Invalid`].
    pub fn view(&self, now_ms: i64) -> Result<openbot_schema::PhysicalResource, StoreError> {
        use crate::store::stored_time;
        use openbot_schema::ResourceState;
        let (state, error_id) = match self.status(now_ms) {
            ResourceStatus::Open => (ResourceState::Open, None),
            ResourceStatus::Closed => (ResourceState::Closed, None),
            ResourceStatus::Failed { error_id } => (ResourceState::Failed, Some(error_id.into())),
            ResourceStatus::Unknown => (ResourceState::Unknown, None),
        };
        Ok(openbot_schema::PhysicalResource {
            id: self.id,
            kind: self.kind.clone(),
            scope: self.scope.clone(),
            owner_node: self.owner_node.clone(),
            owner_incarnation: self.owner_incarnation,
            execution_id: self.execution_id.map(Into::into),
            phase: self.phase.clone(),
            lease_until: stored_time(self.lease_until)?,
            state,
            error_id,
            created_at: stored_time(self.created_at)?,
        })
    }

    /// What the row says at `now_ms`.
    pub fn status(&self, now_ms: i64) -> ResourceStatus {
        match self.closed {
            Some(result) => result.status(),
            None if now_ms < self.lease_until => ResourceStatus::Open,
            None => ResourceStatus::Unknown,
        }
    }
}

impl CloseResult {
    /// What a resource with this saved result reads as.
    pub fn status(&self) -> ResourceStatus {
        match *self {
            CloseResult::Closed { .. } => ResourceStatus::Closed,
            CloseResult::Failed { error_id, .. } => ResourceStatus::Failed { error_id },
        }
    }
}

/// The `resources` table.
#[async_trait]
pub trait ResourceStore: Send + Sync {
    /// Registers a resource (before its connection starts).
    async fn register_resource(&self, row: &ResourceRow) -> Result<(), StoreError>;

    /// Extends the lease of `id` held by `incarnation`; `false` when it is not that
    /// incarnation's any more or a close result is saved (the lease is lost).
    async fn renew_resource(
        &self,
        id: Uuid,
        incarnation: Uuid,
        lease_until: i64,
    ) -> Result<bool, StoreError>;

    /// Saves the close result of `id` by its owner `incarnation`; `false`, changing nothing,
    /// when a result was saved before or `incarnation` is not its owner.
    async fn save_close(
        &self,
        id: Uuid,
        incarnation: Uuid,
        result: &CloseResult,
    ) -> Result<bool, StoreError>;

    /// The row of `id`.
    async fn resource(&self, id: Uuid) -> Result<Option<ResourceRow>, StoreError>;

    /// Every resource the phases of `execution` opened, oldest first.
    async fn resources_of_execution(&self, execution: Uuid)
    -> Result<Vec<ResourceRow>, StoreError>;

    /// Every resource of `scope`, oldest first, old routes included.
    async fn resources_of_scope(&self, scope: &str) -> Result<Vec<ResourceRow>, StoreError>;
}

/// A physical thing a node holds, which it alone can close.
#[async_trait]
pub trait Physical: Send + Sync {
    /// Closes it. The error is the full cause, sealed before anyone sees its error ID.
    async fn close(self: Box<Self>) -> Result<(), String>;
}

/// Why the directory could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No such resource.
    #[error("resource {0} is not in the directory")]
    NotFound(Uuid),
    /// The close of this resource stopped before it ended (its task panicked); its result is
    /// not saved, so it reads as open, then unknown.
    #[error("the close of resource {0} stopped before it ended")]
    CloseAborted(Uuid),
    /// A failed close's cause could not be sealed.
    #[error("the cause of a failed close could not be sealed: {0}")]
    Seal(String),
    /// A close of this phase's resources failed (its cause is sealed under this error ID):
    /// the phase opens nothing new.
    #[error("a close in this phase failed (error ID {0}); it sends nothing new")]
    Blocked(Uuid),
}

impl DirectoryError {
    /// A short name of the failure for logs, which never hold its full cause.
    pub fn kind(&self) -> &'static str {
        match self {
            DirectoryError::Store(err) => crate::engine::store_error_kind(err),
            DirectoryError::NotFound(_) => "not_found",
            DirectoryError::CloseAborted(_) => "close_aborted",
            DirectoryError::Seal(_) => "seal",
            DirectoryError::Blocked(_) => "blocked",
        }
    }
}

/// What this node holds: the physical resource once attached (none while its connection
/// starts), and since when its lease was last confirmed.
struct Held {
    physical: Option<Box<dyn Physical>>,
    confirmed_at: i64,
    /// A close was asked for while the connection was still starting: it runs on attach.
    close_requested: bool,
}

/// The other nodes, for routing a close to its owner.
#[derive(Clone)]
pub struct Peers {
    /// The cluster's nodes.
    pub nodes: Arc<dyn NodeStore>,
    /// This node's RPC client.
    pub client: NodeClient,
    /// How long a routed close waits for the owner's answer before reading the saved row.
    pub deadline: Duration,
}

/// One node's view of the directory: what it holds, and the way to everyone else's.
pub struct Directory {
    store: Arc<dyn ResourceStore>,
    records: Arc<dyn crate::store::Store>,
    keys: KeyRing,
    node: String,
    incarnation: Uuid,
    lease: Duration,
    held: Mutex<HashMap<Uuid, Held>>,
    /// Results this node could not save yet (the database was away), saved on its next pass.
    unsaved: Mutex<HashMap<Uuid, CloseResult>>,
    /// The way to the other nodes, once this node has RPC.
    peers: std::sync::OnceLock<Peers>,
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory")
            .field("node", &self.node)
            .field("incarnation", &self.incarnation)
            .finish_non_exhaustive()
    }
}

/// The settings of a node's directory.
pub struct DirectoryConfig {
    /// The `resources` table.
    pub store: Arc<dyn ResourceStore>,
    /// Where a failed close's cause is sealed (the error records).
    pub records: Arc<dyn crate::store::Store>,
    /// The key ring that seals it.
    pub keys: KeyRing,
    /// This node.
    pub node: String,
    /// This start of it.
    pub incarnation: Uuid,
    /// How long a lease runs without renewal.
    pub lease: Duration,
    /// The other nodes, when this node has RPC.
    pub peers: Option<Peers>,
}

impl Directory {
    /// A node's directory.
    pub fn new(config: DirectoryConfig) -> Arc<Self> {
        let peers = std::sync::OnceLock::new();
        if let Some(given) = config.peers {
            let _ = peers.set(given);
        }
        Arc::new(Self {
            store: config.store,
            records: config.records,
            keys: config.keys,
            node: config.node,
            incarnation: config.incarnation,
            lease: config.lease,
            held: Mutex::default(),
            unsaved: Mutex::default(),
            peers,
        })
    }

    /// Gives the directory the way to the other nodes (once; later calls change nothing).
    pub fn connect(&self, peers: Peers) {
        let _ = self.peers.set(peers);
    }

    /// This node's incarnation, which owns what it registers.
    pub fn incarnation(&self) -> Uuid {
        self.incarnation
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a resource of `kind` for `scope` (and the phase that opens it), owned by this
    /// node, before its connection starts. Attach it with [`Directory::attach`] once started.
    pub async fn register(
        &self,
        kind: &str,
        scope: &str,
        execution: Option<Uuid>,
        phase: Option<&str>,
    ) -> Result<Uuid, DirectoryError> {
        let now = now_ms();
        let row = ResourceRow {
            id: Uuid::now_v7(),
            kind: kind.to_string(),
            scope: scope.to_string(),
            owner_node: self.node.clone(),
            owner_incarnation: self.incarnation,
            execution_id: execution,
            phase: phase.map(str::to_string),
            lease_until: now + self.lease.as_millis() as i64,
            closed: None,
            created_at: now,
        };
        self.store.register_resource(&row).await?;
        self.held().insert(
            row.id,
            Held {
                physical: None,
                confirmed_at: now,
                close_requested: false,
            },
        );
        Ok(row.id)
    }

    /// Hands the started resource `id` to the directory, which closes it from now on (at
    /// once, when a close was asked for while it started).
    pub fn attach(self: &Arc<Self>, id: Uuid, physical: Box<dyn Physical>) {
        let close_now = match self.held().get_mut(&id) {
            Some(held) => {
                held.physical = Some(physical);
                held.close_requested
            }
            // Not held: nothing of this node's may stay open unowned.
            None => {
                drop(physical);
                false
            }
        };
        if close_now {
            let directory = Arc::clone(self);
            crate::telemetry::spawn(async move {
                if let Err(err) = directory.close_here(id).await {
                    tracing::warn!(resource = %id, error_kind = err.kind(), "a close asked for while the resource started was not saved");
                }
            });
        }
    }

    /// Gives up resource `id`, registered here, whose connection never started: saved
    /// closed, as there is nothing to close.
    pub async fn abandon(self: &Arc<Self>, id: Uuid) -> Result<ResourceStatus, DirectoryError> {
        let held = self.held().remove(&id);
        match held {
            Some(held) if held.physical.is_none() => {
                let result = CloseResult::Closed { at: now_ms() };
                match self.save(id, result).await? {
                    true => Ok(result.status()),
                    false => self.status(id).await,
                }
            }
            // Started after all: closed as any other.
            Some(held) => {
                self.held().insert(id, held);
                self.close_here(id).await
            }
            None => self.status(id).await,
        }
    }

    /// What the directory says about `id` now.
    pub async fn status(&self, id: Uuid) -> Result<ResourceStatus, DirectoryError> {
        let row = self
            .store
            .resource(id)
            .await?
            .ok_or(DirectoryError::NotFound(id))?;
        Ok(row.status(now_ms()))
    }

    /// Every resource of `scope` and what is known of its release, old routes included:
    /// cleanup is done when all are [`ResourceStatus::Closed`].
    pub async fn scope(&self, scope: &str) -> Result<Vec<(Uuid, ResourceStatus)>, DirectoryError> {
        let now = now_ms();
        Ok(self
            .store
            .resources_of_scope(scope)
            .await?
            .into_iter()
            .map(|row| (row.id, row.status(now)))
            .collect())
    }

    /// The resources of `scope` open now (their owner's lease runs, no close saved), newest
    /// first: where a call about the scope's live connection goes.
    pub async fn open_resources(&self, scope: &str) -> Result<Vec<ResourceRow>, DirectoryError> {
        let now = now_ms();
        let mut open: Vec<ResourceRow> = self
            .store
            .resources_of_scope(scope)
            .await?
            .into_iter()
            .filter(|row| row.status(now) == ResourceStatus::Open)
            .collect();
        open.reverse();
        Ok(open)
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The way to the other nodes, once this node has RPC.
    pub fn peers(&self) -> Option<&Peers> {
        self.peers.get()
    }

    /// Closes `id`, wherever it is held: here, or by its owner over RPC. The answer is the
    /// saved result, or, when the owner's answer did not come, what the database says
    /// (still open, or unknown): never a release nobody saved.
    pub async fn close(self: &Arc<Self>, id: Uuid) -> Result<ResourceStatus, DirectoryError> {
        // Held here: closed here, without reading the row first (every App call ends so).
        if self.held().contains_key(&id) {
            return self.close_here(id).await;
        }
        let row = self
            .store
            .resource(id)
            .await?
            .ok_or(DirectoryError::NotFound(id))?;
        if row.closed.is_some() {
            return Ok(row.status(now_ms()));
        }
        if row.owner_incarnation == self.incarnation {
            return self.close_here(id).await;
        }
        let Some(peers) = self.peers.get() else {
            return Ok(row.status(now_ms()));
        };
        let owner = peers.nodes.node(&row.owner_node).await?;
        // The same incarnation only: a restarted owner no longer holds what its old start
        // did, but nothing says it was closed.
        if let Some(owner) = owner.filter(|o| o.incarnation == row.owner_incarnation) {
            let body = json!({ "id": id }).to_string().into_bytes();
            let called = peers
                .client
                .call(&owner, CLOSE, body, peers.deadline, &format!("close-{id}"))
                .await;
            if let Err(err) = called {
                tracing::info!(resource = %id, owner = %row.owner_node, may_have_run = err.may_have_run(), "a close routed to its owner got no answer; reading its saved result");
            }
        }
        // Whatever the call said, the saved row is the answer.
        self.status(id).await
    }

    /// Closes every resource of `scope` not closed yet, each by its owner (old routes
    /// included), and answers what is known of each afterwards: cleanup of the scope is done
    /// when all are [`ResourceStatus::Closed`].
    pub async fn close_scope(
        self: &Arc<Self>,
        scope: &str,
    ) -> Result<Vec<(Uuid, ResourceStatus)>, DirectoryError> {
        let mut statuses = Vec::new();
        for row in self.store.resources_of_scope(scope).await? {
            let status = match row.closed {
                Some(result) => result.status(),
                None => self.close(row.id).await?,
            };
            statuses.push((row.id, status));
        }
        Ok(statuses)
    }

    /// Closes `id`, held by this node, and saves the result (the first saved wins). The close
    /// runs in a task of its own: a caller that stops waiting (an RPC cut off at its deadline)
    /// never leaves a close half done and unsaved.
    async fn close_here(self: &Arc<Self>, id: Uuid) -> Result<ResourceStatus, DirectoryError> {
        let taken = {
            let mut held = self.held();
            match held.get_mut(&id) {
                // Still starting: closed when it is attached; until then it is open.
                Some(starting) if starting.physical.is_none() => {
                    starting.close_requested = true;
                    None
                }
                _ => held.remove(&id),
            }
        };
        let Some(held) = taken else {
            // Not held (any more), or starting: the row says.
            return self.status(id).await;
        };
        let directory = Arc::clone(self);
        let closing = crate::telemetry::spawn(async move {
            let result = match held.physical {
                // Taken only once attached (see above).
                None => CloseResult::Closed { at: now_ms() },
                Some(physical) => match physical.close().await {
                    Ok(()) => CloseResult::Closed { at: now_ms() },
                    Err(cause) => CloseResult::Failed {
                        error_id: directory.seal_cause(id, &cause).await?,
                        at: now_ms(),
                    },
                },
            };
            Ok::<_, DirectoryError>(directory.save(id, result).await?.then_some(result))
        });
        let saved = closing
            .await
            .map_err(|_| DirectoryError::CloseAborted(id))??;
        match saved {
            Some(result) => Ok(result.status()),
            // Another result was saved first: that one stands.
            None => self.status(id).await,
        }
    }

    /// Seals a failed close's full cause in the error records; returns its error ID.
    async fn seal_cause(&self, id: Uuid, cause: &str) -> Result<Uuid, DirectoryError> {
        let error_id = Uuid::now_v7();
        let text = format!("closing resource {id} failed: {cause}");
        let blob = self
            .keys
            .seal(error_id, text.as_bytes())
            .map_err(|err| DirectoryError::Seal(err.to_string()))?;
        self.records
            .put_error_record(None, "resource", blob)
            .await?;
        Ok(error_id)
    }

    /// Saves `result`; `false` when a result was saved before (the first stands).
    async fn save(&self, id: Uuid, result: CloseResult) -> Result<bool, DirectoryError> {
        // A database that does not answer keeps the result for the next pass (saving it
        // twice changes nothing: the first saved stands).
        let saved = tokio::time::timeout(
            self.lease / 3,
            self.store.save_close(id, self.incarnation, &result),
        )
        .await
        .unwrap_or(Err(StoreError::Unavailable(sqlx::Error::PoolTimedOut)));
        match saved {
            Ok(saved) => Ok(saved),
            Err(err) => {
                // Kept, and saved on the lease keeper's next pass: the same error ID.
                self.unsaved
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id, result);
                Err(err.into())
            }
        }
    }

    /// One pass of the lease keeper: renews every lease this node holds; closes what it lost
    /// or could not confirm for a whole lease; saves results it could not save before.
    pub async fn keep_leases_once(self: &Arc<Self>) {
        let now = now_ms();
        let unsaved: Vec<(Uuid, CloseResult)> = self
            .unsaved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .collect();
        for (id, result) in unsaved {
            if let Err(err) = self.save(id, result).await {
                tracing::warn!(resource = %id, error_kind = err.kind(), "a close result is still unsaved");
            }
        }
        let ids: Vec<(Uuid, i64)> = self
            .held()
            .iter()
            .map(|(id, held)| (*id, held.confirmed_at))
            .collect();
        let lease_ms = self.lease.as_millis() as i64;
        for (id, confirmed_at) in ids {
            // Not confirmed for a whole lease (the node was frozen, or the database away):
            // others may have read it as unknown, so it is closed, never quietly renewed.
            if now - confirmed_at >= lease_ms {
                tracing::warn!(resource = %id, "the lease of a resource lapsed unconfirmed; closing it");
                let _ = self.close_here(id).await;
                continue;
            }
            match self.renew(id, now + lease_ms).await {
                Ok(true) => {
                    if let Some(held) = self.held().get_mut(&id) {
                        held.confirmed_at = now;
                    }
                }
                Ok(false) => {
                    tracing::warn!(resource = %id, "lost the lease of a resource; closing it");
                    let _ = self.close_here(id).await;
                }
                // Tried again on the next pass, until the lease lapses (above).
                Err(_) => {}
            }
        }
    }

    /// Extends this node's lease of `id` to `until`. A database that does not answer (a cut
    /// link) is a failed check, not a wait; a failure is tried once more at once, since the
    /// first try may have met a connection the database had already ended.
    async fn renew(&self, id: Uuid, until: i64) -> Result<bool, StoreError> {
        let mut tries = 0;
        loop {
            tries += 1;
            let renewed = tokio::time::timeout(
                self.lease / 6,
                self.store.renew_resource(id, self.incarnation, until),
            )
            .await
            .unwrap_or(Err(StoreError::Unavailable(sqlx::Error::PoolTimedOut)));
            match renewed {
                Err(_) if tries < 2 => continue,
                other => return other,
            }
        }
    }

    /// Runs the lease keeper (a pass every third of a lease) until `stop`.
    pub fn keep_leases(self: &Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let directory = Arc::clone(self);
        let every = self.lease / 3;
        crate::telemetry::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(every) => directory.keep_leases_once().await,
                    () = stop.cancelled() => return,
                }
            }
        });
    }

    /// `operations` with [`CLOSE`]: another node asking this one to close what it holds.
    pub fn operations(self: &Arc<Self>, operations: Operations) -> Operations {
        let directory = Arc::clone(self);
        operations.with(CLOSE, move |call| {
            let directory = Arc::clone(&directory);
            async move {
                let asked: serde_json::Value = serde_json::from_slice(&call.body)
                    .map_err(|_| OperationError::BadRequest("not a close request".into()))?;
                let id = asked["id"]
                    .as_str()
                    .and_then(|id| id.parse::<Uuid>().ok())
                    .ok_or_else(|| OperationError::BadRequest("no resource ID".into()))?;
                let status = directory.close(id).await.map_err(|err| match err {
                    DirectoryError::NotFound(_) => OperationError::BadRequest(err.to_string()),
                    _ => OperationError::Failed("the close could not be saved".into()),
                })?;
                Ok(status_json(&status).to_string().into_bytes())
            }
        })
    }
}

fn status_json(status: &ResourceStatus) -> serde_json::Value {
    match status {
        ResourceStatus::Open => json!({"status": "open"}),
        ResourceStatus::Closed => json!({"status": "closed"}),
        ResourceStatus::Failed { error_id } => json!({"status": "failed", "error_id": error_id}),
        ResourceStatus::Unknown => json!({"status": "unknown"}),
    }
}

/// Registers the directory's store with the capabilities' features ([`store`]).
pub fn register(
    features: crate::features::Features,
    store: Arc<dyn ResourceStore>,
) -> crate::features::Features {
    features.with(store)
}

/// The directory's store, as [`register`] left it.
pub fn store(features: &crate::features::Features) -> Option<&Arc<dyn ResourceStore>> {
    features.get::<Arc<dyn ResourceStore>>()
}

/// Registers this node's running directory with the capabilities' features, where the phases
/// that open physical resources find it ([`runtime`]).
pub fn with_runtime(
    features: crate::features::Features,
    directory: Arc<Directory>,
) -> crate::features::Features {
    features.with(directory)
}

/// This node's running directory, as [`with_runtime`] left it.
pub fn runtime(features: &crate::features::Features) -> Option<&Arc<Directory>> {
    features.get::<Arc<Directory>>()
}

/// Where a phase's physical resources are registered: the node's directory, and the
/// execution and phase they belong to. A close of the phase's resources that fails blocks
/// the phase's new sends (spec: "A close failure keeps its full cause and a safe error ID. It
/// blocks new sends."): every later [`PhaseScope::register`] is refused with its error ID.
#[derive(Debug, Clone)]
pub struct PhaseScope {
    directory: Arc<Directory>,
    execution: Uuid,
    phase: String,
    /// The error ID of the phase's first failed close, once one failed.
    failed: Arc<std::sync::OnceLock<Uuid>>,
}

impl PhaseScope {
    /// The resources of `phase` of `execution`, in `directory`.
    pub fn new(directory: Arc<Directory>, execution: Uuid, phase: String) -> Self {
        Self {
            directory,
            execution,
            phase,
            failed: Arc::default(),
        }
    }

    /// Registers a resource of `kind` for `scope` in this phase, before its connection
    /// starts; [`DirectoryError::Blocked`] once a close of this phase failed.
    pub async fn register(&self, kind: &str, scope: &str) -> Result<Uuid, DirectoryError> {
        if let Some(error_id) = self.failed.get() {
            return Err(DirectoryError::Blocked(*error_id));
        }
        self.directory
            .register(kind, scope, Some(self.execution), Some(&self.phase))
            .await
    }

    /// Hands the started resource `id` to the directory, which closes it from now on.
    pub fn attach(&self, id: Uuid, physical: Box<dyn Physical>) {
        self.directory.attach(id, physical);
    }

    /// Gives up `id`, whose connection never started (saved closed: nothing to close).
    pub async fn abandon(&self, id: Uuid) -> Result<ResourceStatus, DirectoryError> {
        self.directory.abandon(id).await
    }

    /// Closes `id` and answers its saved result; a failed one blocks the phase's new sends.
    pub async fn close(&self, id: Uuid) -> Result<ResourceStatus, DirectoryError> {
        let status = self.directory.close(id).await?;
        if let ResourceStatus::Failed { error_id } = status {
            let _ = self.failed.set(error_id);
        }
        Ok(status)
    }
}
