//! `openbot approvals`: tool calls waiting for a person's decision, and the rules that ask.

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use openbot_core::Operations;
use openbot_core::client::Client;
use openbot_schema::{
    ApprovalRequest, ApprovalRequestPage, ApprovalRule, ApprovalRulePage, ApprovalState, BotId,
    CreateApprovalRule, DecideApproval, Decision, RuleAction,
};
use uuid::Uuid;

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot approvals`.
#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    #[command(subcommand)]
    command: ApprovalsCommand,
    #[command(flatten)]
    server: ServerArgs,
}

/// Which requests to list.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum StateFilter {
    Pending,
    Approved,
    Denied,
    Expired,
    Revoked,
    Cancelled,
    All,
}

/// What a rule does.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Action {
    Allow,
    Ask,
    Deny,
}

#[derive(Debug, Subcommand)]
enum ApprovalsCommand {
    /// Lists the requests you may decide (pending ones unless --state says otherwise).
    List {
        /// Which requests.
        #[arg(long, value_enum, default_value = "pending")]
        state: StateFilter,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Shows one request with the call's arguments.
    Show {
        /// The request's ID.
        id: Uuid,
    },
    /// Approves a pending request: the call runs once and its result reaches the Chat.
    Approve {
        /// The request's ID.
        id: Uuid,
        /// Why, for the audit log and the model.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Denies a pending request: the call never runs and the model is told.
    Deny {
        /// The request's ID.
        id: Uuid,
        /// Why, for the audit log and the model.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Lists the organization's rules.
    Rules {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Adds a rule: what happens to calls of matching tools.
    AddRule {
        /// The tool name, or a pattern where `*` stands for any text.
        tool: String,
        /// allow, ask or deny.
        #[arg(long, value_enum)]
        action: Action,
        /// A pattern the call's arguments (compact JSON) must match, e.g. '*"amount":1000*'.
        #[arg(long)]
        arguments: Option<String>,
        /// Only calls of this Bot.
        #[arg(long)]
        bot: Option<BotId>,
        /// Only calls made for this member.
        #[arg(long)]
        member: Option<Uuid>,
        /// How long an `ask` waits before it expires, in seconds (default one day).
        #[arg(long)]
        expires_after_s: Option<u64>,
    },
    /// Removes a rule.
    DeleteRule {
        /// The rule's ID.
        id: Uuid,
    },
}

fn line(request: &ApprovalRequest) -> String {
    format!(
        "{}  {}  {}({})  chat {}",
        request.id,
        request.state.as_str(),
        request.call.name,
        request.call.arguments,
        request
            .chat_id
            .map(|c| c.to_string())
            .unwrap_or_else(|| "-".into())
    )
}

fn rule_line(rule: &ApprovalRule) -> String {
    let action = match rule.action {
        RuleAction::Allow => "allow",
        RuleAction::Ask => "ask",
        RuleAction::Deny => "deny",
    };
    let mut text = format!("{}  {action}  {}", rule.id, rule.tool);
    if let Some(arguments) = &rule.arguments {
        text.push_str(&format!("  arguments {arguments}"));
    }
    if let Some(bot) = rule.bot_id {
        text.push_str(&format!("  bot {bot}"));
    }
    if let Some(member) = rule.member_id {
        text.push_str(&format!("  member {member}"));
    }
    text
}

/// Runs the command.
pub async fn run(args: ApprovalsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        ApprovalsCommand::List { state, page } => {
            let state = match state {
                StateFilter::Pending => Some(ApprovalState::Pending),
                StateFilter::Approved => Some(ApprovalState::Approved),
                StateFilter::Denied => Some(ApprovalState::Denied),
                StateFilter::Expired => Some(ApprovalState::Expired),
                StateFilter::Revoked => Some(ApprovalState::Revoked),
                StateFilter::Cancelled => Some(ApprovalState::Cancelled),
                StateFilter::All => None,
            };
            let path = match state {
                Some(state) => format!("/v1/approvals?state={}", state.as_str()),
                None => "/v1/approvals".to_string(),
            };
            list::<ApprovalRequestPage>(&client, &path, &page, output, line, "no requests").await?;
        }
        ApprovalsCommand::Show { id } => {
            output.print(&client.get_approval(&id).await?, line)?;
        }
        ApprovalsCommand::Approve { id, reason } | ApprovalsCommand::Deny { id, reason }
            if reason.as_ref().is_some_and(|r| r.len() > 1000) =>
        {
            anyhow::bail!("request {id}: --reason may have at most 1000 characters");
        }
        ApprovalsCommand::Approve { id, reason } => {
            let decision = DecideApproval {
                decision: Decision::Approve,
                reason,
            };
            output.print(&client.decide_approval(id, decision).await?, line)?;
        }
        ApprovalsCommand::Deny { id, reason } => {
            let decision = DecideApproval {
                decision: Decision::Deny,
                reason,
            };
            output.print(&client.decide_approval(id, decision).await?, line)?;
        }
        ApprovalsCommand::Rules { page } => {
            let empty = "no rules: every call runs";
            list::<ApprovalRulePage>(
                &client,
                "/v1/approval-rules",
                &page,
                output,
                rule_line,
                empty,
            )
            .await?;
        }
        ApprovalsCommand::AddRule {
            tool,
            action,
            arguments,
            bot,
            member,
            expires_after_s,
        } => {
            let rule = CreateApprovalRule {
                tool,
                arguments,
                action: match action {
                    Action::Allow => RuleAction::Allow,
                    Action::Ask => RuleAction::Ask,
                    Action::Deny => RuleAction::Deny,
                },
                bot_id: bot,
                member_id: member,
                expires_after_ms: expires_after_s.map(|s| s.saturating_mul(1000)),
            };
            output.print(&client.create_rule(&rule).await?, rule_line)?;
        }
        ApprovalsCommand::DeleteRule { id } => {
            client.delete_rule(&id).await?;
            output.print(&serde_json::json!({"deleted": id}), |_| {
                format!("deleted the rule {id}")
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
