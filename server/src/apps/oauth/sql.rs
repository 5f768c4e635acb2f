//! OAuth storage on SQL, written once for SQLite and PostgreSQL. Every write that touches a
//! grant scope first locks its `grant_scopes` row (an upsert: a row lock on PostgreSQL, the
//! one writer on SQLite), so grant sends, installation and cleanup never interleave.

use async_trait::async_trait;
use const_format::concatcp;
use futures::future::BoxFuture;
use sqlx::{Postgres, Row as _, Sqlite, Transaction};
use uuid::Uuid;

use super::store::{
    ConnectionRow, FlowRow, GrantRow, GrantUseRow, InstallGrant, NewRevocation, OAuthStore,
    RecordSend, RevocationDone, RotateGrant, SendEnded, USE_HOLD, USE_REVOCATION, USE_SEND,
    UnusedGrant,
};
use crate::sealed::SealedValue;
use crate::store::{StoreError, TxWrite, TxWrites, both_backends, now_ms};

fn sealed(key_id: Option<String>, bytes: Option<Vec<u8>>) -> Option<SealedValue> {
    match (key_id, bytes) {
        (Some(key_id), Some(bytes)) => Some(SealedValue { key_id, bytes }),
        _ => None,
    }
}

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const LOCK_SCOPE: &str = "INSERT INTO grant_scopes (issuer, client_id, locked_at) VALUES ($1, $2, $3) \
         ON CONFLICT (issuer, client_id) DO UPDATE SET locked_at = excluded.locked_at";
    const BUSY: &str = "SELECT COUNT(*) AS n FROM grant_uses WHERE issuer = $1 AND client_id = $2 \
         AND kind IN ($3, $4) AND state = 'active' AND (grant_id IS NULL OR grant_id <> $5)";
    const INSERT_GRANT: &str = "INSERT INTO oauth_grants (id, connection_id, organization_id, issuer, client_id, \
         tokens_key_id, tokens_sealed, expires_at, rotation, source_execution, source_call, state, \
         created_at, updated_at, metadata) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, $14)";
    const INSERT_USE: &str = "INSERT INTO grant_uses (id, organization_id, issuer, client_id, kind, holder_kind, \
         holder_id, grant_id, execution_id, state, result, owner_scope, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, 'connection', $6, $7, $8, $9, NULL, $10, $11, $11) \
         ON CONFLICT (id) DO NOTHING";
    const END_USE: &str = "UPDATE grant_uses SET state = 'done', updated_at = $2 WHERE id = $1";
    const RELEASE_GRANT_UPDATE_GRANT_USES: &str = "UPDATE grant_uses SET state = 'done', updated_at = $3 WHERE grant_id = $1 AND kind = $2 \
         AND state = 'active'";
    const RELEASE_GRANT_UPDATE_OAUTH_GRANTS: &str = "UPDATE oauth_grants SET state = 'released', updated_at = $2 WHERE id = $1 AND state = 'installed'";
    const RECORD_SEND: &str = "SELECT COUNT(*) AS n FROM grant_uses WHERE issuer = $1 AND client_id = $2 AND kind = $3 \
         AND state = 'reserved'";
    const INSTALL_GRANT_SELECT_OAUTH_CONNECTIONS: &str = concatcp!(
        "SELECT grant_id FROM oauth_connections WHERE connection_id = $1",
        Store::FOR_UPDATE
    );
    const INSTALL_GRANT_UPDATE_OAUTH_CONNECTIONS: &str = "UPDATE oauth_connections SET grant_id = $2, status = 'ready', reason = NULL, updated_at = $3 \
         WHERE connection_id = $1";
    const ROTATE_GRANT: &str = "UPDATE oauth_grants SET tokens_key_id = $3, tokens_sealed = $4, expires_at = $5, \
         rotation = rotation + 1, updated_at = $6 WHERE id = $1 AND rotation = $2 AND state = 'installed'";
    const SEND_ENDED_REASON: &str =
        "UPDATE oauth_connections SET reason = $2, updated_at = $3 WHERE connection_id = $1";
    const SEND_ENDED_NEEDS_SIGN_IN: &str = "UPDATE oauth_connections SET status = 'needs_sign_in', reason = $2, updated_at = $3 \
             WHERE connection_id = $1 AND status <> 'removed'";
    const REVOCATION_DONE_UPDATE_GRANT_USES: &str =
        "UPDATE grant_uses SET state = 'done', result = $2, updated_at = $3 WHERE id = $1";
    const REVOCATION_DONE_UPDATE_OAUTH_GRANTS: &str = "UPDATE oauth_grants SET state = 'revoked', tokens_key_id = NULL, tokens_sealed = NULL, \
         updated_at = $2 WHERE id = $1";
    const CONNECTION: &str = "SELECT * FROM oauth_connections WHERE connection_id = $1";
    const PUT_CONNECTION: &str = "INSERT INTO oauth_connections (connection_id, organization_id, resource, issuer, metadata, \
             client_id, client_registered, secret_key_id, secret_sealed, redirect_uri, scope, status, \
             grant_id, reason, created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, \
             $9, $10, $11, $12, NULL, NULL, $13, $14, $14) ON CONFLICT (connection_id) DO UPDATE SET \
             resource = excluded.resource, issuer = excluded.issuer, metadata = excluded.metadata, \
             client_id = excluded.client_id, client_registered = excluded.client_registered, \
             secret_key_id = excluded.secret_key_id, secret_sealed = excluded.secret_sealed, \
             redirect_uri = excluded.redirect_uri, scope = excluded.scope, \
             status = CASE WHEN oauth_connections.status = 'removed' THEN 'needs_sign_in' ELSE oauth_connections.status END, \
             updated_at = excluded.updated_at";
    const PUT_FLOW: &str = "INSERT INTO oauth_flows (id, connection_id, organization_id, member_id, state_hash, \
             verifier_key_id, verifier_sealed, client_id, expires_at, used_at, execution_id, created_at, \
             redirect_uri) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, NULL, $10, $11)";
    const FLOW_BY_STATE: &str = "SELECT * FROM oauth_flows WHERE state_hash = $1";
    const USE_FLOW: &str =
        "UPDATE oauth_flows SET used_at = $2, execution_id = $3 WHERE id = $1 AND used_at IS NULL";
    const GRANT: &str = "SELECT * FROM oauth_grants WHERE id = $1";
    const GRANT_USE: &str = "SELECT * FROM grant_uses WHERE id = $1";
    const SCOPE_RESERVED: &str = "SELECT COUNT(*) AS n FROM grant_uses WHERE issuer = $1 AND client_id = $2 AND kind = $3 \
             AND state = 'reserved'";
    const RESERVE_REVOCATION_SELECT_GRANT_USES: &str = "SELECT * FROM grant_uses WHERE id = $1";
    const RESERVE_REVOCATION_UPDATE_GRANT_USES: &str = "UPDATE grant_uses SET state = 'reserved', execution_id = $2, updated_at = $3 \
             WHERE id = $1 AND state IN ('pending', 'reserved')";
    const REMOVE_SELECT_OAUTH_CONNECTIONS: &str = concatcp!(
        "SELECT grant_id FROM oauth_connections WHERE connection_id = $1",
        Store::FOR_UPDATE
    );
    const REMOVE_UPDATE_OAUTH_CONNECTIONS: &str = "UPDATE oauth_connections SET status = 'removed', grant_id = NULL, updated_at = $2 \
             WHERE connection_id = $1";
    const OPEN_REVOCATIONS: &str = concatcp!(
        "SELECT * FROM grant_uses WHERE kind = $1 AND state <> 'done' AND (",
        "$2",
        Store::UUID_CAST,
        " IS NULL OR id > $2) ORDER BY id LIMIT $3"
    );

    fn connection_row(row: &Row) -> Result<ConnectionRow, StoreError> {
        Ok(ConnectionRow {
            connection_id: row.try_get("connection_id")?,
            organization_id: row.try_get("organization_id")?,
            resource: row.try_get("resource")?,
            issuer: row.try_get("issuer")?,
            metadata: row.try_get("metadata")?,
            client_id: row.try_get("client_id")?,
            client_registered: row.try_get("client_registered")?,
            secret: sealed(row.try_get("secret_key_id")?, row.try_get("secret_sealed")?),
            redirect_uri: row.try_get("redirect_uri")?,
            scope: row.try_get("scope")?,
            status: row.try_get("status")?,
            grant_id: row.try_get("grant_id")?,
            reason: row.try_get("reason")?,
            created_by: row.try_get("created_by")?,
        })
    }

    fn grant_row(row: &Row) -> Result<GrantRow, StoreError> {
        Ok(GrantRow {
            id: row.try_get("id")?,
            connection_id: row.try_get("connection_id")?,
            organization_id: row.try_get("organization_id")?,
            issuer: row.try_get("issuer")?,
            client_id: row.try_get("client_id")?,
            metadata: row.try_get("metadata")?,
            tokens: sealed(row.try_get("tokens_key_id")?, row.try_get("tokens_sealed")?),
            expires_at: row.try_get("expires_at")?,
            rotation: row.try_get("rotation")?,
            source_execution: row.try_get("source_execution")?,
            source_call: row.try_get("source_call")?,
            state: row.try_get("state")?,
        })
    }

    fn use_row(row: &Row) -> Result<GrantUseRow, StoreError> {
        Ok(GrantUseRow {
            id: row.try_get("id")?,
            organization_id: row.try_get("organization_id")?,
            issuer: row.try_get("issuer")?,
            client_id: row.try_get("client_id")?,
            kind: row.try_get("kind")?,
            holder_kind: row.try_get("holder_kind")?,
            holder_id: row.try_get("holder_id")?,
            grant_id: row.try_get("grant_id")?,
            execution_id: row.try_get("execution_id")?,
            state: row.try_get("state")?,
            result: row.try_get("result")?,
            owner_scope: row.try_get("owner_scope")?,
        })
    }

    /// Locks a grant scope for the rest of the transaction.
    async fn lock_scope(
        tx: &mut Transaction<'_, Db>,
        issuer: &str,
        client_id: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(LOCK_SCOPE)
            .bind(issuer)
            .bind(client_id)
            .bind(now_ms())
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Whether anything but grant `except` holds or sends in the scope.
    async fn busy(
        tx: &mut Transaction<'_, Db>,
        issuer: &str,
        client_id: &str,
        except: Uuid,
    ) -> Result<bool, StoreError> {
        let row = sqlx::query(BUSY)
            .bind(issuer)
            .bind(client_id)
            .bind(USE_HOLD)
            .bind(USE_SEND)
            .bind(except)
            .fetch_one(&mut **tx)
            .await?;
        Ok(row.try_get::<i64, _>("n")? > 0)
    }

    async fn insert_grant(
        tx: &mut Transaction<'_, Db>,
        grant: &GrantRow,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        sqlx::query(INSERT_GRANT)
            .bind(grant.id)
            .bind(grant.connection_id)
            .bind(grant.organization_id)
            .bind(&grant.issuer)
            .bind(&grant.client_id)
            .bind(grant.tokens.as_ref().map(|t| t.key_id.clone()))
            .bind(grant.tokens.as_ref().map(|t| t.bytes.clone()))
            .bind(grant.expires_at)
            .bind(grant.rotation)
            .bind(grant.source_execution)
            .bind(&grant.source_call)
            .bind(&grant.state)
            .bind(now)
            .bind(&grant.metadata)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    async fn insert_use(
        tx: &mut Transaction<'_, Db>,
        id: Uuid,
        organization_id: Uuid,
        issuer: &str,
        client_id: &str,
        kind: &str,
        holder_id: Uuid,
        grant_id: Option<Uuid>,
        execution_id: Option<Uuid>,
        state: &str,
        owner_scope: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        sqlx::query(INSERT_USE)
            .bind(id)
            .bind(organization_id)
            .bind(issuer)
            .bind(client_id)
            .bind(kind)
            .bind(holder_id)
            .bind(grant_id)
            .bind(execution_id)
            .bind(state)
            .bind(owner_scope)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn end_use(tx: &mut Transaction<'_, Db>, id: Uuid) -> Result<(), StoreError> {
        sqlx::query(END_USE)
            .bind(id)
            .bind(now_ms())
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn insert_revocation(
        tx: &mut Transaction<'_, Db>,
        revocation: &NewRevocation,
    ) -> Result<(), StoreError> {
        insert_use(
            tx,
            revocation.id,
            revocation.organization_id,
            &revocation.issuer,
            &revocation.client_id,
            USE_REVOCATION,
            revocation.connection_id,
            Some(revocation.grant_id),
            None,
            "pending",
            Some(&revocation.owner_scope),
        )
        .await
    }

    /// Releases grant `grant_id`: its holds end and it is `released`.
    async fn release_grant(tx: &mut Transaction<'_, Db>, grant_id: Uuid) -> Result<(), StoreError> {
        let now = now_ms();
        sqlx::query(RELEASE_GRANT_UPDATE_GRANT_USES)
            .bind(grant_id)
            .bind(USE_HOLD)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        sqlx::query(RELEASE_GRANT_UPDATE_OAUTH_GRANTS)
            .bind(grant_id)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    pub(super) async fn record_send(
        tx: &mut Transaction<'_, Db>,
        w: &RecordSend,
    ) -> Result<(), StoreError> {
        lock_scope(tx, &w.issuer, &w.client_id).await?;
        let reserved = sqlx::query(RECORD_SEND)
            .bind(&w.issuer)
            .bind(&w.client_id)
            .bind(USE_REVOCATION)
            .fetch_one(&mut **tx)
            .await?;
        if reserved.try_get::<i64, _>("n")? > 0 {
            return Err(StoreError::Refused(
                "a revocation holds the grant scope".into(),
            ));
        }
        insert_use(
            tx,
            w.use_id,
            w.organization_id,
            &w.issuer,
            &w.client_id,
            USE_SEND,
            w.connection_id,
            None,
            Some(w.execution_id),
            "active",
            None,
        )
        .await
    }

    pub(super) async fn install_grant(
        tx: &mut Transaction<'_, Db>,
        w: &InstallGrant,
    ) -> Result<(), StoreError> {
        lock_scope(tx, &w.grant.issuer, &w.grant.client_id).await?;
        let current = sqlx::query(INSTALL_GRANT_SELECT_OAUTH_CONNECTIONS)
            .bind(w.grant.connection_id)
            .fetch_optional(&mut **tx)
            .await?;
        let Some(current) = current else {
            return Err(StoreError::Refused("the connection is gone".into()));
        };
        let current: Option<Uuid> = current.try_get("grant_id")?;
        if current != w.previous {
            return Err(StoreError::Refused(
                "the connection's grant changed meanwhile".into(),
            ));
        }
        insert_grant(tx, &w.grant).await?;
        insert_use(
            tx,
            w.hold_id,
            w.grant.organization_id,
            &w.grant.issuer,
            &w.grant.client_id,
            USE_HOLD,
            w.grant.connection_id,
            Some(w.grant.id),
            Some(w.grant.source_execution),
            "active",
            None,
        )
        .await?;
        end_use(tx, w.send_id).await?;
        if let Some(previous) = w.previous {
            release_grant(tx, previous).await?;
        }
        if let Some(revocation) = &w.revocation {
            insert_revocation(tx, revocation).await?;
        }
        sqlx::query(INSTALL_GRANT_UPDATE_OAUTH_CONNECTIONS)
            .bind(w.grant.connection_id)
            .bind(w.grant.id)
            .bind(now_ms())
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    pub(super) async fn rotate_grant(
        tx: &mut Transaction<'_, Db>,
        w: &RotateGrant,
    ) -> Result<(), StoreError> {
        let done = sqlx::query(ROTATE_GRANT)
            .bind(w.grant_id)
            .bind(w.rotation)
            .bind(&w.tokens.key_id)
            .bind(&w.tokens.bytes)
            .bind(w.expires_at)
            .bind(now_ms())
            .execute(&mut **tx)
            .await?;
        if done.rows_affected() != 1 {
            return Err(StoreError::Refused(
                "the grant was refreshed or released meanwhile".into(),
            ));
        }
        end_use(tx, w.send_id).await
    }

    pub(super) async fn send_ended(
        tx: &mut Transaction<'_, Db>,
        w: &SendEnded,
    ) -> Result<(), StoreError> {
        end_use(tx, w.send_id).await?;
        if !w.needs_sign_in && w.reason.is_some() {
            sqlx::query(SEND_ENDED_REASON)
                .bind(w.connection_id)
                .bind(&w.reason)
                .bind(now_ms())
                .execute(&mut **tx)
                .await?;
        }
        if w.needs_sign_in {
            sqlx::query(SEND_ENDED_NEEDS_SIGN_IN)
                .bind(w.connection_id)
                .bind(&w.reason)
                .bind(now_ms())
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    pub(super) async fn unused_grant(
        tx: &mut Transaction<'_, Db>,
        w: &UnusedGrant,
    ) -> Result<(), StoreError> {
        insert_grant(tx, &w.grant).await?;
        insert_revocation(tx, &w.revocation).await
    }

    pub(super) async fn revocation_done(
        tx: &mut Transaction<'_, Db>,
        w: &RevocationDone,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        sqlx::query(REVOCATION_DONE_UPDATE_GRANT_USES)
            .bind(w.use_id)
            .bind(w.result)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        // The tokens are dropped: nothing is left to open.
        sqlx::query(REVOCATION_DONE_UPDATE_OAUTH_GRANTS)
            .bind(w.grant_id)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    #[async_trait]
    impl OAuthStore for Store {
        async fn connection(&self, id: Uuid) -> Result<Option<ConnectionRow>, StoreError> {
            sqlx::query(CONNECTION)
                .bind(id)
                .fetch_optional(self.reader())
                .await?
                .as_ref()
                .map(connection_row)
                .transpose()
        }

        async fn put_connection(&self, row: &ConnectionRow) -> Result<(), StoreError> {
            let now = now_ms();
            sqlx::query(PUT_CONNECTION)
                .bind(row.connection_id)
                .bind(row.organization_id)
                .bind(&row.resource)
                .bind(&row.issuer)
                .bind(&row.metadata)
                .bind(&row.client_id)
                .bind(row.client_registered)
                .bind(row.secret.as_ref().map(|s| s.key_id.clone()))
                .bind(row.secret.as_ref().map(|s| s.bytes.clone()))
                .bind(&row.redirect_uri)
                .bind(&row.scope)
                .bind(&row.status)
                .bind(row.created_by)
                .bind(now)
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn put_flow(&self, row: &FlowRow) -> Result<(), StoreError> {
            sqlx::query(PUT_FLOW)
                .bind(row.id)
                .bind(row.connection_id)
                .bind(row.organization_id)
                .bind(row.member_id)
                .bind(&row.state_hash)
                .bind(&row.verifier.key_id)
                .bind(&row.verifier.bytes)
                .bind(&row.client_id)
                .bind(row.expires_at)
                .bind(now_ms())
                .bind(&row.redirect_uri)
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn flow_by_state(&self, state_hash: &[u8]) -> Result<Option<FlowRow>, StoreError> {
            let Some(row) = sqlx::query(FLOW_BY_STATE)
                .bind(state_hash)
                .fetch_optional(self.reader())
                .await?
            else {
                return Ok(None);
            };
            Ok(Some(FlowRow {
                id: row.try_get("id")?,
                connection_id: row.try_get("connection_id")?,
                organization_id: row.try_get("organization_id")?,
                member_id: row.try_get("member_id")?,
                state_hash: row.try_get("state_hash")?,
                verifier: SealedValue {
                    key_id: row.try_get("verifier_key_id")?,
                    bytes: row.try_get("verifier_sealed")?,
                },
                client_id: row.try_get("client_id")?,
                redirect_uri: row.try_get("redirect_uri")?,
                expires_at: row.try_get("expires_at")?,
                used_at: row.try_get("used_at")?,
            }))
        }

        async fn use_flow(&self, id: Uuid, execution_id: Uuid) -> Result<bool, StoreError> {
            let done = sqlx::query(USE_FLOW)
                .bind(id)
                .bind(now_ms())
                .bind(execution_id)
                .execute(self.writer())
                .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn grant(&self, id: Uuid) -> Result<Option<GrantRow>, StoreError> {
            sqlx::query(GRANT)
                .bind(id)
                .fetch_optional(self.reader())
                .await?
                .as_ref()
                .map(grant_row)
                .transpose()
        }

        async fn grant_use(&self, id: Uuid) -> Result<Option<GrantUseRow>, StoreError> {
            sqlx::query(GRANT_USE)
                .bind(id)
                .fetch_optional(self.reader())
                .await?
                .as_ref()
                .map(use_row)
                .transpose()
        }

        async fn scope_busy(
            &self,
            issuer: &str,
            client_id: &str,
            except: Uuid,
        ) -> Result<bool, StoreError> {
            let mut tx = self.reader().begin().await?;
            let busy = busy(&mut tx, issuer, client_id, except).await?;
            tx.rollback().await?;
            Ok(busy)
        }

        async fn scope_reserved(&self, issuer: &str, client_id: &str) -> Result<bool, StoreError> {
            let row = sqlx::query(SCOPE_RESERVED)
                .bind(issuer)
                .bind(client_id)
                .bind(USE_REVOCATION)
                .fetch_one(self.reader())
                .await?;
            Ok(row.try_get::<i64, _>("n")? > 0)
        }

        async fn reserve_revocation(
            &self,
            id: Uuid,
            execution_id: Uuid,
        ) -> Result<bool, StoreError> {
            let mut tx = self.writer().begin().await?;
            let Some(row) = sqlx::query(RESERVE_REVOCATION_SELECT_GRANT_USES)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?
            else {
                return Err(StoreError::Invalid(format!("revocation {id} is missing")));
            };
            let revocation = use_row(&row)?;
            lock_scope(&mut tx, &revocation.issuer, &revocation.client_id).await?;
            let grant = revocation.grant_id.unwrap_or(Uuid::nil());
            if busy(&mut tx, &revocation.issuer, &revocation.client_id, grant).await? {
                tx.rollback().await?;
                return Ok(false);
            }
            sqlx::query(RESERVE_REVOCATION_UPDATE_GRANT_USES)
                .bind(id)
                .bind(execution_id)
                .bind(now_ms())
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(true)
        }

        async fn remove(
            &self,
            connection_id: Uuid,
            revocation: &NewRevocation,
            extra: TxWrites,
        ) -> Result<bool, StoreError> {
            let mut tx = self.writer().begin().await?;
            lock_scope(&mut tx, &revocation.issuer, &revocation.client_id).await?;
            let row = sqlx::query(REMOVE_SELECT_OAUTH_CONNECTIONS)
                .bind(connection_id)
                .fetch_optional(&mut *tx)
                .await?;
            let grant: Option<Uuid> = match row {
                Some(row) => row.try_get("grant_id")?,
                None => None,
            };
            sqlx::query(REMOVE_UPDATE_OAUTH_CONNECTIONS)
                .bind(connection_id)
                .bind(now_ms())
                .execute(&mut *tx)
                .await?;
            let handed = match grant {
                Some(grant) if grant == revocation.grant_id => {
                    release_grant(&mut tx, grant).await?;
                    insert_revocation(&mut tx, revocation).await?;
                    true
                }
                Some(_) => {
                    return Err(StoreError::Refused(
                        "the connection's grant changed meanwhile".into(),
                    ));
                }
                None => false,
            };
            Self::run_writes(&extra, &mut tx).await?;
            tx.commit().await?;
            Ok(handed)
        }

        async fn open_revocations(
            &self,
            after: Option<Uuid>,
            limit: i64,
        ) -> Result<Vec<GrantUseRow>, StoreError> {
            sqlx::query(OPEN_REVOCATIONS)
                .bind(USE_REVOCATION)
                .bind(after)
                .bind(limit)
                .fetch_all(self.reader())
                .await?
                .iter()
                .map(use_row)
                .collect()
        }
    }
}

/// Implements [`TxWrite`] for a write type with the same-named function of both modules.
macro_rules! oauth_write {
    ($ty:ty, $fn:ident) => {
        impl TxWrite for $ty {
            fn on_sqlite<'a, 'c>(
                &'a self,
                tx: &'a mut Transaction<'c, Sqlite>,
            ) -> BoxFuture<'a, Result<(), StoreError>> {
                Box::pin(on_sqlite::$fn(tx, self))
            }

            fn on_postgres<'a, 'c>(
                &'a self,
                tx: &'a mut Transaction<'c, Postgres>,
            ) -> BoxFuture<'a, Result<(), StoreError>> {
                Box::pin(on_postgres::$fn(tx, self))
            }
        }
    };
}

oauth_write!(RecordSend, record_send);
oauth_write!(InstallGrant, install_grant);
oauth_write!(RotateGrant, rotate_grant);
oauth_write!(SendEnded, send_ended);
oauth_write!(UnusedGrant, unused_grant);
oauth_write!(RevocationDone, revocation_done);
