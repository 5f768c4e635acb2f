//! `openbot usage`: usage and cost of model calls by organization, Bot, Chat, member or model
//! over a time range, as a table, `--json` lines or `--csv`.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
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
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

impl UsageArgs {
    fn query(&self) -> String {
        let mut parts = vec![format!("group_by={}", self.by.as_str())];
        let mut add = |name: &str, value: Option<String>| {
            if let Some(value) = value {
                parts.push(format!("{name}={}", encode(&value)));
            }
        };
        add("from", self.from.map(|t| t.to_rfc3339()));
        add("to", self.to.map(|t| t.to_rfc3339()));
        add("bot_id", self.bot.map(|id| id.to_string()));
        add("chat_id", self.chat.map(|id| id.to_string()));
        add("member_id", self.member.map(|id| id.to_string()));
        add("model", self.model.clone());
        parts.join("&")
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

/// Runs the command: every page of the report.
pub async fn run(args: UsageArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let query = args.query();
    if args.csv {
        print!("{}", client.usage_csv(&query).await?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page_query = match &cursor {
            Some(cursor) => format!("{query}&limit=500&cursor={}", encode(cursor)),
            None => format!("{query}&limit=500"),
        };
        let page = client.usage(&page_query).await?;
        rows.extend(page.items);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::encode;

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(
            encode("2026-12-01T00:00:00+00:00"),
            "2026-12-01T00%3A00%3A00%2B00%3A00"
        );
        assert_eq!(encode("a&b c"), "a%26b%20c");
    }
}
