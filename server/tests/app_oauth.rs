//! OAuth 2.1 for App connections end to end, on SQLite and on a real PostgreSQL, against a
//! real authorization server: npm `oidc-provider` (tests/oauth/provider.mjs, installed by
//! scripts/oauth-deps) with dynamic registration, PKCE, resource indicators, refresh token
//! rotation and revocation, and a protected resource that answers like an OAuth-protected MCP
//! server. The browser step is driven by the provider's test account, which logs in and
//! consents without a page.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/pg.rs"]
mod pg;
#[macro_use]
#[path = "support/api.rs"]
mod api;
#[path = "support/served.rs"]
mod served;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use openbot_server::apps::oauth::{OAuth, OAuthConfig, OAuthError};
use openbot_server::engine::{Engine, RunnerConfig};
use openbot_server::http::{AppState, app};
use openbot_server::identity::{Role, secret_hash};
use openbot_server::node::{Database, bootstrap, registry};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use api::{Raw, Server, error_code, postgres, sqlite, test_keys, test_platform};

/// How OAuth runs in these tests: a cleanup checks a busy grant scope again after 200 ms.
fn config() -> OAuthConfig {
    OAuthConfig {
        recheck: Duration::from_millis(200),
        ..OAuthConfig::default()
    }
}

/// A node like `api::server`, with OAuth on [`config`].
async fn server(raw: Raw) -> Server {
    server_with(raw, config()).await
}

/// A node like `api::server`, with OAuth on `oauth_config`.
async fn server_with(raw: Raw, oauth_config: OAuthConfig) -> Server {
    api::logs();
    let platform = test_platform();
    let database = match &raw {
        Raw::Sqlite(store, _) => Database::on(Arc::new(store.clone())),
        Raw::Postgres(store) => Database::on(Arc::new(store.clone())),
    };
    let owner = bootstrap(database.identity.as_ref())
        .await
        .unwrap()
        .unwrap();
    let clock = openbot_server::engine::TestClock::new();
    let engine = Arc::new(Engine::open_with_clock(
        Arc::clone(&database.store),
        test_keys(),
        "node-a".into(),
        clock.clone(),
    ));
    let mut workflows = registry(Some(&database), &platform);
    OAuth::register(
        &mut workflows,
        Arc::clone(&database.oauth),
        &platform,
        &config(),
        Some(Arc::new(openbot_server::apps::AppStatusWrite)),
    );
    engine
        .start_runner(
            workflows,
            RunnerConfig {
                lease: Duration::from_secs(5),
                capacity: 16,
                storage_retry_budget: openbot_server::engine::STORAGE_RETRY_BUDGET,
            },
        )
        .await;
    let objects = tempfile::tempdir().unwrap();
    let store = openbot_server::files::local_objects(objects.path()).unwrap();
    let state = AppState::new(Arc::clone(&engine), &database, store, platform.clone()).with_oauth(
        OAuth::new(
            Arc::clone(engine.context()),
            Arc::clone(&database.oauth),
            &platform,
            oauth_config,
            Some(Arc::new(openbot_server::apps::AppStatusWrite)),
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        // The node's own server loop, as `openbot serve` runs it.
        let _ = openbot_server::http::serve(listener, app(state), std::future::pending()).await;
    });
    Server {
        base,
        owner,
        database,
        engine,
        raw,
        http: reqwest::Client::new(),
        objects,
        clock,
    }
}

macro_rules! oauth_tests {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::server(super::sqlite().await).await).await })*
        }
        mod on_postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::server(super::postgres().await).await).await })*
        }
    };
}

oauth_tests!(
    a_connection_signs_in_with_registration_pkce_and_its_resource,
    an_expired_access_token_is_refreshed_and_the_rotated_refresh_token_replaces_the_old,
    a_refresh_refused_for_good_leaves_the_connection_needing_sign_in,
    removing_a_connection_revokes_its_grant_at_the_provider,
    a_provider_without_revocation_gives_a_saved_local_only_result,
    cleanup_waits_while_the_same_client_is_installed_and_survives_its_member_leaving,
    a_cleanup_taken_over_keeps_its_owner_private_data_and_grant_reservation,
    a_forged_or_borrowed_state_is_refused_and_a_replay_gets_the_first_outcome,
    metadata_that_points_at_an_internal_address_is_refused_before_any_request,
    oauth_routes_need_the_apps_rights,
    a_plain_member_cannot_sign_the_organizations_connection_in_or_out,
    a_lost_code_exchange_answer_is_never_asked_again_and_needs_sign_in,
    a_hand_over_whose_work_never_started_is_found_by_the_sweep,
    an_oauth_protected_mcp_server_answers_with_the_connections_credential,
    a_signed_in_connection_never_sends_its_grant_to_another_authorization_server,
    a_sign_in_completes_with_the_client_and_redirect_it_began_with,
    sign_in_begins_only_at_an_oauth_connection_of_a_registered_app,
    removing_the_app_connection_hands_its_grant_to_cleanup,
    an_oauth_setup_needs_an_app_connection_row,
    a_turn_calls_an_oauth_protected_mcp_server_refreshing_then_needing_sign_in,
);

/// The folder scripts/oauth-deps installed oidc-provider into.
fn deps() -> &'static String {
    static DIR: OnceLock<String> = OnceLock::new();
    DIR.get_or_init(|| {
        let script = format!(
            "{}/../scripts/oauth-deps",
            std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR")
        );
        let output = Command::new(&script)
            .output()
            .expect("scripts/oauth-deps runs");
        assert!(
            output.status.success(),
            "oauth-deps failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap().trim().to_string()
    })
}

/// A running tests/oauth/provider.mjs; killed when dropped.
struct Provider {
    child: Child,
    issuer: String,
    resource: String,
    base: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn provider(env: &[(&str, &str)]) -> Provider {
    // ES modules resolve packages next to the file: run a copy inside the install folder.
    let file = format!("{}/provider-{}.mjs", deps(), Uuid::now_v7().simple());
    std::fs::copy(
        format!(
            "{}/../tests/oauth/provider.mjs",
            std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR")
        ),
        &file,
    )
    .unwrap();
    let mut command = Command::new("node");
    command
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("node starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = std::fs::remove_file(&file);
    let started: Value = serde_json::from_str(&line).expect("the provider prints where it listens");
    Provider {
        child,
        issuer: started["issuer"].as_str().unwrap().into(),
        resource: started["resource"].as_str().unwrap().into(),
        base: started["resource_base"].as_str().unwrap().into(),
    }
}

const REDIRECT: &str = "http://127.0.0.1:9/oauth/callback";

/// Registers an App at `url` and opens an OAuth Connection to it through the API, as the
/// owner: sign-in begins only at an App the organization registered. Answers the Connection.
async fn connect(s: &Server, url: &str) -> Uuid {
    let app = app_at(s, url).await;
    open_connection(s, app, json!({"auth": "oauth"})).await
}

/// Registers an App at `url` (a fresh name); answers its ID.
async fn app_at(s: &Server, url: &str) -> Uuid {
    let name = format!("mcp-{}", &Uuid::now_v7().simple().to_string()[20..]);
    let response = s
        .post("/v1/apps", &s.owner)
        .json(&json!({"name": name, "transport": {"type": "http", "url": url}}))
        .send()
        .await
        .unwrap();
    let (status, body) = (response.status(), response.json::<Value>().await.unwrap());
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["id"].as_str().unwrap().parse().unwrap()
}

/// Opens a Connection to `app` with `body`; answers its ID.
async fn open_connection(s: &Server, app: Uuid, body: Value) -> Uuid {
    let response = s
        .post(&format!("/v1/apps/{app}/connections"), &s.owner)
        .json(&body)
        .send()
        .await
        .unwrap();
    let (status, body) = (response.status(), response.json::<Value>().await.unwrap());
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["id"].as_str().unwrap().parse().unwrap()
}

fn path(connection: Uuid, rest: &str) -> String {
    format!("/v1/app-connections/{connection}/oauth{rest}")
}

/// The browser step: follows the authorization URL as the provider's test account and
/// answers the redirect's `code` and `state`.
async fn browse(provider: &Provider, url: &str) -> (String, String) {
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/browser", provider.base))
        .json(&json!({ "url": url }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let location = reqwest::Url::parse(answer["location"].as_str().unwrap_or_else(|| {
        panic!("the browser step ends at the redirect: {answer}");
    }))
    .unwrap();
    assert!(location.as_str().starts_with(REDIRECT), "{location}");
    let get = |name: &str| {
        location
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.to_string())
            .unwrap()
    };
    (get("code"), get("state"))
}

async fn begin(s: &Server, token: &str, connection: Uuid, body: Value) -> Value {
    let response = s
        .post(&path(connection, "/authorize"), token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

/// Signs a connection in: begin, the browser step, complete. Answers the completed status.
async fn sign_in(s: &Server, token: &str, connection: Uuid, provider: &Provider) -> Value {
    sign_in_with(s, token, connection, provider, json!({})).await
}

async fn sign_in_with(
    s: &Server,
    token: &str,
    connection: Uuid,
    provider: &Provider,
    extra: Value,
) -> Value {
    // No server_url: the server takes the Connection's App URL.
    let mut body = json!({ "redirect_uri": REDIRECT });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let step = begin(s, token, connection, body).await;
    let (code, state) = browse(provider, step["authorization_url"].as_str().unwrap()).await;
    assert_eq!(state, step["state"]);
    let response = s
        .post(&path(connection, "/complete"), token)
        .json(&json!({ "state": state, "code": code }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

/// The service as the Apps' MCP client calls it at send time.
fn oauth(s: &Server) -> OAuth {
    OAuth::new(
        Arc::clone(s.engine.context()),
        Arc::clone(&s.database.oauth),
        &test_platform(),
        config(),
        Some(Arc::new(openbot_server::apps::AppStatusWrite)),
    )
}

async fn authorization(s: &Server, connection: Uuid) -> String {
    let headers = oauth(s).access_headers(connection).await.unwrap();
    assert_eq!(headers.len(), 1);
    assert_eq!(headers[0].0, "authorization");
    headers[0].1.clone()
}

/// The resource server's answer to a request with `authorization`.
async fn call_resource(provider: &Provider, authorization: &str) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .get(&provider.resource)
        .header("authorization", authorization)
        .send()
        .await
        .unwrap();
    (response.status(), response.json().await.unwrap_or_default())
}

/// The tokens of the connection's current grant, opened as the server would.
async fn tokens(s: &Server, connection: Uuid) -> (Uuid, Value) {
    let row = s
        .database
        .oauth
        .connection(connection)
        .await
        .unwrap()
        .unwrap();
    let grant = row.grant_id.unwrap();
    (grant, tokens_of(s, grant).await.unwrap())
}

async fn tokens_of(s: &Server, grant: Uuid) -> Option<Value> {
    let row = s.database.oauth.grant(grant).await.unwrap().unwrap();
    let sealed = row.tokens?;
    let bytes = test_keys()
        .open_at(format!("oauth_grants:{grant}").as_bytes(), &sealed)
        .unwrap();
    Some(serde_json::from_slice(&bytes).unwrap())
}

async fn active(provider: &Provider, token: &str) -> bool {
    let answer: Value = reqwest::Client::new()
        .get(format!("{}/token-state?token={token}", provider.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    answer["active"].as_bool().unwrap()
}

/// Reads a cleanup until it is done; answers its result.
async fn cleanup_result(s: &Server, connection: Uuid, cleanup: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found: Value = s
            .get(&path(connection, &format!("/cleanups/{cleanup}")), &s.owner)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if found["state"] == "done" {
            return found["result"].as_str().unwrap().to_string();
        }
        assert!(
            Instant::now() < deadline,
            "the cleanup did not end: {found}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn remove(s: &Server, token: &str, connection: Uuid) -> String {
    let response = s.delete(&path(connection, ""), token).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let removal: Value = response.json().await.unwrap();
    assert_eq!(removal["connection_id"], connection.to_string());
    assert_eq!(removal["cleanup"]["connection_id"], connection.to_string());
    assert_eq!(removal["cleanup"]["state"], "pending");
    removal["cleanup"]["id"].as_str().unwrap().to_string()
}

async fn a_connection_signs_in_with_registration_pkce_and_its_resource(s: Server) {
    let provider = provider(&[]);
    let connection = connect(&s, &provider.resource).await;
    let step = begin(
        &s,
        &s.owner,
        connection,
        json!({ "server_url": provider.resource, "redirect_uri": REDIRECT }),
    )
    .await;
    let url = reqwest::Url::parse(step["authorization_url"].as_str().unwrap()).unwrap();
    let query: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert!(url.as_str().starts_with(&provider.issuer));
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["resource"], provider.resource);
    assert_eq!(query["redirect_uri"], REDIRECT);
    assert_eq!(query["scope"], "mcp", "the resource's advertised scope");
    assert_eq!(query["state"], step["state"]);
    let before: Value = s
        .get(&path(connection, ""), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(before["status"], "needs_sign_in");
    assert_eq!(
        before["client_registered"], true,
        "a client registered by RFC 7591"
    );
    assert_eq!(before["issuer"], provider.issuer);
    assert_eq!(query["client_id"], before["client_id"]);

    let (code, state) = browse(&provider, url.as_str()).await;
    let response = s
        .post(&path(connection, "/complete"), &s.owner)
        .json(&json!({ "state": state, "code": code }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let status: Value = response.json().await.unwrap();
    assert_eq!(status["status"], "ready");
    assert_eq!(status["resource"], provider.resource);
    assert!(status["expires_at"].is_string());

    // The MCP server accepts the credential the Apps' client gets at send time.
    let (answer, body) = call_resource(&provider, &authorization(&s, connection).await).await;
    assert_eq!(answer, StatusCode::OK, "{body}");
    assert_eq!(body["sub"], "test-user");
    assert_eq!(body["scope"], "mcp");

    // The tokens are sealed: no column of the database holds them, nor the code.
    let (_, tokens) = tokens(&s, connection).await;
    for secret in [
        tokens["access_token"].as_str().unwrap(),
        tokens["refresh_token"].as_str().unwrap(),
        code.as_str(),
    ] {
        assert!(
            s.columns_containing(secret).await.is_empty(),
            "a secret is stored in clear"
        );
        let logs = String::from_utf8_lossy(&api::logs().lock().unwrap()).to_string();
        assert!(!logs.contains(secret), "a secret reached the logs");
    }
    // The exchange was durable work in the common call log: intent, sending, result.
    let row = s
        .database
        .oauth
        .grant(
            s.database
                .oauth
                .connection(connection)
                .await
                .unwrap()
                .unwrap()
                .grant_id
                .unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    let calls = s
        .database
        .store
        .calls(openbot_schema::ExecutionId::from(row.source_execution))
        .await
        .unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].phase, openbot_server::store::CallPhase::Done);
    assert_eq!(row.source_call, calls[0].key.to_string());
}

async fn an_expired_access_token_is_refreshed_and_the_rotated_refresh_token_replaces_the_old(
    s: Server,
) {
    // Access tokens live 5 s: each is within the 30 s refresh margin at once.
    let provider = provider(&[("ACCESS_TTL", "5")]);
    let connection = connect(&s, &provider.resource).await;
    sign_in(&s, &s.owner, connection, &provider).await;
    let (grant, first) = tokens(&s, connection).await;
    let first_refresh = first["refresh_token"].as_str().unwrap().to_string();

    let header = authorization(&s, connection).await;
    let (_, second) = tokens(&s, connection).await;
    assert_ne!(second["access_token"], first["access_token"]);
    assert_ne!(second["refresh_token"], first["refresh_token"], "rotated");
    assert_eq!(
        header,
        format!("Bearer {}", second["access_token"].as_str().unwrap())
    );
    assert!(
        !active(&provider, &first_refresh).await,
        "the old refresh token is spent"
    );
    let (answer, body) = call_resource(&provider, &header).await;
    assert_eq!(answer, StatusCode::OK, "{body}");

    // Two callers at once share one refresh: one rotation, one answer.
    let service = oauth(&s);
    let (a, b) = tokio::join!(
        service.access_headers(connection),
        service.access_headers(connection)
    );
    assert_eq!(a.unwrap(), b.unwrap());
    let row = s.database.oauth.grant(grant).await.unwrap().unwrap();
    assert_eq!(row.rotation, 2, "one rotation per expiry");
    let status: Value = s
        .get(&path(connection, ""), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["status"], "ready");
}

async fn a_refresh_refused_for_good_leaves_the_connection_needing_sign_in(s: Server) {
    let provider = provider(&[("ACCESS_TTL", "1")]);
    let connection = connect(&s, &provider.resource).await;
    let status = sign_in(&s, &s.owner, connection, &provider).await;
    let (_, tokens) = tokens(&s, connection).await;
    // Someone else spends the refresh token first: OpenBot's refresh is reuse.
    let spent = reqwest::Client::new()
        .post(format!("{}/token", provider.issuer))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "grant_type=refresh_token&refresh_token={}&client_id={}",
            tokens["refresh_token"].as_str().unwrap(),
            status["client_id"].as_str().unwrap()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(spent.status(), StatusCode::OK);

    let err = oauth(&s).access_headers(connection).await.unwrap_err();
    assert!(matches!(err, OAuthError::NeedsSignIn(_)), "{err:?}");
    let status: Value = s
        .get(&path(connection, ""), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["status"], "needs_sign_in");
    assert!(
        status["reason"].as_str().unwrap().contains("invalid_grant"),
        "{status}"
    );
    // It stays so: no refresh is sent again for it.
    let again = oauth(&s).access_headers(connection).await.unwrap_err();
    assert!(matches!(again, OAuthError::NeedsSignIn(_)), "{again:?}");
    // Signing in again makes it ready.
    let status = sign_in(&s, &s.owner, connection, &provider).await;
    assert_eq!(status["status"], "ready");
}

async fn removing_a_connection_revokes_its_grant_at_the_provider(s: Server) {
    let provider = provider(&[]);
    let connection = connect(&s, &provider.resource).await;
    sign_in(&s, &s.owner, connection, &provider).await;
    let (grant, tokens) = tokens(&s, connection).await;
    let access = tokens["access_token"].as_str().unwrap();
    assert!(active(&provider, access).await);

    let cleanup = remove(&s, &s.owner, connection).await;
    assert_eq!(cleanup_result(&s, connection, &cleanup).await, "revoked");
    assert!(
        !active(&provider, access).await,
        "the access token is revoked"
    );
    assert!(!active(&provider, tokens["refresh_token"].as_str().unwrap()).await);
    assert!(
        tokens_of(&s, grant).await.is_none(),
        "the tokens are dropped"
    );
    let status: Value = s
        .get(&path(connection, ""), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["status"], "removed");
    let err = oauth(&s).access_headers(connection).await.unwrap_err();
    assert!(matches!(err, OAuthError::NeedsSignIn(_)), "{err:?}");
    // The cleanup was the organization's cleanup service's work, not the member's.
    let row = s
        .database
        .oauth
        .grant_use(cleanup.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let execution = s
        .engine
        .execution(openbot_schema::ExecutionId::from(row.execution_id.unwrap()))
        .await
        .unwrap();
    assert!(
        matches!(execution.scope, openbot_server::store::Scope::Service(ref name) if name.ends_with("/oauth-cleanup"))
    );
    // Removing again finds nothing to clean up.
    let again = s
        .delete(&path(connection, ""), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    let again: Value = again.json().await.unwrap();
    assert!(again.get("cleanup").is_none(), "{again}");
}

async fn a_provider_without_revocation_gives_a_saved_local_only_result(s: Server) {
    let provider = provider(&[("NO_REVOCATION", "1")]);
    let connection = connect(&s, &provider.resource).await;
    sign_in(&s, &s.owner, connection, &provider).await;
    let (grant, tokens) = tokens(&s, connection).await;
    let cleanup = remove(&s, &s.owner, connection).await;
    assert_eq!(cleanup_result(&s, connection, &cleanup).await, "local_only");
    // Nothing could revoke it there; OpenBot only forgot it, and says so.
    assert!(active(&provider, tokens["access_token"].as_str().unwrap()).await);
    assert!(tokens_of(&s, grant).await.is_none());
}

async fn cleanup_waits_while_the_same_client_is_installed_and_survives_its_member_leaving(
    s: Server,
) {
    let provider = provider(&[]);
    let member_token = s.member_token_as(Role::Admin, "admin@example.com").await;
    let (_, member) = s
        .database
        .identity
        .token_by_hash(&secret_hash(&member_token))
        .await
        .unwrap()
        .unwrap();
    // Two connections of the member on one client (the first one's registered client).
    let first = connect(&s, &provider.resource).await;
    let status = sign_in(&s, &member_token, first, &provider).await;
    let second = connect(&s, &provider.resource).await;
    sign_in_with(
        &s,
        &member_token,
        second,
        &provider,
        json!({ "client_id": status["client_id"] }),
    )
    .await;
    let (_, first_tokens) = tokens(&s, first).await;
    let (_, second_tokens) = tokens(&s, second).await;

    let cleanup = remove(&s, &member_token, first).await;
    // The same issuer and client are still installed: the cleanup waits and revokes nothing.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let waiting: Value = s
        .get(&path(first, &format!("/cleanups/{cleanup}")), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(waiting["state"], "pending");
    assert!(active(&provider, second_tokens["access_token"].as_str().unwrap()).await);
    assert!(active(&provider, first_tokens["access_token"].as_str().unwrap()).await);
    let (answer, _) = call_resource(&provider, &authorization(&s, second).await).await;
    assert_eq!(answer, StatusCode::OK);

    // The member leaves the organization; an admin removes the other connection.
    assert!(
        s.database
            .identity
            .remove_member(member.organization_id, member.member_id)
            .await
            .unwrap()
    );
    let response = s.get(&path(first, ""), &member_token).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let other = remove(&s, &s.owner, second).await;
    // Both cleanups finish for the organization, with no member rights left.
    assert_eq!(cleanup_result(&s, second, &other).await, "revoked");
    assert_eq!(cleanup_result(&s, first, &cleanup).await, "revoked");
    assert!(!active(&provider, first_tokens["access_token"].as_str().unwrap()).await);
    assert!(!active(&provider, second_tokens["access_token"].as_str().unwrap()).await);
}

/// F11: a cleanup that waits (its client is still installed) is taken over by another node:
/// the new owner runs it under the same owner (the organization's cleanup service), the
/// grant stays reserved for it and sealed, the installed connection keeps working, and the
/// revocation happens once, when the client is no longer installed.
async fn a_cleanup_taken_over_keeps_its_owner_private_data_and_grant_reservation(s: Server) {
    let provider = provider(&[]);
    let member_token = s.member_token_as(Role::Admin, "admin@example.com").await;
    let first = connect(&s, &provider.resource).await;
    let status = sign_in(&s, &member_token, first, &provider).await;
    let second = connect(&s, &provider.resource).await;
    sign_in_with(
        &s,
        &member_token,
        second,
        &provider,
        json!({ "client_id": status["client_id"] }),
    )
    .await;
    let (_, first_tokens) = tokens(&s, first).await;
    let (_, second_tokens) = tokens(&s, second).await;
    let first_access = first_tokens["access_token"].as_str().unwrap().to_string();
    let cleanup = remove(&s, &member_token, first).await;
    let cleanup_id: Uuid = cleanup.parse().unwrap();
    let read = |sql: &'static str, id: Uuid| {
        let s = &s;
        async move { s.raw_text(sql, id).await.unwrap_or_default() }
    };
    let owner_scope = read(
        "SELECT owner_scope FROM grant_uses WHERE id = $1",
        cleanup_id,
    )
    .await;
    assert!(!owner_scope.is_empty());
    // Its execution, found by the command key its hand-over submitted it under.
    let by_key =
        format!("SELECT execution_id FROM command_keys WHERE key = 'oauth-cleanup:{cleanup_id}'");
    let execution: Uuid = match &s.raw {
        api::Raw::Sqlite(store, _) => sqlx::query_scalar::<_, Uuid>(sqlx::AssertSqlSafe(by_key))
            .fetch_one(store.pool())
            .await
            .unwrap(),
        api::Raw::Postgres(store) => sqlx::query_scalar::<_, Uuid>(sqlx::AssertSqlSafe(by_key))
            .fetch_one(store.pool())
            .await
            .unwrap(),
    };
    let scope = read("SELECT scope FROM executions WHERE id = $1", execution).await;
    let generation = |s: &'static str| read(s, execution);
    let before: i64 = generation("SELECT CAST(generation AS TEXT) FROM executions WHERE id = $1")
        .await
        .parse()
        .unwrap();
    // Another node takes it, then goes away: its lease lapses and this node takes it back.
    let lease = chrono::Utc::now().timestamp_millis() + 1_000;
    s.raw_execute(
        &format!(
            "UPDATE executions SET generation = generation + 1, owner_node = 'thief', lease_expires_at = {lease} WHERE id = $1"
        ),
        execution,
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now: i64 = generation("SELECT CAST(generation AS TEXT) FROM executions WHERE id = $1")
            .await
            .parse()
            .unwrap();
        let owner = read(
            "SELECT COALESCE(owner_node, '') FROM executions WHERE id = $1",
            execution,
        )
        .await;
        if now >= before + 2 || (now > before && owner != "thief") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cleanup was never taken back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Same owner, still waiting, the grant still reserved for it and its tokens still sealed.
    assert_eq!(
        read("SELECT scope FROM executions WHERE id = $1", execution).await,
        scope
    );
    assert_eq!(
        read(
            "SELECT owner_scope FROM grant_uses WHERE id = $1",
            cleanup_id
        )
        .await,
        owner_scope
    );
    assert_eq!(
        read("SELECT state FROM grant_uses WHERE id = $1", cleanup_id).await,
        "pending"
    );
    assert!(s.columns_containing(&first_access).await.is_empty());
    assert!(
        active(&provider, &first_access).await,
        "nothing revoked while installed"
    );
    let (answer, _) = call_resource(&provider, &authorization(&s, second).await).await;
    assert_eq!(answer, StatusCode::OK);
    // Once the client is no longer installed, both revoke, each once.
    let other = remove(&s, &s.owner, second).await;
    assert_eq!(cleanup_result(&s, second, &other).await, "revoked");
    assert_eq!(cleanup_result(&s, first, &cleanup).await, "revoked");
    assert!(!active(&provider, &first_access).await);
    assert!(!active(&provider, second_tokens["access_token"].as_str().unwrap()).await);
}

async fn a_forged_or_borrowed_state_is_refused_and_a_replay_gets_the_first_outcome(s: Server) {
    let provider = provider(&[]);
    let connection = connect(&s, &provider.resource).await;
    let step = begin(
        &s,
        &s.owner,
        connection,
        json!({ "server_url": provider.resource, "redirect_uri": REDIRECT }),
    )
    .await;
    let (code, state) = browse(&provider, step["authorization_url"].as_str().unwrap()).await;
    let complete = |token: String, connection: Uuid, state: String, code: String| {
        let s = &s;
        async move {
            s.post(&path(connection, "/complete"), &token)
                .json(&json!({ "state": state, "code": code }))
                .send()
                .await
                .unwrap()
        }
    };
    // A state nobody began.
    let forged = complete(
        s.owner.clone(),
        connection,
        "forged-state".into(),
        code.clone(),
    )
    .await;
    assert_eq!(
        error_code(forged).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    // Another admin of the organization cannot complete the owner's sign-in.
    let other = s.member_token_as(Role::Admin, "admin@example.com").await;
    let borrowed = complete(other, connection, state.clone(), code.clone()).await;
    assert_eq!(
        error_code(borrowed).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    // Nor can the state sign in another connection.
    let moved = complete(s.owner.clone(), Uuid::now_v7(), state.clone(), code.clone()).await;
    assert_eq!(
        error_code(moved).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    // The owner completes once; a replay (its answer was lost) gets the first outcome and
    // exchanges nothing.
    let done = complete(s.owner.clone(), connection, state.clone(), code.clone()).await;
    assert_eq!(done.status(), StatusCode::OK);
    let done: Value = done.json().await.unwrap();
    let grant = s
        .database
        .oauth
        .connection(connection)
        .await
        .unwrap()
        .unwrap()
        .grant_id;
    let replay = complete(s.owner.clone(), connection, state.clone(), code.clone()).await;
    assert_eq!(replay.status(), StatusCode::OK);
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(replay, done, "the first outcome, again");
    assert_eq!(
        s.database
            .oauth
            .connection(connection)
            .await
            .unwrap()
            .unwrap()
            .grant_id,
        grant
    );
    // A bad code for a fresh state is the authorization server's refusal, and leaves the
    // connection signed in.
    let step = begin(
        &s,
        &s.owner,
        connection,
        json!({ "server_url": provider.resource, "redirect_uri": REDIRECT }),
    )
    .await;
    let refused = complete(
        s.owner.clone(),
        connection,
        step["state"].as_str().unwrap().into(),
        "not-a-code".into(),
    )
    .await;
    let (status, body) = (refused.status(), refused.json::<Value>().await.unwrap());
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["message"].as_str().unwrap().contains("invalid_grant"),
        "{body}"
    );
    let after: Value = s
        .get(&path(connection, ""), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(after["status"], "ready");
}

async fn metadata_that_points_at_an_internal_address_is_refused_before_any_request(s: Server) {
    let provider = provider(&[]);
    // The resource's metadata names an authorization server at the cloud metadata address.
    let connection = connect(&s, &format!("{}/internal/mcp", provider.base)).await;
    let internal = s
        .post(&path(connection, "/authorize"), &s.owner)
        .json(&json!({ "redirect_uri": REDIRECT }))
        .send()
        .await
        .unwrap();
    let (status, body) = (internal.status(), internal.json::<Value>().await.unwrap());
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("outbound policy"),
        "{body}"
    );
    // Internal addresses are no App's: a request naming one is refused before any request.
    for server_url in [
        "http://169.254.169.254/mcp",
        "http://10.0.0.1/mcp",
        "file:///etc/passwd",
    ] {
        let response = s
            .post(&path(connection, "/authorize"), &s.owner)
            .json(&json!({ "server_url": server_url, "redirect_uri": REDIRECT }))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{server_url}: {body}");
        assert_eq!(body["code"], "invalid_input");
        let app = s
            .post("/v1/apps", &s.owner)
            .json(&json!({"name": "internal", "transport": {"type": "http", "url": server_url}}))
            .send()
            .await
            .unwrap();
        assert_eq!(app.status(), StatusCode::BAD_REQUEST, "{server_url}");
    }
    // Nothing was saved for the connection.
    let missing = s.get(&path(connection, ""), &s.owner).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let bad = s
        .post(&path(connection, "/authorize"), &s.owner)
        .json(&json!({ "redirect_uri": "javascript:alert(1)" }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(bad).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
}

async fn sign_in_begins_only_at_an_oauth_connection_of_a_registered_app(s: Server) {
    let provider = provider(&[]);
    let app = app_at(&s, &provider.resource).await;
    let begin_at = |connection: Uuid, body: Value| {
        let s = &s;
        async move {
            error_code(
                s.post(&path(connection, "/authorize"), &s.owner)
                    .json(&body)
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    let redirect = json!({ "redirect_uri": REDIRECT });
    // No App Connection of that ID: nothing is discovered or registered anywhere.
    assert_eq!(
        begin_at(Uuid::now_v7(), redirect.clone()).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    // Connections opened without OAuth do not sign in.
    let none = open_connection(&s, app, json!({"auth": "none"})).await;
    let manual = open_connection(
        &s,
        app,
        json!({"auth": "manual", "headers": {"x-api-key": "k-123456"}}),
    )
    .await;
    for connection in [none, manual] {
        assert_eq!(
            begin_at(connection, redirect.clone()).await,
            (StatusCode::CONFLICT, "conflict".into())
        );
    }
    // The request cannot point the sign-in at another server than the App's.
    let connection = open_connection(&s, app, json!({"auth": "oauth"})).await;
    let other = self::provider(&[]);
    let response = s
        .post(&path(connection, "/authorize"), &s.owner)
        .json(&json!({ "server_url": other.resource, "redirect_uri": REDIRECT }))
        .send()
        .await
        .unwrap();
    let (status, body) = (response.status(), response.json::<Value>().await.unwrap());
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("URL of the connection's App"),
        "{body}"
    );
    let count: Value = reqwest::Client::new()
        .get(format!("{}/resource-requests", other.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(count["count"], 0, "the other server was never asked");
    // The App's own URL, given or not, signs in.
    let step = begin(
        &s,
        &s.owner,
        connection,
        json!({ "server_url": provider.resource, "redirect_uri": REDIRECT }),
    )
    .await;
    assert!(
        step["authorization_url"]
            .as_str()
            .unwrap()
            .starts_with(&provider.issuer)
    );
    // A removed Connection, or one of a removed App, does not.
    let removed = s
        .delete(
            &format!("/v1/apps/{app}/connections/{connection}"),
            &s.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        begin_at(connection, redirect.clone()).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    let fresh = open_connection(&s, app, json!({"auth": "oauth"})).await;
    let gone = s
        .delete(&format!("/v1/apps/{app}"), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        begin_at(fresh, redirect).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
}

async fn removing_the_app_connection_hands_its_grant_to_cleanup(s: Server) {
    let provider = provider(&[]);
    let app = app_at(&s, &provider.resource).await;
    let connection = open_connection(&s, app, json!({"auth": "oauth"})).await;
    sign_in(&s, &s.owner, connection, &provider).await;
    let (grant, tokens) = tokens(&s, connection).await;
    let access = tokens["access_token"].as_str().unwrap();
    assert!(active(&provider, access).await);
    let removed = s
        .delete(
            &format!("/v1/apps/{app}/connections/{connection}"),
            &s.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    // The removal released the grant and handed it to cleanup in the same transaction.
    let row = s
        .database
        .oauth
        .connection(connection)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((row.status.as_str(), row.grant_id), ("removed", None));
    let status: Value = s
        .get(&path(connection, ""), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["status"], "removed");
    let deadline = Instant::now() + Duration::from_secs(20);
    while active(&provider, access).await {
        assert!(Instant::now() < deadline, "the grant was never revoked");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokens_of(&s, grant).await.is_some() {
        assert!(Instant::now() < deadline, "the tokens were never dropped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let connection_row = s
        .get(
            &format!("/v1/apps/{app}/connections/{connection}"),
            &s.owner,
        )
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(connection_row["status"], "removed");
    // Removing the whole App does the same for each of its OAuth Connections.
    let second = open_connection(&s, app, json!({"auth": "oauth"})).await;
    sign_in(&s, &s.owner, second, &provider).await;
    let (_, second_tokens) = self::tokens(&s, second).await;
    let access = second_tokens["access_token"].as_str().unwrap().to_string();
    let gone = s
        .delete(&format!("/v1/apps/{app}"), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), StatusCode::NO_CONTENT);
    let deadline = Instant::now() + Duration::from_secs(20);
    while active(&provider, &access).await {
        assert!(
            Instant::now() < deadline,
            "the App's grant was never revoked"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn an_oauth_setup_needs_an_app_connection_row(s: Server) {
    // The foreign key: OAuth rows of no App Connection are refused by the database.
    let result = s
        .database
        .oauth
        .put_connection(&openbot_server::apps::oauth::ConnectionRow {
            connection_id: Uuid::now_v7(),
            organization_id: s.owner_member().await.organization_id,
            resource: "http://127.0.0.1:9/mcp".into(),
            issuer: "http://127.0.0.1:9".into(),
            metadata: "{}".into(),
            client_id: "c".into(),
            client_registered: false,
            secret: None,
            redirect_uri: REDIRECT.into(),
            scope: None,
            status: "needs_sign_in".into(),
            grant_id: None,
            reason: None,
            created_by: s.owner_member().await.member_id,
        })
        .await;
    assert!(result.is_err(), "{result:?}");
}

/// Signing a Connection in decides whose account every Bot acts as at the MCP server: a
/// plain member, whatever their token's rights, can neither begin nor complete a sign-in nor
/// sign the Connection out; the admin's grant stays.
async fn a_plain_member_cannot_sign_the_organizations_connection_in_or_out(s: Server) {
    let provider = provider(&[]);
    let connection = connect(&s, &provider.resource).await;
    sign_in(&s, &s.owner, connection, &provider).await;
    let (grant, _) = tokens(&s, connection).await;
    let member = s.other_member_token().await;
    let begin = s
        .post(&path(connection, "/authorize"), &member)
        .json(&json!({ "server_url": provider.resource, "redirect_uri": REDIRECT }))
        .send()
        .await
        .unwrap();
    let complete = s
        .post(&path(connection, "/complete"), &member)
        .json(&json!({ "state": "s", "code": "c" }))
        .send()
        .await
        .unwrap();
    let sign_out = s
        .delete(&path(connection, ""), &member)
        .send()
        .await
        .unwrap();
    for refused in [begin, complete, sign_out] {
        assert_eq!(
            error_code(refused).await,
            (StatusCode::FORBIDDEN, "forbidden".into())
        );
    }
    assert_eq!(
        tokens(&s, connection).await.0,
        grant,
        "the admin's grant stays"
    );
    let (answer, _) = call_resource(&provider, &authorization(&s, connection).await).await;
    assert_eq!(answer, StatusCode::OK);
}

async fn oauth_routes_need_the_apps_rights(s: Server) {
    let provider = provider(&[]);
    let connection = connect(&s, &provider.resource).await;
    sign_in(&s, &s.owner, connection, &provider).await;
    let reader = s
        .token_with(json!([{"resource": "apps", "action": "read"}]))
        .await;
    let none = s
        .token_with(json!([{"resource": "bots", "action": "read"}]))
        .await;
    let read = s.get(&path(connection, ""), &reader).send().await.unwrap();
    assert_eq!(read.status(), StatusCode::OK);
    let denied = s.get(&path(connection, ""), &none).send().await.unwrap();
    assert_eq!(
        error_code(denied).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    let write = s
        .delete(&path(connection, ""), &reader)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(write).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    let begin = s
        .post(&path(connection, "/authorize"), &reader)
        .json(&json!({ "server_url": provider.resource, "redirect_uri": REDIRECT }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(begin).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    let bad_id = s
        .get("/v1/app-connections/not-an-id/oauth", &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(bad_id).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    let unknown = s
        .get(&path(Uuid::now_v7(), ""), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(unknown).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
}

async fn a_lost_code_exchange_answer_is_never_asked_again_and_needs_sign_in(s: Server) {
    let provider = provider(&[("LOSE_TOKEN_ANSWERS", "1")]);
    let connection = connect(&s, &provider.resource).await;
    let step = begin(
        &s,
        &s.owner,
        connection,
        json!({ "server_url": provider.resource, "redirect_uri": REDIRECT }),
    )
    .await;
    let (code, state) = browse(&provider, step["authorization_url"].as_str().unwrap()).await;
    let response = s
        .post(&path(connection, "/complete"), &s.owner)
        .json(&json!({ "state": state, "code": code }))
        .send()
        .await
        .unwrap();
    let (status, body) = (response.status(), response.json::<Value>().await.unwrap());
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["message"].as_str().unwrap().contains("lost"), "{body}");
    let after: Value = s
        .get(&path(connection, ""), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(after["status"], "needs_sign_in");
    // The provider granted once and was never asked again for that code.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let count: Value = reqwest::Client::new()
        .get(format!("{}/token-requests", provider.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(count["count"], 1);
    let err = oauth(&s).access_headers(connection).await.unwrap_err();
    assert!(matches!(err, OAuthError::NeedsSignIn(_)), "{err:?}");
}

async fn a_hand_over_whose_work_never_started_is_found_by_the_sweep(s: Server) {
    let provider = provider(&[]);
    let connection = connect(&s, &provider.resource).await;
    sign_in(&s, &s.owner, connection, &provider).await;
    let (grant, tokens) = tokens(&s, connection).await;
    let row = s
        .database
        .oauth
        .connection(connection)
        .await
        .unwrap()
        .unwrap();
    // The removal commits its hand-over, and the process stops before it starts the work.
    let revocation = openbot_server::apps::oauth::NewRevocation {
        id: Uuid::now_v7(),
        organization_id: row.organization_id,
        issuer: row.issuer.clone(),
        client_id: row.client_id.clone(),
        connection_id: connection,
        grant_id: grant,
        owner_scope: "service:test".into(),
    };
    assert!(
        s.database
            .oauth
            .remove(
                connection,
                &revocation,
                openbot_server::store::TxWrites::default()
            )
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pending = s
        .database
        .oauth
        .grant_use(revocation.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (pending.state.as_str(), pending.execution_id),
        ("pending", None)
    );
    assert!(active(&provider, tokens["access_token"].as_str().unwrap()).await);

    assert_eq!(oauth(&s).resume_cleanups().await.unwrap(), 1);
    let id = revocation.id.to_string();
    assert_eq!(cleanup_result(&s, connection, &id).await, "revoked");
    assert!(!active(&provider, tokens["access_token"].as_str().unwrap()).await);
    assert_eq!(
        oauth(&s).resume_cleanups().await.unwrap(),
        0,
        "nothing is left open"
    );
}

/// A real MCP server (npm `@modelcontextprotocol/server-everything`, streamable HTTP) on a
/// free port; killed when dropped.
struct Everything {
    child: Child,
    url: String,
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn everything() -> Everything {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("node")
        .arg(format!(
            "{}/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            deps()
        ))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("node starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server-everything did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Everything {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

async fn an_oauth_protected_mcp_server_answers_with_the_connections_credential(s: Server) {
    let mcp = everything();
    let provider = provider(&[("MCP_UPSTREAM", mcp.url.as_str())]);
    let connection = connect(&s, &provider.resource).await;
    sign_in(&s, &s.owner, connection, &provider).await;
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "openbot-test", "version": "1"}}
    });
    let send = |authorization: Option<String>| {
        let mut request = reqwest::Client::new()
            .post(&provider.resource)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        request.send()
    };
    let refused = send(None).await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert!(
        refused.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("resource_metadata")
    );
    let answer = send(Some(authorization(&s, connection).await))
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let text = answer.text().await.unwrap();
    assert!(text.contains("serverInfo"), "{text}");
}

/// `openbot ...` with its own config folder; answers its exit status and output.
fn openbot(config: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_openbot"))
        .args(args)
        .env("OPENBOT_CONFIG_DIR", config)
        .env_remove("OPENBOT_SERVER")
        .env_remove("OPENBOT_TOKEN")
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_signs_a_connection_in_and_removes_it() {
    let served = served::Served::start_with(&[("OPENBOT_OUTBOUND_ALLOW", "loopback")]);
    let provider = provider(&[]);
    let config = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| openbot(config.path(), args);
    let ok = |args: &[&str]| {
        let (success, stdout, stderr) = run(args);
        assert!(success, "openbot {args:?} failed: {stderr}");
        stdout
    };
    ok(&["login", "--server", &served.base, "--token", &served.token]);
    // The App and its OAuth Connection come first; the sign-in takes the App's URL.
    ok(&["apps", "add", "protected", "--url", &provider.resource]);
    let opened: Value =
        serde_json::from_str(&ok(&["apps", "connect", "protected", "--oauth", "--json"])).unwrap();
    let connection = opened["id"].as_str().unwrap().to_string();
    let step: Value = serde_json::from_str(&ok(&[
        "oauth",
        "authorize",
        &connection,
        "--redirect-uri",
        REDIRECT,
        "--json",
    ]))
    .unwrap();
    let (code, state) = browse(&provider, step["authorization_url"].as_str().unwrap()).await;
    let (success, _, stderr) = run(&[
        "oauth",
        "complete",
        &connection,
        "--state",
        "forged",
        "--code",
        &code,
    ]);
    assert!(!success);
    assert!(stderr.contains("invalid_input"), "{stderr}");
    let done = ok(&[
        "oauth",
        "complete",
        &connection,
        "--state",
        &state,
        "--code",
        &code,
    ]);
    assert!(done.contains("ready"), "{done}");
    let status: Value =
        serde_json::from_str(&ok(&["oauth", "status", &connection, "--json"])).unwrap();
    assert_eq!(status["status"], "ready");
    let removal: Value =
        serde_json::from_str(&ok(&["oauth", "remove", &connection, "--json"])).unwrap();
    let cleanup = removal["cleanup"]["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found: Value =
            serde_json::from_str(&ok(&["oauth", "cleanup", &connection, &cleanup, "--json"]))
                .unwrap();
        if found["state"] == "done" {
            assert_eq!(found["result"], "revoked");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cleanup did not end: {found}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = ok(&["oauth", "status", &connection]);
    assert!(text.contains("removed"), "{text}");
}

async fn a_signed_in_connection_never_sends_its_grant_to_another_authorization_server(s: Server) {
    let first = provider(&[]);
    let second = provider(&[]);
    let connection = connect(&s, &first.resource).await;
    sign_in(&s, &s.owner, connection, &first).await;
    // The sign-in is at the App's server only: a request naming another is refused.
    let moved = s
        .post(&path(connection, "/authorize"), &s.owner)
        .json(&json!({ "server_url": second.resource, "redirect_uri": REDIRECT }))
        .send()
        .await
        .unwrap();
    let (status, body) = (moved.status(), moved.json::<Value>().await.unwrap());
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("URL of the connection's App"),
        "{body}"
    );
    let after: Value = s
        .get(&path(connection, ""), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (after["status"].as_str(), after["issuer"].as_str()),
        (Some("ready"), Some(first.issuer.as_str()))
    );
    // Another App's Connection signs in there.
    let other = connect(&s, &second.resource).await;
    let status = sign_in(&s, &s.owner, other, &second).await;
    assert_eq!(
        (status["status"].as_str(), status["issuer"].as_str()),
        (Some("ready"), Some(second.issuer.as_str()))
    );
}

async fn a_sign_in_completes_with_the_client_and_redirect_it_began_with(s: Server) {
    let provider = provider(&[]);
    let connection = connect(&s, &provider.resource).await;
    let first = begin(
        &s,
        &s.owner,
        connection,
        json!({ "server_url": provider.resource, "redirect_uri": REDIRECT }),
    )
    .await;
    // A second sign-in with another redirect registers another client meanwhile.
    let second = begin(
        &s,
        &s.owner,
        connection,
        json!({ "server_url": provider.resource, "redirect_uri": "http://127.0.0.1:9/other" }),
    )
    .await;
    assert_ne!(first["state"], second["state"]);
    let (code, state) = browse(&provider, first["authorization_url"].as_str().unwrap()).await;
    let response = s
        .post(&path(connection, "/complete"), &s.owner)
        .json(&json!({ "state": state, "code": code }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let (answer, _) = call_resource(&provider, &authorization(&s, connection).await).await;
    assert_eq!(answer, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_state_is_refused_and_exchanges_nothing() {
    let s = server_with(
        sqlite().await,
        OAuthConfig {
            flow_ttl: Duration::from_millis(200),
            ..config()
        },
    )
    .await;
    let provider = provider(&[]);
    let connection = connect(&s, &provider.resource).await;
    let step = begin(
        &s,
        &s.owner,
        connection,
        json!({ "server_url": provider.resource, "redirect_uri": REDIRECT }),
    )
    .await;
    let (code, state) = browse(&provider, step["authorization_url"].as_str().unwrap()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let response = s
        .post(&path(connection, "/complete"), &s.owner)
        .json(&json!({ "state": state, "code": code }))
        .send()
        .await
        .unwrap();
    let (status, body) = (response.status(), response.json::<Value>().await.unwrap());
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("expired"),
        "{body}"
    );
    let count: Value = reqwest::Client::new()
        .get(format!("{}/token-requests", provider.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(count["count"], 0, "no exchange was sent");
}

fn tool_results(events: &[openbot_schema::Event]) -> Vec<openbot_schema::ToolResult> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            openbot_schema::EventKind::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .collect()
}

/// A Turn of a scripted model calls a tool of an OAuth-protected MCP server (server-everything
/// behind the provider's resource server, which checks each bearer token at the provider).
/// The access token expires before the call, so the call refreshes it within the Turn; then
/// the refresh token is spent elsewhere and the next Turn's call finds the grant refused for
/// good: the Connection needs sign-in again and the model reads a clear error, no token.
async fn a_turn_calls_an_oauth_protected_mcp_server_refreshing_then_needing_sign_in(s: Server) {
    let mcp = everything();
    // Access tokens live 5 s: each is within the 30 s refresh margin at once.
    let provider = provider(&[("MCP_UPSTREAM", mcp.url.as_str()), ("ACCESS_TTL", "5")]);
    let app = app_at(&s, &provider.resource).await;
    let name: Value = s
        .get(&format!("/v1/apps/{app}"), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tool = format!("{}__echo", name["name"].as_str().unwrap());
    let connection = open_connection(&s, app, json!({"auth": "oauth"})).await;
    let status = sign_in(&s, &s.owner, connection, &provider).await;
    let discovered = s
        .post(
            &format!("/v1/apps/{app}/connections/{connection}/discover"),
            &s.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(discovered.status(), StatusCode::OK);
    let (grant, before) = tokens(&s, connection).await;
    let rotation = s
        .database
        .oauth
        .grant(grant)
        .await
        .unwrap()
        .unwrap()
        .rotation;

    let model = fake_openai::FakeOpenAi::start(vec![
        fake_openai::Answer::Tool(
            Box::leak(tool.clone().into_boxed_str()),
            json!({"message": "through oauth"}),
        ),
        fake_openai::Answer::Text(vec!["done"]),
        fake_openai::Answer::Tool(
            Box::leak(tool.clone().into_boxed_str()),
            json!({"message": "again"}),
        ),
        fake_openai::Answer::Text(vec!["needs sign-in"]),
    ])
    .await;
    let bot: Value = s
        .post("/v1/bots", &s.owner)
        .json(&json!({"name": "Protected", "model": model.spec(),
            "tools": [{"name": tool, "input_schema": {"type": "object"}}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let chat = s.chat(&s.owner, &bot).await;
    let sent = api::receipt(s.send(&s.owner, &chat, "Echo", None).await).await;
    let events = s
        .finish(&s.owner, sent["execution_id"].as_str().unwrap())
        .await;
    let results = tool_results(&events);
    assert!(!results[0].is_error, "{results:?}");
    assert!(
        results[0].output[0]
            .as_text()
            .unwrap()
            .contains("through oauth"),
        "{results:?}"
    );
    // The call refreshed the expired access token during the Turn: a new rotation.
    let after = s
        .database
        .oauth
        .grant(grant)
        .await
        .unwrap()
        .unwrap()
        .rotation;
    assert!(after > rotation, "refreshed: {rotation} -> {after}");
    let (_, current) = tokens(&s, connection).await;
    assert_ne!(current["access_token"], before["access_token"]);

    // Someone else spends the refresh token: the next refresh is refused for good.
    let spent = reqwest::Client::new()
        .post(format!("{}/token", provider.issuer))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "grant_type=refresh_token&refresh_token={}&client_id={}",
            current["refresh_token"].as_str().unwrap(),
            status["client_id"].as_str().unwrap()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(spent.status(), StatusCode::OK);
    let spent: Value = spent.json().await.unwrap();
    let sent = api::receipt(s.send(&s.owner, &chat, "Again", None).await).await;
    let second = s
        .finish(&s.owner, sent["execution_id"].as_str().unwrap())
        .await;
    let results = tool_results(&second);
    assert!(results[0].is_error, "{results:?}");
    let text = results[0].output[0].as_text().unwrap().to_string();
    assert!(text.contains("sign in"), "{text}");
    let oauth_status: Value = s
        .get(&path(connection, ""), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(oauth_status["status"], "needs_sign_in");
    let app_connection: Value = s
        .get(
            &format!("/v1/apps/{app}/connections/{connection}"),
            &s.owner,
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(app_connection["status"], "needs_sign_in");
    // No token reached the model, an event, a row in clear or a log line.
    let logs = String::from_utf8_lossy(&api::logs().lock().unwrap()).to_string();
    let everything_seen = format!(
        "{}{}{}",
        serde_json::to_string(&events).unwrap(),
        serde_json::to_string(&second).unwrap(),
        model.bodies().join("")
    );
    for token in [
        &before["access_token"],
        &before["refresh_token"],
        &current["access_token"],
        &current["refresh_token"],
        &spent["access_token"],
    ] {
        let token = token.as_str().unwrap();
        assert!(
            !everything_seen.contains(token),
            "a token reached the model or an event"
        );
        assert!(!logs.contains(token), "a token reached the logs");
        assert!(
            s.columns_containing(token).await.is_empty(),
            "a token is stored in clear"
        );
    }
}
