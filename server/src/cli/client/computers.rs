//! `openbot computers` (a member: approve pairing codes, list, remove and grant Computers) and
//! `openbot computer` (the machine: pair with a server, keep its credential, run its agent).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{
    ApprovePairing, BotId, ClaimPairing, Computer, ComputerPage, GrantComputer, StartPairing,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::ServerArgs;
use super::paging::{PageArgs, list};
use super::profile::{config_dir, write_private};

/// Arguments of `openbot computers`.
#[derive(Debug, Args)]
pub struct ComputersArgs {
    #[command(subcommand)]
    command: ComputersCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum ComputersCommand {
    /// Approves the code `openbot computer pair` shows on a machine: the machine becomes your
    /// Computer (or, with --shared, the organization's).
    Approve {
        /// The code, e.g. ABCD-EFGH (any case, with or without the dash).
        code: String,
        /// The organization's Computer instead of yours (owners and admins).
        #[arg(long)]
        shared: bool,
    },
    /// Lists your Computers and the organization's shared ones.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Shows a Computer.
    Show {
        /// The Computer's ID.
        id: Uuid,
    },
    /// Removes a Computer: its credential stops working at once and its link ends.
    Remove {
        /// The Computer's ID.
        id: Uuid,
    },
    /// Grants a Computer to a Bot: the Bot's Turns get the Computer tools on it. Its calls
    /// that change the machine wait for your approval unless --no-ask.
    Grant {
        /// The Computer's ID.
        id: Uuid,
        /// The Bot's ID.
        #[arg(long)]
        bot: Uuid,
        /// Let the Bot start, type into and close terminals and write files without asking.
        #[arg(long)]
        no_ask: bool,
    },
    /// Prints a terminal session's output on a Computer (the session's ID is in the Bot's
    /// computer_terminal_start result), read on the machine through its link.
    Output {
        /// The Computer's ID.
        id: Uuid,
        /// The terminal session's ID.
        session: String,
        /// Print the chunks after this cursor (a next_cursor); 0 prints from the start.
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// Keep reading until the session's program ends.
        #[arg(long)]
        follow: bool,
    },
    /// Takes a Computer back from a Bot.
    Revoke {
        /// The Computer's ID.
        id: Uuid,
        /// The Bot's ID.
        #[arg(long)]
        bot: Uuid,
    },
}

fn line(computer: &Computer) -> String {
    let owner = match computer.owner_member_id {
        Some(member) => format!("member {member}"),
        None => "shared".into(),
    };
    let paired = if computer.paired_at.is_some() {
        "paired"
    } else {
        "waiting for the machine"
    };
    format!("{}  {}  {owner}  {paired}", computer.id, computer.name)
}

/// Runs `openbot computers`.
pub async fn run(args: ComputersArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        ComputersCommand::Approve { code, shared } => {
            let computer = client
                .approve_pairing(&ApprovePairing { code, shared })
                .await?;
            output.print(&computer, |c| format!("approved: {}", line(c)))?;
        }
        ComputersCommand::List { page } => {
            list::<ComputerPage>(
                &client,
                "/v1/computers",
                &page,
                output,
                line,
                "no Computers",
            )
            .await?;
        }
        ComputersCommand::Show { id } => {
            output.print(&client.get_computer(&id).await?, line)?;
        }
        ComputersCommand::Remove { id } => {
            client.remove_computer(&id).await?;
            output.print(&serde_json::json!({"removed": id}), |_| {
                format!("removed Computer {id}; its credential no longer works")
            })?;
        }
        ComputersCommand::Grant { id, bot, no_ask } => {
            let grant = client
                .grant_computer(&id, &BotId::from(bot), &GrantComputer { ask: !no_ask })
                .await?;
            output.print(&grant, |g| {
                let asks = if g.ask {
                    "its calls that change the machine ask first"
                } else {
                    "it does not ask first"
                };
                format!(
                    "granted Computer {} to Bot {}; {asks}",
                    g.computer_id, g.bot_id
                )
            })?;
        }
        ComputersCommand::Output {
            id,
            session,
            after,
            follow,
        } => {
            let mut cursor = after;
            loop {
                let wait = if follow { Some(10_000) } else { None };
                let out = client
                    .terminal_output(&id, &session, Some(cursor), wait)
                    .await?;
                cursor = out.next_cursor;
                output.print(&out, |o| {
                    let mut text = o.text();
                    if o.dropped > 0 {
                        text = format!("[{} chunks no longer kept]\n{text}", o.dropped);
                    }
                    if o.exited {
                        let code = o.exit_code.map(|c| format!(" ({c})")).unwrap_or_default();
                        text.push_str(&format!("\n[exited{code}]"));
                    }
                    text
                })?;
                if !follow || out.exited {
                    break;
                }
            }
        }
        ComputersCommand::Revoke { id, bot } => {
            client.revoke_computer(&id, &BotId::from(bot)).await?;
            output.print(&serde_json::json!({"revoked": id, "bot_id": bot}), |_| {
                format!("took Computer {id} back from Bot {bot}")
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `openbot computer`.
#[derive(Debug, Args)]
pub struct ComputerArgs {
    #[command(subcommand)]
    command: ComputerCommand,
}

#[derive(Debug, Subcommand)]
enum ComputerCommand {
    /// Pairs this machine with a server: shows a code for a member to approve
    /// (`openbot computers approve CODE`), waits for the approval, and keeps the machine's own
    /// credential in a file only this user can read.
    Pair {
        /// The server, e.g. https://openbot.example.com.
        #[arg(long, env = "OPENBOT_SERVER")]
        server: String,
        /// The Computer's name (default: this machine's host name).
        #[arg(long)]
        name: Option<String>,
        /// Where to keep the credential (default: computer.json in the CLI's folder).
        #[arg(long)]
        credential_file: Option<PathBuf>,
        /// Print JSON lines (the code, then the result) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Links this paired machine to its server and keeps the link (linking again with
    /// backoff when it ends), so that Bots granted the Computer work on it: terminals and
    /// files inside the folders given here only. Stops when the server refuses the machine
    /// (the Computer was removed).
    Run {
        /// A folder the Computer's file tools reach and its terminals start in (repeat for
        /// more; the first is where relative paths start).
        #[arg(long = "folder", required = true)]
        folders: Vec<PathBuf>,
        /// Offer files only: no terminal sessions.
        #[arg(long)]
        no_terminal: bool,
        /// A local MCP server this machine publishes as a Connector (repeat for more):
        /// `NAME=URL` for a streamable HTTP endpoint, `NAME=COMMAND ARG...` for a stdio server
        /// the agent starts. An admin registers it as an App of the organization.
        #[arg(long = "connector", value_name = "NAME=URL|NAME=COMMAND")]
        connectors: Vec<openbot_core::computer::connector::ConnectorSpec>,
        /// Where `openbot computer pair` kept the credential (default: computer.json in the
        /// CLI's folder).
        #[arg(long)]
        credential_file: Option<PathBuf>,
        /// A node of the server to link to (repeat for several: after a link ends, the agent
        /// links to the next); default: the server it paired with.
        #[arg(long = "server")]
        servers: Vec<String>,
        /// Print JSON lines (linked, unlinked, refused) instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// What `openbot computer pair` keeps: the machine's credential for its server.
#[derive(Debug, Serialize, Deserialize)]
struct SavedComputer {
    server: String,
    computer_id: Uuid,
    credential: String,
}

fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "computer".into())
}

/// Where the machine's credential is kept: `credential_file`, else computer.json in the CLI's
/// folder.
fn credential_path(credential_file: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    Ok(match credential_file {
        Some(path) => path,
        None => config_dir()?.join("computer.json"),
    })
}

/// Runs `openbot computer`.
pub async fn run_machine(args: ComputerArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ComputerCommand::Pair {
            server,
            name,
            credential_file,
            json,
        } => pair(server, name, credential_path(credential_file)?, json).await,
        ComputerCommand::Run {
            folders,
            no_terminal,
            connectors,
            credential_file,
            servers,
            json,
        } => {
            let path = credential_path(credential_file)?;
            let text = std::fs::read_to_string(&path).map_err(|err| {
                anyhow::anyhow!(
                    "cannot read {} ({}): pair this machine first with `openbot computer pair`",
                    path.display(),
                    err.kind()
                )
            })?;
            let saved: SavedComputer = serde_json::from_str(&text)
                .map_err(|_| anyhow::anyhow!("{} is not a saved Computer", path.display()))?;
            let mut options = openbot_core::computer::ComputerOptions::new(folders);
            if no_terminal {
                options = options.without_terminal();
            }
            super::computer_agent::Agent {
                servers: if servers.is_empty() {
                    vec![saved.server]
                } else {
                    servers
                },
                computer_id: saved.computer_id,
                credential: saved.credential,
                options,
                connectors,
                json,
            }
            .run()
            .await
        }
    }
}

async fn pair(
    server: String,
    name: Option<String>,
    path: PathBuf,
    json: bool,
) -> anyhow::Result<ExitCode> {
    // The machine has no credential yet: these two calls need none.
    let client = openbot_core::RemoteClient::new(&server, openbot_core::ConnectOptions::default())?;
    let pairing = client
        .start_pairing(&StartPairing {
            name: name.unwrap_or_else(host_name),
        })
        .await?;
    if json {
        println!(
            "{}",
            serde_json::json!({"code": pairing.code, "expires_at": pairing.expires_at})
        );
    } else {
        println!(
            "Pairing code: {}\nApprove it with `openbot computers approve {}` (until {}).",
            pairing.code, pairing.code, pairing.expires_at
        );
    }
    let claim = ClaimPairing {
        secret: pairing.secret,
    };
    loop {
        // A claim is safe to repeat (each one voids the credential before): a lost answer
        // is asked again.
        let answer = match client.claim_pairing(&pairing.id, &claim).await {
            Ok(answer) => answer,
            Err(err) if err.code == openbot_schema::ErrorCode::Unavailable => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(err) => return Err(err.into()),
        };
        if let (Some(computer_id), Some(credential)) = (answer.computer_id, answer.credential) {
            let saved = SavedComputer {
                server: server.clone(),
                computer_id,
                credential,
            };
            write_private(&path, &serde_json::to_string_pretty(&saved)?)?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({"computer_id": computer_id, "credential_file": path})
                );
            } else {
                println!(
                    "Paired as Computer {computer_id}; its credential is in {}.",
                    path.display()
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
