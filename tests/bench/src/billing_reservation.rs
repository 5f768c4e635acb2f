//! The cost of a reservation per model request: the `sending` commit of a model request with
//! its reservation (release of older holds, the price override read, the budget and credit
//! rows locked, the spent-and-held sums, the hold inserted) against the same commit without
//! it, alternating in the same run on the same database. Prints each side's mean time per
//! commit and the ratio. SQLite in a temporary folder always; PostgreSQL too when
//! `OPENBOT_BENCH_DATABASE_URL` names a server's database (a new database is created there
//! for the run).
//!
//! Settings: OPENBOT_BENCH_COMMITS (commits per side and round, default 300),
//! OPENBOT_BENCH_ROUNDS (default 3), OPENBOT_BENCH_HISTORY (settled usage records already in
//! the organization, default 1000: the sums read them).

use std::sync::Arc;
use std::time::{Duration, Instant};

use openbot_core::turn::{CallKey, CallSlot, RequestEstimate};
use openbot_schema::{BudgetScope, ExecutionId, Usage};
use openbot_server::billing::{CallBilling, Reservation, Settlement};
use openbot_server::engine::{Engine, Submission};
use openbot_server::node::{Database, bootstrap};
use openbot_server::sealed::KeyRing;
use openbot_server::store::{
    CallPhase, CallWrite, Commit, PostgresStore, Scope, SqliteStore, Store, TxWrite, TxWrites,
    call_key_name,
};
use uuid::Uuid;

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sending(step: u32, writes: TxWrites) -> Commit {
    let key = CallKey {
        step,
        slot: CallSlot::Model,
        attempt: 1,
    };
    Commit {
        calls: vec![CallWrite {
            key,
            phase: CallPhase::Sending,
            idempotency_key: format!("k-{key}"),
            result: None,
            usage: None,
        }],
        input_step: Some(step),
        writes,
        ..Commit::default()
    }
}

struct Setup {
    store: Arc<dyn Store>,
    id: ExecutionId,
    generation: i64,
    organization: Uuid,
    bot: Uuid,
    chat: Uuid,
}

impl Setup {
    fn billing(&self, step: u32) -> CallBilling {
        let key = CallKey {
            step,
            slot: CallSlot::Model,
            attempt: 1,
        };
        CallBilling {
            execution: self.id,
            call_key: call_key_name(&key),
            generation: self.generation,
            organization: self.organization,
            bot: self.bot,
            budget_bot: self.bot,
            chat: Some(self.chat),
            member: None,
            model: "openai:gpt-4o-mini".into(),
            catalog: openbot_server::billing::catalog_price("openai:gpt-4o-mini"),
        }
    }
}

async fn setup(database: &Database, keys: KeyRing, history: u64) -> anyhow::Result<Setup> {
    bootstrap(database.identity.as_ref()).await?;
    let owner = database
        .identity
        .first_owner()
        .await?
        .ok_or_else(|| anyhow::anyhow!("no owner"))?;
    let engine = Engine::open(Arc::clone(&database.store), keys, "bench".into());
    let submitted = engine
        .submit(Submission {
            kind: "billing-bench",
            scope: Scope::Member(owner.member_id.to_string()),
            command_key: None,
            input: &serde_json::json!({}),
            events: Vec::new(),
            parent_id: None,
            chat_id: None,
            admission_gate: None,
        })
        .await?;
    let claim = database
        .store
        .claim("bench", &["billing-bench"], 3_600_000, 10)
        .await?
        .remove(0);
    let setup = Setup {
        store: Arc::clone(&database.store),
        id: submitted.execution_id(),
        generation: claim.generation,
        organization: owner.organization_id,
        bot: Uuid::now_v7(),
        chat: Uuid::now_v7(),
    };
    // An organization on credits with a budget above the calls: the reservation's full path.
    database
        .budgets
        .put_budget(
            owner.organization_id,
            BudgetScope::Organization,
            owner.organization_id,
            i64::MAX / 2,
        )
        .await?;
    database
        .billing
        .grant_credits(owner.organization_id, i64::MAX / 4, None, None)
        .await?;
    // Settled history the sums read.
    for n in 0..history {
        let step = 1_000_000 + n as u32;
        let write: Arc<dyn TxWrite> = Arc::new(Settlement {
            call: setup.billing(step),
            usage: Some(Usage {
                input_tokens: 100,
                output_tokens: 10,
                ..Usage::default()
            }),
            record_price: None,
        });
        setup
            .store
            .commit(
                setup.id,
                setup.generation,
                Commit {
                    writes: TxWrites(vec![write]),
                    ..Commit::default()
                },
            )
            .await?;
    }
    Ok(setup)
}

async fn run(name: &str, setup: &Setup) -> anyhow::Result<()> {
    let commits = setting("OPENBOT_BENCH_COMMITS", 300) as u32;
    let rounds = setting("OPENBOT_BENCH_ROUNDS", 3) as u32;
    let estimate = RequestEstimate {
        input_tokens: 2_000,
        output_tokens: 4_096,
    };
    // One commit of each side in turn, so that both see the same load; medians, since the
    // machine is shared.
    let mut plain = Vec::new();
    let mut reserved = Vec::new();
    let mut step = 1;
    for _ in 0..rounds * commits {
        let started = Instant::now();
        setup
            .store
            .commit(
                setup.id,
                setup.generation,
                sending(step, TxWrites::default()),
            )
            .await?;
        plain.push(started.elapsed());
        step += 1;
        // The request before has no result here, so its hold is released first, as the
        // host does then.
        let write: Arc<dyn TxWrite> =
            Arc::new(Reservation::new(setup.billing(step), estimate, true));
        let started = Instant::now();
        setup
            .store
            .commit(
                setup.id,
                setup.generation,
                sending(step, TxWrites(vec![write])),
            )
            .await?;
        reserved.push(started.elapsed());
        step += 1;
    }
    let median = |all: &mut Vec<Duration>| {
        all.sort();
        all[all.len() / 2].as_secs_f64() * 1e6
    };
    let plain_us = median(&mut plain);
    let reserved_us = median(&mut reserved);
    println!(
        "{name}: sending commit {plain_us:.0} us, with its reservation {reserved_us:.0} us \
         (+{:.0} us, ratio {:.2}; medians of {} commits a side)",
        reserved_us - plain_us,
        reserved_us / plain_us,
        commits * rounds
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let history = setting("OPENBOT_BENCH_HISTORY", 1000);
    let (keys, _) = KeyRing::generate("bench");
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bench.db");
    SqliteStore::migrate(&path).await?;
    let sqlite = SqliteStore::open(&path, keys.clone()).await?;
    let database = Database::on(Arc::new(sqlite));
    let setup_sqlite = setup(&database, keys.clone(), history).await?;
    run("sqlite", &setup_sqlite).await?;
    if let Ok(server) = std::env::var("OPENBOT_BENCH_DATABASE_URL") {
        use sqlx::Connection as _;
        let name = format!("openbot_bench_{}", Uuid::now_v7().simple());
        let mut admin = sqlx::PgConnection::connect(&server).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await?;
        admin.close().await?;
        let (base, _) = server
            .rsplit_once('/')
            .ok_or_else(|| anyhow::anyhow!("a URL with a database"))?;
        let url = format!("{base}/{name}");
        PostgresStore::migrate(&url).await?;
        let postgres = PostgresStore::connect(&url, 8, keys.clone()).await?;
        let database = Database::on(Arc::new(postgres));
        let setup_pg = setup(&database, keys, history).await?;
        run("postgres", &setup_pg).await?;
    }
    Ok(())
}
