//! One store body for both databases, and the few places where their SQL differs.
//!
//! A store is written once, as an ordinary module marked `#[both_backends]` (rustfmt formats
//! it; rust-analyzer reads it), which expands its items with [`sql_store!`] twice: in a module
//! `on_sqlite` with `Store = SqliteStore`, `Row = SqliteRow` and `Db = Sqlite`, and in a
//! module `on_postgres` with `Store = PostgresStore`, `Row = PgRow` and `Db = Postgres`.
//! Queries take `$N` placeholders, which both drivers read.
//!
//! What each database brings is the backend contract, [`super::SqlBackend`], implemented by
//! both stores: the dialect words as constants (`Store::FOR_UPDATE`, `FOR_SHARE`,
//! `SKIP_LOCKED`, `BYTEWISE`, `UUID_CAST`, `TEXT_CAST`, spliced in with
//! `const_format::concatcp!`), the pools, and the operations that differ (batched inserts and
//! lease renewals: a loop on SQLite, `UNNEST` arrays on PostgreSQL; how a commit is written;
//! capability writes). Three SQL fragments take a column and a parameter, so they are
//! templates here rather than constants:
//!
//! | macro | SQLite | PostgreSQL |
//! | --- | --- | --- |
//! | `in_bot_limit!("col", "$N")` | `$N` is NULL or `col` is in the JSON array `$N` (hex ids) | the same with `jsonb_array_elements_text` |
//! | `bot_in!("col", "$N")` | `col` is in the JSON array `$N` | the same on PostgreSQL |
//! | `text_in!("col", "$N")` | the text `col` is in the JSON array of strings `$N` | the same on PostgreSQL |
//!
//! Values bind the same way on both: `bool` is an `INTEGER` 0/1 on SQLite and a `BOOLEAN` on
//! PostgreSQL, `Uuid` a `BLOB` and a `uuid`, and sums are cast with `CAST(... AS BIGINT)`.

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
            #[allow(unused_imports)]
            use $crate::store::SqlBackend as _;
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
            macro_rules! in_bot_limit {
                ($col:literal, $param:literal) => {
                    concat!("(", $param, " IS NULL OR ", bot_in!($col, $param), ")")
                };
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
            #[allow(unused_imports)]
            use $crate::store::SqlBackend as _;
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
            macro_rules! in_bot_limit {
                ($col:literal, $param:literal) => {
                    concat!("(", $param, "::text IS NULL OR ", bot_in!($col, $param), ")")
                };
            }
            $($body)*
        }
    };
}

pub(crate) use sql_store;
