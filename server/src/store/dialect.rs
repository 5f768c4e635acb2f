//! One store body for both databases, and the few places where their SQL differs.
//!
//! A store is written once, inside [`sql_store!`], which expands it twice: in a module
//! `on_sqlite` with `Store = SqliteStore` and `Row = SqliteRow`, and in a module `on_postgres`
//! with `Store = PostgresStore` and `Row = PgRow`. Queries take `$N` placeholders, which both
//! drivers read, and are written with `concat!`, so that a dialect word is a macro that expands
//! to the database's own text:
//!
//! | macro | SQLite | PostgreSQL |
//! | --- | --- | --- |
//! | `in_bot_limit!("col", "$N")` | `$N` is NULL or `col` is in the JSON array `$N` (hex ids) | the same with `jsonb_array_elements_text` |
//! | `bot_in!("col", "$N")` | `col` is in the JSON array `$N` | the same on PostgreSQL |
//! | `text_in!("col", "$N")` | the text `col` is in the JSON array of strings `$N` | the same on PostgreSQL |
//! | `for_update!()` | nothing (one writer holds the database) | ` FOR UPDATE` |
//! | `for_share!()` | nothing | ` FOR SHARE` |
//! | `skip_locked!()` | nothing | ` FOR UPDATE SKIP LOCKED` (nodes claim side by side) |
//! | `run_writes!(writes, tx)` | capability writes on SQLite | on PostgreSQL |
//! | `uuid_param!("$N")` | `$N` | `$N::uuid` (a bare `$N IS NULL` has no type there) |
//! | `text_param!("$N")` | `$N` | `$N::text` |
//! | `bytewise!()` | nothing (text compares by bytes) | ` COLLATE "C"` (by bytes, as Rust orders text) |
//!
//! Everything else that differs is a function of each backend's own file (`sqlite.rs`,
//! `postgres.rs`): connection setup, migrations and the schema probe, batched inserts and
//! updates (a loop on SQLite, `UNNEST` arrays on PostgreSQL).
//!
//! Both stores have `pool()` (writes) and `reader()` (reads: SQLite's read connections; the one
//! pool on PostgreSQL). Values bind the same way on both: `bool` is an `INTEGER` 0/1 on SQLite
//! and a `BOOLEAN` on PostgreSQL, `Uuid` a `BLOB` and a `uuid`, and sums are cast with
//! `CAST(... AS BIGINT)`.

/// Expands a store body once per database (see the module documentation).
macro_rules! sql_store {
    ($($body:tt)*) => {
        #[allow(unused_imports)]
        mod on_sqlite {
            use super::*;
            #[allow(dead_code)]
            type Store = $crate::store::SqliteStore;
            #[allow(dead_code)]
            type Row = sqlx::sqlite::SqliteRow;
            #[allow(dead_code)]
            type Db = sqlx::Sqlite;
            #[allow(unused_macros)]
            macro_rules! bot_in {
                ($col:literal, $param:literal) => {
                    concat!("lower(hex(", $col, ")) IN (SELECT lower(replace(value, '-', '')) FROM json_each(", $param, "))")
                };
            }
            #[allow(unused_macros)]
            macro_rules! text_in {
                ($col:literal, $param:literal) => {
                    concat!($col, " IN (SELECT value FROM json_each(", $param, "))")
                };
            }
            #[allow(unused_macros)]
            macro_rules! for_share {
                () => { "" };
            }
            #[allow(unused_macros)]
            macro_rules! skip_locked {
                () => { "" };
            }
            #[allow(unused_macros)]
            macro_rules! run_writes {
                ($writes:expr, $tx:expr) => { $writes.on_sqlite($tx) };
            }
            #[allow(unused_macros)]
            macro_rules! in_bot_limit {
                ($col:literal, $param:literal) => {
                    concat!("(", $param, " IS NULL OR ", bot_in!($col, $param), ")")
                };
            }
            #[allow(unused_macros)]
            macro_rules! for_update {
                () => { "" };
            }
            #[allow(unused_macros)]
            macro_rules! uuid_param {
                ($param:literal) => { $param };
            }
            #[allow(unused_macros)]
            macro_rules! text_param {
                ($param:literal) => { $param };
            }
            #[allow(unused_macros)]
            macro_rules! bytewise {
                () => { "" };
            }
            $($body)*
        }
        #[allow(unused_imports)]
        mod on_postgres {
            use super::*;
            #[allow(dead_code)]
            type Store = $crate::store::PostgresStore;
            #[allow(dead_code)]
            type Row = sqlx::postgres::PgRow;
            #[allow(dead_code)]
            type Db = sqlx::Postgres;
            #[allow(unused_macros)]
            macro_rules! bot_in {
                ($col:literal, $param:literal) => {
                    concat!($col, "::text IN (SELECT jsonb_array_elements_text(", $param, "::jsonb))")
                };
            }
            #[allow(unused_macros)]
            macro_rules! text_in {
                ($col:literal, $param:literal) => {
                    concat!($col, " IN (SELECT jsonb_array_elements_text(", $param, "::jsonb))")
                };
            }
            #[allow(unused_macros)]
            macro_rules! for_share {
                () => { " FOR SHARE" };
            }
            #[allow(unused_macros)]
            macro_rules! skip_locked {
                () => { " FOR UPDATE SKIP LOCKED" };
            }
            #[allow(unused_macros)]
            macro_rules! run_writes {
                ($writes:expr, $tx:expr) => { $writes.on_postgres($tx) };
            }
            #[allow(unused_macros)]
            macro_rules! in_bot_limit {
                ($col:literal, $param:literal) => {
                    concat!("(", $param, "::text IS NULL OR ", bot_in!($col, $param), ")")
                };
            }
            #[allow(unused_macros)]
            macro_rules! for_update {
                () => { " FOR UPDATE" };
            }
            #[allow(unused_macros)]
            macro_rules! uuid_param {
                ($param:literal) => { concat!($param, "::uuid") };
            }
            #[allow(unused_macros)]
            macro_rules! text_param {
                ($param:literal) => { concat!($param, "::text") };
            }
            #[allow(unused_macros)]
            macro_rules! bytewise {
                () => { " COLLATE \"C\"" };
            }
            $($body)*
        }
    };
}

pub(crate) use sql_store;

impl super::PostgresStore {
    /// The pool reads use: on PostgreSQL the one pool (SQLite keeps read connections apart).
    pub fn reader(&self) -> &sqlx::PgPool {
        self.pool()
    }
}
