//! `openbot prices` and `openbot credits`: the model prices in force and the organization's
//! credits, balance and ledger (owners and admins with the `billing` right; docs/billing.md).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{
    CreditBalance, CreditEntry, CreditLedgerPage, GrantCredits, ModelPrice, ModelPricePage,
    PutModelPrice,
};

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot prices`.
#[derive(Debug, Args)]
pub struct PricesArgs {
    #[command(subcommand)]
    command: PricesCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum PricesCommand {
    /// Lists the prices in force: the organization's and the catalog's, by model spec.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Sets the organization's price for a model spec, in US dollars per million tokens.
    Set {
        /// The model spec, e.g. openai:gpt-4o.
        model: String,
        /// Dollars per million input tokens.
        #[arg(long)]
        input_usd: f64,
        /// Dollars per million output tokens.
        #[arg(long)]
        output_usd: f64,
        /// Dollars per million cached input tokens (default: the input price).
        #[arg(long)]
        cached_input_usd: Option<f64>,
    },
    /// Removes the organization's price for a model: the catalog's applies again.
    Delete {
        /// The model spec.
        model: String,
    },
}

/// Arguments of `openbot credits`.
#[derive(Debug, Args)]
pub struct CreditsArgs {
    #[command(subcommand)]
    command: CreditsCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum CreditsCommand {
    /// The organization's credit balance.
    Show,
    /// Grants credits to the organization; the first grant puts it on credits.
    Grant {
        /// How much, in US dollars, e.g. 25.
        #[arg(long)]
        usd: f64,
        /// Why, for the ledger.
        #[arg(long)]
        note: Option<String>,
    },
    /// The credit ledger (grants and charges), newest first.
    Ledger {
        #[command(flatten)]
        page: PageArgs,
    },
}

/// Dollars as micros; refuses what is not a positive finite amount.
fn micros(usd: f64, what: &str) -> anyhow::Result<u64> {
    anyhow::ensure!(
        usd.is_finite() && (0.0..1e12).contains(&usd),
        "{what} must be a dollar amount of 0 or more"
    );
    Ok((usd * 1e6).round() as u64)
}

fn usd(micros: impl Into<f64>) -> String {
    format!("${:.6}", micros.into() / 1e6)
}

fn price_line(price: &ModelPrice) -> String {
    let source = serde_json::to_value(price.source)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    format!(
        "{}  in {}  out {}  cached {}  per million tokens  ({source})",
        price.model,
        usd(price.input_micros_per_million as f64),
        usd(price.output_micros_per_million as f64),
        usd(price.cached_input_micros_per_million as f64)
    )
}

fn balance_text(balance: &CreditBalance) -> String {
    if !balance.enabled {
        return "not on credits (no grant yet)".to_string();
    }
    format!(
        "balance {}  held {}  available {}",
        usd(balance.balance_micros as f64),
        usd(balance.held_micros as f64),
        usd(balance.available_micros as f64)
    )
}

fn entry_line(entry: &CreditEntry) -> String {
    let kind = serde_json::to_value(entry.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut text = format!(
        "{}  {kind}  {}",
        entry.created_at.to_rfc3339(),
        usd(entry.amount_micros as f64)
    );
    if let Some(execution) = entry.execution_id {
        text.push_str(&format!("  execution {execution}"));
    }
    if let Some(note) = &entry.note {
        text.push_str(&format!("  {note}"));
    }
    text
}

/// Runs `openbot prices`.
pub async fn run_prices(args: PricesArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        PricesCommand::List { page } => {
            list::<ModelPricePage>(&client, "/v1/billing/prices", &page, output, price_line, "")
                .await?;
        }
        PricesCommand::Set {
            model,
            input_usd,
            output_usd,
            cached_input_usd,
        } => {
            let request = PutModelPrice {
                model,
                input_micros_per_million: micros(input_usd, "--input-usd")?,
                output_micros_per_million: micros(output_usd, "--output-usd")?,
                cached_input_micros_per_million: cached_input_usd
                    .map(|usd| micros(usd, "--cached-input-usd"))
                    .transpose()?,
            };
            let price = client.put_price(&request).await?;
            output.print(&price, price_line)?;
        }
        PricesCommand::Delete { model } => {
            client.delete_price(&model).await?;
            output.print(&serde_json::json!({"deleted": model}), |_| {
                format!("deleted {model}")
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `openbot credits`.
pub async fn run_credits(args: CreditsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        CreditsCommand::Show => {
            let balance = client.get_credits().await?;
            output.print(&balance, balance_text)?;
        }
        CreditsCommand::Grant { usd, note } => {
            let amount_micros = micros(usd, "--usd")?;
            anyhow::ensure!(amount_micros > 0, "--usd must be more than 0");
            let balance = client
                .grant_credits(&GrantCredits {
                    amount_micros,
                    note,
                })
                .await?;
            output.print(&balance, balance_text)?;
        }
        CreditsCommand::Ledger { page } => {
            let ledger = if page.all {
                CreditLedgerPage {
                    items: client.credit_ledger_all().await?,
                    next_cursor: None,
                }
            } else {
                client
                    .credit_ledger(page.limit.map(u64::from), page.cursor.as_deref())
                    .await?
            };
            output.print(&ledger, |ledger| {
                let mut lines: Vec<String> = ledger.items.iter().map(entry_line).collect();
                if lines.is_empty() {
                    lines.push("no entries".to_string());
                }
                if let Some(cursor) = &ledger.next_cursor {
                    lines.push(format!("next: {cursor}"));
                }
                lines.join("\n")
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
