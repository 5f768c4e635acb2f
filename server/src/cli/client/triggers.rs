//! `openbot triggers`: schedules and webhooks that send input to one of your Chats (see
//! docs/triggers.md), and their firings; `openbot reminders`: the reminders a Chat's Bot set.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{
    CreateTrigger, Reminder, ReminderPage, Trigger, TriggerFiring, TriggerFiringPage, TriggerKind,
    TriggerPage,
};
use uuid::Uuid;

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot triggers`.
#[derive(Debug, Args)]
pub struct TriggersArgs {
    #[command(subcommand)]
    command: TriggersCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum TriggersCommand {
    /// Creates a schedule (--cron) or a webhook (--webhook) on one of your Chats. A webhook's
    /// signing secret is printed once.
    Create {
        /// The Chat it sends to.
        #[arg(long)]
        chat: Uuid,
        /// A cron expression, e.g. "0 9 * * MON-FRI" (five fields, or six with seconds).
        #[arg(long, conflicts_with = "webhook", required_unless_present = "webhook")]
        cron: Option<String>,
        /// The schedule's IANA time zone (default UTC).
        #[arg(long, requires = "cron")]
        time_zone: Option<String>,
        /// A webhook instead of a schedule.
        #[arg(long)]
        webhook: bool,
        /// The text each firing sends (a webhook sends it before the body).
        #[arg(long)]
        text: Option<String>,
    },
    /// Lists your triggers, oldest first.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Shows a trigger.
    Show {
        /// The trigger.
        id: Uuid,
    },
    /// Pauses a trigger.
    Pause {
        /// The trigger.
        id: Uuid,
    },
    /// Resumes a trigger (a schedule fires next at its first slot after now).
    Resume {
        /// The trigger.
        id: Uuid,
    },
    /// Deletes a trigger.
    Delete {
        /// The trigger.
        id: Uuid,
    },
    /// Lists a trigger's firings, newest first.
    Firings {
        /// The trigger.
        id: Uuid,
        #[command(flatten)]
        page: PageArgs,
    },
}

fn when(at: Option<chrono::DateTime<chrono::Utc>>) -> String {
    at.map(|t| t.to_rfc3339()).unwrap_or_else(|| "-".into())
}

fn trigger_line(t: &Trigger) -> String {
    let what = match t.kind {
        TriggerKind::Schedule => format!(
            "schedule \"{}\" {}",
            t.cron.as_deref().unwrap_or_default(),
            t.time_zone.as_deref().unwrap_or("UTC")
        ),
        TriggerKind::Webhook => format!("webhook {}", t.hook_path.as_deref().unwrap_or_default()),
    };
    let state = match (&t.paused_reason, serde_json::to_value(t.state)) {
        (Some(why), _) => format!("paused ({why})"),
        (None, Ok(serde_json::Value::String(state))) => state,
        _ => "-".into(),
    };
    format!(
        "{}  chat {}  {what}  {state}  next {}",
        t.id,
        t.chat_id,
        when(t.next_fire_at)
    )
}

fn firing_line(f: &TriggerFiring) -> String {
    let outcome = serde_json::to_value(f.outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut parts = vec![f.fired_at.to_rfc3339(), outcome];
    if let Some(slot) = f.scheduled_for {
        parts.push(format!("slot {}", slot.to_rfc3339()));
    }
    if f.catch_up {
        parts.push("catch-up".into());
    }
    if let Some(delivery) = &f.delivery_id {
        parts.push(format!("delivery {delivery}"));
    }
    if let Some(execution) = f.execution_id {
        parts.push(format!("turn {execution}"));
    }
    if let Some(reason) = &f.reason {
        parts.push(reason.clone());
    }
    parts.join("  ")
}

/// Runs `openbot triggers`, through the generated operations.
pub async fn run(args: TriggersArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        TriggersCommand::Create {
            chat,
            cron,
            time_zone,
            webhook,
            text,
        } => {
            let request = CreateTrigger {
                chat_id: chat.into(),
                kind: if webhook {
                    TriggerKind::Webhook
                } else {
                    TriggerKind::Schedule
                },
                cron,
                time_zone,
                text,
            };
            let created = client.create_trigger(&request).await?;
            output.print(&created, |created| {
                let mut text = trigger_line(&created.trigger);
                if let Some(secret) = &created.signing_secret {
                    text.push_str(&format!("\nsigning secret (shown once): {secret}"));
                }
                text
            })?;
        }
        TriggersCommand::List { page } => {
            list::<TriggerPage>(
                &client,
                "/v1/triggers",
                &page,
                output,
                trigger_line,
                "no triggers",
            )
            .await?;
        }
        TriggersCommand::Show { id } => {
            let trigger = client.get_trigger(&id).await?;
            output.print(&trigger, trigger_line)?;
        }
        TriggersCommand::Pause { id } => {
            let trigger = client.pause_trigger(&id).await?;
            output.print(&trigger, trigger_line)?;
        }
        TriggersCommand::Resume { id } => {
            let trigger = client.resume_trigger(&id).await?;
            output.print(&trigger, trigger_line)?;
        }
        TriggersCommand::Delete { id } => {
            client.delete_trigger(&id).await?;
            output.print(&serde_json::json!({"deleted": id}), |_| {
                format!("deleted trigger {id}")
            })?;
        }
        TriggersCommand::Firings { id, page } => {
            list::<TriggerFiringPage>(
                &client,
                &format!("/v1/triggers/{id}/firings"),
                &page,
                output,
                firing_line,
                "no firings",
            )
            .await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `openbot reminders`.
#[derive(Debug, Args)]
pub struct RemindersArgs {
    #[command(subcommand)]
    command: RemindersCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum RemindersCommand {
    /// Lists a Chat's reminders by due time, every state.
    List {
        /// The Chat.
        #[arg(long)]
        chat: Uuid,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Cancels a pending reminder.
    Cancel {
        /// The Chat.
        #[arg(long)]
        chat: Uuid,
        /// The reminder.
        id: Uuid,
    },
}

fn reminder_line(r: &Reminder) -> String {
    let state = serde_json::to_value(r.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    format!("{}  {}  {state}  {}", r.id, r.due_at.to_rfc3339(), r.text)
}

/// Runs `openbot reminders`, through the generated operations.
pub async fn run_reminders(args: RemindersArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        RemindersCommand::List { chat, page } => {
            list::<ReminderPage>(
                &client,
                &format!("/v1/chats/{chat}/reminders"),
                &page,
                output,
                reminder_line,
                "no reminders",
            )
            .await?;
        }
        RemindersCommand::Cancel { chat, id } => {
            let reminder = client.cancel_reminder(&chat, &id).await?;
            output.print(&reminder, reminder_line)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
