//! `openbot admin ...`: maintenance commands that work on the database directly.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use futures::StreamExt;
use openbot_schema::ExecutionId;
use openbot_server::engine::Engine;
use openbot_server::identity::{NewToken, Right, new_secret, secret_hash};

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
