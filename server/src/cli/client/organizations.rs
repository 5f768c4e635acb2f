//! `openbot organizations`: the organizations of your account, and new ones.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{CreateOrganization, Organization, OrganizationPage};

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot organizations`.
#[derive(Debug, Args)]
pub struct OrganizationsArgs {
    #[command(subcommand)]
    command: OrganizationsCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum OrganizationsCommand {
    /// Lists the organizations your account belongs to.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Creates an organization you own (owners and admins may); prints its first token once.
    Create {
        /// Its name.
        name: String,
    },
}

fn line(organization: &Organization) -> String {
    let role = serde_json::to_value(organization.role)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    format!("{}  {}  {role}", organization.id, organization.name)
}

/// Runs the command.
pub async fn run(args: OrganizationsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        OrganizationsCommand::List { page } => {
            list::<OrganizationPage>(&client, "/v1/organizations", &page, output, line, "").await?;
        }
        OrganizationsCommand::Create { name } => {
            let created = client
                .create_organization(&CreateOrganization { name })
                .await?;
            output.print(&created, |created| {
                format!(
                    "{}\ntoken (shown once; it acts in the new organization): {}",
                    line(&created.organization),
                    created.token_secret
                )
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
