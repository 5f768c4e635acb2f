//! File deletion as durable, retryable cross-store work, and retention per organization, on
//! SQLite and on a real PostgreSQL: a deleted file is hidden at once and its object goes
//! before its row; an object store that fails is tried again until the object is gone; work
//! left between the two writes (a node gone) is taken over and leaves no orphaned object;
//! retention expiry with an injected clock and through the scheduled sweep work item.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/pg.rs"]
mod pg;
#[macro_use]
#[path = "support/api.rs"]
mod api;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use api::{Raw, Server, error_code, postgres, sqlite, test_keys, test_platform};
use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::path::Path as ObjectPath;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use openbot_schema::ExecutionState;
use openbot_server::engine::{Engine, RunnerConfig};
use openbot_server::files::{FileRow, MarkDeleting, Started, ensure_sweep, start_deletion, sweep};
use openbot_server::node::registry;
use openbot_server::store::now_ms;
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

macro_rules! both {
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

both!(
    a_deleted_file_is_hidden_at_once_then_its_object_then_its_row_go,
    an_object_store_that_fails_is_tried_again_until_the_object_is_gone,
    work_left_between_the_object_and_the_row_is_taken_over_and_leaves_no_orphan,
    retention_expiry_deletes_only_files_older_than_the_organizations_days,
    the_retention_sweep_is_a_work_item_that_deletes_expired_files_and_waits_on_its_timer,
    the_sweep_finishes_rows_left_deleting_without_their_work,
    file_retention_needs_an_admin_and_days_in_range,
);

const DAY_MS: i64 = 86_400_000;

/// An object store whose next `n` deletes fail (a passing outage), counting every delete.
#[derive(Debug)]
struct Flaky {
    inner: Arc<dyn ObjectStore>,
    failures_left: AtomicU32,
    deletes: AtomicU32,
}

impl Flaky {
    fn over(inner: Arc<dyn ObjectStore>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            failures_left: AtomicU32::new(0),
            deletes: AtomicU32::new(0),
        })
    }

    fn fail_next_deletes(&self, n: u32) {
        self.failures_left.store(n, Ordering::SeqCst);
    }

    fn deletes(&self) -> u32 {
        self.deletes.load(Ordering::SeqCst)
    }
}

impl fmt::Display for Flaky {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Flaky({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Flaky {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn delete(&self, location: &ObjectPath) -> object_store::Result<()> {
        self.deletes.fetch_add(1, Ordering::SeqCst);
        let failing = self
            .failures_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(object_store::Error::Generic {
                store: "flaky",
                source: "the object store is unavailable".into(),
            });
        }
        self.inner.delete(location).await
    }

    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy(&self, from: &ObjectPath, to: &ObjectPath) -> object_store::Result<()> {
        self.inner.copy(from, to).await
    }

    async fn copy_if_not_exists(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
    ) -> object_store::Result<()> {
        self.inner.copy_if_not_exists(from, to).await
    }
}

fn runner() -> RunnerConfig {
    RunnerConfig {
        lease: Duration::from_secs(5),
        capacity: 16,
        storage_retry_budget: openbot_server::engine::STORAGE_RETRY_BUDGET,
    }
}

/// A node whose object store is a folder behind [`Flaky`].
async fn node(raw: Raw) -> (Server, Arc<Flaky>) {
    let folder = tempfile::tempdir().unwrap();
    let flaky = Flaky::over(openbot_server::files::local_objects(folder.path()).unwrap());
    let server = api::server_with_objects(
        raw,
        test_platform(),
        runner(),
        Arc::clone(&flaky) as Arc<dyn ObjectStore>,
        folder,
    )
    .await;
    (server, flaky)
}

async fn upload(server: &Server, name: &str) -> String {
    let response = server
        .post(&format!("/v1/files?name={name}"), &server.owner)
        .header("content-type", "text/plain")
        .body(format!("the bytes of {name}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    response.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn object_key(server: &Server, id: &str) -> ObjectPath {
    let organization = server.owner_member().await.organization_id;
    ObjectPath::from(format!("org-{organization}/{id}"))
}

async fn has_object(objects: &dyn ObjectStore, key: &ObjectPath) -> bool {
    match objects.head(key).await {
        Ok(_) => true,
        Err(object_store::Error::NotFound { .. }) => false,
        Err(err) => panic!("head failed: {err}"),
    }
}

/// The row's state: `None` gone, `Some(true)` deleting, `Some(false)` in use.
async fn row_state(server: &Server, id: &str) -> Option<bool> {
    server
        .database
        .files
        .deleting(id.parse().unwrap())
        .await
        .unwrap()
}

async fn wait_row_gone(server: &Server, id: &str) {
    for _ in 0..400 {
        if row_state(server, id).await.is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the row of file {id} is still there");
}

async fn status_of(server: &Server, id: &str) -> StatusCode {
    server
        .get(&format!("/v1/files/{id}"), &server.owner)
        .send()
        .await
        .unwrap()
        .status()
}

async fn listed(server: &Server) -> Vec<String> {
    server
        .items("/v1/files", &server.owner)
        .await
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

async fn a_deleted_file_is_hidden_at_once_then_its_object_then_its_row_go(raw: Raw) {
    let (server, flaky) = node(raw).await;
    let id = upload(&server, "a.txt").await;
    let kept = upload(&server, "b.txt").await;
    let key = object_key(&server, &id).await;
    assert!(has_object(flaky.as_ref(), &key).await);
    let deleted = server
        .delete(&format!("/v1/files/{id}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    assert_eq!(status_of(&server, &id).await, StatusCode::NOT_FOUND);
    assert_eq!(listed(&server).await, vec![kept.clone()]);
    let again = server
        .delete(&format!("/v1/files/{id}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(again).await,
        (StatusCode::NOT_FOUND, "not_found".to_string()),
        "a file being deleted is not found"
    );
    wait_row_gone(&server, &id).await;
    assert!(
        !has_object(flaky.as_ref(), &key).await,
        "the object went first"
    );
    let kept_key = object_key(&server, &kept).await;
    assert!(has_object(flaky.as_ref(), &kept_key).await);
    assert_eq!(row_state(&server, &kept).await, Some(false));
    // Another member's delete of a file not theirs finds nothing and changes nothing.
    let other = server.other_member_token().await;
    let foreign = server
        .delete(&format!("/v1/files/{kept}"), &other)
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), StatusCode::NOT_FOUND);
    assert_eq!(row_state(&server, &kept).await, Some(false));
    let bad = server
        .delete("/v1/files/not-an-id", &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}

async fn an_object_store_that_fails_is_tried_again_until_the_object_is_gone(raw: Raw) {
    let (server, flaky) = node(raw).await;
    let id = upload(&server, "flaky.txt").await;
    let key = object_key(&server, &id).await;
    flaky.fail_next_deletes(2);
    let deleted = server
        .delete(&format!("/v1/files/{id}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    wait_row_gone(&server, &id).await;
    assert_eq!(
        flaky.deletes(),
        3,
        "two failed deletes, then the one that passed"
    );
    assert!(!has_object(flaky.as_ref(), &key).await);
}

/// A row as `upload` would store it, `age_ms` old, with its object.
async fn stored_file(server: &Server, objects: &dyn ObjectStore, age_ms: i64) -> FileRow {
    let owner = server.owner_member().await;
    let id = Uuid::now_v7();
    let key = format!("org-{}/{id}", owner.organization_id);
    objects
        .put(&ObjectPath::from(key.as_str()), "old bytes".into())
        .await
        .unwrap();
    let row = FileRow {
        id,
        organization_id: owner.organization_id,
        owner_member_id: owner.member_id,
        name: "old.txt".into(),
        media_type: "text/plain".into(),
        size: 9,
        sha256: "0".repeat(64),
        object_key: key,
        created_at: now_ms() - age_ms,
        token_id: None,
    };
    server.database.files.add_file(&row).await.unwrap();
    row
}

async fn work_left_between_the_object_and_the_row_is_taken_over_and_leaves_no_orphan(raw: Raw) {
    // A database with a node whose runner is stopped: its work waits, as a dead node's does.
    let (server, flaky) = node(raw).await;
    server.engine.shutdown().await;
    let objects: &dyn ObjectStore = flaky.as_ref();
    let front = Engine::open(
        Arc::clone(&server.database.store),
        test_keys(),
        "front".into(),
    );
    // One file whose node died after the object went (before the row), one whose node died
    // right after the mark and its work were committed.
    let between = stored_file(&server, objects, 0).await;
    let marked = stored_file(&server, objects, 0).await;
    for file in [&between, &marked] {
        let started = start_deletion(
            front.context(),
            file,
            Some(MarkDeleting::new(file.id, None)),
        )
        .await
        .unwrap();
        assert!(matches!(started, Started::Started(_)), "{started:?}");
        assert_eq!(row_state(&server, &file.id.to_string()).await, Some(true));
    }
    objects
        .delete(&ObjectPath::from(between.object_key.as_str()))
        .await
        .unwrap();
    // A second mark of a file being deleted starts nothing.
    let twice = start_deletion(
        front.context(),
        &marked,
        Some(MarkDeleting::new(marked.id, None)),
    )
    .await
    .unwrap();
    assert!(matches!(twice, Started::Already(_)), "{twice:?}");

    // Another node takes the work over.
    let database = server.database.clone();
    let taker = Engine::open(Arc::clone(&database.store), test_keys(), "taker".into());
    taker
        .start_runner(registry(Some(&database), &test_platform()), runner())
        .await;
    for file in [&between, &marked] {
        wait_row_gone(&server, &file.id.to_string()).await;
        assert!(
            !has_object(objects, &ObjectPath::from(file.object_key.as_str())).await,
            "no orphaned object"
        );
    }
    taker.shutdown().await;
}

async fn retention(server: &Server, days: u32) -> Value {
    let response = server
        .http
        .put(format!("{}/v1/files/retention", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({ "days": days }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

async fn retention_expiry_deletes_only_files_older_than_the_organizations_days(raw: Raw) {
    let (server, flaky) = node(raw).await;
    let engine = server.engine.context();
    let files = server.database.files.as_ref();
    let id = upload(&server, "kept-a-while.txt").await;
    let key = object_key(&server, &id).await;
    // No retention: nothing expires, however late.
    let report = sweep(engine, files, now_ms() + 3650 * DAY_MS)
        .await
        .unwrap();
    assert_eq!(report.expired, 0);
    assert_eq!(retention(&server, 2).await, json!({"days": 2}));
    // The clock is injected: a day later the file is younger than its retention.
    let report = sweep(engine, files, now_ms() + DAY_MS).await.unwrap();
    assert_eq!(report.expired, 0);
    assert_eq!(status_of(&server, &id).await, StatusCode::OK);
    // Three days later it is older: hidden at once, then its object and row go.
    let report = sweep(engine, files, now_ms() + 3 * DAY_MS).await.unwrap();
    assert_eq!(report.expired, 1);
    assert_eq!(status_of(&server, &id).await, StatusCode::NOT_FOUND);
    wait_row_gone(&server, &id).await;
    assert!(!has_object(flaky.as_ref(), &key).await);
    // A sweep again finds nothing more.
    let report = sweep(engine, files, now_ms() + 3 * DAY_MS).await.unwrap();
    assert_eq!(report.expired, 0);
}

async fn the_retention_sweep_is_a_work_item_that_deletes_expired_files_and_waits_on_its_timer(
    raw: Raw,
) {
    let (server, flaky) = node(raw).await;
    let objects: &dyn ObjectStore = flaky.as_ref();
    let old = stored_file(&server, objects, 3 * DAY_MS).await;
    let young = stored_file(&server, objects, DAY_MS / 2).await;
    retention(&server, 1).await;
    let engine = server.engine.context();
    let sweep_id = ensure_sweep(engine).await.unwrap();
    wait_row_gone(&server, &old.id.to_string()).await;
    assert!(!has_object(objects, &ObjectPath::from(old.object_key.as_str())).await);
    assert_eq!(row_state(&server, &young.id.to_string()).await, Some(false));
    assert!(has_object(objects, &ObjectPath::from(young.object_key.as_str())).await);
    // After its run the sweep waits, with no owner, for its timer; one per deployment.
    let mut row = server.engine.execution(sweep_id).await.unwrap();
    for _ in 0..100 {
        if row.state == ExecutionState::Waiting {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        row = server.engine.execution(sweep_id).await.unwrap();
    }
    assert_eq!(row.state, ExecutionState::Waiting);
    let swept = server
        .database
        .files
        .swept_at("file-retention")
        .await
        .unwrap()
        .unwrap();
    let interval = openbot_server::files::SWEEP_INTERVAL.as_millis() as i64;
    assert_eq!(row.wake_at, Some(swept + interval), "{row:?}");
    assert_eq!(ensure_sweep(engine).await.unwrap(), sweep_id);
}

/// Marks a row deleting `age_ms` ago with no deletion work, as a version before durable
/// deletion left it.
async fn mark_without_work(server: &Server, id: Uuid, age_ms: i64) {
    let sql = "UPDATE files SET deleted_at = $1 WHERE id = $2";
    let at = now_ms() - age_ms;
    let done = match &server.raw {
        Raw::Sqlite(store, _) => sqlx::query(sql)
            .bind(at)
            .bind(id)
            .execute(store.pool())
            .await
            .unwrap()
            .rows_affected(),
        Raw::Postgres(store) => sqlx::query(sql)
            .bind(at)
            .bind(id)
            .execute(store.pool())
            .await
            .unwrap()
            .rows_affected(),
    };
    assert_eq!(done, 1);
}

async fn the_sweep_finishes_rows_left_deleting_without_their_work(raw: Raw) {
    let (server, flaky) = node(raw).await;
    let objects: &dyn ObjectStore = flaky.as_ref();
    let engine = server.engine.context();
    let files = server.database.files.as_ref();
    let stranded = stored_file(&server, objects, 0).await;
    let recent = stored_file(&server, objects, 0).await;
    mark_without_work(&server, stranded.id, 2 * 3_600_000).await;
    mark_without_work(&server, recent.id, 60_000).await;
    let report = sweep(engine, files, now_ms()).await.unwrap();
    assert_eq!(
        report.restarted, 1,
        "only the row left deleting for an hour"
    );
    wait_row_gone(&server, &stranded.id.to_string()).await;
    assert!(!has_object(objects, &ObjectPath::from(stranded.object_key.as_str())).await);
    assert_eq!(
        row_state(&server, &recent.id.to_string()).await,
        Some(true),
        "a recent mark may still have its work coming"
    );
    // Swept again, a row whose work is there (or done) starts nothing new.
    let report = sweep(engine, files, now_ms()).await.unwrap();
    assert_eq!(report.restarted, 0);
}

async fn file_retention_needs_an_admin_and_days_in_range(raw: Raw) {
    let (server, _) = node(raw).await;
    let got: Value = server
        .get("/v1/files/retention", &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got, json!({}), "kept until deleted");
    for body in [
        json!({"days": 0}),
        json!({"days": 36501}),
        json!({"days": -1}),
        json!({"days": "ten"}),
        json!({"days": 3, "extra": true}),
        json!({}),
    ] {
        let response = server
            .http
            .put(format!("{}/v1/files/retention", server.base))
            .bearer_auth(&server.owner)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            error_code(response).await,
            (StatusCode::BAD_REQUEST, "invalid_input".to_string()),
            "{body}"
        );
    }
    assert_eq!(retention(&server, 36500).await, json!({"days": 36500}));
    let member = server.other_member_token().await;
    let refused = server
        .http
        .put(format!("{}/v1/files/retention", server.base))
        .bearer_auth(&member)
        .json(&json!({"days": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(refused).await,
        (StatusCode::FORBIDDEN, "forbidden".to_string())
    );
    let model = fake_openai::FakeOpenAi::start(Vec::new()).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let limited = server.bot_limited_token(&bot).await;
    let refused = server
        .http
        .delete(format!("{}/v1/files/retention", server.base))
        .bearer_auth(&limited)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(refused).await,
        (StatusCode::FORBIDDEN, "forbidden".to_string()),
        "a Bot-limited token of the owner changes no retention"
    );
    let seen: Value = server
        .get("/v1/files/retention", &member)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(seen, json!({"days": 36500}), "members read it");
    let removed = server
        .delete("/v1/files/retention", &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    let again = server
        .delete("/v1/files/retention", &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_FOUND);
}
