//! A real PostgreSQL for tests: the server named by `OPENBOT_TEST_DATABASE_URL`, or one started
//! with `scripts/pg-start` (reused across runs; `scripts/pg-stop` removes it). Each test gets
//! a database of its own.
#![allow(dead_code)]

use std::sync::OnceLock;

use sqlx::Connection;

/// The URL of the test server's maintenance database.
pub fn server_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("OPENBOT_TEST_DATABASE_URL") {
            return url;
        }
        let script = format!(
            "{}/../scripts/pg-start",
            std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR")
        );
        let output = std::process::Command::new(&script)
            .output()
            .expect("scripts/pg-start runs");
        assert!(
            output.status.success(),
            "pg-start failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout)
            .expect("a URL")
            .trim()
            .to_string()
    })
    .clone()
}

/// A new, empty database at this build's schema version; returns its URL.
pub async fn fresh_database() -> String {
    let url = empty_database().await;
    openbot_server::store::PostgresStore::migrate(&url)
        .await
        .expect("migrations apply");
    url
}

/// A new database with no schema at all; returns its URL.
pub async fn empty_database() -> String {
    let server = server_url();
    let name = format!("openbot_t_{}", uuid::Uuid::now_v7().simple());
    let mut admin = sqlx::PgConnection::connect(&server)
        .await
        .expect("the test server accepts connections");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .expect("create database");
    admin.close().await.ok();
    let (base, _) = server.rsplit_once('/').expect("a URL with a database");
    format!("{base}/{name}")
}
