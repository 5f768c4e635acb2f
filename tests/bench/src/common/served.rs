//! A real `openbot serve` (release build) for the benchmarks that measure the server end to
//! end: migrated first, on a fresh SQLite data folder or an existing PostgreSQL database.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
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
        Self::start_with(openbot, database_url, None)
    }

    /// Like [`Served::start`]; with `traces`, an OTLP/HTTP base URL, the server exports its
    /// spans there at `debug` (`OPENBOT_TRACE_LEVEL`: with the claim spans and wake-up events),
    /// in batches of up to 2,048 every 100 ms from a queue of 65,536 (so none is dropped).
    pub fn start_with(
        openbot: &Path,
        database_url: Option<&str>,
        traces: Option<&str>,
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
        if let Some(endpoint) = traces {
            command
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
                .env("OPENBOT_TRACE_LEVEL", "debug")
                .env("OTEL_BSP_SCHEDULE_DELAY", "100")
                .env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2048")
                .env("OTEL_BSP_MAX_QUEUE_SIZE", "65536");
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
        // Read what else it logs, so its pipe never fills.
        std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
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
        })
    }
}
