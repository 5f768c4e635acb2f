//! A real `openbot serve` (release build) for the benchmarks that measure the server end to
//! end: migrated first, on a fresh SQLite data folder or an existing PostgreSQL database.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, bail, ensure};

/// A running server; killed when dropped.
pub struct Served {
    /// The process.
    pub child: Child,
    /// Its base URL, e.g. `http://127.0.0.1:41234`.
    pub api: String,
    /// The admin token printed on first start.
    pub token: String,
    /// From spawning the process to its "listening" line, in ms.
    #[allow(dead_code)] // not every benchmark that includes this file reports it
    pub ready_ms: f64,
    /// The start time the server reports itself, in ms.
    #[allow(dead_code)] // not every benchmark that includes this file reports it
    pub ready_reported_ms: Option<f64>,
    /// The data folder.
    pub data: tempfile::TempDir,
    /// The server's timing lines (target `openbot::timing`), as they arrive; empty unless
    /// started with timings on.
    #[allow(dead_code)] // read only by the benchmarks that start it with timings
    pub timings: Arc<Mutex<Vec<String>>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// Migrates and starts `openbot` on `database_url`, or on SQLite in a new folder.
    #[allow(dead_code)] // not every benchmark that includes this file starts it this way
    pub fn start(openbot: &Path, database_url: Option<&str>) -> anyhow::Result<Self> {
        Self::start_with(openbot, database_url, false)
    }

    /// Like [`Served::start`]; with `timings`, the server logs its timing lines
    /// (`OPENBOT_LOG=error,openbot::timing=debug`), collected in [`Served::timings`].
    pub fn start_with(
        openbot: &Path,
        database_url: Option<&str>,
        timings: bool,
    ) -> anyhow::Result<Self> {
        let data = tempfile::tempdir()?;
        let mut node_args: Vec<String> =
            vec!["--data-dir".into(), data.path().display().to_string()];
        if let Some(url) = database_url {
            node_args.extend(["--database-url".into(), url.to_string()]);
        }
        let keys = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        let migrated = Command::new(openbot)
            .arg("migrate")
            .args(&node_args)
            .output()?;
        ensure!(
            migrated.status.success(),
            "migrate failed: {}",
            String::from_utf8_lossy(&migrated.stderr)
        );
        let started = Instant::now();
        let mut command = Command::new(openbot);
        if timings {
            command
                .env("OPENBOT_LOG", "error,openbot::timing=debug")
                .env("NO_COLOR", "1");
        }
        let mut child = command
            .arg("serve")
            .args(&node_args)
            .args(["--bind", "127.0.0.1:0"])
            .env("OPENBOT_SEAL_KEYS", keys)
            // The benchmarks' scripts and tool endpoints: the temp folder and loopback.
            .env("OPENBOT_SCRIPTED_DIR", std::env::temp_dir())
            .env("OPENBOT_OUTBOUND_ALLOW", "loopback")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let (api, ready_reported_ms) = loop {
            let Some(line) = lines.next() else {
                bail!("the server stopped before it was ready")
            };
            let line = line?;
            if let Some(at) = line.find("http://") {
                let api = line[at..]
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let reported = line
                    .split("ready in ")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|n| n.parse::<f64>().ok());
                break (api, reported);
            }
        };
        let ready_ms = started.elapsed().as_secs_f64() * 1000.0;
        let collected = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&collected);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if line.contains("openbot::timing") {
                    sink.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(line);
                }
            }
        });
        let token = {
            let stdout = child.stdout.take().context("no stdout")?;
            BufReader::new(stdout)
                .lines()
                .next()
                .context("no token")??
        };
        Ok(Self {
            child,
            api,
            token,
            ready_ms,
            ready_reported_ms,
            data,
            timings: collected,
        })
    }
}
