//! The real MCP servers the App tests use, installed by `scripts/mcp-install` into
//! `$HOME/.cache/openbot/mcp` (or `OPENBOT_MCP_DIR`): `@modelcontextprotocol/server-everything`
//! (stdio and streamable HTTP), `mcp-server-time` (stdio) and the steerable fixture server
//! `server/tests/support/mcp_fixture.py` on the same venv's `mcp` SDK.
#![allow(dead_code, clippy::unwrap_used)] // each suite uses some helpers; a failed unwrap is a failed test

use std::path::PathBuf;
use std::time::Duration;

use openbot_schema::AppTransport;

/// Where `scripts/mcp-install` put the servers; panics with the fix when they are missing.
pub fn mcp_dir() -> PathBuf {
    let dir = std::env::var_os("OPENBOT_MCP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/openbot/mcp")
        });
    assert!(
        dir.join("venv/bin/mcp-server-time").exists() && everything_in(&dir).exists(),
        "the MCP test servers are not installed in {}: run scripts/mcp-install",
        dir.display()
    );
    dir
}

fn everything_in(dir: &std::path::Path) -> PathBuf {
    dir.join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// server-everything on stdio.
pub fn everything_stdio() -> AppTransport {
    AppTransport::Stdio {
        command: "node".into(),
        args: vec![
            everything_in(&mcp_dir()).display().to_string(),
            "stdio".into(),
        ],
    }
}

/// mcp-server-time on stdio.
pub fn time_stdio() -> AppTransport {
    AppTransport::Stdio {
        command: mcp_dir()
            .join("venv/bin/mcp-server-time")
            .display()
            .to_string(),
        args: vec!["--local-timezone".into(), "UTC".into()],
    }
}

/// The fixture server's script.
pub fn fixture_script() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"))
        .join("../server/tests/support/mcp_fixture.py")
        .canonicalize()
        .unwrap()
}

/// The fixture on stdio, logging to `log`, each call taking `delay` seconds, its
/// `write_note` description read from `description` when given.
pub fn fixture_stdio(
    log: &std::path::Path,
    delay: f64,
    description: Option<&std::path::Path>,
) -> AppTransport {
    fixture_stdio_with(log, delay, description, None)
}

/// [`fixture_stdio`] where only the first call takes `delay` (it leaves `once_marker`).
pub fn fixture_stdio_with(
    log: &std::path::Path,
    delay: f64,
    description: Option<&std::path::Path>,
    once_marker: Option<&std::path::Path>,
) -> AppTransport {
    let mut args = vec![
        fixture_script().display().to_string(),
        "--log".into(),
        log.display().to_string(),
        "--delay".into(),
        delay.to_string(),
    ];
    if let Some(file) = description {
        args.push("--description-file".into());
        args.push(file.display().to_string());
    }
    if let Some(marker) = once_marker {
        args.push("--once-marker".into());
        args.push(marker.display().to_string());
    }
    AppTransport::Stdio {
        command: mcp_dir().join("venv/bin/python").display().to_string(),
        args,
    }
}

/// The fixture's log lines so far.
pub fn fixture_log(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waits up to 30 s until the fixture's log has a line starting with `prefix`.
pub async fn wait_for_log(log: &std::path::Path, prefix: &str) -> Vec<String> {
    for _ in 0..300 {
        let lines = fixture_log(log);
        if lines.iter().any(|l| l.starts_with(prefix)) {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the fixture never logged `{prefix}`: {:?}",
        fixture_log(log)
    );
}

/// A server process that is killed when dropped.
pub struct Running {
    child: tokio::process::Child,
    /// Its streamable-HTTP endpoint.
    pub url: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn wait_listening(port: u16) {
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the MCP server on port {port} never listened");
}

/// server-everything on streamable HTTP at `http://127.0.0.1:<port>/mcp`.
pub async fn everything_http() -> Running {
    let port = free_port();
    let child = tokio::process::Command::new("node")
        .arg(everything_in(&mcp_dir()))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_listening(port).await;
    Running {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

/// The fixture on streamable HTTP, logging to `log`, each call taking `delay` seconds.
pub async fn fixture_http(log: &std::path::Path, delay: f64) -> Running {
    let port = free_port();
    let child = tokio::process::Command::new(mcp_dir().join("venv/bin/python"))
        .arg(fixture_script())
        .args([
            "--log",
            &log.display().to_string(),
            "--delay",
            &delay.to_string(),
        ])
        .args(["--http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_listening(port).await;
    Running {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}
