//! Where Apps and OAuth meet: an OAuth Connection's headers come from the OAuth service at
//! the call boundary, and its status follows its grant in the transaction that changes the
//! grant (a sign-in makes it `ready`; a refresh refused for good, `needs_sign_in`).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use openbot_schema::{AppAuthKind, AppConnectionStatus, BeginOAuth, OAuthAuthorization, Resource};
use uuid::Uuid;

use super::credentials::{ConnectionCredentials, CredentialsError, SealedCredentials};
use super::error::AppError;
use super::oauth::{ConnectionStatusWrite, OAuth, OAuthError};
use super::service::Apps;
use super::store::ConnectionRow;
use crate::identity::{Action, Caller};
use crate::sealed::KeyRing;
use crate::store::{TxWrite, tx_write};

/// Sets an App Connection's status, unless it was removed, and only when the OAuth setup
/// that changes is of the Connection's own organization.
#[derive(Debug)]
struct SetConnectionStatus {
    id: Uuid,
    status: &'static str,
}

tx_write!(SetConnectionStatus, |this, tx| {
    let changed = sqlx::query(
        "UPDATE app_connections SET status = $1 WHERE id = $2 AND status <> 'removed' \
         AND organization_id = (SELECT organization_id FROM oauth_connections \
         WHERE connection_id = $2)",
    )
    .bind(this.status)
    .bind(this.id)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    // A grant is never installed on a removed Connection: the refusal rolls the install
    // back, and the token work hands the grant to cleanup as an unused one.
    if changed == 0 && this.status == "ready" {
        return Err(crate::store::StoreError::Refused(
            "the App connection was removed".into(),
        ));
    }
    Ok(())
});

/// Marks an App Connection removed (a new revision, manual credentials dropped), in the
/// transaction that hands its OAuth grant to cleanup.
#[derive(Debug)]
struct RemoveConnection {
    organization: Uuid,
    id: Uuid,
}

tx_write!(RemoveConnection, |this, tx| {
    sqlx::query(
        "UPDATE app_connections SET status = 'removed', revision = revision + 1, \
         credentials_key_id = NULL, credentials = NULL \
         WHERE organization_id = $1 AND id = $2 AND status <> 'removed'",
    )
    .bind(this.organization)
    .bind(this.id)
    .execute(&mut **tx)
    .await?;
    Ok(())
});

/// The [`ConnectionStatusWrite`] of `app_connections`.
pub struct AppStatusWrite;

impl ConnectionStatusWrite for AppStatusWrite {
    fn status(&self, connection_id: Uuid, status: &'static str) -> Option<Arc<dyn TxWrite>> {
        Some(Arc::new(SetConnectionStatus {
            id: connection_id,
            status,
        }))
    }
}

/// Credentials of every Connection kind: OAuth ones from the OAuth service (refreshed when
/// their access token expired), none and manual ones sealed at rest.
pub struct OAuthCredentials {
    oauth: OAuth,
    sealed: SealedCredentials,
}

impl OAuthCredentials {
    /// OAuth Connections through `oauth`; the others opened with `keys`.
    pub fn new(oauth: OAuth, keys: KeyRing) -> Self {
        Self {
            oauth,
            sealed: SealedCredentials::new(keys),
        }
    }
}

#[async_trait]
impl ConnectionCredentials for OAuthCredentials {
    async fn headers(
        &self,
        connection: &ConnectionRow,
    ) -> Result<BTreeMap<String, String>, CredentialsError> {
        if connection.auth != AppAuthKind::Oauth {
            return self.sealed.headers(connection).await;
        }
        if connection.status == AppConnectionStatus::Removed {
            return Err(CredentialsError::Removed);
        }
        match self
            .oauth
            .access_headers_of(connection.organization_id, connection.id)
            .await
        {
            Ok(headers) => Ok(headers.into_iter().collect()),
            Err(OAuthError::NeedsSignIn(_) | OAuthError::NotFound) => {
                Err(CredentialsError::NeedsSignIn)
            }
            // The cause may name the authorization server; it is logged, never sent on.
            Err(err) => {
                tracing::warn!(connection = %connection.id, error = %err, "an OAuth connection's token could not be read");
                Err(CredentialsError::Unreadable)
            }
        }
    }

    async fn remove(&self, connection: &ConnectionRow) -> Result<bool, CredentialsError> {
        if connection.auth != AppAuthKind::Oauth {
            return Ok(false);
        }
        let write: Arc<dyn TxWrite> = Arc::new(RemoveConnection {
            organization: connection.organization_id,
            id: connection.id,
        });
        match self
            .oauth
            .remove_connection(connection.organization_id, connection.id, vec![write])
            .await
        {
            Ok(Some(_)) => Ok(true),
            // It never began a sign-in: nothing is held elsewhere.
            Ok(None) => Ok(false),
            Err(err) => {
                tracing::warn!(connection = %connection.id, error = %err, "an OAuth connection could not be removed");
                Err(CredentialsError::Unreadable)
            }
        }
    }
}

/// The credentials a phase's App calls ask, when the node has OAuth (`oauth`): built for
/// the phase on its engine, so a refresh runs as the engine's own work.
pub fn phase_credentials(
    oauth: Option<&Arc<dyn super::oauth::OAuthStore>>,
    engine: &Arc<crate::engine::EngineContext>,
    platform: &crate::platform::Platform,
) -> Option<Arc<dyn ConnectionCredentials>> {
    let store = oauth?;
    let service = OAuth::new(
        Arc::clone(engine),
        Arc::clone(store),
        platform,
        super::oauth::OAuthConfig::default(),
        Some(Arc::new(AppStatusWrite)),
    );
    Some(Arc::new(OAuthCredentials::new(
        service,
        engine.keys.clone(),
    )))
}

/// Begins the OAuth sign-in of an App Connection: the caller needs the `apps` write right,
/// the Connection must be a live `oauth` Connection of a live HTTP App of the caller's
/// organization, and the MCP server is that App's URL (a `server_url` in the request must
/// be the same). So a member can make the server discover and register only at an App the
/// organization registered, and an OAuth setup always belongs to an App Connection.
pub async fn begin_sign_in(
    apps: &Apps,
    oauth: &OAuth,
    caller: &Caller,
    connection: Uuid,
    request: &BeginOAuth,
) -> Result<OAuthAuthorization, OAuthError> {
    caller.require(Resource::Apps, Action::Write)?;
    let server_url = apps
        .oauth_server_url(caller.member.organization_id, connection)
        .await
        .map_err(|err| match err {
            AppError::NotFound(_) => OAuthError::NotFound,
            AppError::Conflict(why)
            | AppError::Invalid(why)
            | AppError::Upstream(why)
            | AppError::CleanupPending(why) => OAuthError::NotOAuth(why),
            AppError::Store(err) => OAuthError::Store(err),
        })?;
    oauth.begin(caller, connection, &server_url, request).await
}
