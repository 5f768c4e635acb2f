//! A node: one `openbot serve` process. It opens the database, the key ring and the engine,
//! and runs the registered workflows until it is stopped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::engine::{Engine, Registry, RunnerConfig};
use crate::identity::{IdentityStore, NewToken};
use crate::platform::Platform;
use crate::sealed::{KeyRing, KeyRingError};
use crate::store::{PostgresStore, SqliteStore, Store, StoreError};
use crate::turns::{PhaseSetup, TurnWorkflow};
use crate::work::ToolJobWorkflow;

/// Where a node keeps its data and how it runs.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The data folder: the SQLite database and, without `seal_keys`, the key file.
    pub data_dir: PathBuf,
    /// A PostgreSQL URL: run as one node of a multi-node deployment instead of SQLite.
    pub database_url: Option<String>,
    /// The sealing key ring as text (`id:base64key,...`); every node of a deployment needs
    /// the same keys. Without it the key file in the data folder is used (created if missing).
    pub seal_keys: Option<String>,
    /// This node's name, unique among running nodes.
    pub node_name: String,
    /// How long a lease lasts without renewal.
    pub lease: Duration,
    /// The most PostgreSQL connections.
    pub max_connections: u32,
    /// The folder of the object store (files' bytes); `<data_dir>/objects` by default. Nodes
    /// of one deployment must share it.
    pub objects_dir: Option<PathBuf>,
    /// An S3 bucket for the object store instead of a folder (`s3://bucket/prefix`), with its
    /// credentials, region and endpoint from the standard `AWS_*` variables. Every node of a
    /// PostgreSQL deployment uses the same one.
    pub objects_url: Option<String>,
    /// What outbound requests may reach, the platform's keys, where scripted models come from.
    pub platform: Platform,
}

/// A node that cannot start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The database could not be opened or is at another schema version.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The key ring could not be read.
    #[error(transparent)]
    Keys(#[from] KeyRingError),
    /// The data folder could not be created.
    #[error("data folder {path}: {source}")]
    DataDir {
        /// The folder.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The data folder has no database yet.
    #[error("there is no database at {0}: run `openbot migrate` first (with the same --data-dir)")]
    NoDatabase(String),
    /// PostgreSQL needs shared keys.
    #[error("a PostgreSQL node needs the sealing keys every node shares: set OPENBOT_SEAL_KEYS")]
    MissingSharedKeys,
}

/// The folder of a node's object store (the bytes of files).
pub fn objects_dir(config: &NodeConfig) -> PathBuf {
    config
        .objects_dir
        .clone()
        .unwrap_or_else(|| config.data_dir.join("objects"))
}

/// Where the SQLite database of a data folder is.
pub fn sqlite_path(data_dir: &Path) -> PathBuf {
    data_dir.join("openbot.db")
}

/// An open database: the same connections serve the engine and identity.
#[derive(Clone)]
pub struct Database {
    /// The engine's store.
    pub store: Arc<dyn Store>,
    /// Organizations, members and tokens.
    pub identity: Arc<dyn IdentityStore>,
    /// Bots.
    pub bots: Arc<dyn crate::bots::BotStore>,
    /// Chats.
    pub chats: Arc<dyn crate::chats::ChatStore>,
    /// The model registry.
    pub models: Arc<dyn crate::models::ModelRegistryStore>,
    /// Budgets.
    pub budgets: Arc<dyn crate::budgets::BudgetStore>,
    /// Prices, credits and usage records.
    pub billing: Arc<dyn crate::billing::BillingStore>,
    /// The tool registry.
    pub tools: Arc<dyn crate::tools::ToolStore>,
    /// Approval rules.
    pub rules: Arc<dyn crate::approvals::RuleStore>,
    /// File descriptions (their bytes are in the object store).
    pub files: Arc<dyn crate::files::FileStore>,
    /// Shared limits: permits and token buckets.
    pub limits: Arc<dyn crate::limits::LimitStore>,
    /// The object store of files' bytes, when the node has one ([`Database::with_objects`]):
    /// the node then runs file deletions and the retention sweep.
    pub objects: Option<Arc<dyn object_store::ObjectStore>>,
    /// Bots' memories.
    pub memories: Arc<dyn crate::memories::MemoryStore>,
    /// Vault items, their sealed fields and rules.
    pub vaults: Arc<dyn crate::vaults::VaultStore>,
    /// Triggers and their firings.
    pub triggers: Arc<dyn crate::triggers::TriggerStore>,
    /// Reminders.
    pub reminders: Arc<dyn crate::reminders::ReminderStore>,
    /// Channels, their conversations' Chats and their inputs with their sends.
    pub channels: Arc<dyn crate::channels::ChannelStore>,
    /// Apps and their Connections.
    pub apps: Arc<dyn crate::apps::AppStore>,
    /// OAuth for App connections: connections, browser steps, grants, the grant-use table.
    pub oauth: Arc<dyn crate::apps::oauth::OAuthStore>,
    /// What the capabilities that plug in by themselves registered (the operator's store, the
    /// cluster's `nodes` table).
    pub features: crate::features::Features,
}

impl Database {
    /// One database serving every store.
    pub fn on<S>(store: Arc<S>) -> Self
    where
        S: Store
            + IdentityStore
            + crate::bots::BotStore
            + crate::chats::ChatStore
            + crate::models::ModelRegistryStore
            + crate::budgets::BudgetStore
            + crate::billing::BillingStore
            + crate::tools::ToolStore
            + crate::approvals::RuleStore
            + crate::files::FileStore
            + crate::limits::LimitStore
            + crate::memories::MemoryStore
            + crate::vaults::VaultStore
            + crate::triggers::TriggerStore
            + crate::reminders::ReminderStore
            + crate::channels::ChannelStore
            + crate::apps::AppStore
            + crate::apps::oauth::OAuthStore
            + crate::operator::OperatorStore
            + crate::cluster::NodeStore
            + crate::cluster::directory::ResourceStore
            + crate::computers::ComputerStore,
    {
        Self {
            store: store.clone(),
            identity: store.clone(),
            bots: store.clone(),
            chats: store.clone(),
            models: store.clone(),
            budgets: store.clone(),
            billing: store.clone(),
            tools: store.clone(),
            rules: store.clone(),
            limits: store.clone(),
            memories: store.clone(),
            vaults: store.clone(),
            triggers: store.clone(),
            reminders: store.clone(),
            channels: store.clone(),
            apps: store.clone(),
            oauth: store.clone(),
            features: crate::computers::register(
                crate::cluster::directory::register(
                    crate::cluster::register(
                        crate::operator::register(
                            crate::features::Features::default(),
                            store.clone(),
                        ),
                        store.clone(),
                    ),
                    store.clone(),
                ),
                store.clone(),
            ),
            files: store,
            objects: None,
        }
    }

    /// The same database, with this node's running resource directory, which the phases
    /// that open physical resources (MCP sessions) register them in, and the links of the
    /// machines that connect to this node.
    pub fn with_directory(mut self, directory: Arc<crate::cluster::directory::Directory>) -> Self {
        let links = crate::computers::Links::new(
            Arc::clone(&directory),
            crate::computers::store(&self.features).cloned(),
        );
        self.features = crate::computers::with_links(
            crate::cluster::directory::with_runtime(self.features, directory),
            links,
        );
        self
    }

    /// The same database, with the object store its files' bytes live in.
    pub fn with_objects(mut self, objects: Arc<dyn object_store::ObjectStore>) -> Self {
        self.objects = Some(objects);
        self
    }
}

/// Opens the configured database, which must be at this build's schema version: a server
/// never changes the schema (`openbot migrate` does). The store seals and opens row payloads
/// with the configured key ring, the same one [`start`] gives the engine.
pub async fn open_database(config: &NodeConfig) -> Result<Database, NodeError> {
    Ok(open_database_and_keys(config).await?.0)
}

/// [`open_database`], with the key ring it read, for the engine and the resource directory
/// of the same node (read once).
pub async fn open_database_and_keys(config: &NodeConfig) -> Result<(Database, KeyRing), NodeError> {
    match &config.database_url {
        Some(url) => {
            let keys = key_ring(config)?;
            let store = PostgresStore::connect(url, config.max_connections, keys.clone()).await?;
            Ok((Database::on(Arc::new(store)), keys))
        }
        None => {
            let path = sqlite_path(&config.data_dir);
            if !path.exists() {
                return Err(NodeError::NoDatabase(path.display().to_string()));
            }
            // Read only once the database is there: a data folder gets its keys with it.
            let keys = key_ring(config)?;
            let store = SqliteStore::open(&path, keys.clone()).await?;
            Ok((Database::on(Arc::new(store)), keys))
        }
    }
}

/// Opens the configured database's engine store.
pub async fn open_store(config: &NodeConfig) -> Result<Arc<dyn Store>, NodeError> {
    Ok(open_database(config).await?.store)
}

/// On the first start of a deployment, creates the first organization, its owner and an
/// owner token with every right, and returns the token's secret (to be shown once).
/// Returns `None` when the deployment was set up before.
pub async fn bootstrap(identity: &dyn IdentityStore) -> Result<Option<String>, NodeError> {
    let (secret, token) = NewToken::with_every_right("admin");
    Ok(identity
        .bootstrap("default", "admin@localhost", token)
        .await?
        .then_some(secret))
}

/// What `openbot migrate` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// The schema version the database is at now.
    pub version: i64,
    /// How many rows an older build wrote in clear text were sealed now; `None` when no key
    /// ring is configured (PostgreSQL without `OPENBOT_SEAL_KEYS`), so none could be.
    pub sealed_rows: Option<u64>,
}

/// Applies the schema migrations to the configured database, then seals the payloads an
/// older build wrote in clear text with the configured key ring (a migration file has no
/// keys; see [`crate::store::RecordStore::seal_clear_rows`]). Without a key ring on PostgreSQL the clear rows
/// stay as they are (they are still read) until it runs again with the keys.
pub async fn migrate(config: &NodeConfig) -> Result<Migrated, NodeError> {
    let version = match &config.database_url {
        Some(url) => PostgresStore::migrate(url).await?,
        None => {
            std::fs::create_dir_all(&config.data_dir).map_err(|source| NodeError::DataDir {
                path: config.data_dir.display().to_string(),
                source,
            })?;
            SqliteStore::migrate(&sqlite_path(&config.data_dir)).await?
        }
    };
    let sealed_rows = match open_database(config).await {
        Ok(database) => Some(database.store.seal_clear_rows().await?),
        Err(NodeError::MissingSharedKeys) => None,
        Err(err) => return Err(err),
    };
    Ok(Migrated {
        version,
        sealed_rows,
    })
}

/// Reads the key ring from the configuration or the data folder.
pub fn key_ring(config: &NodeConfig) -> Result<KeyRing, NodeError> {
    match (&config.seal_keys, &config.database_url) {
        (Some(text), _) => Ok(KeyRing::parse(text)?),
        (None, Some(_)) => Err(NodeError::MissingSharedKeys),
        (None, None) => Ok(KeyRing::load_or_create(&config.data_dir.join("seal-keys"))?),
    }
}

/// The workflows every node runs, reaching the outside as `platform` allows; with a database,
/// Turns build their models from their organization's provider settings and check their
/// saved identity's current rights.
///
/// [`tool_routing`] is the other half: what a Turn's tools are, decided when it is submitted.
pub fn registry(database: Option<&Database>, platform: &Platform) -> Registry {
    let setup = match database {
        Some(database) => PhaseSetup::on_database(platform.clone(), database),
        None => PhaseSetup::new(platform.clone()),
    };
    let mut turns = TurnWorkflow::new(setup.clone());
    if let Some(database) = database {
        turns = turns
            .with_model_registry(Arc::clone(&database.models))
            .with_admission(Arc::clone(&database.rules), Arc::clone(&database.chats))
            .with_feature(Arc::new(crate::limits::LimitsFeature(
                crate::limits::Limits::new(Arc::clone(&database.limits)),
            )))
            .with_feature(Arc::new(crate::memories::MemoryFeature::new(
                Arc::clone(&database.memories),
                platform.clone(),
                Arc::clone(&database.models),
                Arc::clone(&database.identity),
            )));
        if let Some(objects) = &database.objects {
            turns = turns.with_feature(Arc::new(crate::files::FilesFeature(
                crate::files::FileReader::new(Arc::clone(objects), Arc::clone(&database.files)),
            )));
        }
    }
    // Last: Code Mode goes over every tool the features before it added.
    let turns = turns.with_feature(Arc::new(crate::codemode::CodeModeFeature(
        platform.code_limits(),
    )));
    let jobs = ToolJobWorkflow::new(setup.clone());
    let mut registry = Registry::new();
    registry.register(Arc::new(turns));
    registry.register(Arc::new(jobs));
    if let Some(database) = database {
        registry.register(Arc::new(crate::chats::ChatDeletionWorkflow::new(
            Arc::clone(&database.chats),
        )));
        registry.register(Arc::new(crate::bots::BotDeletionWorkflow::new(Arc::clone(
            &database.bots,
        ))));
        if let Some(objects) = &database.objects {
            registry.register(Arc::new(crate::files::FileDeletionWorkflow::new(
                Arc::clone(objects),
            )));
            registry.register(Arc::new(crate::files::RetentionSweepWorkflow::new(
                Arc::clone(&database.files),
            )));
        }
        registry.register(Arc::new(crate::codemode::CodeRunWorkflow::new(
            setup.clone(),
            Arc::clone(&database.rules),
        )));
        registry.register(Arc::new(crate::memories::MemoryLearningWorkflow::new(
            platform.clone(),
            database,
            setup.clone(),
        )));
        let firing = crate::triggers::FiringStores {
            triggers: Arc::clone(&database.triggers),
            identity: Arc::clone(&database.identity),
            chats: Arc::clone(&database.chats),
            bots: Arc::clone(&database.bots),
            routing: tool_routing(database),
        };
        registry.register(Arc::new(crate::reminders::ReminderWorkflow::new(
            Arc::clone(&database.reminders),
            firing.clone(),
        )));
        registry.register(Arc::new(crate::channels::DeliveryWorkflow::new(
            Arc::clone(&database.channels),
            firing.clone(),
            crate::channels::ChannelHttp::new(platform),
        )));
        registry.register(Arc::new(crate::channels::RemovalWorkflow::new(Arc::clone(
            &database.channels,
        ))));
        registry.register(Arc::new(crate::triggers::ScheduleWorkflow::new(firing)));
        crate::apps::oauth::OAuth::register(
            &mut registry,
            Arc::clone(&database.oauth),
            platform,
            &crate::apps::oauth::OAuthConfig::default(),
            Some(Arc::new(crate::apps::AppStatusWrite)),
        );
    }
    registry
}

/// The node's object store: the S3 bucket of `--objects-url`, else the objects folder.
pub fn objects(
    config: &NodeConfig,
) -> Result<Arc<dyn object_store::ObjectStore>, crate::files::FileError> {
    match &config.objects_url {
        Some(url) => crate::files::s3_objects(url),
        None => crate::files::local_objects(&objects_dir(config)),
    }
}

/// Opens the engine of a node and starts running work, sealing with `keys` (those the database
/// was opened with, [`open_database_and_keys`]); its Turns read attached files from the
/// database's object store ([`Database::with_objects`]).
pub async fn start(
    config: &NodeConfig,
    database: &Database,
    keys: KeyRing,
) -> Result<Engine, NodeError> {
    let engine = Engine::open(Arc::clone(&database.store), keys, config.node_name.clone());
    let runner = RunnerConfig {
        lease: config.lease,
        ..RunnerConfig::default()
    };
    let workflows = registry(Some(database), &config.platform);
    if config.database_url.is_none() {
        // One node: work of a kind this build has no workflow for can run nowhere.
        let ended = engine.interrupt_other_kinds(&workflows.kinds()).await?;
        if ended > 0 {
            tracing::warn!(ended, "interrupted work whose workflow kind no node runs");
        }
    }
    engine.start_runner(workflows, runner).await;
    if database.objects.is_some() {
        // One sweep per deployment: a node finds it there, or submits it.
        crate::files::ensure_sweep(engine.context())
            .await
            .map_err(|e| match e {
                crate::engine::EngineError::Store(err) => NodeError::Store(err),
                other => NodeError::Store(StoreError::Invalid(other.to_string())),
            })?;
    }
    // Grants handed to cleanup just before a crash get their work now.
    if let Err(err) =
        crate::apps::oauth::resume_cleanups(engine.context(), database.oauth.as_ref()).await
    {
        tracing::warn!(error = %err, "could not resume OAuth grant cleanups");
    }
    Ok(engine)
}

/// A node name: the host name, the process ID and a random part.
pub fn default_node_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".into());
    format!(
        "{host}-{}-{}",
        std::process::id(),
        &uuid::Uuid::now_v7().simple().to_string()[24..]
    )
}

/// Where a Turn's tools come from, decided when input is submitted (see
/// [`crate::chats::ToolRouting`]): an App's tools first, then the organization's HTTP tools and
/// delegates; any other name is a host tool. Plan mode and reminders add their own tool.
pub fn tool_routing(database: &Database) -> crate::chats::ToolRouting {
    let routing = crate::chats::ToolRouting::default();
    // The Computer tools a granted Bot names (first: those names are the Computer's).
    let routing = match crate::computers::store(&database.features) {
        Some(store) => routing.with_source(Arc::new(crate::computers::tool::ComputerTools(
            Arc::clone(store),
        ))),
        None => routing,
    };
    routing
        .with_source(Arc::new(crate::apps::AppTools(Arc::clone(&database.apps))))
        .with_source(Arc::new(crate::tools::HttpTools(Arc::clone(
            &database.tools,
        ))))
        .with_source(Arc::new(crate::tools::DelegateTools::new(
            Arc::clone(&database.tools),
            Arc::clone(&database.bots),
        )))
        .with_offer(Arc::new(crate::chats::PlanOffer))
        .with_offer(Arc::new(crate::reminders::RemindOffer))
}
