//! `openbot vaults`: Vault items, their fields and rules (see docs/vaults.md). Values go in
//! (from the command line, an environment variable or standard input) and are never printed.

use std::collections::HashMap;
use std::io::Read as _;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{
    CreateVaultItem, CreateVaultRule, PutVaultField, VaultItem, VaultItemPage, VaultOwner,
    VaultReader, VaultRule, VaultRulePage,
};

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot vaults`.
#[derive(Debug, Args)]
pub struct VaultsArgs {
    #[command(subcommand)]
    command: VaultsCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum VaultsCommand {
    /// Lists the Vault items you see (the organization's and your own), with field names.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Creates an item; its values are sealed and never shown again.
    Create {
        /// A name for people.
        name: String,
        /// The organization owns it (owners and admins), not you.
        #[arg(long)]
        organization: bool,
        /// A field, `NAME=VALUE` (repeatable).
        #[arg(long = "field", value_name = "NAME=VALUE")]
        fields: Vec<String>,
        /// A field whose value is read from an environment variable, `NAME=VARIABLE`
        /// (repeatable), so the value stays out of the shell's history.
        #[arg(long = "field-env", value_name = "NAME=VARIABLE")]
        field_envs: Vec<String>,
    },
    /// Shows an item: its name, owner and field names (never values).
    Show {
        /// The item's ID.
        id: uuid::Uuid,
    },
    /// Sets a field's value: from --value, --env, or else standard input.
    Set {
        /// The item's ID.
        id: uuid::Uuid,
        /// The field's name.
        field: String,
        /// The value.
        #[arg(long, conflicts_with = "env")]
        value: Option<String>,
        /// The environment variable that holds the value.
        #[arg(long)]
        env: Option<String>,
    },
    /// Removes a field and the rules that name it.
    Unset {
        /// The item's ID.
        id: uuid::Uuid,
        /// The field's name.
        field: String,
    },
    /// Deletes an item with its fields and rules.
    Delete {
        /// The item's ID.
        id: uuid::Uuid,
    },
    /// Lists an item's rules.
    Rules {
        /// The item's ID.
        id: uuid::Uuid,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Adds a rule: a Bot or an HTTP tool may read a field (`*`: every field). A tool's send
    /// needs a rule for the Turn's Bot and one for the tool.
    Allow {
        /// The item's ID.
        id: uuid::Uuid,
        /// The field, or `*`.
        #[arg(long)]
        field: String,
        /// The Bot that may read it.
        #[arg(long, conflicts_with_all = ["tool", "app_connection", "code_mode"], required_unless_present_any = ["tool", "app_connection", "code_mode"])]
        bot: Option<openbot_schema::BotId>,
        /// The HTTP tool that may read it.
        #[arg(long, conflicts_with_all = ["app_connection", "code_mode"])]
        tool: Option<String>,
        /// The manual App connection (its ID) whose headers may read it.
        #[arg(long, conflicts_with = "code_mode")]
        app_connection: Option<uuid::Uuid>,
        /// The Bot whose Code Mode runs may pass it to a tool (`{{vault.<item>.<field>}}` in a
        /// program's tool arguments).
        #[arg(long)]
        code_mode: Option<openbot_schema::BotId>,
    },
    /// Removes a rule.
    Revoke {
        /// The rule's ID.
        rule: uuid::Uuid,
    },
}

fn line(item: &VaultItem) -> String {
    let owner = match item.owner {
        VaultOwner::Organization => "organization",
        VaultOwner::Member => "member",
    };
    let fields: Vec<&str> = item.fields.iter().map(|f| f.name.as_str()).collect();
    format!(
        "{}  {}  ({owner})  fields: {}",
        item.id,
        item.name,
        if fields.is_empty() {
            "none".to_string()
        } else {
            fields.join(", ")
        }
    )
}

fn rule_line(rule: &VaultRule) -> String {
    let reader = match &rule.reader {
        VaultReader::Bot { bot_id } => format!("bot {bot_id}"),
        VaultReader::Tool { name } => format!("tool {name}"),
        VaultReader::AppConnection { connection_id } => format!("app connection {connection_id}"),
        VaultReader::CodeMode { bot_id } => format!("Code Mode runs of bot {bot_id}"),
    };
    format!("{}  {reader} may read {}", rule.id, rule.field)
}

fn pair(text: &str, flag: &str) -> anyhow::Result<(String, String)> {
    text.split_once('=')
        .map(|(a, b)| (a.trim().to_string(), b.to_string()))
        .with_context(|| format!("{flag} needs NAME=..."))
}

fn env_value(variable: &str) -> anyhow::Result<String> {
    std::env::var(variable)
        .with_context(|| format!("the environment variable {variable} is not set"))
}

/// Runs the command.
pub async fn run(args: VaultsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        VaultsCommand::List { page } => {
            list::<VaultItemPage>(
                &client,
                "/v1/vault-items",
                &page,
                output,
                line,
                "no Vault items",
            )
            .await?;
        }
        VaultsCommand::Create {
            name,
            organization,
            fields,
            field_envs,
        } => {
            let mut values = HashMap::new();
            for field in &fields {
                let (name, value) = pair(field, "--field")?;
                values.insert(name, value);
            }
            for field in &field_envs {
                let (name, variable) = pair(field, "--field-env")?;
                values.insert(name, env_value(&variable)?);
            }
            let request = CreateVaultItem {
                name,
                owner: if organization {
                    VaultOwner::Organization
                } else {
                    VaultOwner::Member
                },
                fields: values,
            };
            output.print(&client.create_vault_item(&request).await?, line)?;
        }
        VaultsCommand::Show { id } => {
            output.print(&client.get_vault_item(&id).await?, line)?;
        }
        VaultsCommand::Set {
            id,
            field,
            value,
            env,
        } => {
            let value = match (value, env) {
                (Some(value), _) => value,
                (None, Some(variable)) => env_value(&variable)?,
                (None, None) => {
                    let mut text = String::new();
                    std::io::stdin()
                        .read_to_string(&mut text)
                        .context("cannot read the value from standard input")?;
                    text.trim_end_matches(['\r', '\n']).to_string()
                }
            };
            let item = client
                .put_vault_field(&id, &field, &PutVaultField { value })
                .await?;
            output.print(&item, line)?;
        }
        VaultsCommand::Unset { id, field } => {
            client.delete_vault_field(&id, &field).await?;
            output.print(&serde_json::json!({"deleted": field}), |_| {
                format!("field {field} removed")
            })?;
        }
        VaultsCommand::Delete { id } => {
            client.delete_vault_item(&id).await?;
            output.print(&serde_json::json!({"deleted": id}), |_| {
                format!("Vault item {id} deleted")
            })?;
        }
        VaultsCommand::Rules { id, page } => {
            list::<VaultRulePage>(
                &client,
                &format!("/v1/vault-items/{id}/rules"),
                &page,
                output,
                rule_line,
                "no rules",
            )
            .await?;
        }
        VaultsCommand::Allow {
            id,
            field,
            bot,
            tool,
            app_connection,
            code_mode,
        } => {
            let reader = match (bot, tool, app_connection, code_mode) {
                (Some(bot_id), ..) => VaultReader::Bot { bot_id },
                (None, Some(name), ..) => VaultReader::Tool { name },
                (None, None, Some(connection_id), _) => {
                    VaultReader::AppConnection { connection_id }
                }
                (None, None, None, Some(bot_id)) => VaultReader::CodeMode { bot_id },
                (None, None, None, None) => {
                    anyhow::bail!("pass --bot, --tool, --app-connection or --code-mode")
                }
            };
            let rule = client
                .create_vault_rule(&id, &CreateVaultRule { field, reader })
                .await?;
            output.print(&rule, rule_line)?;
        }
        VaultsCommand::Revoke { rule } => {
            client.delete_vault_rule(&rule).await?;
            output.print(&serde_json::json!({"deleted": rule}), |_| {
                format!("rule {rule} removed")
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
