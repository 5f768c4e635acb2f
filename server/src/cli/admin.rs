//! `openbot admin ...`: maintenance commands that work on the database directly.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use futures::StreamExt;
use openbot_schema::{ErrorId, ExecutionId};
use openbot_server::engine::Engine;
use openbot_server::identity::{NewToken, Right, new_secret, secret_hash};
use openbot_server::operator::{OperatorActor, read_error};
use openbot_server::store::category_name;

use super::node_args::NodeArgs;

/// Arguments of `openbot admin`.
#[derive(Debug, Args)]
pub struct AdminArgs {
    #[command(flatten)]
    node: NodeArgs,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Prints an execution's events after a cursor as JSON lines, following it to its end.
    Events {
        /// The execution.
        execution: String,
        /// Start after this sequence.
        #[arg(long, default_value_t = 0)]
        after: u64,
    },
    /// Manages API tokens of the deployment's owner.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Credits of an organization, granted by the platform.
    Credits {
        #[command(subcommand)]
        command: CreditsCommand,
    },
    /// Error records: the sealed cause behind an error ID (each read is audited).
    Errors {
        #[command(subcommand)]
        command: ErrorsCommand,
    },
    /// Operator tokens: the platform operator's credential for `/v1/admin/...` (no member's).
    OperatorToken {
        #[command(subcommand)]
        command: OperatorTokenCommand,
    },
    /// The cluster's nodes as registered (docs/cluster.md), a JSON line each: name,
    /// incarnation, RPC address, start, last heartbeat, whether it left, whether it is alive.
    Nodes {
        #[command(flatten)]
        through: ThroughServer,
    },
    /// The resource directory's rows of one scope or one execution, a JSON line each, with
    /// what is known of their release (`open`, `closed`, `failed` with its error ID, `unknown`).
    Resources {
        #[command(flatten)]
        through: ThroughServer,
        /// The scope, e.g. `app_connection:<id>`.
        #[arg(
            long,
            conflicts_with = "execution",
            required_unless_present = "execution"
        )]
        scope: Option<String>,
        /// The execution whose phases opened them.
        #[arg(long)]
        execution: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum ErrorsCommand {
    /// Opens an error record: its category, time, execution (if any) and full cause. The read
    /// is written to the operator audit (as `local:<account>`) before the cause is opened.
    Show {
        /// The error ID an answer (`openbot-error-id`) or a `failed` event gave.
        id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        through: ThroughServer,
    },
}

/// Where an operator's read goes: the database (the default), or a server's `/v1/admin/...`
/// route with an operator token.
#[derive(Debug, clap::Args)]
struct ThroughServer {
    /// Read through this server's `/v1/admin/...` route instead of the database (with an
    /// operator token: --operator-token or OPENBOT_OPERATOR_TOKEN).
    #[arg(long)]
    server: Option<String>,
    /// The operator token, with --server.
    #[arg(
        long,
        env = "OPENBOT_OPERATOR_TOKEN",
        hide_env_values = true,
        requires = "server"
    )]
    operator_token: Option<String>,
}

impl ThroughServer {
    /// The server's client, when --server was given.
    fn client(&self) -> anyhow::Result<Option<openbot_core::RemoteClient>> {
        let Some(server) = &self.server else {
            return Ok(None);
        };
        let options = openbot_core::ConnectOptions {
            token: self.operator_token.clone(),
            ..openbot_core::ConnectOptions::default()
        };
        Ok(Some(openbot_core::RemoteClient::new(server, options)?))
    }
}

#[derive(Debug, Subcommand)]
enum OperatorTokenCommand {
    /// Creates an operator token and prints its secret (shown only once). It works only on
    /// `/v1/admin/...` routes, and no member's token works there.
    Create {
        /// A name for the token, kept in the audit of what it reads.
        #[arg(long, default_value = "operator")]
        name: String,
    },
}

#[derive(Debug, Subcommand)]
enum CreditsCommand {
    /// Grants credits to an organization as the platform (a ledger entry with no member) and
    /// prints its balance as JSON. The first grant puts the organization on credits.
    Grant {
        /// The organization's ID.
        #[arg(long)]
        organization: uuid::Uuid,
        /// How much, in US dollars, e.g. 25.
        #[arg(long)]
        usd: f64,
        /// Why, for the ledger.
        #[arg(long)]
        note: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Creates an owner token with every right and prints its secret (shown only once).
    Create {
        /// A name for the token.
        #[arg(long, default_value = "admin")]
        name: String,
    },
}

/// Runs the admin command.
pub async fn run(args: AdminArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        AdminCommand::Token {
            command: TokenCommand::Create { name },
        } => {
            let config = args.node.config()?;
            let database = openbot_server::node::open_database(&config).await?;
            let owner = database.identity.first_owner().await?.ok_or_else(|| {
                anyhow::anyhow!("this deployment has no owner yet: start `openbot serve` once")
            })?;
            let secret = new_secret();
            let token = NewToken {
                id: uuid::Uuid::now_v7(),
                name,
                secret_hash: secret_hash(&secret),
                rights: Right::all(),
                bot_ids: None,
                expires_at: None,
            };
            database
                .identity
                .create_token(owner.member_id, token)
                .await?;
            println!("{secret}");
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::Credits {
            command:
                CreditsCommand::Grant {
                    organization,
                    usd,
                    note,
                },
        } => {
            anyhow::ensure!(
                usd.is_finite() && usd > 0.0 && usd < 1e12,
                "--usd must be more than 0"
            );
            let micros = (usd * 1e6).round() as i64;
            let config = args.node.config()?;
            let database = openbot_server::node::open_database(&config).await?;
            let balance = database
                .billing
                .grant_credits(organization, micros, None, note.as_deref())
                .await?;
            println!(
                "{}",
                serde_json::json!({
                    "organization_id": organization,
                    "balance_micros": balance.balance_micros,
                    "held_micros": balance.held_micros,
                })
            );
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::Errors {
            command: ErrorsCommand::Show { id, json, through },
        } => {
            let id: ErrorId = id.parse()?;
            let record = match through.client()? {
                Some(client) => {
                    use openbot_core::Operations;
                    client.get_error(&id).await?
                }
                None => {
                    let config = args.node.config()?;
                    let database = openbot_server::node::open_database(&config).await?;
                    let keys = openbot_server::node::key_ring(&config)?;
                    let actor = OperatorActor::Local(local_account());
                    read_error(operator_store(&database)?.as_ref(), &keys, id, &actor)
                        .await?
                        .ok_or_else(|| anyhow::anyhow!("no error record has the ID {id}"))?
                }
            };
            if json {
                println!("{}", serde_json::to_string(&record)?);
            } else {
                println!("error     {}", record.error_id);
                println!("category  {}", category_name(record.category));
                println!("time      {}", record.created_at.to_rfc3339());
                if let Some(execution) = record.execution_id {
                    println!("execution {execution}");
                }
                println!("cause     {}", record.cause);
            }
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::OperatorToken {
            command: OperatorTokenCommand::Create { name },
        } => {
            let config = args.node.config()?;
            let database = openbot_server::node::open_database(&config).await?;
            let secret = new_secret();
            operator_store(&database)?
                .create_operator_token(uuid::Uuid::now_v7(), &name, &secret_hash(&secret))
                .await?;
            println!("{secret}");
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::Nodes { through } => nodes(&args.node, &through).await,
        AdminCommand::Resources {
            through,
            scope,
            execution,
        } => resources(&args.node, &through, scope, execution).await,
        AdminCommand::Events { execution, after } => {
            let id: ExecutionId = execution.parse()?;
            let config = args.node.config()?;
            // The store opens each event's sealed payload with the deployment's key ring.
            let store = openbot_server::node::open_store(&config).await?;
            let keys = openbot_server::node::key_ring(&config)?;
            let engine = Engine::open(store, keys, config.node_name.clone());
            let mut events = engine.observe(id, after);
            let mut stdout = std::io::stdout().lock();
            while let Some(event) = events.next().await {
                writeln!(stdout, "{}", serde_json::to_string(&event?)?)?;
                stdout.flush()?;
            }
            engine.shutdown().await;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The account that runs this command, for the operator audit: `USER@host` when known.
fn local_account() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("USERNAME"))
        .unwrap_or_else(|_| "unknown".to_string());
    match hostname() {
        Some(host) => format!("{user}@{host}"),
        None => user,
    }
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
}

/// The operator's store as its capability registered it.
fn operator_store(
    database: &openbot_server::node::Database,
) -> anyhow::Result<&std::sync::Arc<dyn openbot_server::operator::OperatorStore>> {
    openbot_server::operator::store(&database.features)
        .ok_or_else(|| anyhow::anyhow!("the operator's store was not registered"))
}

/// `openbot admin nodes`: the `nodes` table, a JSON line each.
async fn nodes(node: &NodeArgs, through: &ThroughServer) -> anyhow::Result<ExitCode> {
    let nodes = match through.client()? {
        Some(client) => {
            use openbot_core::Operations;
            client.list_cluster_nodes().await?.nodes
        }
        None => {
            let config = node.config()?;
            let database = openbot_server::node::open_database(&config).await?;
            let now = openbot_server::store::now_ms();
            openbot_server::cluster::store(&database.features)
                .ok_or_else(|| anyhow::anyhow!("this database has no nodes table"))?
                .nodes()
                .await?
                .iter()
                .map(|node| node.view(now))
                .collect::<Result<_, _>>()?
        }
    };
    for node in nodes {
        println!("{}", serde_json::to_string(&node)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// `openbot admin resources`: the directory's rows of a scope or an execution, a JSON line each.
async fn resources(
    node: &NodeArgs,
    through: &ThroughServer,
    scope: Option<String>,
    execution: Option<String>,
) -> anyhow::Result<ExitCode> {
    let execution: Option<ExecutionId> = execution.map(|id| id.parse()).transpose()?;
    let resources = match through.client()? {
        Some(client) => {
            use openbot_core::Operations;
            let execution = execution.map(|id| id.to_string());
            client
                .list_physical_resources(scope.as_deref(), execution.as_deref())
                .await?
                .resources
        }
        None => {
            let config = node.config()?;
            let database = openbot_server::node::open_database(&config).await?;
            let store = openbot_server::cluster::directory::store(&database.features)
                .ok_or_else(|| anyhow::anyhow!("this database has no resources table"))?;
            let rows = match (scope, execution) {
                (Some(scope), _) => store.resources_of_scope(&scope).await?,
                (None, Some(execution)) => {
                    store.resources_of_execution(execution.as_uuid()).await?
                }
                (None, None) => anyhow::bail!("give --scope or --execution"),
            };
            let now = openbot_server::store::now_ms();
            rows.iter()
                .map(|row| row.view(now))
                .collect::<Result<_, _>>()?
        }
    };
    for resource in resources {
        println!("{}", serde_json::to_string(&resource)?);
    }
    Ok(ExitCode::SUCCESS)
}
