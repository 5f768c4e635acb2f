//! The App store on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use const_format::concatcp;
use openbot_schema::{AppAuthKind, AppConnectionStatus, AppToolDeclaration};
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{AppRow, AppStore, ConnectionRow};
use crate::sealed::SealedValue;
use crate::store::{Millis, StoreError, both_backends};

/// The stored word of an auth kind.
pub(crate) fn auth_word(auth: AppAuthKind) -> &'static str {
    match auth {
        AppAuthKind::None => "none",
        AppAuthKind::Manual => "manual",
        AppAuthKind::Oauth => "oauth",
    }
}

fn auth_of(word: &str) -> Result<AppAuthKind, StoreError> {
    Ok(match word {
        "none" => AppAuthKind::None,
        "manual" => AppAuthKind::Manual,
        "oauth" => AppAuthKind::Oauth,
        other => return Err(StoreError::Invalid(format!("connection auth `{other}`"))),
    })
}

/// The stored word of a Connection status.
pub(crate) fn status_word(status: AppConnectionStatus) -> &'static str {
    match status {
        AppConnectionStatus::Ready => "ready",
        AppConnectionStatus::NeedsSignIn => "needs_sign_in",
        AppConnectionStatus::Removed => "removed",
    }
}

fn status_of(word: &str) -> Result<AppConnectionStatus, StoreError> {
    Ok(match word {
        "ready" => AppConnectionStatus::Ready,
        "needs_sign_in" => AppConnectionStatus::NeedsSignIn,
        "removed" => AppConnectionStatus::Removed,
        other => return Err(StoreError::Invalid(format!("connection status `{other}`"))),
    })
}

fn json<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Invalid(format!("{what}: {e}")))
}

fn text<T: serde::Serialize>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Invalid(format!("{what}: {e}")))
}

macro_rules! app_columns {
    () => {
        "id, organization_id, name, transport, created_at, removed_at"
    };
}

macro_rules! connection_columns {
    () => {
        "id, app_id, organization_id, auth, status, revision, header_names, \
         credentials_key_id, credentials, tools, discovered_at, created_by, created_at"
    };
}

fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(e) if e.is_unique_violation())
}

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const CREATE_APP: &str = concat!(
        "INSERT INTO apps (",
        app_columns!(),
        ") VALUES ($1, $2, $3, $4, $5, NULL) RETURNING ",
        app_columns!()
    );
    const APP: &str = concat!(
        "SELECT ",
        app_columns!(),
        " FROM apps WHERE organization_id = $1 AND id = $2"
    );
    const APP_NAMED: &str = concat!(
        "SELECT ",
        app_columns!(),
        " FROM apps WHERE organization_id = $1 AND name = $2 AND removed_at IS NULL"
    );
    const APPS_PAGE: &str = concatcp!(
        "SELECT ",
        app_columns!(),
        " FROM apps WHERE organization_id = $1 AND removed_at IS NULL \
             AND (",
        "$2",
        Store::UUID_CAST,
        " IS NULL OR id > $2) ORDER BY id LIMIT $3"
    );
    const REMOVE_APP_UPDATE_APPS: &str = "UPDATE apps SET removed_at = $3 WHERE organization_id = $1 AND id = $2 AND removed_at IS NULL";
    const REMOVE_APP_UPDATE_APP_CONNECTIONS: &str = "UPDATE app_connections SET status = 'removed', revision = revision + 1, \
                 credentials_key_id = NULL, credentials = NULL \
                 WHERE organization_id = $1 AND app_id = $2 AND status <> 'removed'";
    const CREATE_CONNECTION: &str = concat!(
        "INSERT INTO app_connections (",
        connection_columns!(),
        ") \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, NULL, $10, $11) RETURNING ",
        connection_columns!()
    );
    const CONNECTION: &str = concat!(
        "SELECT ",
        connection_columns!(),
        " FROM app_connections WHERE organization_id = $1 AND id = $2"
    );
    const CONNECTIONS_PAGE: &str = concatcp!(
        "SELECT ",
        connection_columns!(),
        " FROM app_connections WHERE organization_id = $1 AND app_id = $2 \
             AND status <> 'removed' AND (",
        "$3",
        Store::UUID_CAST,
        " IS NULL OR id > $3) ORDER BY id LIMIT $4"
    );
    const READY_CONNECTION: &str = concat!(
        "SELECT ",
        connection_columns!(),
        " FROM app_connections WHERE organization_id = $1 AND app_id = $2 \
             AND status = 'ready' ORDER BY id DESC LIMIT 1"
    );
    const SET_STATUS: &str = concat!(
        "UPDATE app_connections SET status = $3, revision = revision + 1, \
             credentials_key_id = CASE WHEN $4 THEN NULL ELSE credentials_key_id END, \
             credentials = CASE WHEN $4 THEN NULL ELSE credentials END \
             WHERE organization_id = $1 AND id = $2 AND status <> 'removed' RETURNING ",
        connection_columns!()
    );
    const SAVE_DISCOVERY: &str = concat!(
        "UPDATE app_connections SET tools = $4, discovered_at = $5 \
             WHERE organization_id = $1 AND id = $2 AND revision = $3 AND status <> 'removed' \
             RETURNING ",
        connection_columns!()
    );

    fn app_row(row: &Row) -> Result<AppRow, StoreError> {
        let transport: String = row.try_get("transport")?;
        Ok(AppRow {
            id: row.try_get("id")?,
            organization_id: row.try_get("organization_id")?,
            name: row.try_get("name")?,
            transport: json(&transport, "app transport")?,
            created_at: row.try_get("created_at")?,
            removed_at: row.try_get("removed_at")?,
        })
    }

    fn connection_row(row: &Row) -> Result<ConnectionRow, StoreError> {
        let auth: String = row.try_get("auth")?;
        let status: String = row.try_get("status")?;
        let revision: i64 = row.try_get("revision")?;
        let names: String = row.try_get("header_names")?;
        let key_id: Option<String> = row.try_get("credentials_key_id")?;
        let bytes: Option<Vec<u8>> = row.try_get("credentials")?;
        let tools: Option<String> = row.try_get("tools")?;
        Ok(ConnectionRow {
            id: row.try_get("id")?,
            app_id: row.try_get("app_id")?,
            organization_id: row.try_get("organization_id")?,
            auth: auth_of(&auth)?,
            status: status_of(&status)?,
            revision: u64::try_from(revision).unwrap_or_default(),
            header_names: json(&names, "header names")?,
            credentials: match (key_id, bytes) {
                (Some(key_id), Some(bytes)) => Some(SealedValue { key_id, bytes }),
                _ => None,
            },
            tools: tools.map(|t| json(&t, "discovered tools")).transpose()?,
            discovered_at: row.try_get("discovered_at")?,
            created_by: row.try_get("created_by")?,
            created_at: row.try_get("created_at")?,
        })
    }

    #[async_trait]
    impl AppStore for Store {
        async fn create_app(&self, app: AppRow) -> Result<Option<AppRow>, StoreError> {
            let inserted = sqlx::query(CREATE_APP)
                .bind(app.id)
                .bind(app.organization_id)
                .bind(&app.name)
                .bind(text(&app.transport, "app transport")?)
                .bind(app.created_at)
                .fetch_one(self.writer())
                .await;
            match inserted {
                Ok(row) => app_row(&row).map(Some),
                Err(err) if is_unique_violation(&err) => Ok(None),
                Err(err) => Err(err.into()),
            }
        }

        async fn app(&self, organization: Uuid, id: Uuid) -> Result<Option<AppRow>, StoreError> {
            let row = sqlx::query(APP)
                .bind(organization)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(app_row).transpose()
        }

        async fn app_named(
            &self,
            organization: Uuid,
            name: &str,
        ) -> Result<Option<AppRow>, StoreError> {
            let row = sqlx::query(APP_NAMED)
                .bind(organization)
                .bind(name)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(app_row).transpose()
        }

        async fn apps_page(
            &self,
            organization: Uuid,
            after: Option<Uuid>,
            limit: i64,
        ) -> Result<Vec<AppRow>, StoreError> {
            // IDs are UUIDv7: their order is the order of creation.
            let rows = sqlx::query(APPS_PAGE)
                .bind(organization)
                .bind(after)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(app_row).collect()
        }

        async fn remove_app(
            &self,
            organization: Uuid,
            id: Uuid,
            at: Millis,
        ) -> Result<bool, StoreError> {
            let mut tx = self.writer().begin().await?;
            let removed = sqlx::query(REMOVE_APP_UPDATE_APPS)
                .bind(organization)
                .bind(id)
                .bind(at)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if removed > 0 {
                sqlx::query(REMOVE_APP_UPDATE_APP_CONNECTIONS)
                    .bind(organization)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(removed > 0)
        }

        async fn create_connection(
            &self,
            connection: ConnectionRow,
        ) -> Result<ConnectionRow, StoreError> {
            let (key_id, bytes) = match &connection.credentials {
                Some(sealed) => (Some(sealed.key_id.clone()), Some(sealed.bytes.clone())),
                None => (None, None),
            };
            let row = sqlx::query(CREATE_CONNECTION)
                .bind(connection.id)
                .bind(connection.app_id)
                .bind(connection.organization_id)
                .bind(auth_word(connection.auth))
                .bind(status_word(connection.status))
                .bind(i64::try_from(connection.revision).unwrap_or(i64::MAX))
                .bind(text(&connection.header_names, "header names")?)
                .bind(key_id)
                .bind(bytes)
                .bind(connection.created_by)
                .bind(connection.created_at)
                .fetch_one(self.writer())
                .await?;
            connection_row(&row)
        }

        async fn connection(
            &self,
            organization: Uuid,
            id: Uuid,
        ) -> Result<Option<ConnectionRow>, StoreError> {
            let row = sqlx::query(CONNECTION)
                .bind(organization)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(connection_row).transpose()
        }

        async fn connections_page(
            &self,
            organization: Uuid,
            app: Uuid,
            after: Option<Uuid>,
            limit: i64,
        ) -> Result<Vec<ConnectionRow>, StoreError> {
            let rows = sqlx::query(CONNECTIONS_PAGE)
                .bind(organization)
                .bind(app)
                .bind(after)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(connection_row).collect()
        }

        async fn ready_connection(
            &self,
            organization: Uuid,
            app: Uuid,
        ) -> Result<Option<ConnectionRow>, StoreError> {
            let row = sqlx::query(READY_CONNECTION)
                .bind(organization)
                .bind(app)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(connection_row).transpose()
        }

        async fn set_status(
            &self,
            organization: Uuid,
            id: Uuid,
            status: AppConnectionStatus,
        ) -> Result<Option<ConnectionRow>, StoreError> {
            let removed = status == AppConnectionStatus::Removed;
            let row = sqlx::query(SET_STATUS)
                .bind(organization)
                .bind(id)
                .bind(status_word(status))
                .bind(removed)
                .fetch_optional(self.writer())
                .await?;
            row.as_ref().map(connection_row).transpose()
        }

        async fn save_discovery(
            &self,
            organization: Uuid,
            id: Uuid,
            revision: u64,
            tools: &[AppToolDeclaration],
            at: Millis,
        ) -> Result<Option<ConnectionRow>, StoreError> {
            let row = sqlx::query(SAVE_DISCOVERY)
                .bind(organization)
                .bind(id)
                .bind(i64::try_from(revision).unwrap_or(i64::MAX))
                .bind(text(&tools, "discovered tools")?)
                .bind(at)
                .fetch_optional(self.writer())
                .await?;
            row.as_ref().map(connection_row).transpose()
        }
    }
}
