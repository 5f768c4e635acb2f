//! The `oauth_token` work: one code exchange or one refresh, as an outside call in the common
//! call log (intent with its grant-use `send` row, then sending, then the result with the
//! grant it installs or rotates, in one commit each).
//!
//! Neither is ever sent twice. An authorization code is single use, and a rotated refresh
//! token is spent by its first use (a second use is reuse, and a server may revoke the whole
//! grant for it). So an answer that was lost, or a call found `sending` by a new owner, ends
//! the work with the connection needing sign-in; an answer an old owner saves after losing the
//! work is kept as an `unused` grant and handed to cleanup with the late result.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::turn::{CallKey, CallSlot};
use openbot_schema::{ErrorCategory, ExecutionId, ExecutionState};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::http::OAuthHttp;
use super::metadata::ServerMetadata;
use super::store::{
    ConnectionRow, ConnectionStatusWrite, GrantRow, InstallGrant, NewRevocation, OAuthStore,
    RecordSend, RotateGrant, SendEnded, UnusedGrant,
};
use super::token::{self, ClientCredentials, TokenFailure, TokenSet};
use crate::engine::{
    EngineContext, EngineEnd, Next, PhaseContext, PhaseError, RunScope, SavedCalls, Wake, Workflow,
};
use crate::identity::{ServiceIdentity, ServiceOwner};
use crate::sealed::SealedValue;
use crate::store::{
    CallPhase, CallWrite, Commit, NewExecution, Scope, StateChange, StoreError, TxWrite, TxWrites,
    now_ms,
};

/// The execution kind of token work.
pub const OAUTH_TOKEN: &str = "oauth_token";

/// The one call of token work.
pub(super) const CALL: CallKey = CallKey {
    step: 1,
    slot: CallSlot::Tool(0),
    attempt: 1,
};

/// What token work asks for.
#[derive(Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(super) enum TokenRequest {
    /// A code exchange, with the browser step's PKCE verifier and client.
    Exchange {
        code: String,
        verifier: String,
        client_id: String,
        redirect_uri: String,
    },
    /// A refresh of the grant at this rotation.
    Refresh { grant_id: Uuid, rotation: i64 },
}

/// The saved input of token work (sealed at rest).
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct TokenInput {
    pub organization_id: Uuid,
    pub connection_id: Uuid,
    /// The work's `send` row in the grant-use table.
    pub send_id: Uuid,
    pub request: TokenRequest,
}

/// A token call's saved result (sealed in the call log).
#[derive(Clone, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum CallOutcome {
    Tokens { tokens: TokenSet },
    Failed { failure: TokenFailure },
}

/// What OAuth's workflows and use cases share.
#[derive(Clone)]
pub(super) struct Shared {
    pub store: Arc<dyn OAuthStore>,
    pub http: OAuthHttp,
    pub status: Option<Arc<dyn ConnectionStatusWrite>>,
    /// How long a cleanup waits before it checks a busy grant scope again.
    pub recheck_ms: i64,
}

impl Shared {
    /// The connection-status write for `status`, if the node wired one.
    pub fn status_write(&self, connection_id: Uuid, status: &'static str) -> Vec<Arc<dyn TxWrite>> {
        self.status
            .as_ref()
            .and_then(|s| s.status(connection_id, status))
            .into_iter()
            .collect()
    }
}

/// The place a connection's client secret is sealed for.
pub(super) fn secret_place(connection_id: Uuid) -> Vec<u8> {
    format!("oauth_connections:{connection_id}:secret").into_bytes()
}

/// The place a grant's tokens are sealed for.
pub(super) fn tokens_place(grant_id: Uuid) -> Vec<u8> {
    format!("oauth_grants:{grant_id}").into_bytes()
}

/// The scope of an organization's cleanup service.
pub(super) fn cleanup_scope(organization_id: Uuid) -> Scope {
    match ServiceIdentity::new(
        ServiceOwner::Organization(organization_id),
        super::CLEANUP_SERVICE,
    ) {
        Ok(service) => service.scope(),
        Err(_) => Scope::Service(format!("org-{organization_id}/{}", super::CLEANUP_SERVICE)),
    }
}

/// Stores work of `kind` under `key` in `scope`, or finds the earlier one of the same key and
/// input, and wakes the runners.
pub(super) async fn submit<T: Serialize>(
    cx: &EngineContext,
    kind: &str,
    scope: Scope,
    key: String,
    input: &T,
) -> Result<crate::store::Submitted, crate::engine::EngineError> {
    let json =
        serde_json::to_vec(input).map_err(|e| crate::engine::EngineError::Input(e.to_string()))?;
    let mut digest = Sha256::new();
    digest.update(kind.as_bytes());
    digest.update([0]);
    digest.update(&json);
    let submitted = cx
        .store
        .submit(NewExecution {
            id: ExecutionId::new(),
            kind: kind.to_string(),
            scope,
            command_key: Some(key),
            input_digest: digest.finalize().to_vec(),
            input: cx.keys.seal(Uuid::now_v7(), &json)?,
            parent_id: None,
            chat_id: None,
            admission_gate: None,
            events: Vec::new(),
        })
        .await?;
    cx.hub.announce(Wake::Work);
    Ok(submitted)
}

/// Hands revocation `id` to the organization's cleanup service: its work, keyed by the
/// revocation (a second hand-over finds the same work).
pub(super) async fn start_cleanup(
    cx: &EngineContext,
    organization_id: Uuid,
    id: Uuid,
) -> Result<ExecutionId, crate::engine::EngineError> {
    let input = super::cleanup::CleanupInput {
        use_id: id,
        organization_id,
    };
    Ok(submit(
        cx,
        super::OAUTH_CLEANUP,
        cleanup_scope(organization_id),
        format!("oauth-cleanup:{id}"),
        &input,
    )
    .await?
    .execution_id())
}

/// Opens a sealed value for `place`.
pub(super) fn open<T: serde::de::DeserializeOwned>(
    cx: &EngineContext,
    place: &[u8],
    value: &SealedValue,
) -> Result<T, StoreError> {
    let bytes = cx
        .keys
        .open_at(place, value)
        .map_err(|e| StoreError::Invalid(e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// Seals a value for `place`.
pub(super) fn seal<T: Serialize>(
    cx: &EngineContext,
    place: &[u8],
    value: &T,
) -> Result<SealedValue, StoreError> {
    let bytes = serde_json::to_vec(value).map_err(|e| StoreError::Invalid(e.to_string()))?;
    cx.keys
        .seal_at(place, &bytes)
        .map_err(|e| StoreError::Invalid(e.to_string()))
}

/// The client credentials of a connection for `client_id` (its secret only if it is the
/// connection's client).
pub(super) fn credentials(
    cx: &EngineContext,
    connection: &ConnectionRow,
    client_id: &str,
) -> Result<ClientCredentials, StoreError> {
    let client_secret = match (&connection.secret, client_id == connection.client_id) {
        (Some(secret), true) => Some(open::<String>(
            cx,
            &secret_place(connection.connection_id),
            secret,
        )?),
        _ => None,
    };
    Ok(ClientCredentials {
        client_id: client_id.to_string(),
        client_secret,
    })
}

pub(super) fn metadata_of(connection: &ConnectionRow) -> Result<ServerMetadata, StoreError> {
    serde_json::from_str(&connection.metadata).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// Runs token work.
pub struct TokenWorkflow {
    shared: Shared,
}

impl TokenWorkflow {
    pub(super) fn new(shared: Shared) -> Self {
        Self { shared }
    }

    async fn input(&self, cx: &PhaseContext) -> Result<TokenInput, PhaseError> {
        Ok(cx.input().await?)
    }

    async fn connection(&self, input: &TokenInput) -> Result<ConnectionRow, PhaseError> {
        self.shared
            .store
            .connection(input.connection_id)
            .await?
            .ok_or_else(|| PhaseError::Failed {
                category: ErrorCategory::Configuration,
                cause: format!("OAuth connection {} is gone", input.connection_id),
            })
    }

    /// The client the request uses and the grant it refreshes.
    async fn client_of(
        &self,
        input: &TokenInput,
        connection: &ConnectionRow,
    ) -> Result<(String, Option<GrantRow>), PhaseError> {
        match &input.request {
            TokenRequest::Exchange { client_id, .. } => Ok((client_id.clone(), None)),
            TokenRequest::Refresh { grant_id, .. } => {
                let grant = self.shared.store.grant(*grant_id).await?.ok_or_else(|| {
                    PhaseError::Failed {
                        category: ErrorCategory::Configuration,
                        cause: format!("grant {grant_id} is gone"),
                    }
                })?;
                let _ = connection;
                Ok((grant.client_id.clone(), Some(grant)))
            }
        }
    }

    /// Ends the work without a grant: the send ends, and with `needs_sign_in` the
    /// connection needs sign-in again, in the commit that saves the call's end.
    #[allow(clippy::too_many_arguments)]
    async fn end_without_grant(
        &self,
        cx: &PhaseContext,
        input: &TokenInput,
        call: Option<CallWrite>,
        category: ErrorCategory,
        cause: &str,
        needs_sign_in: bool,
        reason: &str,
    ) -> Result<(), PhaseError> {
        let failed = cx.failed_end(category, cause)?;
        let mut writes: Vec<Arc<dyn TxWrite>> = vec![Arc::new(SendEnded {
            connection_id: input.connection_id,
            send_id: input.send_id,
            needs_sign_in,
            reason: Some(reason.to_string()),
        })];
        if needs_sign_in {
            writes.extend(
                self.shared
                    .status_write(input.connection_id, "needs_sign_in"),
            );
        }
        let commit = Commit {
            calls: call.into_iter().collect(),
            events: vec![failed.event],
            state: Some(failed.change),
            writes: TxWrites(writes),
            ..Commit::default()
        };
        SavedCalls::of(cx).commit(commit).await?;
        Ok(())
    }

    async fn send(&self, cx: &PhaseContext, scope: &RunScope) -> Result<(), PhaseError> {
        let input = self.input(cx).await?;
        let connection = self.connection(&input).await?;
        let (client_id, grant) = self.client_of(&input, &connection).await?;
        // A refresh goes to the server that issued the grant.
        let server = match &grant {
            Some(grant) => serde_json::from_str(&grant.metadata)
                .map_err(|e| StoreError::Invalid(e.to_string()))?,
            None => metadata_of(&connection)?,
        };
        let credentials = credentials(&cx.engine, &connection, &client_id)?;
        let calls = SavedCalls::of(cx);
        let intent = Commit {
            calls: vec![calls.write(CALL, CallPhase::Intent, None, None)],
            writes: TxWrites::one(RecordSend {
                use_id: input.send_id,
                organization_id: input.organization_id,
                issuer: connection.issuer.clone(),
                client_id: client_id.clone(),
                connection_id: input.connection_id,
                execution_id: cx.execution.id.as_uuid(),
            }),
            ..Commit::default()
        };
        match calls.commit(intent).await {
            // A revocation holds the scope: `next` waits for it to end.
            Err(StoreError::Refused(_)) => return Ok(()),
            other => other?,
        };
        if !scope.gate_open() {
            return Err(PhaseError::Cancelled);
        }
        let sending = Commit {
            calls: vec![calls.write(CALL, CallPhase::Sending, None, None)],
            ..Commit::default()
        };
        calls.commit(sending).await?;
        let http = &self.shared.http;
        let answer = match (&input.request, &grant) {
            (
                TokenRequest::Exchange {
                    code,
                    verifier,
                    redirect_uri,
                    ..
                },
                _,
            ) => {
                token::exchange(
                    http,
                    &server,
                    &credentials,
                    redirect_uri,
                    code,
                    verifier,
                    &connection.resource,
                )
                .await
            }
            (TokenRequest::Refresh { .. }, Some(grant)) if grant.issuer != connection.issuer => {
                // A grant is only ever sent to the server that issued it.
                return self
                    .end_without_grant(
                        cx,
                        &input,
                        None,
                        ErrorCategory::Access,
                        "the grant belongs to another authorization server",
                        true,
                        "the connection moved to another authorization server; sign in again",
                    )
                    .await;
            }
            (TokenRequest::Refresh { .. }, Some(grant)) => {
                let tokens: TokenSet = match &grant.tokens {
                    Some(sealed) => open(&cx.engine, &tokens_place(grant.id), sealed)?,
                    None => {
                        return self
                            .end_without_grant(
                                cx,
                                &input,
                                None,
                                ErrorCategory::Access,
                                "the grant was revoked",
                                true,
                                "the grant was revoked",
                            )
                            .await;
                    }
                };
                match &tokens.refresh_token {
                    Some(refresh) => {
                        token::refresh(
                            http,
                            &server,
                            &credentials,
                            &connection.redirect_uri,
                            refresh,
                            &connection.resource,
                        )
                        .await
                    }
                    None => Err(TokenFailure::NotSent(
                        "the grant has no refresh token".into(),
                    )),
                }
            }
            (TokenRequest::Refresh { .. }, None) => {
                Err(TokenFailure::NotSent("the grant is gone".into()))
            }
        };
        let outcome = match answer {
            Ok(tokens) => CallOutcome::Tokens { tokens },
            Err(failure) => CallOutcome::Failed { failure },
        };
        self.save(cx, &input, &connection, grant.as_ref(), &client_id, outcome)
            .await
    }

    /// Saves the call's result with what it means for the connection, in one commit.
    async fn save(
        &self,
        cx: &PhaseContext,
        input: &TokenInput,
        connection: &ConnectionRow,
        grant: Option<&GrantRow>,
        client_id: &str,
        outcome: CallOutcome,
    ) -> Result<(), PhaseError> {
        let record = cx.engine.seal_json(&outcome)?;
        let calls = SavedCalls::of(cx);
        let done = calls.write(CALL, CallPhase::Done, Some(record), None);
        let tokens = match outcome {
            CallOutcome::Tokens { tokens } => tokens,
            CallOutcome::Failed { failure } => {
                let refresh = matches!(input.request, TokenRequest::Refresh { .. });
                let (call, category, needs_sign_in, reason) = match &failure {
                    // Refused for good: a refresh means sign-in again; a code exchange leaves
                    // the connection as it was (the person may try again).
                    TokenFailure::Refused { error, .. } => (
                        Some(done),
                        ErrorCategory::Access,
                        refresh,
                        format!("the authorization server refused: {error}"),
                    ),
                    TokenFailure::NotSent(_) => (
                        Some(done),
                        ErrorCategory::Network,
                        false,
                        "the authorization server could not be reached".to_string(),
                    ),
                    TokenFailure::Lost(_) => (
                        Some(CallWrite {
                            phase: CallPhase::Unknown,
                            result: None,
                            ..done
                        }),
                        ErrorCategory::Network,
                        true,
                        "the token answer was lost; sign in again".to_string(),
                    ),
                };
                return self
                    .end_without_grant(
                        cx,
                        input,
                        call,
                        category,
                        &format!("OAuth token request: {failure}"),
                        needs_sign_in,
                        &reason,
                    )
                    .await;
            }
        };
        match (&input.request, grant) {
            (TokenRequest::Refresh { rotation, grant_id }, _) => {
                let sealed = seal(&cx.engine, &tokens_place(*grant_id), &tokens)?;
                let commit = Commit {
                    calls: vec![done.clone()],
                    state: Some(StateChange::ended(ExecutionState::Completed)),
                    writes: TxWrites::one(RotateGrant {
                        grant_id: *grant_id,
                        rotation: *rotation,
                        tokens: sealed,
                        expires_at: tokens.expires_at,
                        send_id: input.send_id,
                    }),
                    ..Commit::default()
                };
                match calls.commit(commit).await {
                    Ok(()) => Ok(()),
                    Err(StoreError::Fenced(_)) => {
                        self.late(cx, input, connection, client_id, done, tokens)
                            .await
                    }
                    Err(err) => Err(err.into()),
                }
            }
            (TokenRequest::Exchange { .. }, _) => {
                let grant_id = Uuid::now_v7();
                let grant = GrantRow {
                    id: grant_id,
                    connection_id: input.connection_id,
                    organization_id: input.organization_id,
                    issuer: connection.issuer.clone(),
                    client_id: client_id.to_string(),
                    metadata: connection.metadata.clone(),
                    tokens: Some(seal(&cx.engine, &tokens_place(grant_id), &tokens)?),
                    expires_at: tokens.expires_at,
                    rotation: 0,
                    source_execution: cx.execution.id.as_uuid(),
                    source_call: CALL.to_string(),
                    state: "installed".into(),
                };
                let previous = match connection.grant_id {
                    Some(id) => self.shared.store.grant(id).await?,
                    None => None,
                };
                let revocation = previous.as_ref().map(|old| NewRevocation {
                    id: Uuid::now_v7(),
                    organization_id: input.organization_id,
                    issuer: old.issuer.clone(),
                    client_id: old.client_id.clone(),
                    connection_id: input.connection_id,
                    grant_id: old.id,
                    owner_scope: cleanup_scope(input.organization_id).to_stored(),
                });
                let mut writes: Vec<Arc<dyn TxWrite>> = vec![Arc::new(InstallGrant {
                    grant,
                    hold_id: Uuid::now_v7(),
                    send_id: input.send_id,
                    previous: connection.grant_id,
                    revocation: revocation.clone(),
                })];
                writes.extend(self.shared.status_write(input.connection_id, "ready"));
                let commit = Commit {
                    calls: vec![done.clone()],
                    state: Some(StateChange::ended(ExecutionState::Completed)),
                    writes: TxWrites(writes),
                    ..Commit::default()
                };
                match calls.commit(commit).await {
                    Ok(()) => {}
                    Err(StoreError::Fenced(_)) => {
                        return self
                            .late(cx, input, connection, client_id, done, tokens)
                            .await;
                    }
                    Err(StoreError::Refused(cause)) => {
                        // The connection changed (removed, or signed in by other work): this
                        // grant is not installed; it goes to cleanup as an unused grant.
                        return self
                            .unused(cx, input, connection, client_id, done, tokens, &cause)
                            .await;
                    }
                    Err(err) => return Err(err.into()),
                }
                if let Some(revocation) = revocation {
                    // The hand-over committed above; starting its work now only saves the
                    // sweep's wait (a crash here leaves it for the sweep).
                    let _ = start_cleanup(&cx.engine, input.organization_id, revocation.id).await;
                }
                Ok(())
            }
        }
    }

    /// An answer saved after this owner lost the work: kept with the late result as an unused
    /// grant, handed to cleanup in the same transaction.
    async fn late(
        &self,
        cx: &PhaseContext,
        input: &TokenInput,
        connection: &ConnectionRow,
        client_id: &str,
        done: CallWrite,
        tokens: TokenSet,
    ) -> Result<(), PhaseError> {
        let (grant, revocation) = self.unused_parts(cx, input, connection, client_id, &tokens)?;
        SavedCalls::of(cx)
            .save_late(
                done,
                TxWrites::one(UnusedGrant {
                    grant,
                    revocation: revocation.clone(),
                }),
            )
            .await?;
        let _ = start_cleanup(&cx.engine, input.organization_id, revocation.id).await;
        Err(PhaseError::Fenced)
    }

    /// A grant that could not be installed: saved unused with the call's end, and cleaned up.
    #[allow(clippy::too_many_arguments)]
    async fn unused(
        &self,
        cx: &PhaseContext,
        input: &TokenInput,
        connection: &ConnectionRow,
        client_id: &str,
        done: CallWrite,
        tokens: TokenSet,
        cause: &str,
    ) -> Result<(), PhaseError> {
        let (grant, revocation) = self.unused_parts(cx, input, connection, client_id, &tokens)?;
        let failed = cx.failed_end(
            ErrorCategory::Configuration,
            &format!("the grant could not be installed: {cause}"),
        )?;
        let commit = Commit {
            calls: vec![done],
            events: vec![failed.event],
            state: Some(failed.change),
            writes: TxWrites(vec![
                Arc::new(UnusedGrant {
                    grant,
                    revocation: revocation.clone(),
                }),
                Arc::new(SendEnded {
                    connection_id: input.connection_id,
                    send_id: input.send_id,
                    needs_sign_in: false,
                    reason: None,
                }),
            ]),
            ..Commit::default()
        };
        SavedCalls::of(cx).commit(commit).await?;
        let _ = start_cleanup(&cx.engine, input.organization_id, revocation.id).await;
        Ok(())
    }

    fn unused_parts(
        &self,
        cx: &PhaseContext,
        input: &TokenInput,
        connection: &ConnectionRow,
        client_id: &str,
        tokens: &TokenSet,
    ) -> Result<(GrantRow, NewRevocation), PhaseError> {
        let grant_id = Uuid::now_v7();
        let grant = GrantRow {
            id: grant_id,
            connection_id: input.connection_id,
            organization_id: input.organization_id,
            issuer: connection.issuer.clone(),
            client_id: client_id.to_string(),
            metadata: connection.metadata.clone(),
            tokens: Some(seal(&cx.engine, &tokens_place(grant_id), tokens)?),
            expires_at: tokens.expires_at,
            rotation: 0,
            source_execution: cx.execution.id.as_uuid(),
            source_call: CALL.to_string(),
            state: "unused".into(),
        };
        let revocation = NewRevocation {
            id: Uuid::now_v7(),
            organization_id: input.organization_id,
            issuer: connection.issuer.clone(),
            client_id: client_id.to_string(),
            connection_id: input.connection_id,
            grant_id,
            owner_scope: cleanup_scope(input.organization_id).to_stored(),
        };
        Ok((grant, revocation))
    }
}

#[async_trait]
impl Workflow for TokenWorkflow {
    fn kind(&self) -> &'static str {
        OAUTH_TOKEN
    }

    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError> {
        if cx.execution.state.is_terminal() {
            return Ok(Next::Done);
        }
        let call = SavedCalls::of(cx).latest(CALL).await?;
        Ok(match call.map(|c| c.phase) {
            None | Some(CallPhase::Intent) => {
                let input = self.input(cx).await?;
                let connection = self.connection(&input).await?;
                let (client_id, _) = self.client_of(&input, &connection).await?;
                if self
                    .shared
                    .store
                    .scope_reserved(&connection.issuer, &client_id)
                    .await?
                {
                    // New grant sends wait for a revocation of their scope to end.
                    Next::Wait {
                        until: Some(now_ms() + 500),
                    }
                } else {
                    Next::Run("send".into())
                }
            }
            // Sent, answer not saved: a code or a rotated refresh token is never sent again.
            Some(CallPhase::Sending | CallPhase::Unknown) => Next::Run("lost".into()),
            Some(CallPhase::Done) => Next::Run("finish".into()),
        })
    }

    async fn run(
        &self,
        cx: &PhaseContext,
        phase: &str,
        scope: &RunScope,
    ) -> Result<(), PhaseError> {
        match phase {
            "send" => self.send(cx, scope).await,
            "lost" => {
                let input = self.input(cx).await?;
                let unknown = SavedCalls::of(cx).write(CALL, CallPhase::Unknown, None, None);
                self.end_without_grant(
                    cx,
                    &input,
                    Some(unknown),
                    ErrorCategory::Network,
                    "the token request was sent but its answer was lost (the node stopped)",
                    true,
                    "the token answer was lost; sign in again",
                )
                .await
            }
            // A saved result commits with the work's end, so this only closes a result saved
            // late by an old owner (its grant is unused and went to cleanup with it).
            _ => {
                let input = self.input(cx).await?;
                self.end_without_grant(
                    cx,
                    &input,
                    None,
                    ErrorCategory::Network,
                    "the token answer was saved after its owner lost the work",
                    true,
                    "the token answer came too late; sign in again",
                )
                .await
            }
        }
    }

    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError> {
        let input = self.input(cx).await?;
        let (category, cause, signals) = match end {
            EngineEnd::Cancelled { signals } => (
                ErrorCategory::Internal,
                "the token work was cancelled".to_string(),
                signals,
            ),
            EngineEnd::Failed { category, cause } => (category, cause, Vec::new()),
        };
        let failed = cx.failed_end(category, &cause)?;
        let commit = Commit {
            events: vec![failed.event],
            state: Some(failed.change),
            handled_signals: signals,
            writes: TxWrites::one(SendEnded {
                connection_id: input.connection_id,
                send_id: input.send_id,
                needs_sign_in: false,
                reason: None,
            }),
            ..Commit::default()
        };
        cx.engine
            .commit(cx.execution.id, cx.generation, commit)
            .await?;
        Ok(())
    }
}
