//! `openbot tokens`: your member's API tokens on a server: list, create (with fewer rights or
//! fewer Bots than the token you call with), revoke.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{ApiToken, ApiTokenPage, BotId, CreateToken, Right};

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot tokens`.
#[derive(Debug, Args)]
pub struct TokensArgs {
    #[command(subcommand)]
    command: TokensCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum TokensCommand {
    /// Lists your member's tokens, newest first (never their secrets).
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Creates a token and prints its secret (shown only once).
    Create {
        /// A name for the token (1-100 characters).
        name: String,
        /// A right, RESOURCE:ACTION (e.g. bots:read, chats:write); repeat for more. Without
        /// one, the token gets every right (refused when the calling token lacks one).
        #[arg(long = "right", value_parser = parse_right)]
        rights: Vec<Right>,
        /// Limit the token to this Bot; repeat for more (default: every Bot).
        #[arg(long = "bot")]
        bots: Vec<BotId>,
        /// When it stops working (RFC 3339, e.g. 2027-01-01T00:00:00Z).
        #[arg(long)]
        expires_at: Option<chrono::DateTime<chrono::Utc>>,
    },
    /// Revokes a token; it stops working at once.
    Revoke {
        /// The token's ID.
        id: openbot_schema::TokenId,
    },
}

/// `bots:read` as a right.
fn parse_right(text: &str) -> Result<Right, String> {
    let (resource, action) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}`: a right is RESOURCE:ACTION, e.g. bots:read"))?;
    serde_json::from_value(serde_json::json!({"resource": resource, "action": action}))
        .map_err(|_| format!("`{text}`: unknown resource or action (action: read or write)"))
}

fn right_text(right: &Right) -> String {
    let value = serde_json::to_value(right).unwrap_or_default();
    format!(
        "{}:{}",
        value["resource"].as_str().unwrap_or_default(),
        value["action"].as_str().unwrap_or_default()
    )
}

fn line(token: &ApiToken) -> String {
    let mut text = format!(
        "{}  {}  {} rights",
        token.id,
        token.name,
        token.rights.len()
    );
    if let Some(bots) = &token.bot_ids {
        text.push_str(&format!("  {} Bots", bots.len()));
    }
    if let Some(at) = token.revoked_at {
        text.push_str(&format!("  revoked {}", at.to_rfc3339()));
    } else if let Some(at) = token.expires_at {
        text.push_str(&format!("  expires {}", at.to_rfc3339()));
    }
    text
}

/// Runs the command.
pub async fn run(args: TokensArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        TokensCommand::List { page } => {
            list::<ApiTokenPage>(&client, "/v1/tokens", &page, output, line, "no tokens").await?;
        }
        TokensCommand::Create {
            name,
            rights,
            bots,
            expires_at,
        } => {
            let rights = if rights.is_empty() {
                // Every right; refused when the calling token lacks one.
                Right::all()
            } else {
                rights
            };
            let created = client
                .create_token(&CreateToken {
                    name,
                    rights,
                    bot_ids: (!bots.is_empty()).then_some(bots),
                    expires_at,
                })
                .await;
            let created = match created {
                Err(err) if err.code == openbot_schema::ErrorCode::Forbidden => {
                    anyhow::bail!("{err} (name the rights it gets with --right RESOURCE:ACTION)")
                }
                other => other?,
            };
            output.print(&created, |created| {
                let rights: Vec<String> = created.token.rights.iter().map(right_text).collect();
                format!(
                    "{}\nrights: {}\nsecret (shown once): {}",
                    line(&created.token),
                    rights.join(" "),
                    created.secret
                )
            })?;
        }
        TokensCommand::Revoke { id } => {
            client.revoke_token(&id).await?;
            output.print(&serde_json::json!({"revoked": id}), |_| {
                format!("revoked {id}")
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
