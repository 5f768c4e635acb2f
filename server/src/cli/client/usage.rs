//! `openbot usage`: usage and cost of model calls by organization, Bot, Chat, member or model
//! over a time range, as a table, `--json` lines or `--csv`.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use openbot_core::Operations;
use openbot_schema::UsageRow;
use uuid::Uuid;

use super::ServerArgs;

/// Arguments of `openbot usage`.
#[derive(Debug, Args)]
pub struct UsageArgs {
    /// One row per organization, bot, chat, member or model.
    #[arg(long, value_enum, default_value = "model")]
    by: Group,
    /// Calls sent at or after this time (RFC 3339, e.g. 2026-12-01T00:00:00Z).
    #[arg(long)]
    from: Option<chrono::DateTime<chrono::Utc>>,
    /// Calls sent before this time (RFC 3339).
    #[arg(long)]
    to: Option<chrono::DateTime<chrono::Utc>>,
    /// Only calls made by this Bot.
    #[arg(long)]
    bot: Option<Uuid>,
    /// Only calls for this Chat.
    #[arg(long)]
    chat: Option<Uuid>,
    /// Only calls of this member's work.
    #[arg(long)]
    member: Option<Uuid>,
    /// Only calls to this model spec.
    #[arg(long)]
    model: Option<String>,
    /// Prints the report as CSV (the server's export).
    #[arg(long, conflicts_with = "json")]
    csv: bool,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Group {
    Organization,
    Bot,
    Chat,
    Member,
    Model,
}

impl Group {
    fn as_str(self) -> &'static str {
        match self {
            Group::Organization => "organization",
            Group::Bot => "bot",
            Group::Chat => "chat",
            Group::Member => "member",
            Group::Model => "model",
        }
    }
}

/// Percent-encodes a query value (everything but unreserved characters).
impl UsageArgs {
    /// The report's parameters as text: (from, to, bot, chat, member).
    fn filters(&self) -> [Option<String>; 5] {
        [
            self.from.map(|t| t.to_rfc3339()),
            self.to.map(|t| t.to_rfc3339()),
            self.bot.map(|id| id.to_string()),
            self.chat.map(|id| id.to_string()),
            self.member.map(|id| id.to_string()),
        ]
    }
}

fn table(group: &str, rows: &[UsageRow]) -> String {
    let mut lines = vec![format!(
        "{:<40} {:>7} {:>8} {:>12} {:>12} {:>14} {:>14}",
        group.to_uppercase(),
        "CALLS",
        "UNKNOWN",
        "INPUT",
        "OUTPUT",
        "COST USD",
        "UNKNOWN EST"
    )];
    let mut total = 0u64;
    for row in rows {
        total += row.cost_micros;
        lines.push(format!(
            "{:<40} {:>7} {:>8} {:>12} {:>12} {:>14.6} {:>14.6}",
            row.key.as_deref().unwrap_or("-"),
            row.calls,
            row.unknown_calls,
            row.input_tokens,
            row.output_tokens,
            row.cost_micros as f64 / 1e6,
            row.unknown_estimate_micros as f64 / 1e6
        ));
    }
    lines.push(format!("total cost ${:.6}", total as f64 / 1e6));
    lines.join("\n")
}

/// Runs the command: every page of the report, through the generated operations.
pub async fn run(args: UsageArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let [from, to, bot, chat, member] = args.filters();
    let group = Some(args.by.as_str());
    let model = args.model.as_deref();
    if args.csv {
        let csv = client
            .usage_export(
                from.as_deref(),
                to.as_deref(),
                group,
                bot.as_deref(),
                chat.as_deref(),
                member.as_deref(),
                model,
                None,
                None,
            )
            .await?;
        print!("{}", String::from_utf8_lossy(&csv.data));
        return Ok(ExitCode::SUCCESS);
    }
    let rows = client
        .usage_all(
            from.as_deref(),
            to.as_deref(),
            group,
            bot.as_deref(),
            chat.as_deref(),
            member.as_deref(),
            model,
        )
        .await?;
    let output = args.server.output();
    if output.json {
        for row in &rows {
            output.print(row, |_| String::new())?;
        }
    } else {
        output.print(&rows, |rows| table(args.by.as_str(), rows))?;
    }
    Ok(ExitCode::SUCCESS)
}
