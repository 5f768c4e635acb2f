//! A real `openbot serve` process on a fresh SQLite data folder, as an SDK user runs it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A served node; killed when dropped.
pub struct Served {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// The admin token it printed on its first start.
    pub token: String,
    data: tempfile::TempDir,
    child: Option<Child>,
    /// Every line the node (each of its runs) wrote to standard error.
    log: Arc<Mutex<String>>,
}

impl Served {
    /// Migrates a fresh data folder and serves it on a free port.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// The same, with these variables in the server's environment.
    pub fn start_with(env: &[(&str, &str)]) -> Self {
        let data = tempfile::tempdir().unwrap();
        let status = Command::new(env!("CARGO_BIN_EXE_openbot"))
            .args(["migrate", "--data-dir"])
            .arg(data.path())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "openbot migrate failed");
        let log = Arc::default();
        let (child, base, token) = serve(data.path(), "127.0.0.1:0", env, &log);
        Self {
            base,
            token: token.expect("the first start prints the admin token"),
            data,
            child: Some(child),
            log,
        }
    }

    /// What the node wrote to standard error so far (all its runs).
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The node's data folder.
    pub fn data_dir(&self) -> &Path {
        self.data.path()
    }

    /// SIGKILL: the node dies at once, releasing nothing.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the node again on the same data folder and port.
    pub fn restart(&mut self) {
        self.restart_with(&[]);
    }

    /// The same, with these variables in the server's environment.
    pub fn restart_with(&mut self, env: &[(&str, &str)]) {
        self.kill();
        let bind = self.base.trim_start_matches("http://").to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // The old socket may linger for a moment.
            if std::net::TcpListener::bind(&bind).is_ok() || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let (child, base, _) = serve(self.data.path(), &bind, env, &self.log);
        assert_eq!(base, self.base);
        self.child = Some(child);
    }
}

impl Served {
    /// Long polls the events of `execution` (at most 50 polls of up to 10 s each) until the
    /// page that ends it: every event read, in order, and whether the end was read.
    pub async fn events_to_end(&self, execution: &str) -> (Vec<serde_json::Value>, bool) {
        let http = reqwest::Client::new();
        let mut events = Vec::new();
        let mut after = 0;
        for _ in 0..50 {
            let page: serde_json::Value = http
                .get(format!(
                    "{}/v1/executions/{execution}/events?after={after}&wait=10",
                    self.base
                ))
                .bearer_auth(&self.token)
                .send()
                .await
                .expect("the server is up")
                .json()
                .await
                .unwrap();
            events.extend(page["events"].as_array().unwrap().iter().cloned());
            after = page["next_after"].as_u64().unwrap();
            if page["ended"].as_bool().unwrap() {
                return (events, true);
            }
        }
        (events, false)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `openbot serve` and waits until it listens; the token line is read when printed.
fn serve(
    data: &Path,
    bind: &str,
    env: &[(&str, &str)],
    log: &Arc<Mutex<String>>,
) -> (Child, String, Option<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_openbot"))
        .args(["serve", "--lease-ms", "1000", "--bind", bind, "--data-dir"])
        .arg(data)
        .arg("--scripted-dir")
        .arg(std::env::temp_dir())
        .env(
            "OPENBOT_LOG",
            std::env::var("OPENBOT_TEST_SERVE_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .env_remove("OPENBOT_FAULT_POINT")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut base = None;
    let mut line = String::new();
    while base.is_none() {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "openbot serve ended before listening"
        );
        log.lock().unwrap().push_str(&line);
        if let Some(at) = line.find("http://") {
            base = Some(line[at..].split_whitespace().next().unwrap().to_string());
        }
    }
    // Keep draining stderr so the node never blocks on a full pipe; with
    // OPENBOT_TEST_SERVE_LOG set, the node's log goes to this test's standard error.
    let echo = std::env::var_os("OPENBOT_TEST_SERVE_LOG").is_some();
    let kept = Arc::clone(log);
    std::thread::spawn(move || {
        let mut sink = String::new();
        while stderr.read_line(&mut sink).unwrap_or(0) > 0 {
            if echo {
                eprint!("[node] {sink}");
            }
            kept.lock().unwrap().push_str(&sink);
            sink.clear();
        }
    });
    let stdout = child.stdout.take().unwrap();
    let token = {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut first = String::new();
            let _ = BufReader::new(stdout).read_line(&mut first);
            let _ = sender.send(first);
        });
        receiver
            .recv_timeout(Duration::from_millis(500))
            .ok()
            .map(|line| line.trim().to_string())
            .filter(|line| !line.is_empty())
    };
    (child, base.unwrap(), token)
}
