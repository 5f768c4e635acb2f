//! What the OAuth use cases can fail with. Messages never hold a token, a code, a verifier
//! or a client secret.

use crate::identity::AccessError;
use crate::store::StoreError;

/// An OAuth use case that did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// The request is not usable (a bad URL, a missing field).
    #[error("{0}")]
    Invalid(String),
    /// The token lacks the right.
    #[error(transparent)]
    Forbidden(#[from] AccessError),
    /// Only owners and admins sign the organization's App Connections in or out.
    #[error("only owners and admins sign App connections in or out")]
    NotAdmin,
    /// The connection (or browser step) does not exist for this caller.
    #[error("no such OAuth connection")]
    NotFound,
    /// The state is unknown, expired, used, or belongs to another member or connection.
    #[error("the OAuth state is not valid here: {0}")]
    State(&'static str),
    /// The state was used already: a browser step completes once.
    #[error("the OAuth state was used already")]
    StateUsed,
    /// The MCP server or its authorization server does not answer as OAuth 2.1 and MCP ask.
    #[error("OAuth discovery: {0}")]
    Discovery(String),
    /// The outbound policy refused an address the metadata named.
    #[error("{0}")]
    Refused(String),
    /// The App Connection does not sign in with OAuth (it was opened with `none` or
    /// `manual`), or its App has no URL to sign in at.
    #[error("{0}")]
    NotOAuth(String),
    /// The request named another MCP server than the Connection's App.
    #[error(
        "server_url is not the URL of the connection's App ({0}): leave it out, the server takes the App's"
    )]
    ServerMismatch(String),
    /// The connection has no usable grant: sign in again (`.../oauth/authorize`).
    #[error("the connection needs sign-in: {0}")]
    NeedsSignIn(String),
    /// The authorization server refused the exchange.
    #[error("the authorization server refused: {0}")]
    Exchange(String),
    /// The work did not end in time; it goes on, and its result is saved.
    #[error("the token request is still running")]
    Pending,
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::engine::EngineError> for OAuthError {
    fn from(err: crate::engine::EngineError) -> Self {
        match err {
            crate::engine::EngineError::Store(err) => Self::Store(err),
            other => Self::Store(StoreError::Invalid(other.to_string())),
        }
    }
}

impl From<crate::sealed::SealError> for OAuthError {
    fn from(err: crate::sealed::SealError) -> Self {
        Self::Store(StoreError::Invalid(err.to_string()))
    }
}
