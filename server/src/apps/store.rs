//! The App store: Apps and their Connections per organization.

use async_trait::async_trait;
use openbot_schema::{AppAuthKind, AppConnectionStatus, AppToolDeclaration, AppTransport};
use uuid::Uuid;

use crate::sealed::SealedValue;
use crate::store::{Millis, StoreError};

/// A registered App.
#[derive(Debug, Clone, PartialEq)]
pub struct AppRow {
    /// Its ID.
    pub id: Uuid,
    /// Its organization.
    pub organization_id: Uuid,
    /// Its name, unique among the organization's live Apps.
    pub name: String,
    /// Where its MCP server is.
    pub transport: AppTransport,
    /// When it was registered.
    pub created_at: Millis,
    /// When it was removed, if it was.
    pub removed_at: Option<Millis>,
}

/// A Connection to an App.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionRow {
    /// Its ID.
    pub id: Uuid,
    /// The App.
    pub app_id: Uuid,
    /// Its organization.
    pub organization_id: Uuid,
    /// How it authenticates.
    pub auth: AppAuthKind,
    /// Whether calls may use it.
    pub status: AppConnectionStatus,
    /// Grows with each change of credentials or status.
    pub revision: u64,
    /// The names of the headers it sends.
    pub header_names: Vec<String>,
    /// The header values (a JSON object), sealed for this row; manual credentials only.
    pub credentials: Option<SealedValue>,
    /// The tools its last discovery found.
    pub tools: Option<Vec<AppToolDeclaration>>,
    /// When the last discovery ran.
    pub discovered_at: Option<Millis>,
    /// The member who opened it.
    pub created_by: Option<Uuid>,
    /// When it was opened.
    pub created_at: Millis,
}

/// The place a Connection's credentials are sealed for: bound to its row.
pub fn credentials_place(connection: Uuid) -> Vec<u8> {
    let mut place = b"app_connections/".to_vec();
    place.extend_from_slice(connection.as_bytes());
    place
}

/// Apps and Connections per organization. Every read and write names the organization, so
/// one organization never reaches another's rows.
#[async_trait]
pub trait AppStore: Send + Sync + 'static {
    /// Registers an App; `None` when a live App of the organization has its name.
    async fn create_app(&self, app: AppRow) -> Result<Option<AppRow>, StoreError>;

    /// One of the organization's Apps, removed ones too.
    async fn app(&self, organization: Uuid, id: Uuid) -> Result<Option<AppRow>, StoreError>;

    /// The organization's live App of that name.
    async fn app_named(&self, organization: Uuid, name: &str)
    -> Result<Option<AppRow>, StoreError>;

    /// Up to `limit` of the organization's live Apps, oldest first, after the App `after`.
    async fn apps_page(
        &self,
        organization: Uuid,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<AppRow>, StoreError>;

    /// Removes a live App and, in the same transaction, marks each of its Connections
    /// removed (a new revision, credentials dropped). Returns whether it was live.
    async fn remove_app(
        &self,
        organization: Uuid,
        id: Uuid,
        at: Millis,
    ) -> Result<bool, StoreError>;

    /// Opens a Connection.
    async fn create_connection(
        &self,
        connection: ConnectionRow,
    ) -> Result<ConnectionRow, StoreError>;

    /// One of the organization's Connections, removed ones too.
    async fn connection(
        &self,
        organization: Uuid,
        id: Uuid,
    ) -> Result<Option<ConnectionRow>, StoreError>;

    /// Up to `limit` of an App's Connections that are not removed, oldest first, after the
    /// Connection `after`.
    async fn connections_page(
        &self,
        organization: Uuid,
        app: Uuid,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<ConnectionRow>, StoreError>;

    /// The newest ready Connection of an App: the one a Bot's App tools use.
    async fn ready_connection(
        &self,
        organization: Uuid,
        app: Uuid,
    ) -> Result<Option<ConnectionRow>, StoreError>;

    /// Sets a Connection's status with a new revision (dropping its credentials when it is
    /// removed). Returns the row as it is now, `None` when there is none or it is removed.
    async fn set_status(
        &self,
        organization: Uuid,
        id: Uuid,
        status: AppConnectionStatus,
    ) -> Result<Option<ConnectionRow>, StoreError>;

    /// Saves what a discovery found, when the Connection is still at `revision`. Returns the
    /// row as it is now; `None` when it changed meanwhile (nothing saved).
    async fn save_discovery(
        &self,
        organization: Uuid,
        id: Uuid,
        revision: u64,
        tools: &[AppToolDeclaration],
        at: Millis,
    ) -> Result<Option<ConnectionRow>, StoreError>;
}
