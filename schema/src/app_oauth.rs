//! OAuth 2.1 sign-in for App connections: the browser step given to the API caller, the
//! connection's sign-in state, and the saved result of a grant's cleanup.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Starts a sign-in: OpenBot discovers the MCP server's authorization server, registers a
/// client there when none is given, and answers the URL to open in a browser.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct BeginOAuth {
    /// The MCP server's URL (its streamable-HTTP endpoint): the protected resource. The server
    /// takes it from the Connection's App; given here, it must be that App's URL (a mismatch
    /// is `400`). Kept optional for callers that still send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub server_url: Option<String>,
    /// Where the authorization server sends the browser back, with `code` and `state`: a
    /// page of the caller's, which hands both to `.../oauth/complete`.
    pub redirect_uri: String,
    /// A client registered with the authorization server beforehand; without it OpenBot
    /// registers one (RFC 7591).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub client_id: Option<String>,
    /// That client's secret, if it has one: sealed at rest, never shown again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub client_secret: Option<String>,
    /// The scopes to ask for; the server's advertised scopes unless given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub scope: Option<String>,
}

/// The browser step: open `authorization_url`; the redirect brings `code` and `state` back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct OAuthAuthorization {
    /// The authorization server's URL with the request (PKCE S256, `resource`, `state`).
    pub authorization_url: String,
    /// The state this step is known by: single use, bound to the caller and the connection.
    pub state: String,
    /// When the step expires.
    pub expires_at: DateTime<Utc>,
}

/// The browser step's result, handed in by the caller who began it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct CompleteOAuth {
    /// The `state` from the redirect.
    pub state: String,
    /// The `code` from the redirect.
    pub code: String,
}

/// A connection's OAuth sign-in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct OAuthConnection {
    /// The connection.
    pub connection_id: uuid::Uuid,
    /// `ready` (signed in), `needs_sign_in` (no grant, or its refresh failed for good) or
    /// `removed`.
    pub status: String,
    /// The authorization server's issuer.
    pub issuer: String,
    /// The protected resource (RFC 8707) tokens are asked for.
    pub resource: String,
    /// The OAuth client OpenBot uses there.
    pub client_id: String,
    /// Whether OpenBot registered that client itself (RFC 7591).
    pub client_registered: bool,
    /// When the current access token expires, if signed in and the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub expires_at: Option<DateTime<Utc>>,
    /// The last exchange or refresh that failed, if the connection needs sign-in again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub reason: Option<String>,
}

/// A grant handed to the organization's cleanup service, and its saved result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct OAuthCleanup {
    /// The cleanup.
    pub id: uuid::Uuid,
    /// The connection whose grant it cleans up.
    pub connection_id: uuid::Uuid,
    /// `pending` (waits: the source runs, or the same issuer and client are still in use),
    /// `reserved` (revoking) or `done`.
    pub state: String,
    /// With `done`: `revoked` (RFC 7009), `local_only` (the server has no revocation endpoint:
    /// the tokens were only forgotten) or `failed` (the server refused for good).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub result: Option<String>,
}

/// What removing a sign-in did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct OAuthRemoval {
    /// The connection.
    pub connection_id: uuid::Uuid,
    /// The cleanup its grant was handed to; absent when it had no grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub cleanup: Option<OAuthCleanup>,
}
