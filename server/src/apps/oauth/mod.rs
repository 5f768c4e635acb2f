//! OAuth 2.1 for App connections, as MCP's authorization spec asks, and the cleanup of grants
//! (spec: "App authorization exchange and refresh ...", "A shared grant-use table ...", F11).
//!
//! - `metadata`: discovery: the MCP server's protected-resource metadata (RFC 9728, from its
//!   401 `WWW-Authenticate` or the well-known path), then its authorization server's metadata
//!   (RFC 8414, falling back to OpenID discovery). Every URL passes the outbound policy.
//! - `registration`: dynamic client registration (RFC 7591).
//! - `token`: the token endpoint and revocation through the oauth2 crate, on a client built
//!   by the outbound policy (PKCE S256, `resource` on every request: RFC 8707).
//! - `store` / `sql`: connections, browser steps, grants and the grant-use table; every
//!   change that describes a grant commits with what it describes (`TxWrite`s).
//! - `workflow`: the `oauth_token` work: a code exchange or a refresh in the common call log.
//!   Neither is ever sent twice: a lost answer leaves the connection needing sign-in.
//! - `cleanup`: the `oauth_cleanup` work of the organization's cleanup service: it revokes a
//!   released or unused grant (RFC 7009) once nothing uses its issuer and client, or saves a
//!   `local_only` result where the server has no revocation endpoint.
//! - `service`: the use cases: `begin`, `complete`, `access_headers`, `remove`.

mod cleanup;
mod error;
mod http;
mod metadata;
mod registration;
mod service;
mod sql;
mod store;
mod token;
mod workflow;

pub use cleanup::{CLEANUP_SERVICE, CleanupWorkflow, OAUTH_CLEANUP};
pub use error::OAuthError;
pub use metadata::{Discovered, ServerMetadata};
pub use service::{OAuth, OAuthConfig, resume_cleanups};
pub use store::{
    ConnectionRow, ConnectionStatusWrite, FlowRow, GrantRow, GrantUseRow, NewRevocation, OAuthStore,
};
pub use workflow::{OAUTH_TOKEN, TokenWorkflow};
