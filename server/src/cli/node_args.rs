//! The options every command that opens the database shares.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use openbot_core::outbound::OutboundPolicy;
use openbot_server::node::{NodeConfig, default_node_name};
use openbot_server::platform::Platform;

/// Where the data is.
#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    /// The data folder (SQLite database, local files, key file).
    #[arg(long, env = "OPENBOT_DATA_DIR", default_value_os_t = default_data_dir())]
    pub data_dir: PathBuf,
    /// A PostgreSQL URL; run as one node of a multi-node deployment instead of SQLite.
    #[arg(long, env = "OPENBOT_DATABASE_URL")]
    pub database_url: Option<String>,
    /// This node's name, unique among running nodes (default: host, process and a random part).
    #[arg(long, env = "OPENBOT_NODE_NAME")]
    pub node_name: Option<String>,
    /// How long a node's lease on its work lasts, in milliseconds; another node takes the work
    /// over this long after the owner stopped renewing it.
    #[arg(long, env = "OPENBOT_LEASE_MS", default_value_t = 2000)]
    pub lease_ms: u64,
    /// The folder of the object store that keeps files' bytes (default: `objects` in the
    /// data folder). The nodes of one deployment must share it.
    #[arg(long, env = "OPENBOT_OBJECTS_DIR")]
    pub objects_dir: Option<PathBuf>,
    /// An S3 bucket (or an S3-compatible server's) for files' bytes instead of a folder:
    /// `s3://bucket/prefix`. Credentials, region and endpoint come from the standard variables
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`,
    /// `AWS_ALLOW_HTTP` for a local server). Not with --objects-dir.
    #[arg(long, env = "OPENBOT_OBJECTS_URL", conflicts_with = "objects_dir")]
    pub objects_url: Option<String>,
    /// Internal addresses outbound requests (models, HTTP tools) may reach, comma-separated:
    /// host names, ranges like 10.0.0.0/8, `loopback`, `private`, `any`, or `none`. Default:
    /// `loopback` on the embedded SQLite database (local development), `none` on PostgreSQL.
    #[arg(long, env = "OPENBOT_OUTBOUND_ALLOW")]
    pub outbound_allow: Option<String>,
    /// The folder scripted models (`scripted:<name>`) are read from; without it a server
    /// accepts no scripted models.
    #[arg(long, env = "OPENBOT_SCRIPTED_DIR")]
    pub scripted_dir: Option<PathBuf>,
    /// Allow stdio Apps: MCP servers the server starts as its own child processes from a
    /// registered command. Off by default; turn it on only where the members who register Apps
    /// (owners and admins) may run programs on this machine.
    #[arg(long, env = "OPENBOT_STDIO_APPS")]
    pub stdio_apps: bool,
    /// The wall time one Code Mode run may take, in milliseconds (its tool calls' waits
    /// included); a run past it ends with `code_mode.deadline_exceeded`.
    #[arg(long, env = "OPENBOT_CODE_WALL_MS", default_value_t = openbot_core::codemode::DEFAULT_WALL_MS)]
    pub code_wall_ms: u64,
}

fn default_data_dir() -> PathBuf {
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".local/share/openbot"),
        None => PathBuf::from(".openbot"),
    }
}

impl NodeArgs {
    /// The node configuration; sealing keys come from `OPENBOT_SEAL_KEYS` when set.
    pub fn config(&self) -> anyhow::Result<NodeConfig> {
        let default_allow = if self.database_url.is_some() {
            "none"
        } else {
            "loopback"
        };
        let outbound =
            OutboundPolicy::parse(self.outbound_allow.as_deref().unwrap_or(default_allow))
                .map_err(|e| anyhow::anyhow!("--outbound-allow: {e}"))?;
        let platform = Platform::new(outbound, self.scripted_dir.as_deref())?
            .with_stdio_apps(self.stdio_apps)
            .with_code_wall_ms(self.code_wall_ms);
        Ok(NodeConfig {
            data_dir: self.data_dir.clone(),
            database_url: self.database_url.clone(),
            seal_keys: std::env::var("OPENBOT_SEAL_KEYS")
                .ok()
                .filter(|k| !k.is_empty()),
            node_name: self.node_name.clone().unwrap_or_else(default_node_name),
            lease: Duration::from_millis(self.lease_ms.max(200)),
            max_connections: 16,
            objects_dir: self.objects_dir.clone(),
            objects_url: self.objects_url.clone(),
            platform,
        })
    }
}
