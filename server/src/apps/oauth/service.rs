//! The OAuth use cases of App connections: the browser step (`begin`, `complete`), the
//! credential at send time (`access_headers`, refreshing when the access token expired), and
//! `remove`, which hands the grant to the organization's cleanup service in the transaction
//! that removes it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::OsRng;
use chacha20poly1305::aead::rand_core::RngCore;
use openbot_schema::{
    BeginOAuth, CompleteOAuth, ExecutionId, ExecutionState, OAuthAuthorization, OAuthCleanup,
    OAuthConnection, Resource,
};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::OAuthError;
use super::cleanup::CleanupWorkflow;
use super::http::OAuthHttp;
use super::metadata::discover;
use super::registration::register;
use super::store::{
    ConnectionRow, ConnectionStatusWrite, FlowRow, NewRevocation, OAuthStore, USE_REVOCATION,
};
use super::token::{self, ClientCredentials, TokenSet};
use super::workflow::{
    OAUTH_TOKEN, Shared, TokenInput, TokenRequest, TokenWorkflow, cleanup_scope, open, seal,
    secret_place, start_cleanup, submit, tokens_place,
};
use crate::engine::{EngineContext, Registry};
use crate::identity::{Action, Caller, ServiceIdentity, ServiceOwner};
use crate::platform::Platform;
use crate::store::{StoreError, Submitted, TxWrites, now_ms, stored_time, stored_time_opt};

/// The service that refreshes grants for an organization's connections.
const REFRESH_SERVICE: &str = "oauth-refresh";

/// An access token this close to its expiry is refreshed first.
const EXPIRY_MARGIN_MS: i64 = 30_000;

/// How OAuth behaves on a node.
#[derive(Debug, Clone)]
pub struct OAuthConfig {
    /// How long a browser step stays valid.
    pub flow_ttl: Duration,
    /// How long a cleanup waits before it checks a busy grant scope again.
    pub recheck: Duration,
    /// How long `complete` and `access_headers` wait for token work to end.
    pub wait: Duration,
}

impl Default for OAuthConfig {
    /// Ten minutes for a browser step, a minute between checks, 30 s of waiting.
    fn default() -> Self {
        Self {
            flow_ttl: Duration::from_secs(600),
            recheck: Duration::from_secs(60),
            wait: Duration::from_secs(30),
        }
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 4)
}

/// The OAuth use cases. Cheap to clone.
#[derive(Clone)]
pub struct OAuth {
    engine: Arc<EngineContext>,
    shared: Shared,
    config: OAuthConfig,
}

impl OAuth {
    /// The use cases on `engine` and `store`, reaching the outside as `platform` allows.
    pub fn new(
        engine: Arc<EngineContext>,
        store: Arc<dyn OAuthStore>,
        platform: &Platform,
        config: OAuthConfig,
        status: Option<Arc<dyn ConnectionStatusWrite>>,
    ) -> Self {
        Self {
            engine,
            shared: shared(store, platform, &config, status),
            config,
        }
    }

    /// Registers OAuth's workflows (token work and cleanup) on a node's registry.
    pub fn register(
        registry: &mut Registry,
        store: Arc<dyn OAuthStore>,
        platform: &Platform,
        config: &OAuthConfig,
        status: Option<Arc<dyn ConnectionStatusWrite>>,
    ) {
        let shared = shared(store, platform, config, status);
        registry.register(Arc::new(TokenWorkflow::new(shared.clone())));
        registry.register(Arc::new(CleanupWorkflow::new(shared)));
    }

    fn store(&self) -> &dyn OAuthStore {
        self.shared.store.as_ref()
    }

    /// The connection, if the caller's organization has it.
    async fn own(&self, caller: &Caller, connection_id: Uuid) -> Result<ConnectionRow, OAuthError> {
        match self.store().connection(connection_id).await? {
            Some(row) if row.organization_id == caller.member.organization_id => Ok(row),
            _ => Err(OAuthError::NotFound),
        }
    }

    /// Starts a sign-in at `server_url`, the MCP server of the Connection's App (the caller
    /// resolved it from the App, never from the request: see `apps::begin_sign_in`):
    /// discovery, a client (registered when none is given), and the browser step's URL with
    /// a new state and PKCE S256. A `server_url` in the request must be the same URL.
    pub async fn begin(
        &self,
        caller: &Caller,
        connection_id: Uuid,
        server_url: &str,
        request: &BeginOAuth,
    ) -> Result<OAuthAuthorization, OAuthError> {
        may_sign(caller)?;
        if let Some(asked) = &request.server_url
            && !same_url(asked, server_url)
        {
            return Err(OAuthError::ServerMismatch(server_url.to_string()));
        }
        let redirect = reqwest::Url::parse(&request.redirect_uri)
            .map_err(|e| OAuthError::Invalid(format!("redirect_uri is not a URL: {e}")))?;
        if !matches!(redirect.scheme(), "http" | "https") || request.redirect_uri.len() > 2000 {
            return Err(OAuthError::Invalid(
                "redirect_uri must be an http(s) URL of at most 2000 characters".into(),
            ));
        }
        let existing = match self.store().connection(connection_id).await? {
            Some(row) if row.organization_id != caller.member.organization_id => {
                return Err(OAuthError::NotFound);
            }
            other => other,
        };
        let found = discover(&self.shared.http, server_url).await?;
        if let Some(row) = &existing
            && row.grant_id.is_some()
            && row.issuer != found.server.issuer
        {
            // Its grant's tokens belong to the other server: they must never be sent here.
            return Err(OAuthError::Invalid(
                "the connection is signed in at another authorization server: remove its sign-in first".into(),
            ));
        }
        let scope = request
            .scope
            .clone()
            .or_else(|| (!found.scopes.is_empty()).then(|| found.scopes.join(" ")));
        let reuse = existing.as_ref().filter(|row| {
            request.client_id.is_none()
                && row.client_registered
                && row.issuer == found.server.issuer
                && row.redirect_uri == request.redirect_uri
        });
        let (client_id, client_secret, registered) = match (&request.client_id, reuse) {
            (Some(id), _) => (id.clone(), request.client_secret.clone(), false),
            (None, Some(row)) => {
                let secret = match &row.secret {
                    Some(sealed) => Some(open::<String>(
                        &self.engine,
                        &secret_place(connection_id),
                        sealed,
                    )?),
                    None => None,
                };
                (row.client_id.clone(), secret, true)
            }
            (None, None) => {
                let client = register(
                    &self.shared.http,
                    &found.server,
                    &request.redirect_uri,
                    scope.as_deref(),
                )
                .await?;
                (client.client_id, client.client_secret, true)
            }
        };
        let cx = &self.engine;
        let secret = client_secret
            .as_ref()
            .map(|s| seal(cx, &secret_place(connection_id), s))
            .transpose()?;
        let metadata =
            serde_json::to_string(&found.server).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.store()
            .put_connection(&ConnectionRow {
                connection_id,
                organization_id: caller.member.organization_id,
                resource: found.resource.clone(),
                issuer: found.server.issuer.clone(),
                metadata,
                client_id: client_id.clone(),
                client_registered: registered,
                secret,
                redirect_uri: request.redirect_uri.clone(),
                scope: scope.clone(),
                status: "needs_sign_in".into(),
                grant_id: None,
                reason: None,
                created_by: caller.member.member_id,
            })
            .await?;
        let mut bytes = [0u8; 32];
        OsRng.fill_bytes(&mut bytes);
        let state = URL_SAFE_NO_PAD.encode(bytes);
        let credentials = ClientCredentials {
            client_id: client_id.clone(),
            client_secret,
        };
        let (authorization_url, verifier) = token::authorization_url(
            &found.server,
            &credentials,
            &request.redirect_uri,
            scope.as_deref(),
            &found.resource,
            &state,
        )
        .map_err(|e| OAuthError::Discovery(e.to_string()))?;
        let flow_id = Uuid::now_v7();
        let expires_at = now_ms() + millis(self.config.flow_ttl);
        self.store()
            .put_flow(&FlowRow {
                id: flow_id,
                connection_id,
                organization_id: caller.member.organization_id,
                member_id: caller.member.member_id,
                state_hash: Sha256::digest(state.as_bytes()).to_vec(),
                verifier: seal(cx, &verifier_place(flow_id), &verifier)?,
                client_id,
                redirect_uri: request.redirect_uri.clone(),
                expires_at,
                used_at: None,
            })
            .await?;
        Ok(OAuthAuthorization {
            authorization_url,
            state,
            expires_at: stored_time(expires_at)?,
        })
    }

    /// Completes a sign-in with the redirect's `code` and `state`: only the member who began
    /// it, for the same connection, once, before it expires. The code exchange is durable
    /// token work; this waits for it and answers the connection's status.
    pub async fn complete(
        &self,
        caller: &Caller,
        connection_id: Uuid,
        request: &CompleteOAuth,
    ) -> Result<OAuthConnection, OAuthError> {
        may_sign(caller)?;
        if request.code.is_empty() || request.code.len() > 4096 || request.state.len() > 512 {
            return Err(OAuthError::Invalid(
                "code (at most 4096 characters) and state are needed".into(),
            ));
        }
        let Some(flow) = self
            .store()
            .flow_by_state(&Sha256::digest(request.state.as_bytes()))
            .await?
        else {
            return Err(OAuthError::State("it is unknown"));
        };
        if flow.organization_id != caller.member.organization_id
            || flow.connection_id != connection_id
        {
            return Err(OAuthError::State("it belongs to another connection"));
        }
        if flow.member_id != caller.member.member_id {
            return Err(OAuthError::State("another member began this sign-in"));
        }
        if flow.used_at.is_some() {
            // A retry of a step whose answer was lost: the first outcome, never a new exchange.
            return self.first_outcome(caller, connection_id, flow.id).await;
        }
        if flow.expires_at < now_ms() {
            return Err(OAuthError::State("it expired: begin the sign-in again"));
        }
        let connection = self.own(caller, connection_id).await?;
        let cx = &self.engine;
        let verifier: String = open(cx, &verifier_place(flow.id), &flow.verifier)?;
        let input = TokenInput {
            organization_id: connection.organization_id,
            connection_id,
            send_id: Uuid::now_v7(),
            request: TokenRequest::Exchange {
                code: request.code.clone(),
                verifier,
                client_id: flow.client_id.clone(),
                redirect_uri: flow.redirect_uri.clone(),
            },
        };
        let submitted = submit(
            cx,
            OAUTH_TOKEN,
            caller.scope(),
            format!("oauth-exchange:{}", flow.id),
            &input,
        )
        .await;
        let execution = match submitted {
            Ok(Submitted::Created(id)) => id,
            // The same step at the same time, or after a crash before the state was marked
            // used: the exchange stored first answers.
            Ok(Submitted::Existing(_))
            | Err(crate::engine::EngineError::Store(StoreError::CommandKeyConflict(_))) => {
                return self.first_outcome(caller, connection_id, flow.id).await;
            }
            Err(err) => return Err(err.into()),
        };
        if !self.store().use_flow(flow.id, execution.as_uuid()).await? {
            return self.first_outcome(caller, connection_id, flow.id).await;
        }
        self.outcome(caller, connection_id, execution).await
    }

    /// The outcome of the code exchange a completed sign-in step started first (found by its
    /// command key, which only the member who began the sign-in holds).
    async fn first_outcome(
        &self,
        caller: &Caller,
        connection_id: Uuid,
        flow: Uuid,
    ) -> Result<OAuthConnection, OAuthError> {
        let key = format!("oauth-exchange:{flow}");
        match self.engine.store.command_key(&caller.scope(), &key).await? {
            Some(first) => {
                self.outcome(caller, connection_id, first.execution_id)
                    .await
            }
            None => Err(OAuthError::StateUsed),
        }
    }

    /// Waits for a code exchange and answers the connection's status, or why it failed.
    async fn outcome(
        &self,
        caller: &Caller,
        connection_id: Uuid,
        execution: ExecutionId,
    ) -> Result<OAuthConnection, OAuthError> {
        let state = self.wait(execution).await?;
        let status = self
            .status_of(&self.own(caller, connection_id).await?)
            .await?;
        if state != ExecutionState::Completed {
            return Err(OAuthError::Exchange(
                status
                    .reason
                    .unwrap_or_else(|| "the code exchange failed".into()),
            ));
        }
        Ok(status)
    }

    /// The connection's sign-in state.
    pub async fn status(
        &self,
        caller: &Caller,
        connection_id: Uuid,
    ) -> Result<OAuthConnection, OAuthError> {
        caller.require(Resource::Apps, Action::Read)?;
        let row = self.own(caller, connection_id).await?;
        self.status_of(&row).await
    }

    async fn status_of(&self, row: &ConnectionRow) -> Result<OAuthConnection, OAuthError> {
        let expires_at = match row.grant_id {
            Some(id) => stored_time_opt(self.store().grant(id).await?.and_then(|g| g.expires_at))?,
            None => None,
        };
        Ok(OAuthConnection {
            connection_id: row.connection_id,
            status: row.status.clone(),
            issuer: row.issuer.clone(),
            resource: row.resource.clone(),
            client_id: row.client_id.clone(),
            client_registered: row.client_registered,
            expires_at,
            reason: row.reason.clone(),
        })
    }

    /// Removes the connection's grant and hands it to the organization's cleanup service in
    /// the same transaction; answers that cleanup (none when there was no grant).
    pub async fn remove(
        &self,
        caller: &Caller,
        connection_id: Uuid,
    ) -> Result<Option<OAuthCleanup>, OAuthError> {
        may_sign(caller)?;
        let row = self.own(caller, connection_id).await?;
        let extra = self.shared.status_write(connection_id, "needs_sign_in");
        self.hand_over(&row, extra).await
    }

    /// Removes the OAuth setup of `organization`'s connection with `extra` writes in the same
    /// transaction (the Apps side removes its Connection there), handing its grant to the
    /// organization's cleanup service. `Ok(None)` and nothing written when the connection
    /// never began a sign-in; `Ok(Some(None))` when it had no grant to hand over.
    pub async fn remove_connection(
        &self,
        organization: Uuid,
        connection_id: Uuid,
        extra: Vec<Arc<dyn crate::store::TxWrite>>,
    ) -> Result<Option<Option<OAuthCleanup>>, OAuthError> {
        match self.store().connection(connection_id).await? {
            Some(row) if row.organization_id == organization => {
                Ok(Some(self.hand_over(&row, extra).await?))
            }
            Some(_) => Err(OAuthError::NotFound),
            None => Ok(None),
        }
    }

    async fn hand_over(
        &self,
        row: &ConnectionRow,
        extra: Vec<Arc<dyn crate::store::TxWrite>>,
    ) -> Result<Option<OAuthCleanup>, OAuthError> {
        let connection_id = row.connection_id;
        let grant = match row.grant_id {
            Some(id) => self.store().grant(id).await?,
            None => None,
        };
        let revocation = NewRevocation {
            id: Uuid::now_v7(),
            organization_id: row.organization_id,
            issuer: grant
                .as_ref()
                .map_or(row.issuer.clone(), |g| g.issuer.clone()),
            client_id: grant
                .as_ref()
                .map_or(row.client_id.clone(), |g| g.client_id.clone()),
            connection_id,
            grant_id: grant.as_ref().map_or(Uuid::nil(), |g| g.id),
            owner_scope: cleanup_scope(row.organization_id).to_stored(),
        };
        let handed = match self
            .store()
            .remove(connection_id, &revocation, TxWrites(extra))
            .await
        {
            Ok(handed) => handed,
            Err(StoreError::Refused(_)) => {
                return Err(OAuthError::Exchange(
                    "the connection was signed in meanwhile: remove it again".into(),
                ));
            }
            Err(err) => return Err(err.into()),
        };
        if !handed {
            return Ok(None);
        }
        start_cleanup(&self.engine, row.organization_id, revocation.id).await?;
        Ok(Some(OAuthCleanup {
            id: revocation.id,
            connection_id,
            state: "pending".into(),
            result: None,
        }))
    }

    /// A cleanup of the connection's grants, with its saved result.
    pub async fn cleanup(
        &self,
        caller: &Caller,
        connection_id: Uuid,
        cleanup_id: Uuid,
    ) -> Result<OAuthCleanup, OAuthError> {
        caller.require(Resource::Apps, Action::Read)?;
        let row = match self.store().grant_use(cleanup_id).await? {
            Some(row)
                if row.kind == USE_REVOCATION
                    && row.holder_id == connection_id
                    && row.organization_id == caller.member.organization_id =>
            {
                row
            }
            _ => return Err(OAuthError::NotFound),
        };
        Ok(OAuthCleanup {
            id: row.id,
            connection_id,
            state: row.state,
            result: row.result,
        })
    }

    /// [`OAuth::access_headers`] of a connection of `organization` only: the setup of another
    /// organization under the same ID is [`OAuthError::NotFound`].
    pub async fn access_headers_of(
        &self,
        organization: Uuid,
        connection_id: Uuid,
    ) -> Result<Vec<(String, String)>, OAuthError> {
        match self.store().connection(connection_id).await? {
            Some(row) if row.organization_id == organization => {
                self.access_headers(connection_id).await
            }
            _ => Err(OAuthError::NotFound),
        }
    }

    /// The headers that authorize a request to the connection's MCP server now (an
    /// `Authorization: Bearer` header), refreshing the grant first when its access token
    /// expired. Fails with [`OAuthError::NeedsSignIn`] when there is no usable grant.
    pub async fn access_headers(
        &self,
        connection_id: Uuid,
    ) -> Result<Vec<(String, String)>, OAuthError> {
        let started = now_ms();
        let mut refreshed = false;
        for _ in 0..2 {
            let Some(row) = self.store().connection(connection_id).await? else {
                return Err(OAuthError::NotFound);
            };
            if row.status != "ready" {
                return Err(OAuthError::NeedsSignIn(
                    row.reason
                        .unwrap_or_else(|| "the connection is not signed in".into()),
                ));
            }
            let Some(grant) = (match row.grant_id {
                Some(id) => self.store().grant(id).await?,
                None => None,
            }) else {
                return Err(OAuthError::NeedsSignIn(
                    "the connection has no grant".into(),
                ));
            };
            let Some(sealed) = &grant.tokens else {
                return Err(OAuthError::NeedsSignIn("the grant was revoked".into()));
            };
            let tokens: TokenSet = open(&self.engine, &tokens_place(grant.id), sealed)?;
            // A token got since this call began (by its own refresh or a concurrent caller's)
            // is used while it is valid at all: a server may give lifetimes shorter than the
            // margin, and callers that waited on one refresh must not start another.
            let margin = if refreshed || tokens.obtained_at.is_some_and(|at| at >= started) {
                0
            } else {
                EXPIRY_MARGIN_MS
            };
            let fresh = tokens.expires_at.is_none_or(|at| at > now_ms() + margin);
            if fresh {
                return Ok(vec![(
                    "authorization".to_string(),
                    format!("Bearer {}", tokens.access_token),
                )]);
            }
            if tokens.refresh_token.is_none() {
                return Err(OAuthError::NeedsSignIn(
                    "the access token expired and the grant has no refresh token".into(),
                ));
            }
            // One refresh per grant rotation: concurrent callers join the same work.
            let mut digest = Sha256::new();
            digest.update(grant.id.as_bytes());
            digest.update(grant.rotation.to_be_bytes());
            let mut send = [0u8; 16];
            send.copy_from_slice(&digest.finalize()[..16]);
            let input = TokenInput {
                organization_id: row.organization_id,
                connection_id,
                send_id: Uuid::from_bytes(send),
                request: TokenRequest::Refresh {
                    grant_id: grant.id,
                    rotation: grant.rotation,
                },
            };
            let scope = ServiceIdentity::new(
                ServiceOwner::Organization(row.organization_id),
                REFRESH_SERVICE,
            )
            .map_err(|e| OAuthError::Invalid(e.to_string()))?
            .scope();
            let execution = submit(
                &self.engine,
                OAUTH_TOKEN,
                scope,
                format!("oauth-refresh:{}:{}", grant.id, grant.rotation),
                &input,
            )
            .await?
            .execution_id();
            self.wait(execution).await?;
            refreshed = true;
        }
        Err(OAuthError::NeedsSignIn(
            "the grant could not be refreshed".into(),
        ))
    }

    /// Hands every revocation not done to its cleanup work again (each is keyed by its
    /// revocation, so work that exists is found, not doubled). For a node's start, after a
    /// crash between a hand-over and its work's start. Answers how many it handed.
    pub async fn resume_cleanups(&self) -> Result<usize, OAuthError> {
        resume_cleanups(&self.engine, self.store()).await
    }

    async fn wait(&self, execution: ExecutionId) -> Result<ExecutionState, OAuthError> {
        let deadline = Instant::now() + self.config.wait;
        loop {
            let row = self.engine.store.execution(execution).await?;
            if row.state.is_terminal() {
                return Ok(row.state);
            }
            if Instant::now() > deadline {
                return Err(OAuthError::Pending);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Hands every revocation not done to its cleanup work again (see
/// [`OAuth::resume_cleanups`]); a node runs it when it starts.
pub async fn resume_cleanups(
    engine: &EngineContext,
    store: &dyn OAuthStore,
) -> Result<usize, OAuthError> {
    let mut after = None;
    let mut handed = 0;
    loop {
        let page = store.open_revocations(after, 100).await?;
        let Some(last) = page.last() else {
            return Ok(handed);
        };
        after = Some(last.id);
        for row in &page {
            start_cleanup(engine, row.organization_id, row.id).await?;
            handed += 1;
        }
    }
}

fn shared(
    store: Arc<dyn OAuthStore>,
    platform: &Platform,
    config: &OAuthConfig,
    status: Option<Arc<dyn ConnectionStatusWrite>>,
) -> Shared {
    Shared {
        store,
        http: OAuthHttp::new(platform),
        status,
        recheck_ms: millis(config.recheck),
    }
}

/// Whether two URLs name the same resource (parsed, so `HTTP://Host:80/mcp` is
/// `http://host/mcp`); an unparsable one matches only itself.
fn same_url(a: &str, b: &str) -> bool {
    match (reqwest::Url::parse(a), reqwest::Url::parse(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The place a browser step's PKCE verifier is sealed for.
fn verifier_place(flow_id: Uuid) -> Vec<u8> {
    format!("oauth_flows:{flow_id}:verifier").into_bytes()
}

/// Who may sign an App Connection in or out: the `apps` write right and the role that opens
/// Connections (owner or admin), since every Bot of the organization then acts at the MCP
/// server as the account that signed in. A plain member could otherwise replace an admin's
/// grant with their own account, or sign the Connection out for everyone; a token limited to
/// some Bots could do the same for the Bots beyond its limit.
fn may_sign(caller: &Caller) -> Result<(), OAuthError> {
    caller.require(Resource::Apps, Action::Write)?;
    caller.require_whole_organization()?;
    if caller.is_admin() {
        Ok(())
    } else {
        Err(OAuthError::NotAdmin)
    }
}
