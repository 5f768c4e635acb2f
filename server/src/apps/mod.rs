//! Apps: MCP servers an organization offers its Bots as tool sources, and the Connections it
//! opens to them (none, manual credentials sealed at rest, or OAuth filled by the OAuth
//! service). Discovery is its own operation and saves the tool list on the Connection; a Bot
//! names App tools as `<app>__<tool>`, a Turn saves each one's full declaration and the
//! Connection's revision when it is submitted, and a saved call checks both and sends without
//! listing again (see [`tool`]).

pub mod connector;
mod credentials;
mod error;
pub mod oauth;
mod oauth_link;
mod route;
mod service;
mod sql;
mod store;
pub mod tool;
mod vault_headers;

pub use connector::ConnectorReach;
pub use credentials::{ConnectionCredentials, CredentialsError, SealedCredentials};
pub use error::AppError;
pub use oauth_link::{AppStatusWrite, OAuthCredentials, begin_sign_in, phase_credentials};
pub use route::AppTools;
pub use service::{
    AppPermits, Apps, MAX_HEADERS, app_scopes, app_view, check_app_name, connection_view, upstream,
};
pub use store::{AppRow, AppStore, ConnectionRow, credentials_place};
pub use vault_headers::{header_references, render_headers};

/// The resource directory's scope of Connection `id`: every MCP session a call on it opens,
/// which removing the Connection waits for.
pub fn connection_scope(id: uuid::Uuid) -> String {
    format!("app_connection:{id}")
}

/// The App use cases a phase calls App tools with: over `store`, asking `credentials` (or
/// the sealed none/manual credentials opened with `keys`), registering each MCP session in
/// `resources` (the node's directory) when given. `None` without a store.
pub fn phase_apps(
    store: Option<&std::sync::Arc<dyn AppStore>>,
    credentials: Option<&std::sync::Arc<dyn ConnectionCredentials>>,
    keys: &crate::sealed::KeyRing,
    platform: &crate::platform::Platform,
    permits: Option<AppPermits>,
    resources: Option<crate::cluster::directory::PhaseScope>,
    connectors: Option<std::sync::Arc<dyn ConnectorReach>>,
) -> Option<std::sync::Arc<Apps>> {
    let store = store?;
    let credentials = credentials.cloned().unwrap_or_else(|| {
        std::sync::Arc::new(SealedCredentials::new(keys.clone()))
            as std::sync::Arc<dyn ConnectionCredentials>
    });
    let apps = Apps::new(
        std::sync::Arc::clone(store),
        keys.clone(),
        platform.clone(),
        credentials,
    );
    let apps = match permits {
        Some(permits) => apps.with_permits(permits),
        None => apps,
    }
    .with_connectors(connectors);
    Some(std::sync::Arc::new(match resources {
        Some(resources) => apps.with_resources(resources),
        None => apps,
    }))
}
