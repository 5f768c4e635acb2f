//! The cluster as the platform operator sees it: its nodes (`GET /v1/admin/nodes`) and the
//! physical resources they hold (`GET /v1/admin/resources`). Only an operator token reads them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::ids::{ErrorId, ExecutionId};

/// One node of the deployment, as it registered itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ClusterNode {
    /// Its name (`--node-name`).
    pub name: String,
    /// This start of it; a restart under the same name is a new incarnation.
    pub incarnation: Uuid,
    /// Where other nodes call it (its private RPC listener).
    pub rpc_address: String,
    /// When this incarnation started.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat.
    pub heartbeat_at: DateTime<Utc>,
    /// When it stopped, if it said so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub left_at: Option<DateTime<Utc>>,
    /// Whether it beat its heart lately and has not left. Never proof that what it held was
    /// released.
    pub alive: bool,
}

/// The cluster's nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ClusterNodes {
    /// Every node that ever registered, by name.
    pub nodes: Vec<ClusterNode>,
}

/// What is known about a physical resource's release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum ResourceState {
    /// Held, and its owner's lease runs.
    Open,
    /// Closed, as its owner saved.
    Closed,
    /// Its close failed, as its owner saved (see `error_id`).
    Failed,
    /// Its owner's lease ran out with no close saved: it may still be held.
    Unknown,
}

/// One physical resource a node holds or held (an MCP stdio process, an MCP HTTP session, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct PhysicalResource {
    /// Its ID.
    pub id: Uuid,
    /// What it is (`mcp.stdio`, `mcp.http`, ...).
    pub kind: String,
    /// What it belongs to, as cleanup waits for it (`app_connection:<id>`, ...).
    pub scope: String,
    /// The node that holds it.
    pub owner_node: String,
    /// That node's incarnation, the only one that may close it.
    pub owner_incarnation: Uuid,
    /// The execution whose phase opened it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub execution_id: Option<ExecutionId>,
    /// That phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub phase: Option<String>,
    /// Until when its owner's lease runs.
    pub lease_until: DateTime<Utc>,
    /// What is known about its release.
    pub state: ResourceState,
    /// For `failed`: the error ID of the sealed cause (`GET /v1/admin/errors/{id}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub error_id: Option<ErrorId>,
    /// When it was registered (before its connection started).
    pub created_at: DateTime<Utc>,
}

/// Physical resources, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct PhysicalResources {
    /// The resources.
    pub resources: Vec<PhysicalResource>,
}

/// Which resources `GET /v1/admin/resources` lists: those of one scope, or those one
/// execution's phases opened (exactly one of the two).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ResourceFilter {
    /// A scope, e.g. `app_connection:<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// An execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(value_type = Option<uuid::Uuid>, nullable = false)]
    pub execution_id: Option<ExecutionId>,
}
