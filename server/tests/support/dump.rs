//! What a database dump shows: every column of every table searched for a string, as the
//! bytes a dump would hold (text as text, blobs as their bytes).
#![allow(dead_code, clippy::unwrap_used)] // each suite uses some helpers; a failed unwrap is a failed test

use sqlx::{PgPool, Row, SqlitePool};

/// The `table.column`s of an SQLite database in which some row holds `needle`.
pub async fn sqlite_columns_containing(pool: &SqlitePool, needle: &str) -> Vec<String> {
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .fetch_all(pool)
            .await
            .unwrap();
    let mut found = Vec::new();
    for table in tables {
        let columns: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info(?1)")
            .bind(&table)
            .fetch_all(pool)
            .await
            .unwrap();
        for column in columns {
            // Compared as bytes, so text and blob columns are both searched.
            let sql = format!(
                "SELECT count(*) FROM \"{table}\" WHERE instr(CAST(\"{column}\" AS BLOB), CAST(?1 AS BLOB)) > 0"
            );
            let hits: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .bind(needle)
                .fetch_one(pool)
                .await
                .unwrap();
            if hits > 0 {
                found.push(format!("{table}.{column}"));
            }
        }
    }
    found
}

/// The `table.column`s of a PostgreSQL database (its current schema) in which some row holds
/// `needle`.
pub async fn pg_columns_containing(pool: &PgPool, needle: &str) -> Vec<String> {
    let columns = sqlx::query(
        "SELECT c.table_name::text AS t, c.column_name::text AS c, c.data_type::text AS d \
         FROM information_schema.columns c JOIN information_schema.tables t \
           ON t.table_schema = c.table_schema AND t.table_name = c.table_name \
         WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' \
         ORDER BY 1, 2",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut found = Vec::new();
    for row in columns {
        let table: String = row.get("t");
        let column: String = row.get("c");
        let data_type: String = row.get("d");
        // Bytes are searched as bytes; everything else as its text form.
        let condition = if data_type == "bytea" {
            format!("position(convert_to($1, 'UTF8') in \"{column}\") > 0")
        } else {
            format!("strpos(\"{column}\"::text, $1) > 0")
        };
        let sql = format!("SELECT count(*) FROM \"{table}\" WHERE {condition}");
        let hits: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(needle)
            .fetch_one(pool)
            .await
            .unwrap();
        if hits > 0 {
            found.push(format!("{table}.{column}"));
        }
    }
    found
}
