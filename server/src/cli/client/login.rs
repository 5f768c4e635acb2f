//! `openbot login`: checks a server and token, then saves them for the other commands.

use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;

use clap::Args;
use openbot_core::{ConnectOptions, connect};

use super::profile::Profile;

/// Arguments of `openbot login`.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server, e.g. http://127.0.0.1:8080.
    #[arg(long, env = "OPENBOT_SERVER", default_value = "http://127.0.0.1:8080")]
    server: String,
    /// The API token; read from standard input when not given.
    #[arg(long, env = "OPENBOT_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// Checks the token against the server and saves the login.
pub async fn run(args: LoginArgs) -> anyhow::Result<ExitCode> {
    let token = match args.token {
        Some(token) => token,
        None => {
            if std::io::stdin().is_terminal() {
                eprintln!("openbot: paste the API token and press Enter:");
            }
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            line.trim().to_string()
        }
    };
    anyhow::ensure!(!token.is_empty(), "no token given");
    let client = connect(
        &args.server,
        ConnectOptions {
            token: Some(token.clone()),
            ..ConnectOptions::default()
        },
    )
    .await?;
    // A read every token may do proves the server and the token.
    client.list_bots().await?;
    let path = Profile {
        server: args.server.clone(),
        token,
    }
    .save()?;
    eprintln!(
        "openbot: logged in to {}; saved in {}",
        args.server,
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}
