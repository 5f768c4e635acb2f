//! The `oauth_cleanup` work of an organization's cleanup service (a `ServiceIdentity`, so a
//! member losing access never stops it, and a takeover goes on from its saved revocation).
//!
//! One revocation row of the grant-use table per work:
//! - an unused grant (a late answer) waits for its source execution to end;
//! - every cleanup waits while anything else holds or sends in its grant scope (the same
//!   issuer and client): servers may revoke related tokens together, so revoking there could
//!   revoke a grant still installed. A durable timer checks again;
//! - then it reserves the scope (new grant sends wait), revokes (RFC 7009; a retry after a
//!   lost answer is safe, and a failed request waits on the common retry timer), or saves
//!   `local_only` where the server has no revocation endpoint, and ends with the revocation's
//!   result, the grant's tokens dropped and the scope released in one commit.

use async_trait::async_trait;
use openbot_core::turn::CallKey;
use openbot_schema::{ErrorCategory, ExecutionId, ExecutionState};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::store::{GrantRow, GrantUseRow, RevocationDone};
use super::token::{self, Revoked, TokenFailure, TokenSet};
use super::workflow::{CALL, Shared, credentials, open, tokens_place};
use crate::engine::{Backoff, EngineEnd, Next, PhaseContext, PhaseError, RunScope, Workflow};
use crate::store::{CallPhase, CallWrite, Commit, StateChange, StoreError, TxWrites, now_ms};

/// The execution kind of grant cleanup.
pub const OAUTH_CLEANUP: &str = "oauth_cleanup";

/// The name of each organization's cleanup service.
pub const CLEANUP_SERVICE: &str = "oauth-cleanup";

/// How often a revocation request is tried before its result is `failed`.
const ATTEMPTS: u32 = 6;

/// The saved input of cleanup work.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct CleanupInput {
    pub use_id: Uuid,
    pub organization_id: Uuid,
}

/// A revocation call's saved result.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum RevokeOutcome {
    Done { result: String },
    Retry { at: i64 },
}

/// Runs grant cleanup.
pub struct CleanupWorkflow {
    shared: Shared,
}

impl CleanupWorkflow {
    pub(super) fn new(shared: Shared) -> Self {
        Self { shared }
    }

    async fn parts(
        &self,
        cx: &PhaseContext,
    ) -> Result<(CleanupInput, GrantUseRow, GrantRow), PhaseError> {
        let input: CleanupInput = cx.input().await?;
        let missing = |what: &str| {
            PhaseError::Storage(StoreError::Invalid(format!(
                "cleanup {}: its {what} is missing",
                input.use_id
            )))
        };
        let row = self
            .shared
            .store
            .grant_use(input.use_id)
            .await?
            .ok_or_else(|| missing("revocation"))?;
        let grant_id = row.grant_id.ok_or_else(|| missing("grant"))?;
        let grant = self
            .shared
            .store
            .grant(grant_id)
            .await?
            .ok_or_else(|| missing("grant"))?;
        Ok((input, row, grant))
    }

    /// The latest revocation attempt and its saved outcome.
    async fn last_attempt(
        &self,
        cx: &PhaseContext,
    ) -> Result<Option<(u32, Option<RevokeOutcome>, CallPhase)>, PhaseError> {
        let Some(call) = cx
            .engine
            .store
            .latest_call(cx.execution.id, CALL.step, CALL.slot)
            .await?
        else {
            return Ok(None);
        };
        let outcome = match call.result_record {
            Some(record) => Some(cx.engine.open_json::<RevokeOutcome>(record).await?),
            None => None,
        };
        Ok(Some((call.key.attempt, outcome, call.phase)))
    }

    async fn finish(
        &self,
        cx: &PhaseContext,
        row: &GrantUseRow,
        grant: &GrantRow,
        call: Option<CallWrite>,
        result: &'static str,
    ) -> Result<(), PhaseError> {
        let commit = Commit {
            calls: call.into_iter().collect(),
            state: Some(StateChange::ended(ExecutionState::Completed)),
            writes: TxWrites::one(RevocationDone {
                use_id: row.id,
                grant_id: grant.id,
                result,
            }),
            ..Commit::default()
        };
        cx.engine
            .commit(cx.execution.id, cx.generation, commit)
            .await?;
        tracing::info!(cleanup = %row.id, result, "OAuth grant cleanup ended");
        Ok(())
    }

    async fn revoke(&self, cx: &PhaseContext, scope: &RunScope) -> Result<(), PhaseError> {
        let (_, row, grant) = self.parts(cx).await?;
        if !self
            .shared
            .store
            .reserve_revocation(row.id, cx.execution.id.as_uuid())
            .await?
        {
            // Something took the scope meanwhile: `next` waits for it.
            return Ok(());
        }
        let Some(sealed) = &grant.tokens else {
            return self.finish(cx, &row, &grant, None, "local_only").await;
        };
        let tokens: TokenSet = open(&cx.engine, &tokens_place(grant.id), sealed)?;
        let connection = self
            .shared
            .store
            .connection(grant.connection_id)
            .await?
            .ok_or_else(|| StoreError::Invalid("the grant's connection is gone".into()))?;
        // The grant's own server, wherever the connection signs in now.
        let server: super::ServerMetadata = serde_json::from_str(&grant.metadata)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        if server.revocation_endpoint.is_none() {
            // No endpoint to ask: the tokens are forgotten, and the saved result says only that.
            return self.finish(cx, &row, &grant, None, "local_only").await;
        }
        let credentials = credentials(&cx.engine, &connection, &grant.client_id)?;
        let attempt = match self.last_attempt(cx).await? {
            Some((attempt, Some(RevokeOutcome::Retry { .. }), _)) => attempt + 1,
            Some((attempt, _, _)) => attempt,
            None => 1,
        };
        let key = CallKey { attempt, ..CALL };
        let call = |phase, result| CallWrite {
            key,
            phase,
            idempotency_key: key.idempotency_key(cx.execution.id),
            result,
            usage: None,
        };
        cx.engine
            .commit(
                cx.execution.id,
                cx.generation,
                Commit {
                    calls: vec![call(CallPhase::Sending, None)],
                    ..Commit::default()
                },
            )
            .await?;
        if !scope.gate_open() {
            return Err(PhaseError::Cancelled);
        }
        let answer = token::revoke(
            &self.shared.http,
            &server,
            &credentials,
            &connection.redirect_uri,
            &tokens,
        )
        .await;
        if let Err(failure) = &answer {
            // The failure names an OAuth error code or a transport kind, never a token.
            tracing::warn!(cleanup = %row.id, attempt, %failure, "OAuth revocation failed");
        }
        let result: &'static str = match answer {
            Ok(Revoked::Revoked) => "revoked",
            Ok(Revoked::LocalOnly) => "local_only",
            Err(TokenFailure::Refused { .. }) => "failed",
            Err(TokenFailure::NotSent(_) | TokenFailure::Lost(_)) if attempt < ATTEMPTS => {
                let mut backoff = Backoff::new();
                let mut delay = backoff.next_delay();
                for _ in 1..attempt {
                    delay = backoff.next_delay();
                }
                let at = now_ms() + i64::try_from(delay.as_millis()).unwrap_or(1000);
                let record = cx.engine.seal_json(&RevokeOutcome::Retry { at })?;
                cx.engine
                    .commit(
                        cx.execution.id,
                        cx.generation,
                        Commit {
                            calls: vec![call(CallPhase::Done, Some(record))],
                            ..Commit::default()
                        },
                    )
                    .await?;
                return Ok(());
            }
            Err(_) => "failed",
        };
        let record = cx.engine.seal_json(&RevokeOutcome::Done {
            result: result.to_string(),
        })?;
        self.finish(
            cx,
            &row,
            &grant,
            Some(call(CallPhase::Done, Some(record))),
            result,
        )
        .await
    }
}

#[async_trait]
impl Workflow for CleanupWorkflow {
    fn kind(&self) -> &'static str {
        OAUTH_CLEANUP
    }

    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError> {
        if cx.execution.state.is_terminal() {
            return Ok(Next::Done);
        }
        let (_, row, grant) = self.parts(cx).await?;
        if row.state == "done" {
            return Ok(Next::Run("close".into()));
        }
        let recheck = Next::Wait {
            until: Some(now_ms() + self.shared.recheck_ms),
        };
        if grant.state == "unused" {
            // Cleanup of an unused result waits for the source execution.
            let source = cx
                .engine
                .store
                .execution(ExecutionId::from(grant.source_execution))
                .await?;
            if !source.state.is_terminal() {
                return Ok(recheck);
            }
        }
        if let Some((_, Some(RevokeOutcome::Retry { at }), _)) = self.last_attempt(cx).await?
            && now_ms() < at
        {
            return Ok(Next::Wait { until: Some(at) });
        }
        if row.state == "pending"
            && self
                .shared
                .store
                .scope_busy(&grant.issuer, &grant.client_id, grant.id)
                .await?
        {
            return Ok(recheck);
        }
        Ok(Next::Run("revoke".into()))
    }

    async fn run(
        &self,
        cx: &PhaseContext,
        phase: &str,
        scope: &RunScope,
    ) -> Result<(), PhaseError> {
        match phase {
            "revoke" => self.revoke(cx, scope).await,
            _ => {
                cx.engine
                    .commit(
                        cx.execution.id,
                        cx.generation,
                        Commit {
                            state: Some(StateChange::ended(ExecutionState::Completed)),
                            ..Commit::default()
                        },
                    )
                    .await?;
                Ok(())
            }
        }
    }

    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError> {
        // A cleanup that cannot go on keeps its revocation row (not done): the sweep hands it
        // to new work, so the grant is never forgotten unrevoked.
        let (category, cause, signals) = match end {
            EngineEnd::Cancelled { signals } => (
                ErrorCategory::Internal,
                "the cleanup was cancelled".to_string(),
                signals,
            ),
            EngineEnd::Failed { category, cause } => (category, cause, Vec::new()),
        };
        let failed = cx.failed_end(category, &cause)?;
        cx.engine
            .commit(
                cx.execution.id,
                cx.generation,
                Commit {
                    events: vec![failed.event],
                    state: Some(failed.change),
                    handled_signals: signals,
                    ..Commit::default()
                },
            )
            .await?;
        Ok(())
    }
}
