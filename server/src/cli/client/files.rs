//! `openbot files`: your files on a server (upload, list, show, download, delete) and the
//! organization's file retention (see docs/files.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{FileId, FileRetention, PutFileRetention, StoredFile, StoredFilePage};

use super::ServerArgs;
use super::paging::{PageArgs, list};

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
    /// Lists your files, newest first.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Uploads a file (at most 20 MiB); prints its ID.
    Upload {
        /// The file to read (`-` for standard input, then --name is needed).
        path: PathBuf,
        /// Its name on the server (default: the file's name).
        #[arg(long)]
        name: Option<String>,
        /// Its media type (default: from the file's extension, else application/octet-stream).
        #[arg(long)]
        media_type: Option<String>,
    },
    /// Shows a file's description.
    Show {
        /// The file's ID.
        id: FileId,
    },
    /// Writes a file's bytes to standard output or to --output.
    Download {
        /// The file's ID.
        id: FileId,
        /// Write to this path instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Deletes a file.
    Delete {
        /// The file's ID.
        id: FileId,
    },
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

fn file_line(file: &StoredFile) -> String {
    format!(
        "{}  {}  {}  {} bytes  sha256 {}",
        file.id, file.name, file.media_type, file.size, file.sha256
    )
}

/// A media type from a file name's extension.
fn media_type_of(name: &str) -> &'static str {
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match extension.as_deref() {
        Some("txt") => "text/plain",
        Some("md") => "text/markdown",
        Some("csv") => "text/csv",
        Some("html" | "htm") => "text/html",
        Some("json") => "application/json",
        Some("pdf") => "application/pdf",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        _ => "application/octet-stream",
    }
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
        FilesCommand::List { page } => {
            list::<StoredFilePage>(&client, "/v1/files", &page, output, file_line, "no files")
                .await?;
        }
        FilesCommand::Upload {
            path,
            name,
            media_type,
        } => {
            let (bytes, default_name) = if path.as_os_str() == "-" {
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)?;
                (bytes, None)
            } else {
                let bytes = std::fs::read(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
                (bytes, name)
            };
            let name = name
                .or(default_name)
                .ok_or_else(|| anyhow::anyhow!("give the file's name with --name"))?;
            let media_type = media_type.unwrap_or_else(|| media_type_of(&name).to_string());
            let file = client.upload_file(&name, bytes, &media_type).await?;
            output.print(&file, |file| file.id.to_string())?;
        }
        FilesCommand::Show { id } => {
            let file = client.get_file(&id).await?;
            output.print(&file, file_line)?;
        }
        FilesCommand::Download { id, output: path } => {
            let content = client.file_content(&id).await?;
            match path {
                Some(path) => {
                    std::fs::write(&path, &content.data)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    let written = serde_json::json!({
                        "id": id,
                        "path": path.display().to_string(),
                        "size": content.data.len(),
                        "media_type": content.content_type,
                    });
                    output.print(&written, |_| {
                        format!("wrote {} bytes to {}", content.data.len(), path.display())
                    })?;
                }
                None => {
                    let mut stdout = std::io::stdout().lock();
                    stdout.write_all(&content.data)?;
                    stdout.flush()?;
                }
            }
        }
        FilesCommand::Delete { id } => {
            client.delete_file(&id).await?;
            output.print(&serde_json::json!({"deleted": id}), |_| {
                format!("deleted {id}")
            })?;
        }
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
