//! What a Connection sends its App: asked at call time, never saved with a call.

use std::collections::BTreeMap;

use async_trait::async_trait;
use openbot_schema::{AppAuthKind, AppConnectionStatus};

use super::store::{ConnectionRow, credentials_place};
use crate::sealed::KeyRing;

/// Why a Connection has no headers to send now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// A person has to sign in (again) first.
    #[error("the connection needs a person to sign in first")]
    NeedsSignIn,
    /// The Connection was removed.
    #[error("the connection was removed")]
    Removed,
    /// The sealed credentials do not open (a missing key, damage).
    #[error("the connection's credentials cannot be opened")]
    Unreadable,
}

/// The headers a Connection sends each request. The durable host asks it right before a
/// send (after the current rights and the revision were checked), so credentials are opened
/// only at the call boundary and never reach a saved call, an event or a log.
#[async_trait]
pub trait ConnectionCredentials: Send + Sync + 'static {
    /// The headers for one request on `connection`.
    async fn headers(
        &self,
        connection: &ConnectionRow,
    ) -> Result<BTreeMap<String, String>, CredentialsError>;

    /// Removes `connection` together with what its credentials hold elsewhere (an OAuth
    /// grant goes to the organization's cleanup service in the transaction that marks the
    /// Connection removed). `Ok(false)`: nothing is held elsewhere, and the caller removes
    /// the Connection itself.
    async fn remove(&self, connection: &ConnectionRow) -> Result<bool, CredentialsError> {
        let _ = connection;
        Ok(false)
    }
}

/// Credentials of `none` and `manual` Connections (sealed header values). OAuth Connections
/// answer [`CredentialsError::NeedsSignIn`] here; the OAuth service supplies their tokens.
pub struct SealedCredentials {
    keys: KeyRing,
}

impl SealedCredentials {
    /// Opens manual credentials with `keys`.
    pub fn new(keys: KeyRing) -> Self {
        Self { keys }
    }
}

#[async_trait]
impl ConnectionCredentials for SealedCredentials {
    async fn headers(
        &self,
        connection: &ConnectionRow,
    ) -> Result<BTreeMap<String, String>, CredentialsError> {
        match connection.status {
            AppConnectionStatus::Ready => {}
            AppConnectionStatus::NeedsSignIn => return Err(CredentialsError::NeedsSignIn),
            AppConnectionStatus::Removed => return Err(CredentialsError::Removed),
        }
        match connection.auth {
            AppAuthKind::None => Ok(BTreeMap::new()),
            AppAuthKind::Oauth => Err(CredentialsError::NeedsSignIn),
            AppAuthKind::Manual => {
                let Some(sealed) = &connection.credentials else {
                    return Err(CredentialsError::Unreadable);
                };
                let plain = self
                    .keys
                    .open_at(&credentials_place(connection.id), sealed)
                    .map_err(|_| CredentialsError::Unreadable)?;
                serde_json::from_slice(&plain).map_err(|_| CredentialsError::Unreadable)
            }
        }
    }
}
