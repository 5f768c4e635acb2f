//! Shared permits and rate limits (F09): the limit store's behaviours on SQLite and on a real
//! PostgreSQL, the wait for room (deadline, cancellation), and real `openbot serve` processes
//! on one PostgreSQL that share their limits: two nodes under a permit limit, an owner frozen
//! with SIGSTOP whose connections are cut, a pause, a cancel while waiting, a request bucket.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/nodes.rs"]
mod nodes;
#[path = "support/pg.rs"]
mod pg;
#[macro_use]
#[path = "support/api.rs"]
#[allow(unused_macros)]
mod api;
#[path = "support/front.rs"]
mod front;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use fake_openai::{Answer, FakeOpenAi};
use front::Front;
use futures::StreamExt;
use nodes::NodeProcess;
use openbot_schema::{ErrorCategory, Event, EventKind, ExecutionId, ExecutionState, TurnOutcome};
use openbot_server::engine::Engine;
use openbot_server::limits::{
    AcquireError, Holder, LimitSettings, LimitStore, Limits as SharedLimits, Take,
};
use openbot_server::sealed::KeyRing;
use openbot_server::store::{
    Claim, Commit, NewExecution, PostgresStore, Scope, SqliteStore, StateChange, Store,
};
use sqlx::Connection;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// The store, on both databases.

/// A store seen as the engine's and as the limits' store.
struct Backend {
    store: Arc<dyn Store>,
    limits: Arc<dyn LimitStore>,
    _dir: Option<tempfile::TempDir>,
}

fn keys() -> KeyRing {
    static KEYS: std::sync::OnceLock<KeyRing> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| KeyRing::generate("permits").0).clone()
}

async fn sqlite() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openbot.db");
    SqliteStore::migrate(&path).await.unwrap();
    let store = Arc::new(SqliteStore::open(&path, keys()).await.unwrap());
    Backend {
        store: store.clone(),
        limits: store,
        _dir: Some(dir),
    }
}

async fn postgres() -> Backend {
    let url = pg::fresh_database().await;
    let store = Arc::new(PostgresStore::connect(&url, 8, keys()).await.unwrap());
    Backend {
        store: store.clone(),
        limits: store,
        _dir: None,
    }
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::sqlite().await).await })*
        }
        mod on_postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::postgres().await).await })*
        }
    };
}

conformance!(
    a_permit_limit_admits_that_many_holders_and_the_next_after_a_release,
    a_holder_keeps_its_one_permit_when_it_asks_again,
    a_takeover_moves_the_permit_to_the_new_generation_and_the_old_one_takes_nothing,
    a_permit_whose_holders_lease_lapsed_passes_on,
    an_ended_execution_holds_no_permit,
    a_paused_execution_holds_no_permit,
    room_is_taken_in_every_limit_or_in_none,
    a_request_bucket_admits_its_size_then_says_when_it_has_room_again,
    a_request_bucket_refills_over_its_window,
    a_token_bucket_admits_while_above_zero_and_takes_confirmed_usage_after,
    scopes_without_a_limit_are_free,
    limits_list_in_pages_by_scope_with_their_permits_in_use,
    deleting_a_limit_frees_its_scope,
    a_wait_for_room_ends_when_it_is_cancelled,
    a_wait_for_room_fails_retryable_at_its_deadline,
    a_wait_for_room_is_granted_when_the_holder_releases,
);

const ORG: Uuid = Uuid::from_u128(0x0b0b_0000_0000_7000_8000_0000_0000_0001);

fn settings(max_concurrent: Option<i64>) -> LimitSettings {
    LimitSettings {
        max_concurrent,
        requests_per_window: None,
        tokens_per_window: None,
        window_ms: 60_000,
        max_wait_ms: 60_000,
    }
}

fn scopes(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// A new execution claimed by `node` with a lease of `lease_ms`.
async fn running(store: &Arc<dyn Store>, node: &str, lease_ms: i64) -> Claim {
    let id = ExecutionId::new();
    store
        .submit(NewExecution {
            id,
            kind: "limits-test".into(),
            scope: Scope::Member("m1".into()),
            command_key: None,
            input_digest: b"x".to_vec(),
            input: keys().seal(Uuid::now_v7(), b"{}").unwrap(),
            parent_id: None,
            chat_id: None,
            admission_gate: None,
            events: Vec::new(),
        })
        .await
        .unwrap();
    store
        .claim(node, &["limits-test"], lease_ms, 100)
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.id == id)
        .unwrap()
}

fn holder(claim: &Claim) -> Holder {
    Holder {
        organization: ORG,
        execution: claim.id,
        generation: claim.generation,
        slot: "model".into(),
    }
}

fn granted(take: &Take) -> bool {
    matches!(take, Take::Granted { .. })
}

async fn in_use(limits: &Arc<dyn LimitStore>, scope: &str) -> i64 {
    in_use_of(limits, ORG, scope).await
}

async fn in_use_of(limits: &Arc<dyn LimitStore>, organization: Uuid, scope: &str) -> i64 {
    limits
        .limits(organization, None, None, 100)
        .await
        .unwrap()
        .into_iter()
        .find(|l| l.scope == scope)
        .unwrap()
        .in_use
}

async fn a_permit_limit_admits_that_many_holders_and_the_next_after_a_release(b: Backend) {
    b.limits
        .put_limit(ORG, "provider:openai", &settings(Some(2)))
        .await
        .unwrap();
    let scope = scopes(&["provider:openai"]);
    let first = holder(&running(&b.store, "n1", 60_000).await);
    let second = holder(&running(&b.store, "n1", 60_000).await);
    let third = holder(&running(&b.store, "n2", 60_000).await);
    assert!(granted(&b.limits.try_take(&first, &scope).await.unwrap()));
    assert!(granted(&b.limits.try_take(&second, &scope).await.unwrap()));
    let busy = b.limits.try_take(&third, &scope).await.unwrap();
    assert!(
        matches!(&busy, Take::Busy { scope, retry_in_ms: None, .. } if scope == "provider:openai"),
        "{busy:?}"
    );
    assert_eq!(in_use(&b.limits, "provider:openai").await, 2);
    b.limits.give_back(&first, &scope, 0).await.unwrap();
    assert!(granted(&b.limits.try_take(&third, &scope).await.unwrap()));
    assert_eq!(in_use(&b.limits, "provider:openai").await, 2);
}

async fn a_holder_keeps_its_one_permit_when_it_asks_again(b: Backend) {
    b.limits
        .put_limit(ORG, "organization", &settings(Some(1)))
        .await
        .unwrap();
    let scope = scopes(&["organization"]);
    let only = holder(&running(&b.store, "n1", 60_000).await);
    assert!(granted(&b.limits.try_take(&only, &scope).await.unwrap()));
    // A second attempt of the same call (the same slot) keeps the permit it has.
    assert!(granted(&b.limits.try_take(&only, &scope).await.unwrap()));
    assert_eq!(in_use(&b.limits, "organization").await, 1);
}

async fn a_takeover_moves_the_permit_to_the_new_generation_and_the_old_one_takes_nothing(
    b: Backend,
) {
    b.limits
        .put_limit(ORG, "organization", &settings(Some(1)))
        .await
        .unwrap();
    let scope = scopes(&["organization"]);
    let old = running(&b.store, "n1", 1).await;
    let old_holder = holder(&old);
    // The lease is 1 ms: renew it to hold the permit, then let it lapse for the takeover.
    b.store
        .renew("n1", 60_000, &[(old.id, old.generation)])
        .await
        .unwrap();
    assert!(granted(
        &b.limits.try_take(&old_holder, &scope).await.unwrap()
    ));
    b.store
        .renew("n1", 1, &[(old.id, old.generation)])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let new = b
        .store
        .claim("n2", &["limits-test"], 60_000, 10)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(new.generation, old.generation + 1);
    let new_holder = holder(&new);
    assert!(granted(
        &b.limits.try_take(&new_holder, &scope).await.unwrap()
    ));
    assert_eq!(
        in_use(&b.limits, "organization").await,
        1,
        "one permit: taken over, not doubled"
    );
    assert_eq!(
        b.limits.try_take(&old_holder, &scope).await.unwrap(),
        Take::NotOwner
    );
    let other = holder(&running(&b.store, "n1", 60_000).await);
    assert!(
        matches!(
            b.limits.try_take(&other, &scope).await.unwrap(),
            Take::Busy { .. }
        ),
        "the new generation holds the one permit"
    );
    // The old owner giving back what it thinks it holds frees nothing of the new owner's.
    b.limits.give_back(&old_holder, &scope, 0).await.unwrap();
    assert_eq!(in_use(&b.limits, "organization").await, 1);
}

async fn a_permit_whose_holders_lease_lapsed_passes_on(b: Backend) {
    b.limits
        .put_limit(ORG, "organization", &settings(Some(1)))
        .await
        .unwrap();
    let scope = scopes(&["organization"]);
    let stalled = running(&b.store, "n1", 60_000).await;
    assert!(granted(
        &b.limits.try_take(&holder(&stalled), &scope).await.unwrap()
    ));
    let waiting = holder(&running(&b.store, "n2", 60_000).await);
    assert!(matches!(
        b.limits.try_take(&waiting, &scope).await.unwrap(),
        Take::Busy { .. }
    ));
    // Its owner stops renewing: the lease lapses, nobody took the execution over yet.
    b.store
        .renew("n1", 1, &[(stalled.id, stalled.generation)])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(granted(&b.limits.try_take(&waiting, &scope).await.unwrap()));
}

async fn an_ended_execution_holds_no_permit(b: Backend) {
    b.limits
        .put_limit(ORG, "organization", &settings(Some(1)))
        .await
        .unwrap();
    let scope = scopes(&["organization"]);
    let ending = running(&b.store, "n1", 60_000).await;
    assert!(granted(
        &b.limits.try_take(&holder(&ending), &scope).await.unwrap()
    ));
    b.store
        .commit(
            ending.id,
            ending.generation,
            Commit {
                state: Some(StateChange {
                    state: ExecutionState::Completed,
                    outcome: Some(TurnOutcome::Completed),
                    failure: None,
                    wake_at: None,
                    unknown_call: None,
                    output: None,
                    release: true,
                    reason: None,
                }),
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(in_use(&b.limits, "organization").await, 0);
    let next = holder(&running(&b.store, "n1", 60_000).await);
    assert!(granted(&b.limits.try_take(&next, &scope).await.unwrap()));
}

async fn a_paused_execution_holds_no_permit(b: Backend) {
    b.limits
        .put_limit(ORG, "organization", &settings(Some(1)))
        .await
        .unwrap();
    let scope = scopes(&["organization"]);
    let paused = running(&b.store, "n1", 60_000).await;
    assert!(granted(
        &b.limits.try_take(&holder(&paused), &scope).await.unwrap()
    ));
    let signal = b.store.signal(paused.id, "pause", "{}").await.unwrap();
    assert!(
        b.store
            .pause(paused.id, paused.generation, vec![signal])
            .await
            .unwrap()
    );
    assert_eq!(in_use(&b.limits, "organization").await, 0);
    let next = holder(&running(&b.store, "n1", 60_000).await);
    assert!(granted(&b.limits.try_take(&next, &scope).await.unwrap()));
}

async fn room_is_taken_in_every_limit_or_in_none(b: Backend) {
    b.limits
        .put_limit(ORG, "organization", &settings(Some(5)))
        .await
        .unwrap();
    b.limits
        .put_limit(ORG, "provider:anthropic", &settings(Some(1)))
        .await
        .unwrap();
    let both = scopes(&["organization", "provider:anthropic"]);
    let first = holder(&running(&b.store, "n1", 60_000).await);
    let second = holder(&running(&b.store, "n1", 60_000).await);
    assert_eq!(
        b.limits.try_take(&first, &both).await.unwrap(),
        Take::Granted {
            scopes: both.clone()
        }
    );
    let busy = b.limits.try_take(&second, &both).await.unwrap();
    assert!(
        matches!(&busy, Take::Busy { scope, .. } if scope == "provider:anthropic"),
        "{busy:?}"
    );
    assert_eq!(
        in_use(&b.limits, "organization").await,
        1,
        "the refused take holds nothing in the limit that had room"
    );
}

fn bucket(requests: Option<i64>, tokens: Option<i64>, window_ms: i64) -> LimitSettings {
    LimitSettings {
        max_concurrent: None,
        requests_per_window: requests,
        tokens_per_window: tokens,
        window_ms,
        max_wait_ms: 60_000,
    }
}

async fn a_request_bucket_admits_its_size_then_says_when_it_has_room_again(b: Backend) {
    b.limits
        .put_limit(ORG, "bot:x", &bucket(Some(3), None, 60_000))
        .await
        .unwrap();
    let scope = scopes(&["bot:x"]);
    let one = holder(&running(&b.store, "n1", 60_000).await);
    for _ in 0..3 {
        assert!(granted(&b.limits.try_take(&one, &scope).await.unwrap()));
    }
    match b.limits.try_take(&one, &scope).await.unwrap() {
        Take::Busy {
            scope,
            retry_in_ms: Some(wait),
            ..
        } => {
            assert_eq!(scope, "bot:x");
            // One request of three per minute comes back within 20 s.
            assert!(wait > 0 && wait <= 20_000, "{wait}");
        }
        other => panic!("the fourth request waits: {other:?}"),
    }
}

async fn a_request_bucket_refills_over_its_window(b: Backend) {
    b.limits
        .put_limit(ORG, "bot:y", &bucket(Some(1), None, 100))
        .await
        .unwrap();
    let scope = scopes(&["bot:y"]);
    let one = holder(&running(&b.store, "n1", 60_000).await);
    assert!(granted(&b.limits.try_take(&one, &scope).await.unwrap()));
    assert!(matches!(
        b.limits.try_take(&one, &scope).await.unwrap(),
        Take::Busy { .. }
    ));
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(granted(&b.limits.try_take(&one, &scope).await.unwrap()));
}

async fn a_token_bucket_admits_while_above_zero_and_takes_confirmed_usage_after(b: Backend) {
    b.limits
        .put_limit(ORG, "provider:openai", &bucket(None, Some(100), 60_000))
        .await
        .unwrap();
    let scope = scopes(&["provider:openai"]);
    let one = holder(&running(&b.store, "n1", 60_000).await);
    assert!(granted(&b.limits.try_take(&one, &scope).await.unwrap()));
    b.limits.give_back(&one, &scope, 60).await.unwrap();
    assert!(
        granted(&b.limits.try_take(&one, &scope).await.unwrap()),
        "40 tokens are left"
    );
    b.limits.give_back(&one, &scope, 60).await.unwrap();
    match b.limits.try_take(&one, &scope).await.unwrap() {
        Take::Busy {
            retry_in_ms: Some(wait),
            ..
        } => assert!(wait > 0, "{wait}"),
        other => panic!("the bucket is below zero: {other:?}"),
    }
}

async fn scopes_without_a_limit_are_free(b: Backend) {
    b.limits
        .put_limit(ORG, "organization", &settings(Some(1)))
        .await
        .unwrap();
    assert_eq!(
        b.limits
            .limited_scopes(ORG, &scopes(&["organization", "provider:openai"]))
            .await
            .unwrap(),
        scopes(&["organization"])
    );
    // Another organization's limit does not apply.
    assert!(
        b.limits
            .limited_scopes(Uuid::now_v7(), &scopes(&["organization"]))
            .await
            .unwrap()
            .is_empty()
    );
    let one = holder(&running(&b.store, "n1", 60_000).await);
    assert_eq!(
        b.limits
            .try_take(&one, &scopes(&["provider:openai"]))
            .await
            .unwrap(),
        Take::Granted { scopes: Vec::new() }
    );
}

async fn limits_list_in_pages_by_scope_with_their_permits_in_use(b: Backend) {
    for name in ["c", "a", "b"] {
        b.limits
            .put_limit(ORG, name, &settings(Some(3)))
            .await
            .unwrap();
    }
    let one = holder(&running(&b.store, "n1", 60_000).await);
    assert!(granted(
        &b.limits.try_take(&one, &scopes(&["b"])).await.unwrap()
    ));
    let first = b.limits.limits(ORG, None, None, 2).await.unwrap();
    let names: Vec<&str> = first.iter().map(|l| l.scope.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(first[1].in_use, 1);
    assert_eq!(first[1].settings, settings(Some(3)));
    let rest = b.limits.limits(ORG, None, Some("b"), 2).await.unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].scope, "c");
}

async fn deleting_a_limit_frees_its_scope(b: Backend) {
    b.limits
        .put_limit(ORG, "organization", &settings(Some(1)))
        .await
        .unwrap();
    let scope = scopes(&["organization"]);
    let first = holder(&running(&b.store, "n1", 60_000).await);
    assert!(granted(&b.limits.try_take(&first, &scope).await.unwrap()));
    assert!(b.limits.delete_limit(ORG, "organization").await.unwrap());
    assert!(!b.limits.delete_limit(ORG, "organization").await.unwrap());
    let second = holder(&running(&b.store, "n1", 60_000).await);
    assert_eq!(
        b.limits.try_take(&second, &scope).await.unwrap(),
        Take::Granted { scopes: Vec::new() }
    );
}

/// A scope with one permit, held by one execution; returns another execution's holder.
async fn one_permit_held(b: &Backend, max_wait_ms: i64) -> (Holder, Holder) {
    b.limits
        .put_limit(
            ORG,
            "organization",
            &LimitSettings {
                max_wait_ms,
                ..settings(Some(1))
            },
        )
        .await
        .unwrap();
    let held = holder(&running(&b.store, "n1", 60_000).await);
    assert!(granted(
        &b.limits
            .try_take(&held, &scopes(&["organization"]))
            .await
            .unwrap()
    ));
    (held, holder(&running(&b.store, "n1", 60_000).await))
}

async fn a_wait_for_room_ends_when_it_is_cancelled(b: Backend) {
    let (_held, waiting) = one_permit_held(&b, 600_000).await;
    let limits = SharedLimits::new(Arc::clone(&b.limits));
    let stop = CancellationToken::new();
    let wait = {
        let (limits, stop) = (limits.clone(), stop.clone());
        tokio::spawn(async move {
            limits
                .acquire(&waiting, &scopes(&["organization"]), &stop, &|| true)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!wait.is_finished(), "it waits while the permit is held");
    stop.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the cancelled wait ends")
        .unwrap();
    assert!(matches!(ended, Err(AcquireError::Cancelled)), "{ended:?}");
}

async fn a_wait_for_room_fails_retryable_at_its_deadline(b: Backend) {
    let (_held, waiting) = one_permit_held(&b, 200).await;
    let limits = SharedLimits::new(Arc::clone(&b.limits));
    let ended = tokio::time::timeout(
        Duration::from_secs(10),
        limits.acquire(
            &waiting,
            &scopes(&["organization"]),
            &CancellationToken::new(),
            &|| true,
        ),
    )
    .await
    .expect("the wait ends at its deadline");
    match ended {
        Err(err @ AcquireError::Deadline { .. }) => {
            assert!(err.is_retryable());
            assert!(err.to_string().contains("organization"), "{err}");
        }
        other => panic!("a deadline error: {other:?}"),
    }
}

async fn a_wait_for_room_is_granted_when_the_holder_releases(b: Backend) {
    let (held, waiting) = one_permit_held(&b, 600_000).await;
    let limits = SharedLimits::new(Arc::clone(&b.limits));
    let scope = scopes(&["organization"]);
    let held_permit = limits
        .acquire(&held, &scope, &CancellationToken::new(), &|| true)
        .await
        .unwrap();
    let wait = {
        let (limits, scope) = (limits.clone(), scope.clone());
        tokio::spawn(async move {
            limits
                .acquire(&waiting, &scope, &CancellationToken::new(), &|| true)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!wait.is_finished());
    limits.release(&held_permit, 0).await.unwrap();
    let permit = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the released permit is passed on")
        .unwrap()
        .unwrap();
    assert_eq!(permit.scopes(), scope);
}

// ---------------------------------------------------------------------------------------------
// Real `openbot serve` processes on one PostgreSQL.

/// A database with its shared keys, an HTTP front (an engine with no runner) that submits
/// through the public API with the owner's token and observes, and the limit store to
/// configure.
struct Cluster {
    url: String,
    store: Arc<dyn Store>,
    limits: Arc<dyn LimitStore>,
    engine: Arc<Engine>,
    organization: Uuid,
    front: Front,
}

impl Cluster {
    async fn new() -> Self {
        let front = Front::new().await;
        let limits: Arc<dyn LimitStore> = match &front.server.raw {
            api::Raw::Postgres(store) => Arc::new(store.clone()),
            api::Raw::Sqlite(..) => unreachable!("the front is on PostgreSQL"),
        };
        Self {
            url: front.url.clone(),
            store: Arc::clone(&front.server.database.store),
            limits,
            engine: Arc::clone(&front.server.engine),
            organization: front.organization().await,
            front,
        }
    }

    fn node(&self, name: &str) -> NodeProcess {
        self.front.node(name, 1000)
    }

    async fn limit(&self, scope: &str, settings: LimitSettings) {
        self.limits
            .put_limit(self.organization, scope, &settings)
            .await
            .unwrap();
    }

    /// Sends "go" to a new Chat of a new Bot on `model` through the API.
    async fn submit(&self, model: &FakeOpenAi) -> ExecutionId {
        let bot = self
            .front
            .create_bot(serde_json::json!({"name": "Limited", "model": model.spec()}))
            .await;
        self.front.start_turn(&bot).await.1
    }

    /// Every event to the end.
    async fn events(&self, id: ExecutionId, within: Duration) -> Vec<Event> {
        tokio::time::timeout(
            within,
            self.engine.observe(id, 0).map(|e| e.unwrap()).collect(),
        )
        .await
        .unwrap_or_else(|_| panic!("execution {id} ends in time"))
    }

    /// Waits for the first event of `id` that matches.
    async fn wait_for(&self, id: ExecutionId, what: impl Fn(&Event) -> bool) -> Event {
        let mut stream = self.engine.observe(id, 0);
        loop {
            let next = tokio::time::timeout(Duration::from_secs(30), stream.next())
                .await
                .expect("the event comes in time");
            let event = next.expect("the execution has not ended").unwrap();
            if what(&event) {
                return event;
            }
        }
    }

    /// Waits until the execution is in `state`.
    async fn wait_state(&self, id: ExecutionId, state: ExecutionState) {
        for _ in 0..600 {
            if self.store.execution(id).await.unwrap().state == state {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("execution {id} did not reach {state:?}");
    }

    /// Cuts every database connection of the process `pid`, as a network cut would.
    async fn terminate_connections_of(&self, pid: u32) -> usize {
        let ports: Vec<i32> = client_ports(pid).into_iter().map(i32::from).collect();
        let mut admin = sqlx::PgConnection::connect(&self.url).await.unwrap();
        let killed: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND client_port = ANY($1)",
        )
        .bind(&ports)
        .fetch_all(&mut admin)
        .await
        .unwrap();
        killed.len()
    }
}

/// The local TCP ports of the sockets process `pid` has open (Linux `/proc`).
fn client_ports(pid: u32) -> HashSet<u16> {
    let mut inodes = HashSet::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        if let Ok(target) = std::fs::read_link(entry.path()) {
            let target = target.to_string_lossy().to_string();
            if let Some(inode) = target
                .strip_prefix("socket:[")
                .and_then(|rest| rest.strip_suffix(']'))
            {
                inodes.insert(inode.to_string());
            }
        }
    }
    let mut ports = HashSet::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() > 9
                && inodes.contains(fields[9])
                && let Some((_, port)) = fields[1].rsplit_once(':')
                && let Ok(port) = u16::from_str_radix(port, 16)
            {
                ports.insert(port);
            }
        }
    }
    ports
}

fn ended(events: &[Event]) -> Option<TurnOutcome> {
    match events.last()?.kind {
        EventKind::TurnEnded { outcome, .. } => Some(outcome),
        _ => None,
    }
}

fn model_started(e: &Event) -> bool {
    matches!(e.kind, EventKind::ModelStepStarted { .. })
}

fn text() -> Vec<Answer> {
    vec![Answer::Text(vec!["done"])]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_sharing_32_turns_under_a_permit_limit_of_2_never_send_more_than_2_at_once() {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(text()).await;
    model.delay(0, Duration::from_millis(150));
    cluster
        .limit("provider:compatible", settings(Some(2)))
        .await;
    let _a = cluster.node("permits-a");
    let _b = cluster.node("permits-b");
    let mut ids = Vec::new();
    for _ in 0..32 {
        ids.push(cluster.submit(&model).await);
    }
    for id in &ids {
        let events = cluster.events(*id, Duration::from_secs(120)).await;
        assert_eq!(ended(&events), Some(TurnOutcome::Completed), "{events:#?}");
    }
    println!(
        "peak of concurrent model requests: {}",
        model.peak_in_flight()
    );
    // A takeover (a lease lapsed on a busy machine) may ask for a lost answer again.
    assert!(model.total_requests() >= 32);
    assert!(
        model.peak_in_flight() <= 2,
        "peak {} above the limit",
        model.peak_in_flight()
    );
    assert_eq!(model.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_owners_permit_passes_on_after_its_lease_and_its_turn_is_taken_over() {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(text()).await;
    // The first request hangs: its owner holds the one permit when it is frozen.
    model.delay_first(0, Duration::from_secs(600));
    cluster.limit("organization", settings(Some(1))).await;
    let owner = cluster.node("permits-owner");
    let stalled = cluster.submit(&model).await;
    cluster.wait_for(stalled, model_started).await;
    let waiting = cluster.submit(&model).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        model.total_requests(),
        1,
        "the second Turn waits for the permit"
    );

    owner.pause();
    let cut = cluster.terminate_connections_of(owner.pid()).await;
    assert!(cut > 0, "the frozen owner had database connections");
    let _other = cluster.node("permits-other");
    for id in [stalled, waiting] {
        let events = cluster.events(id, Duration::from_secs(60)).await;
        assert_eq!(ended(&events), Some(TurnOutcome::Completed), "{events:#?}");
    }
    let row = cluster.store.execution(stalled).await.unwrap();
    assert!(row.generation >= 2, "the stalled Turn was taken over");
    owner.resume();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_turn_frees_its_permit_and_another_turn_runs_meanwhile() {
    let cluster = Cluster::new().await;
    // Two model steps (the first asks for a tool the Turn does not have, which answers with
    // an error): a paused Turn stops before its second request.
    let model = FakeOpenAi::start(vec![
        Answer::Tool("missing", serde_json::json!({})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    model.delay_first(0, Duration::from_millis(1500));
    cluster.limit("organization", settings(Some(1))).await;
    let _node = cluster.node("permits-pause");
    let paused = cluster.submit(&model).await;
    cluster.wait_for(paused, model_started).await;
    cluster.engine.pause(paused).await.unwrap();
    let other = cluster.submit(&model).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        model.total_requests(),
        1,
        "the other Turn waits while the paused Turn's request holds the permit"
    );
    // The call in flight ends and its answer is saved; then the Turn pauses, holding nothing.
    cluster.wait_state(paused, ExecutionState::Waiting).await;
    let events = cluster.events(other, Duration::from_secs(60)).await;
    assert_eq!(ended(&events), Some(TurnOutcome::Completed));
    assert_eq!(
        cluster.store.execution(paused).await.unwrap().state,
        ExecutionState::Waiting,
        "still paused"
    );
    assert_eq!(
        in_use_of(&cluster.limits, cluster.organization, "organization").await,
        0
    );

    cluster.engine.resume(paused).await.unwrap();
    let events = cluster.events(paused, Duration::from_secs(60)).await;
    assert_eq!(ended(&events), Some(TurnOutcome::Completed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_turn_that_waits_for_a_permit_ends_its_wait() {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(text()).await;
    model.delay_first(0, Duration::from_secs(600));
    cluster
        .limit(
            "organization",
            LimitSettings {
                max_wait_ms: 600_000,
                ..settings(Some(1))
            },
        )
        .await;
    let _node = cluster.node("permits-cancel");
    let holder = cluster.submit(&model).await;
    cluster.wait_for(holder, model_started).await;
    let waiting = cluster.submit(&model).await;
    cluster.wait_state(waiting, ExecutionState::Running).await;
    cluster.engine.cancel(waiting).await.unwrap();
    let events = cluster.events(waiting, Duration::from_secs(30)).await;
    assert_eq!(ended(&events), Some(TurnOutcome::Cancelled));
    assert!(
        !events.iter().any(model_started),
        "the cancelled Turn never sent"
    );
    assert_eq!(model.total_requests(), 1);
    cluster.engine.cancel(holder).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_of_n_requests_per_window_admits_n_then_makes_the_next_wait_to_its_deadline() {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(text()).await;
    cluster
        .limit(
            "provider:compatible",
            LimitSettings {
                max_wait_ms: 300,
                ..bucket(Some(3), None, 60_000)
            },
        )
        .await;
    let _node = cluster.node("permits-bucket");
    for _ in 0..3 {
        let id = cluster.submit(&model).await;
        let events = cluster.events(id, Duration::from_secs(60)).await;
        assert_eq!(ended(&events), Some(TurnOutcome::Completed));
    }
    let fourth = cluster.submit(&model).await;
    let events = cluster.events(fourth, Duration::from_secs(60)).await;
    assert!(
        matches!(
            events.last().map(|e| &e.kind),
            Some(EventKind::Failed {
                category: ErrorCategory::Timeout,
                ..
            })
        ),
        "{events:#?}"
    );
    assert!(!events.iter().any(model_started), "it was never sent");
    assert_eq!(model.total_requests(), 3);
}
