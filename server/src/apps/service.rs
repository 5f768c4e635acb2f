//! The App use cases: register, list and remove Apps; open, list and remove Connections; run
//! discovery. Rights are checked by the HTTP layer (like the tool registry: `bots` read to
//! see and discover, `bots` write and the owner or admin role to change); every query here
//! is scoped to the caller's organization.

use std::collections::BTreeMap;
use std::sync::Arc;

use openbot_core::mcp::{McpEndpoint, McpError, McpSession};
use openbot_schema::{
    App, AppAuthKind, AppConnection, AppConnectionStatus, AppDiscovery, AppTransport, NewApp,
    NewAppConnection,
};
use uuid::Uuid;

use super::credentials::{ConnectionCredentials, CredentialsError};
use super::error::AppError;
use super::store::{AppRow, AppStore, ConnectionRow, credentials_place};
use crate::cluster::directory::ResourceStatus;
use crate::platform::Platform;
use crate::sealed::KeyRing;
use crate::store::{StoreError, now_ms, stored_time, stored_time_opt};

/// The most headers a manual Connection sends.
pub const MAX_HEADERS: usize = 20;

/// The most tools a discovery saves.
pub const MAX_TOOLS: usize = 1000;

/// The most bytes of tool declarations a discovery saves (as JSON).
pub const MAX_DISCOVERY_BYTES: usize = 4 * 1024 * 1024;

/// The App use cases. Cheap to clone.
#[derive(Clone)]
pub struct Apps {
    store: Arc<dyn AppStore>,
    keys: KeyRing,
    platform: Platform,
    credentials: Arc<dyn ConnectionCredentials>,
    /// The shared limits App calls take room in, and the phase's owner generation.
    permits: Option<AppPermits>,
    /// Opens Vault references in manual headers for a discovery.
    vault: Option<crate::vaults::VaultOpener>,
    /// Where a phase's MCP sessions are registered before they connect.
    resources: Option<crate::cluster::directory::PhaseScope>,
    /// The node's directory, which closes a removed Connection's sessions on every node.
    directory: Option<Arc<crate::cluster::directory::Directory>>,
    /// How Connector Apps reach their Computers, where this node can.
    connectors: Option<Arc<dyn super::ConnectorReach>>,
}

/// Where a phase's App calls take room: the shared limits (the scopes `apps` and
/// `app:<name>`), held by the execution's owner generation like its model requests' room.
#[derive(Clone)]
pub struct AppPermits {
    /// The shared limits.
    pub limits: crate::limits::Limits,
    /// The phase owner's generation.
    pub generation: i64,
}

/// The limit scopes an App call takes room in: every App call, and this App's.
pub fn app_scopes(app_name: &str) -> Vec<String> {
    vec!["apps".to_string(), format!("app:{app_name}")]
}

/// The public view of an App.
pub fn app_view(row: &AppRow) -> Result<App, StoreError> {
    Ok(App {
        id: row.id,
        name: row.name.clone(),
        transport: row.transport.clone(),
        created_at: stored_time(row.created_at)?,
    })
}

/// The public view of a Connection: header names, never their values.
pub fn connection_view(row: &ConnectionRow) -> Result<AppConnection, StoreError> {
    Ok(AppConnection {
        id: row.id,
        app_id: row.app_id,
        auth: row.auth,
        status: row.status,
        revision: row.revision,
        header_names: row.header_names.clone(),
        tool_count: row
            .tools
            .as_ref()
            .map(|t| u32::try_from(t.len()).unwrap_or(u32::MAX)),
        discovered_at: stored_time_opt(row.discovered_at)?,
        created_at: stored_time(row.created_at)?,
    })
}

/// An App name: 1-40 of `a-z 0-9 -`, starting with a letter (so `<app>__<tool>` splits
/// unambiguously and fits a model's tool name).
pub fn check_app_name(name: &str) -> Result<(), AppError> {
    let ok = (1..=40).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(AppError::Invalid(
            "an App name is 1-40 of a-z 0-9 -, starting with a letter".into(),
        ))
    }
}

/// How an MCP failure reads for the caller.
pub fn upstream(err: McpError) -> AppError {
    match err {
        McpError::Refused(why) => AppError::Invalid(why),
        other => AppError::Upstream(other.to_string()),
    }
}

impl Apps {
    /// The use cases on `store`, sealing manual credentials with `keys`, reaching Apps as
    /// `platform` allows, with `credentials` answering what a Connection sends.
    pub fn new(
        store: Arc<dyn AppStore>,
        keys: KeyRing,
        platform: Platform,
        credentials: Arc<dyn ConnectionCredentials>,
    ) -> Self {
        Self {
            store,
            keys,
            platform,
            credentials,
            permits: None,
            vault: None,
            resources: None,
            directory: None,
            connectors: None,
        }
    }

    /// The same use cases, reaching Connector Apps through `reach` (when given).
    pub fn with_connectors(mut self, reach: Option<Arc<dyn super::ConnectorReach>>) -> Self {
        self.connectors = reach;
        self
    }

    /// How Connector Apps are reached: refused where this node cannot reach Computers.
    pub(crate) fn connectors(&self) -> Result<&Arc<dyn super::ConnectorReach>, AppError> {
        self.connectors.as_ref().ok_or_else(|| {
            AppError::Invalid(
                "Connectors are reached only on a server with paired Computers".into(),
            )
        })
    }

    /// The same use cases, closing a removed Connection's MCP sessions through `directory`
    /// (on whichever node holds them) before the removal answers.
    pub fn with_directory(mut self, directory: Arc<crate::cluster::directory::Directory>) -> Self {
        self.directory = Some(directory);
        self
    }

    /// The same use cases, whose discoveries open Vault references in manual headers with
    /// `opener`.
    pub fn with_vault(mut self, opener: crate::vaults::VaultOpener) -> Self {
        self.vault = Some(opener);
        self
    }

    /// The same use cases, whose App calls take room in the shared limits first.
    pub fn with_permits(mut self, permits: AppPermits) -> Self {
        self.permits = Some(permits);
        self
    }

    /// Where App calls take room, if they do.
    pub(crate) fn permits(&self) -> Option<&AppPermits> {
        self.permits.as_ref()
    }

    /// The same use cases, registering each MCP session a call opens in `resources`.
    pub fn with_resources(mut self, resources: crate::cluster::directory::PhaseScope) -> Self {
        self.resources = Some(resources);
        self
    }

    /// Where a call's MCP sessions are registered, if they are.
    pub(crate) fn resources(&self) -> Option<&crate::cluster::directory::PhaseScope> {
        self.resources.as_ref()
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn AppStore> {
        &self.store
    }

    /// How MCP sessions are opened on this deployment.
    pub fn mcp_options(&self) -> openbot_core::mcp::OpenOptions {
        self.platform.mcp_options()
    }

    /// What Connections send.
    pub fn credentials(&self) -> &Arc<dyn ConnectionCredentials> {
        &self.credentials
    }

    async fn check_transport(
        &self,
        organization: Uuid,
        member: Uuid,
        transport: &AppTransport,
    ) -> Result<(), AppError> {
        match transport {
            AppTransport::Http { url } => {
                let valid = reqwest::Url::parse(url)
                    .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
                if !valid {
                    return Err(AppError::Invalid(
                        "transport.url must be an http:// or https:// URL".into(),
                    ));
                }
                self.platform
                    .outbound()
                    .check_url(url)
                    .map_err(|e| AppError::Invalid(e.to_string()))
            }
            AppTransport::Stdio { command, args } => {
                if !self.platform.stdio_apps() {
                    return Err(AppError::Invalid(
                        "stdio Apps are not enabled on this deployment (the operator starts the server with --stdio-apps)".into(),
                    ));
                }
                if command.trim().is_empty() || command.len() > 1000 || args.len() > 100 {
                    return Err(AppError::Invalid(
                        "transport.command must be 1-1000 characters with at most 100 args".into(),
                    ));
                }
                Ok(())
            }
            AppTransport::Connector {
                computer_id,
                connector,
            } => {
                // The machine names its Connectors by the same rule as an App's name.
                check_app_name(connector).map_err(|_| {
                    AppError::Invalid(
                        "transport.connector is 1-40 of a-z 0-9 -, starting with a letter".into(),
                    )
                })?;
                self.connectors()?
                    .check_publish(organization, member, *computer_id)
                    .await
            }
        }
    }

    /// Registers an App of the organization for `member`, who may publish what its
    /// transport names (a Connector: a Computer it may use).
    pub async fn register(
        &self,
        organization: Uuid,
        member: Uuid,
        request: NewApp,
    ) -> Result<App, AppError> {
        check_app_name(&request.name)?;
        self.check_transport(organization, member, &request.transport)
            .await?;
        let row = AppRow {
            id: Uuid::now_v7(),
            organization_id: organization,
            name: request.name,
            transport: request.transport,
            created_at: now_ms(),
            removed_at: None,
        };
        match self.store.create_app(row).await? {
            Some(row) => Ok(app_view(&row)?),
            None => Err(AppError::Conflict(
                "the organization has an App of that name".into(),
            )),
        }
    }

    /// A live App of the organization.
    pub async fn live_app(&self, organization: Uuid, id: Uuid) -> Result<AppRow, AppError> {
        match self.store.app(organization, id).await? {
            Some(row) if row.removed_at.is_none() => Ok(row),
            _ => Err(AppError::NotFound("app")),
        }
    }

    /// Removes an App; its Connections are removed with it, each OAuth one handing its grant
    /// to cleanup in the transaction that removes it.
    pub async fn remove(&self, organization: Uuid, id: Uuid) -> Result<(), AppError> {
        self.live_app(organization, id).await?;
        let mut after = None;
        loop {
            let page = self
                .store
                .connections_page(organization, id, after, 100)
                .await?;
            let Some(last) = page.last() else { break };
            after = Some(last.id);
            for row in page.iter().filter(|row| row.auth == AppAuthKind::Oauth) {
                self.credentials
                    .remove(row)
                    .await
                    .map_err(|e| AppError::Upstream(e.to_string()))?;
            }
        }
        if self.store.remove_app(organization, id, now_ms()).await? {
            Ok(())
        } else {
            Err(AppError::NotFound("app"))
        }
    }

    /// Opens a Connection to an App: `none` (nothing to send), `manual` (the given headers,
    /// sealed) or `oauth` (no tokens yet: it needs a person to sign in).
    pub async fn connect(
        &self,
        organization: Uuid,
        member: Uuid,
        app: Uuid,
        request: NewAppConnection,
    ) -> Result<AppConnection, AppError> {
        let app = self.live_app(organization, app).await?;
        let id = Uuid::now_v7();
        // In name order, so the sealed JSON and the listed names do not depend on a hash.
        let headers: BTreeMap<String, String> = request.headers.into_iter().collect();
        let (status, credentials) = match request.auth {
            AppAuthKind::None | AppAuthKind::Oauth if !headers.is_empty() => {
                return Err(AppError::Invalid(
                    "headers are only for manual connections".into(),
                ));
            }
            AppAuthKind::None => (AppConnectionStatus::Ready, None),
            AppAuthKind::Oauth => (AppConnectionStatus::NeedsSignIn, None),
            AppAuthKind::Manual => {
                check_headers(&headers)?;
                // References are saved as written; the caller checked what they name.
                super::vault_headers::header_references(&headers)
                    .map_err(|e| AppError::Invalid(e.to_string()))?;
                if !matches!(app.transport, AppTransport::Http { .. }) {
                    return Err(AppError::Invalid(
                        "a stdio or Connector App takes no headers: connect it with auth none"
                            .into(),
                    ));
                }
                let plain =
                    serde_json::to_vec(&headers).map_err(|e| AppError::Invalid(e.to_string()))?;
                let sealed = self
                    .keys
                    .seal_at(&credentials_place(id), &plain)
                    .map_err(|e| AppError::Upstream(e.to_string()))?;
                (AppConnectionStatus::Ready, Some(sealed))
            }
        };
        let row = ConnectionRow {
            id,
            app_id: app.id,
            organization_id: organization,
            auth: request.auth,
            status,
            revision: 1,
            header_names: headers.keys().cloned().collect(),
            credentials,
            tools: None,
            discovered_at: None,
            created_by: Some(member),
            created_at: now_ms(),
        };
        let row = self.store.create_connection(row).await?;
        Ok(connection_view(&row)?)
    }

    /// A Connection of a live App of the organization, removed ones too.
    pub async fn connection(
        &self,
        organization: Uuid,
        app: Uuid,
        id: Uuid,
    ) -> Result<ConnectionRow, AppError> {
        self.live_app(organization, app).await?;
        match self.store.connection(organization, id).await? {
            Some(row) if row.app_id == app => Ok(row),
            _ => Err(AppError::NotFound("connection")),
        }
    }

    /// Removes a Connection: a new revision, its credentials dropped. Saved calls that name it
    /// fail with a clear result from now on.
    pub async fn disconnect(
        &self,
        organization: Uuid,
        app: Uuid,
        id: Uuid,
    ) -> Result<(), AppError> {
        let row = self.connection(organization, app, id).await?;
        if row.status == AppConnectionStatus::Removed {
            // Removed before: only sessions not known to be closed are left to wait for.
            return match self.close_sessions(id).await? {
                true => Err(AppError::NotFound("connection")),
                false => Ok(()),
            };
        }
        // An OAuth grant goes to cleanup in the transaction that removes the Connection.
        let removed = self
            .credentials
            .remove(&row)
            .await
            .map_err(|e| AppError::Upstream(e.to_string()))?
            || self
                .store
                .set_status(organization, id, AppConnectionStatus::Removed)
                .await?
                .is_some();
        if !removed {
            return Err(AppError::NotFound("connection"));
        }
        // New calls are refused from here on; the sessions open now are closed by their
        // owners, old routes included.
        self.close_sessions(id).await?;
        Ok(())
    }

    /// Closes every MCP session of Connection `id` on any node. `Ok(true)` when all were
    /// closed before this call, `Ok(false)` when it closed the rest;
    /// [`AppError::CleanupPending`] names those not known to be closed now.
    async fn close_sessions(&self, id: Uuid) -> Result<bool, AppError> {
        let Some(directory) = &self.directory else {
            return Ok(true);
        };
        let scope = super::connection_scope(id);
        let before = directory.scope(&scope).await?;
        if before.iter().all(|(_, s)| *s == ResourceStatus::Closed) {
            return Ok(true);
        }
        let after = directory.close_scope(&scope).await?;
        let open: Vec<String> = after
            .iter()
            .filter_map(|(resource, status)| match status {
                ResourceStatus::Closed => None,
                ResourceStatus::Failed { error_id } => Some(format!(
                    "{resource} (its close failed, error ID {error_id})"
                )),
                ResourceStatus::Open => Some(format!("{resource} (its owner did not answer)")),
                ResourceStatus::Unknown => Some(format!(
                    "{resource} (its owner stopped without saving a close)"
                )),
            })
            .collect();
        if open.is_empty() {
            Ok(false)
        } else {
            Err(AppError::CleanupPending(format!(
                "the connection is removed, but {} of its sessions are not known to be closed: {}",
                open.len(),
                open.join(", ")
            )))
        }
    }

    /// The MCP server an OAuth Connection signs in at: the URL of its App. Only a live
    /// Connection of a live App of the organization that was opened with auth `oauth` has
    /// one; [`AppError::NotFound`] for anything else of another organization or removed,
    /// [`AppError::Conflict`] for a Connection of another kind or a stdio App.
    pub async fn oauth_server_url(
        &self,
        organization: Uuid,
        connection: Uuid,
    ) -> Result<String, AppError> {
        let row = match self.store.connection(organization, connection).await? {
            Some(row) if row.status != AppConnectionStatus::Removed => row,
            _ => return Err(AppError::NotFound("connection")),
        };
        let app = self.live_app(organization, row.app_id).await?;
        if row.auth != AppAuthKind::Oauth {
            return Err(AppError::Conflict(
                "the connection was not opened with auth oauth: open an OAuth connection to sign in".into(),
            ));
        }
        match app.transport {
            AppTransport::Http { url } => Ok(url),
            AppTransport::Stdio { .. } | AppTransport::Connector { .. } => Err(AppError::Conflict(
                "a stdio or Connector App has no URL to sign in at".into(),
            )),
        }
    }

    /// Where a Connection's App is and what to send it now.
    pub async fn endpoint(
        &self,
        app: &AppRow,
        connection: &ConnectionRow,
    ) -> Result<McpEndpoint, AppError> {
        let headers = self
            .credentials
            .headers(connection)
            .await
            .map_err(|e| match e {
                CredentialsError::NeedsSignIn | CredentialsError::Removed => {
                    AppError::Conflict(e.to_string())
                }
                CredentialsError::Unreadable => AppError::Upstream(e.to_string()),
            })?;
        Ok(McpEndpoint {
            transport: app.transport.clone(),
            headers,
        })
    }

    /// Discovery: opens a session on the Connection, lists every tool with its schemas and
    /// annotations, saves the list on the Connection (Bots' Turns take their declarations
    /// from it) and closes the session.
    ///
    /// Vault references in manual headers are opened as `member`, through the Connection's
    /// rule (a discovery has no Bot).
    pub async fn discover(
        &self,
        organization: Uuid,
        member: Uuid,
        app: Uuid,
        id: Uuid,
    ) -> Result<AppDiscovery, AppError> {
        let app = self.live_app(organization, app).await?;
        let row = self.connection(organization, app.id, id).await?;
        if row.status == AppConnectionStatus::Removed {
            return Err(AppError::NotFound("connection"));
        }
        let mut endpoint = self.endpoint(&app, &row).await?;
        // Only headers a member wrote hold references (never an OAuth token's text).
        let refs = if row.auth == AppAuthKind::Manual {
            super::vault_headers::header_references(&endpoint.headers)
                .map_err(|e| AppError::Invalid(e.to_string()))?
        } else {
            Default::default()
        };
        if !refs.is_empty() {
            let opener = self.vault.as_ref().ok_or_else(|| {
                AppError::Conflict("Vault references cannot be opened on this node".into())
            })?;
            let path = crate::vaults::ReaderPath {
                organization,
                member,
                bot: None,
                through: crate::vaults::Through::AppConnection {
                    id: row.id,
                    app: app.name.clone(),
                },
            };
            let values = opener
                .open(&refs, &path, false)
                .await
                .map_err(|err| match err {
                    crate::vaults::OpenError::Refused(why) => AppError::Conflict(why),
                    crate::vaults::OpenError::Store(err) => AppError::Store(err),
                })?;
            endpoint.headers = super::vault_headers::render_headers(&endpoint.headers, &values)
                .map_err(|e| AppError::Invalid(e.to_string()))?;
        }
        let tools = match &app.transport {
            AppTransport::Connector {
                computer_id,
                connector,
            } => self
                .connectors()?
                .tools(*computer_id, connector)
                .await
                .map_err(upstream)?,
            _ => {
                let session = McpSession::open(&endpoint, &self.platform.mcp_options())
                    .await
                    .map_err(upstream)?;
                let listed = session.list_tools().await;
                // A discovery keeps no session: a failed close changes nothing it read.
                let _ = session.close().await;
                listed.map_err(upstream)?
            }
        };
        // A server cannot make the database keep an unbounded list.
        let size = serde_json::to_vec(&tools)
            .map(|b| b.len())
            .unwrap_or(usize::MAX);
        if tools.len() > MAX_TOOLS || size > MAX_DISCOVERY_BYTES {
            return Err(AppError::Upstream(format!(
                "the App declares more than {MAX_TOOLS} tools or {} MiB of declarations",
                MAX_DISCOVERY_BYTES / (1024 * 1024)
            )));
        }
        let at = now_ms();
        let saved = self
            .store
            .save_discovery(organization, id, row.revision, &tools, at)
            .await?
            .ok_or_else(|| {
                AppError::Conflict("the connection changed during discovery: run it again".into())
            })?;
        Ok(AppDiscovery {
            connection_id: saved.id,
            revision: saved.revision,
            tools,
            discovered_at: stored_time(at)?,
        })
    }
}

fn check_headers(headers: &BTreeMap<String, String>) -> Result<(), AppError> {
    if headers.is_empty() || headers.len() > MAX_HEADERS {
        return Err(AppError::Invalid(format!(
            "a manual connection sends 1-{MAX_HEADERS} headers"
        )));
    }
    for (name, value) in headers {
        let valid_name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok();
        if !valid_name || name.len() > 100 {
            return Err(AppError::Invalid(format!(
                "`{}` is not an HTTP header name",
                name.chars().take(100).collect::<String>()
            )));
        }
        // The value is a secret: the error names only its header.
        if reqwest::header::HeaderValue::from_str(value).is_err() || value.len() > 8000 {
            return Err(AppError::Invalid(format!(
                "the value of header `{name}` is not a valid header value"
            )));
        }
        let lower = name.to_ascii_lowercase();
        if matches!(
            lower.as_str(),
            "host"
                | "content-length"
                | "content-type"
                | "accept"
                | "mcp-session-id"
                | "mcp-protocol-version"
                | "connection"
                | "transfer-encoding"
        ) {
            return Err(AppError::Invalid(format!(
                "the header `{name}` is set by the MCP transport"
            )));
        }
    }
    Ok(())
}
