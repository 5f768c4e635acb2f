//! `openbot budgets`: spending caps on the organization, a Bot or a Chat.

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use openbot_core::Operations;
use openbot_schema::{Budget, BudgetPage, BudgetScope, PutBudget};
use uuid::Uuid;

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot budgets`.
#[derive(Debug, Args)]
pub struct BudgetsArgs {
    #[command(subcommand)]
    command: BudgetsCommand,
    #[command(flatten)]
    server: ServerArgs,
}

/// What a budget caps.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Scope {
    Organization,
    Bot,
    Chat,
}

impl From<Scope> for BudgetScope {
    fn from(scope: Scope) -> Self {
        match scope {
            Scope::Organization => BudgetScope::Organization,
            Scope::Bot => BudgetScope::Bot,
            Scope::Chat => BudgetScope::Chat,
        }
    }
}

#[derive(Debug, Subcommand)]
enum BudgetsCommand {
    /// Caps what all Turns of the target may cost together.
    Set {
        /// organization, bot or chat.
        scope: Scope,
        /// The organization's, Bot's or Chat's ID.
        target: Uuid,
        /// The cap in US dollars, e.g. 2.50.
        #[arg(long)]
        usd: f64,
    },
    /// Lists the budgets and what each scope spent.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Removes a budget.
    Delete {
        /// organization, bot or chat.
        scope: Scope,
        /// The organization's, Bot's or Chat's ID.
        target: Uuid,
    },
}

fn line(budget: &Budget) -> String {
    format!(
        "{}  {}  spent ${:.6} of ${:.6}",
        budget.scope.as_str(),
        budget.target_id,
        budget.spent_micros as f64 / 1e6,
        budget.max_cost_micros as f64 / 1e6
    )
}

/// Runs the command.
pub async fn run(args: BudgetsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        BudgetsCommand::Set { scope, target, usd } => {
            anyhow::ensure!(usd.is_finite() && usd >= 0.0, "--usd must be 0 or more");
            let micros = (usd * 1e6).round() as u64;
            let budget = client
                .put_budget(
                    &BudgetScope::from(scope).as_str(),
                    &target,
                    &PutBudget {
                        max_cost_micros: micros,
                    },
                )
                .await?;
            output.print(&budget, line)?;
        }
        BudgetsCommand::List { page } => {
            list::<BudgetPage>(&client, "/v1/budgets", &page, output, line, "no budgets").await?;
        }
        BudgetsCommand::Delete { scope, target } => {
            client
                .delete_budget(&BudgetScope::from(scope).as_str(), &target)
                .await?;
            output.print(&serde_json::json!({"deleted": target}), |_| {
                format!(
                    "deleted the budget of {} {target}",
                    BudgetScope::from(scope).as_str()
                )
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
