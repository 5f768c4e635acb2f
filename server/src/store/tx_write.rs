//! Rows a capability writes in the transaction of an engine write.
//!
//! A step's commit (and a decision on a request) is the one place where state, results, events
//! and outbox commit together. A capability that must write with it (plan mode switched off by
//! an approved plan; App grants, settlements, memory changes and channel sends next) hands the
//! engine a [`TxWrite`] instead of adding a field to [`super::Commit`] and a branch to the
//! stores: the engine runs each one inside its transaction, after its own rows, and knows no
//! capability names. A failing write rolls the whole transaction back.
//!
//! A capability writes its SQL once with [`tx_write!`], which gives both databases the same body
//! (`$N` placeholders read on both).

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use sqlx::{Postgres, Sqlite, Transaction};

use super::StoreError;

/// A capability's rows in an engine transaction, for both databases.
pub trait TxWrite: Send + Sync + fmt::Debug {
    /// Writes the rows on SQLite.
    fn on_sqlite<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Sqlite>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Writes the rows on PostgreSQL.
    fn on_postgres<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Postgres>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
}

/// The capability writes of one engine transaction, in order. Two lists are equal when they
/// hold the same writes (the same allocations).
#[derive(Clone, Default)]
pub struct TxWrites(pub Vec<Arc<dyn TxWrite>>);

impl TxWrites {
    /// One write.
    pub fn one(write: impl TxWrite + 'static) -> Self {
        Self(vec![Arc::new(write)])
    }

    /// Runs every write in a SQLite transaction.
    pub(crate) async fn on_sqlite(
        &self,
        tx: &mut Transaction<'_, Sqlite>,
    ) -> Result<(), StoreError> {
        for write in &self.0 {
            write.on_sqlite(tx).await?;
        }
        Ok(())
    }

    /// Runs every write in a PostgreSQL transaction.
    pub(crate) async fn on_postgres(
        &self,
        tx: &mut Transaction<'_, Postgres>,
    ) -> Result<(), StoreError> {
        for write in &self.0 {
            write.on_postgres(tx).await?;
        }
        Ok(())
    }
}

impl fmt::Debug for TxWrites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl PartialEq for TxWrites {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len() && self.0.iter().zip(&other.0).all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

/// Implements [`TxWrite`] for a type with one body for both databases:
/// `tx_write!(PlanApproved, |this, tx| { sqlx::query("...").bind(this.id).execute(&mut **tx).await?; Ok(()) });`
macro_rules! tx_write {
    ($ty:ty, |$this:ident, $tx:ident| $body:block) => {
        impl $crate::store::TxWrite for $ty {
            fn on_sqlite<'a, 'c>(
                &'a self,
                $tx: &'a mut sqlx::Transaction<'c, sqlx::Sqlite>,
            ) -> futures::future::BoxFuture<'a, Result<(), $crate::store::StoreError>> {
                let $this = self;
                Box::pin(async move $body)
            }

            fn on_postgres<'a, 'c>(
                &'a self,
                $tx: &'a mut sqlx::Transaction<'c, sqlx::Postgres>,
            ) -> futures::future::BoxFuture<'a, Result<(), $crate::store::StoreError>> {
                let $this = self;
                Box::pin(async move $body)
            }
        }
    };
}

pub(crate) use tx_write;
