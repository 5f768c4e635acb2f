//! The rows of OAuth and the grant-use table, and the writes that commit with engine steps.
//!
//! Every change that describes a grant (a send starting, a grant installed, rotated,
//! released, handed to cleanup, revoked) is written in the same transaction as what it
//! describes: a [`TxWrite`] in the step's commit, or one store transaction here.

use async_trait::async_trait;
use std::sync::Arc;
use uuid::Uuid;

use crate::sealed::SealedValue;
use crate::store::{Millis, StoreError, TxWrite, TxWrites};

/// `grant_uses.kind`: a connection or developer test holds the grant.
pub const USE_HOLD: &str = "hold";
/// `grant_uses.kind`: a token request (exchange or refresh) is being sent.
pub const USE_SEND: &str = "send";
/// `grant_uses.kind`: the grant waits for, or had, its revocation.
pub const USE_REVOCATION: &str = "revocation";

/// A connection's OAuth setup and the grant it holds now.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionRow {
    /// The App connection.
    pub connection_id: Uuid,
    /// Its organization.
    pub organization_id: Uuid,
    /// The resource identifier (RFC 8707).
    pub resource: String,
    /// The authorization server's issuer.
    pub issuer: String,
    /// The authorization server's metadata, JSON ([`super::ServerMetadata`]).
    pub metadata: String,
    /// The OAuth client.
    pub client_id: String,
    /// Whether OpenBot registered the client (RFC 7591).
    pub client_registered: bool,
    /// The client's secret, sealed for this row.
    pub secret: Option<SealedValue>,
    /// The redirect URI the client was registered with.
    pub redirect_uri: String,
    /// The scopes asked for.
    pub scope: Option<String>,
    /// `needs_sign_in`, `ready` or `removed`.
    pub status: String,
    /// The grant installed now.
    pub grant_id: Option<Uuid>,
    /// Why it needs sign-in, when it does after a failure.
    pub reason: Option<String>,
    /// The member who set it up.
    pub created_by: Uuid,
}

/// A browser step.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowRow {
    /// Its ID.
    pub id: Uuid,
    /// The connection it signs in.
    pub connection_id: Uuid,
    /// The organization.
    pub organization_id: Uuid,
    /// The member who began it; only they complete it.
    pub member_id: Uuid,
    /// SHA-256 of the state.
    pub state_hash: Vec<u8>,
    /// The PKCE verifier, sealed for this row.
    pub verifier: SealedValue,
    /// The client it was begun with.
    pub client_id: String,
    /// The redirect URI it was begun with (the exchange repeats it).
    pub redirect_uri: String,
    /// When it expires.
    pub expires_at: Millis,
    /// When it was used.
    pub used_at: Option<Millis>,
}

/// A grant: what one token answer gave.
#[derive(Debug, Clone, PartialEq)]
pub struct GrantRow {
    /// Its ID.
    pub id: Uuid,
    /// The connection it was asked for.
    pub connection_id: Uuid,
    /// The organization.
    pub organization_id: Uuid,
    /// The issuer.
    pub issuer: String,
    /// The client.
    pub client_id: String,
    /// The issuing server's metadata, JSON ([`super::ServerMetadata`]): refresh and
    /// revocation of this grant go there, wherever the connection signs in later.
    pub metadata: String,
    /// The tokens (`TokenSet` as JSON), sealed for this row; gone once revoked.
    pub tokens: Option<SealedValue>,
    /// When the access token expires.
    pub expires_at: Option<Millis>,
    /// How often it was refreshed.
    pub rotation: i64,
    /// The execution whose call got it.
    pub source_execution: Uuid,
    /// That call.
    pub source_call: String,
    /// `installed`, `unused` (a late answer), `released` or `revoked`.
    pub state: String,
}

/// One row of the grant-use table.
#[derive(Debug, Clone, PartialEq)]
pub struct GrantUseRow {
    /// Its ID.
    pub id: Uuid,
    /// The organization.
    pub organization_id: Uuid,
    /// The grant scope: issuer ...
    pub issuer: String,
    /// ... and client.
    pub client_id: String,
    /// `hold`, `send` or `revocation`.
    pub kind: String,
    /// `connection` or `test`.
    pub holder_kind: String,
    /// The connection or test.
    pub holder_id: Uuid,
    /// The grant held or revoked.
    pub grant_id: Option<Uuid>,
    /// The send's or the cleanup's execution.
    pub execution_id: Option<Uuid>,
    /// `active` (hold, send), `pending` or `reserved` (revocation), `done`.
    pub state: String,
    /// A revocation's saved result: `revoked`, `local_only` or `failed`.
    pub result: Option<String>,
    /// A revocation's owner: the organization's cleanup service scope.
    pub owner_scope: Option<String>,
}

/// A grant handed to cleanup.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRevocation {
    /// The revocation's ID (its cleanup execution's command key).
    pub id: Uuid,
    /// The organization.
    pub organization_id: Uuid,
    /// The grant scope.
    pub issuer: String,
    /// The grant scope.
    pub client_id: String,
    /// The connection the grant was for.
    pub connection_id: Uuid,
    /// The grant.
    pub grant_id: Uuid,
    /// The cleanup service's scope.
    pub owner_scope: String,
}

/// Writes the App connection's own status in the same transaction as the grant change that
/// sets it (the Apps capability owns `app_connections`; the node wires this).
pub trait ConnectionStatusWrite: Send + Sync {
    /// The write that sets connection `connection_id` to `status` (`ready`, `needs_sign_in`).
    fn status(&self, connection_id: Uuid, status: &'static str) -> Option<Arc<dyn TxWrite>>;
}

/// The storage of OAuth.
#[async_trait]
pub trait OAuthStore: Send + Sync + 'static {
    /// A connection's OAuth setup.
    async fn connection(&self, id: Uuid) -> Result<Option<ConnectionRow>, StoreError>;

    /// Saves a connection's setup (discovery and client); an existing row keeps its grant,
    /// and its status unless it was `removed` (then it needs sign-in again).
    async fn put_connection(&self, row: &ConnectionRow) -> Result<(), StoreError>;

    /// Saves a new browser step.
    async fn put_flow(&self, row: &FlowRow) -> Result<(), StoreError>;

    /// The browser step of a state hash.
    async fn flow_by_state(&self, state_hash: &[u8]) -> Result<Option<FlowRow>, StoreError>;

    /// Marks a browser step used by `execution_id`; `false` when it was used already.
    async fn use_flow(&self, id: Uuid, execution_id: Uuid) -> Result<bool, StoreError>;

    /// A grant.
    async fn grant(&self, id: Uuid) -> Result<Option<GrantRow>, StoreError>;

    /// A row of the grant-use table.
    async fn grant_use(&self, id: Uuid) -> Result<Option<GrantUseRow>, StoreError>;

    /// Whether anything but grant `except` holds or sends in the grant scope.
    async fn scope_busy(
        &self,
        issuer: &str,
        client_id: &str,
        except: Uuid,
    ) -> Result<bool, StoreError>;

    /// Whether a revocation holds the grant scope reserved.
    async fn scope_reserved(&self, issuer: &str, client_id: &str) -> Result<bool, StoreError>;

    /// Reserves revocation `id` for `execution_id` under the scope's lock, unless anything
    /// else holds or sends in its scope (`false`, nothing written). A reserved revocation is
    /// reserved again by a later owner of the same cleanup.
    async fn reserve_revocation(&self, id: Uuid, execution_id: Uuid) -> Result<bool, StoreError>;

    /// Removes a connection's grant in one transaction under the scope's lock: the connection
    /// becomes `removed`, its hold ends, the grant is released and `revocation` hands it to
    /// cleanup; `extra` commits with them. Answers `false` when the connection had no grant
    /// (it is removed all the same, nothing to clean up).
    async fn remove(
        &self,
        connection_id: Uuid,
        revocation: &NewRevocation,
        extra: TxWrites,
    ) -> Result<bool, StoreError>;

    /// Up to `limit` revocations not done, after `after` in ID order.
    async fn open_revocations(
        &self,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<GrantUseRow>, StoreError>;
}

/// A token request starting: a `send` row in the grant scope, with the call's intent.
/// Refused while a revocation holds the scope reserved.
#[derive(Debug, Clone)]
pub struct RecordSend {
    /// The row.
    pub use_id: Uuid,
    /// The organization.
    pub organization_id: Uuid,
    /// The scope.
    pub issuer: String,
    /// The scope.
    pub client_id: String,
    /// The connection.
    pub connection_id: Uuid,
    /// The token work.
    pub execution_id: Uuid,
}

/// A code exchange's grant installed with the call's result: the connection holds it and is
/// ready, the send ends, and the grant it replaces is released and handed to cleanup.
#[derive(Debug, Clone)]
pub struct InstallGrant {
    /// The new grant.
    pub grant: GrantRow,
    /// Its hold row.
    pub hold_id: Uuid,
    /// The send that got it.
    pub send_id: Uuid,
    /// The grant the connection held when the work read it; the install is refused if it
    /// changed meanwhile.
    pub previous: Option<Uuid>,
    /// That grant's cleanup.
    pub revocation: Option<NewRevocation>,
}

/// A refresh's answer: the grant's tokens replaced (a rotated refresh token replaces the old
/// one), the send ends.
#[derive(Debug, Clone)]
pub struct RotateGrant {
    /// The grant.
    pub grant_id: Uuid,
    /// Its rotation the refresh started from; refused if it moved.
    pub rotation: i64,
    /// The new tokens, sealed for the grant's row.
    pub tokens: SealedValue,
    /// When the new access token expires.
    pub expires_at: Option<Millis>,
    /// The send.
    pub send_id: Uuid,
}

/// A token request that got no grant: the send ends; with `needs_sign_in` the connection
/// needs sign-in again (a refresh refused for good, or an answer lost).
#[derive(Debug, Clone)]
pub struct SendEnded {
    /// The connection.
    pub connection_id: Uuid,
    /// The send.
    pub send_id: Uuid,
    /// Whether the connection needs sign-in now.
    pub needs_sign_in: bool,
    /// Why, for the connection's status.
    pub reason: Option<String>,
}

/// A grant nobody installed (an answer saved after its owner lost the work): kept as
/// `unused` and handed to cleanup with the late result.
#[derive(Debug, Clone)]
pub struct UnusedGrant {
    /// The grant.
    pub grant: GrantRow,
    /// Its cleanup.
    pub revocation: NewRevocation,
}

/// A cleanup's end: the revocation done with its result, the grant revoked and its tokens
/// dropped, the scope released.
#[derive(Debug, Clone)]
pub struct RevocationDone {
    /// The revocation.
    pub use_id: Uuid,
    /// Its grant.
    pub grant_id: Uuid,
    /// `revoked`, `local_only` or `failed`.
    pub result: &'static str,
}
