//! `openbot admin ...`: maintenance commands that work on the database directly.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use futures::StreamExt;
use openbot_schema::ExecutionId;
use openbot_server::engine::Engine;
use openbot_server::sealed::KeyRing;

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
}

/// Runs the admin command.
pub async fn run(args: AdminArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        AdminCommand::Events { execution, after } => {
            let id: ExecutionId = execution.parse()?;
            let config = args.node.config();
            let store = openbot_server::node::open_store(&config).await?;
            // Reading events opens no sealed record; any key ring will do.
            let keys = openbot_server::node::key_ring(&config)
                .unwrap_or_else(|_| KeyRing::generate("reader").0);
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
