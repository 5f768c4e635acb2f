//! The command line: one subcommand per file.

mod admin;
mod client;
#[cfg(test)]
mod coverage;
mod migrate;
mod node_args;
mod printer;
mod run;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// OpenBot: run AI agents in-process or as a server.
#[derive(Debug, Parser)]
#[command(name = "openbot", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log lines are written to standard error: `text` or `json` (one object per line,
    /// with the fields of the request or execution it belongs to).
    #[arg(
        long,
        global = true,
        env = "OPENBOT_LOG_FORMAT",
        default_value = "text"
    )]
    pub log_format: openbot_server::telemetry::LogFormat,
    /// Exports traces over OTLP/HTTP to this base URL (`/v1/traces` is added), as
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` does; the standard `OTEL_*` variables work without it.
    #[arg(long, global = true, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
}

impl Cli {
    /// What telemetry this command line asks for, with the log filter of `OPENBOT_LOG`.
    pub fn telemetry(&self) -> openbot_server::telemetry::TelemetryConfig {
        openbot_server::telemetry::TelemetryConfig {
            log_format: self.log_format,
            log_filter: std::env::var("OPENBOT_LOG").ok(),
            otlp_endpoint: self.otlp_endpoint.clone(),
            service_name: None,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs one Turn of an agent in this process and streams its answer.
    Run(run::RunArgs),
    /// Runs a node: the durable engine on SQLite (default) or PostgreSQL.
    Serve(serve::ServeArgs),
    /// Brings the database to this build's schema version.
    Migrate(migrate::MigrateArgs),
    /// Maintenance commands on the database.
    Admin(admin::AdminArgs),
    /// Prints the OpenAPI document of the HTTP API (committed at schema/openapi.json).
    Openapi,
    /// Checks a server and an API token and saves them for the commands below.
    Login(client::login::LoginArgs),
    /// Approvals on a server: decide tool calls that wait for a person, and set the rules.
    Approvals(client::approvals::ApprovalsArgs),
    /// Bots on a server.
    Bots(client::bots::BotsArgs),
    /// Code Mode on a server: run a program against a Bot's tools with no model.
    Code(client::code::CodeArgs),
    /// Budgets on a server: caps on what an organization, a Bot or a Chat may spend.
    Budgets(client::budgets::BudgetsArgs),
    /// Computers on a server: approve a machine's pairing code, list and remove Computers.
    Computers(client::computers::ComputersArgs),
    /// This machine as a Computer of a server: `pair` shows a code, waits for a member's
    /// approval and keeps the machine's own credential.
    Computer(client::computers::ComputerArgs),
    /// A Bot's memories on a server: list, add, edit, delete, search; memory settings.
    Memories(client::memories::MemoriesArgs),
    /// Shared limits on a server: permits and requests or tokens per window, per scope.
    Limits(client::limits::LimitsArgs),
    /// Files on a server: upload, list, show, download, delete; the organization's retention.
    Files(client::files::FilesArgs),
    /// Members of your organization on a server: list, remove.
    Members(client::members::MembersArgs),
    /// Invitations to your organization on a server: create, list, revoke, accept.
    Invitations(client::members::InvitationsArgs),
    /// Your API tokens on a server: list, create, revoke.
    Tokens(client::tokens::TokensArgs),
    /// The organization's model providers on a server: API keys and base URLs.
    Providers(client::providers::ProvidersArgs),
    /// Model prices on a server: the catalog's and the organization's.
    Prices(client::billing::PricesArgs),
    /// The organization's credits on a server: balance, grants, ledger.
    Credits(client::billing::CreditsArgs),
    /// Whether a server answers.
    Health(client::health::HealthArgs),
    /// OAuth sign-in of App connections on a server: authorize, complete, status, remove.
    Oauth(client::oauth::OAuthArgs),
    /// Usage and cost of model calls on a server, by organization, Bot, Chat, member or model
    /// (a table, `--json` lines or `--csv`).
    Usage(client::usage::UsageArgs),
    /// Chats on a server: send input and stream the reply.
    Chats(client::chats::ChatsArgs),
    /// The organization's HTTP and delegate tools on a server.
    Tools(client::tools::ToolsArgs),
    /// Vault items on a server: secret fields (never shown) and who may read them.
    Vaults(client::vaults::VaultsArgs),
    /// Apps on a server: MCP servers as tool sources, their Connections and discovery.
    Apps(client::apps::AppsArgs),
    /// Organizations of your account on a server: list, create.
    Organizations(client::organizations::OrganizationsArgs),
    /// Executions on a server: show, follow, cancel.
    Executions(client::executions::ExecutionsArgs),
    /// Triggers on a server: schedules and signed webhooks that send input to a Chat.
    Triggers(client::triggers::TriggersArgs),
    /// Reminders a Chat's Bot set on a server: list, cancel.
    Reminders(client::triggers::RemindersArgs),
    /// Channels on a server: a Bot connected to Slack or Telegram, its inputs and sends.
    Channels(client::channels::ChannelsArgs),
}

/// Runs the chosen subcommand.
pub async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Serve(args) => serve::run(args).await,
        Command::Migrate(args) => migrate::run(args).await,
        Command::Admin(args) => admin::run(args).await,
        Command::Login(args) => client::login::run(args).await,
        Command::Approvals(args) => client::approvals::run(args).await,
        Command::Bots(args) => client::bots::run(args).await,
        Command::Budgets(args) => client::budgets::run(args).await,
        Command::Computers(args) => client::computers::run(args).await,
        Command::Computer(args) => client::computers::run_machine(args).await,
        Command::Memories(args) => client::memories::run(args).await,
        Command::Code(args) => client::code::run(args).await,
        Command::Usage(args) => client::usage::run(args).await,
        Command::Chats(args) => client::chats::run(args).await,
        Command::Limits(args) => client::limits::run(args).await,
        Command::Files(args) => client::files::run(args).await,
        Command::Members(args) => client::members::run(args).await,
        Command::Invitations(args) => client::members::run_invitations(args).await,
        Command::Tokens(args) => client::tokens::run(args).await,
        Command::Providers(args) => client::providers::run(args).await,
        Command::Prices(args) => client::billing::run_prices(args).await,
        Command::Credits(args) => client::billing::run_credits(args).await,
        Command::Health(args) => client::health::run(args).await,
        Command::Oauth(args) => client::oauth::run(args).await,
        Command::Executions(args) => client::executions::run(args).await,
        Command::Tools(args) => client::tools::run(args).await,
        Command::Vaults(args) => client::vaults::run(args).await,
        Command::Apps(args) => client::apps::run(args).await,
        Command::Organizations(args) => client::organizations::run(args).await,
        Command::Triggers(args) => client::triggers::run(args).await,
        Command::Reminders(args) => client::triggers::run_reminders(args).await,
        Command::Channels(args) => client::channels::run(args).await,
        Command::Openapi => {
            println!("{}", openbot_server::http::openapi_json());
            Ok(ExitCode::SUCCESS)
        }
    }
}
