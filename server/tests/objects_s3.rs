//! Files' bytes in an S3 bucket (issue 17, point 7): a real `openbot serve` with
//! `--objects-url s3://...` against a real S3-compatible server (moto) on 127.0.0.1.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/served.rs"]
mod served;

use std::path::Path;
use std::process::Command;

use openbot_core::{ConnectOptions, Operations, connect};
use openbot_schema::ErrorCode;
use served::Served;

/// A moto server for the test's life.
struct S3 {
    url: String,
    pid: u32,
}

impl S3 {
    fn start() -> Self {
        let pid_file = tempfile::NamedTempFile::new().unwrap();
        let script = Path::new(
            &std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"),
        )
        .join("../scripts/moto-start");
        let output = Command::new(script).arg(pid_file.path()).output().unwrap();
        assert!(
            output.status.success(),
            "moto-start failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let url = String::from_utf8(output.stdout).unwrap().trim().to_string();
        let pid = std::fs::read_to_string(pid_file.path())
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        Self { url, pid }
    }

    async fn create_bucket(&self, name: &str) {
        let answer = reqwest::Client::new()
            .put(format!("{}/{name}", self.url))
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success(), "{}", answer.status());
    }

    /// The keys of the objects in a bucket.
    async fn keys(&self, bucket: &str) -> Vec<String> {
        let listing = reqwest::get(format!("{}/{bucket}?list-type=2", self.url))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        listing
            .split("<Key>")
            .skip(1)
            .filter_map(|part| part.split_once("</Key>").map(|(key, _)| key.to_string()))
            .collect()
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.pid.to_string()).status();
    }
}

fn s3_env<'a>(s3: &'a S3, url: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("OPENBOT_OBJECTS_URL", url),
        ("AWS_ENDPOINT_URL", s3.url.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "test-key"),
        ("AWS_SECRET_ACCESS_KEY", "test-secret"),
        ("AWS_REGION", "us-east-1"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_files_bytes_live_in_the_s3_bucket_under_the_deployments_prefix() {
    let s3 = S3::start();
    s3.create_bucket("openbot-files").await;
    let served = Served::start_with(&s3_env(&s3, "s3://openbot-files/deployment-a"));
    let client = connect(
        &served.base,
        ConnectOptions {
            token: Some(served.token.clone()),
            ..ConnectOptions::default()
        },
    )
    .await
    .unwrap();

    let bytes = b"quarterly numbers\n\x00\x01".to_vec();
    let stored = client
        .upload_file("report.bin", bytes.clone(), "application/octet-stream")
        .await
        .unwrap();
    let keys = s3.keys("openbot-files").await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].starts_with("deployment-a/"), "{keys:?}");
    assert_eq!(client.file_content(&stored.id).await.unwrap().data, bytes);

    client.delete_file(&stored.id).await.unwrap();
    // The object goes with the file's deletion work, which the delete waits for a while.
    for _ in 0..200 {
        if s3.keys("openbot-files").await.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(s3.keys("openbot-files").await.is_empty());
    let gone = client.file_content(&stored.id).await.unwrap_err();
    assert_eq!(gone.code, ErrorCode::NotFound, "{gone}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_bucket_is_missing_refuses_the_upload_with_a_fault_not_a_lost_file() {
    let s3 = S3::start();
    let served = Served::start_with(&s3_env(&s3, "s3://no-such-bucket/a"));
    let client = connect(
        &served.base,
        ConnectOptions {
            token: Some(served.token.clone()),
            ..ConnectOptions::default()
        },
    )
    .await
    .unwrap();
    let err = client
        .upload_file("a.txt", b"a".to_vec(), "text/plain")
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::RequestFailed, "{err}");
    assert!(
        !err.message.contains("test-secret"),
        "the error names no secret: {err}"
    );
    // Nothing was described without its bytes.
    assert!(client.list_files_all().await.unwrap().is_empty());
}
