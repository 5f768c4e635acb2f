//! `openbot files`: the organization's file retention (see docs/files.md).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{FileRetention, PutFileRetention};

use super::ServerArgs;

/// Arguments of `openbot files`.
#[derive(Debug, Args)]
pub struct FilesArgs {
    #[command(subcommand)]
    command: FilesCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum FilesCommand {
    /// The organization's file retention: shows it, sets it or removes it.
    Retention {
        #[command(subcommand)]
        command: Option<RetentionCommand>,
    },
}

#[derive(Debug, Subcommand)]
enum RetentionCommand {
    /// Shows the retention (the default).
    Show,
    /// Deletes files older than DAYS (1-36500) from the next sweep on (owner or admin).
    Set {
        /// The retention in days.
        days: u32,
    },
    /// Keeps files until they are deleted (owner or admin).
    Clear,
}

fn line(retention: &FileRetention) -> String {
    match retention.days {
        Some(days) => format!("files older than {days} days are deleted"),
        None => "files are kept until deleted".to_string(),
    }
}

/// Runs the command.
pub async fn run(args: FilesArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        FilesCommand::Retention { command } => match command.unwrap_or(RetentionCommand::Show) {
            RetentionCommand::Show => {
                let retention = client.get_file_retention().await?;
                output.print(&retention, line)?;
            }
            RetentionCommand::Set { days } => {
                let retention = client
                    .put_file_retention(&PutFileRetention { days })
                    .await?;
                output.print(&retention, line)?;
            }
            RetentionCommand::Clear => {
                client.delete_file_retention().await?;
                output.print(&FileRetention { days: None }, line)?;
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}
