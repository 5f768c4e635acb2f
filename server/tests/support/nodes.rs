//! Real `openbot serve` processes for the multi-process tests.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Runs `openbot admin --database-url <url> <args>` with the seal keys `keys`; its standard
/// output (the test fails when it fails).
pub fn admin(url: &str, keys: &str, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_openbot"))
        .args(["admin", "--database-url", url])
        .args(args)
        .env("OPENBOT_SEAL_KEYS", keys)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The JSON lines `text` holds.
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// One node process; killed when dropped.
pub struct NodeProcess {
    pub name: String,
    child: Child,
    _data: tempfile::TempDir,
}

impl NodeProcess {
    /// Starts `openbot serve` on the database at `url`.
    pub fn start(
        url: &str,
        keys: &str,
        name: &str,
        lease_ms: u64,
        fault_point: Option<&str>,
    ) -> Self {
        let env: Vec<(&str, &str)> = fault_point
            .map(|point| ("OPENBOT_FAULT_POINT", point))
            .into_iter()
            .collect();
        Self::start_with(url, keys, name, lease_ms, &env)
    }

    /// Starts `openbot serve` on the database at `url` with these extra environment variables
    /// (a fault point, the fault log).
    pub fn start_with(
        url: &str,
        keys: &str,
        name: &str,
        lease_ms: u64,
        env: &[(&str, &str)],
    ) -> Self {
        Self::start_at(url, keys, name, lease_ms, "127.0.0.1:0", env)
    }

    /// Starts `openbot serve` as [`NodeProcess::start_with`] does, its public API on `bind`.
    pub fn start_at(
        url: &str,
        keys: &str,
        name: &str,
        lease_ms: u64,
        bind: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let data = tempfile::tempdir().unwrap();
        let log =
            std::fs::File::create(std::env::temp_dir().join(format!("openbot-test-{name}.log")))
                .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_openbot"));
        command
            .args([
                "serve",
                "--bind",
                bind,
                "--database-url",
                url,
                "--node-name",
                name,
                "--lease-ms",
                &lease_ms.to_string(),
                "--outbound-allow",
                "loopback",
                "--scripted-dir",
            ])
            .arg(std::env::temp_dir())
            .env("OPENBOT_SEAL_KEYS", keys)
            .env("OPENBOT_DATA_DIR", data.path())
            .env("OPENBOT_LOG", "info")
            .env_remove("OPENBOT_FAULT_POINT")
            .env_remove("OPENBOT_FAULT_LOG")
            .stdout(Stdio::null())
            .stderr(log);
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn().unwrap();
        Self {
            name: name.to_string(),
            child,
            _data: data,
        }
    }

    /// Waits (up to 30 s) until the public API at `base` answers its health check.
    pub async fn wait_ready(base: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if let Ok(answer) = reqwest::get(format!("{base}/v1/health")).await
                && answer.status().is_success()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the node at {base} never answered");
    }

    /// A free address on 127.0.0.1 for a node's public API.
    pub fn free_address() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: the process dies at once, with no chance to release anything.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGSTOP: the process freezes where it is.
    pub fn pause(&self) {
        signal(self.pid(), "-STOP");
    }

    /// SIGCONT: the frozen process goes on.
    pub fn resume(&self) {
        signal(self.pid(), "-CONT");
    }

    /// SIGTERM, then waits for the process to end.
    pub fn stop(&mut self) {
        signal(self.pid(), "-TERM");
        let _ = self.child.wait();
    }

    /// Waits for the process to exit on its own (after a fault point) and returns whether it
    /// ended within the time.
    pub fn wait_exit(&mut self, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        signal(self.pid(), "-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn signal(pid: u32, which: &str) {
    let _ = Command::new("kill")
        .args([which, &pid.to_string()])
        .status();
}
