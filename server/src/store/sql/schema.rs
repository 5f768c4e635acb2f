//! Applying the schema migrations, written once for SQLite and PostgreSQL (each backend opens
//! its connection and, on PostgreSQL, takes the advisory lock first).

use sqlx::Transaction;

use crate::store::both_backends;
use crate::store::migrate::{Migration, statements};
use crate::store::{StoreError, now_ms};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    impl Store {
        /// Applies, inside `tx`, the migrations of `list` the database lacks, recording each;
        /// returns the version the database had before.
        pub(crate) async fn apply_migrations(
            tx: &mut Transaction<'_, Db>,
            list: &[Migration],
        ) -> Result<i64, StoreError> {
            sqlx::query(
                "CREATE TABLE IF NOT EXISTS openbot_schema (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
            )
            .execute(&mut **tx)
            .await?;
            let current: i64 = sqlx::query_scalar(
                "SELECT CAST(COALESCE(MAX(version), 0) AS BIGINT) FROM openbot_schema",
            )
            .fetch_one(&mut **tx)
            .await?;
            for migration in list.iter().filter(|m| m.version > current) {
                for statement in statements(migration.sql) {
                    sqlx::query(sqlx::AssertSqlSafe(statement))
                        .execute(&mut **tx)
                        .await?;
                }
                sqlx::query(
                    "INSERT INTO openbot_schema (version, name, applied_at) VALUES ($1, $2, $3)",
                )
                .bind(migration.version)
                .bind(migration.name)
                .bind(now_ms())
                .execute(&mut **tx)
                .await?;
            }
            Ok(current)
        }
    }
}
