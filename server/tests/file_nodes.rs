//! File deletion with real processes: two `openbot serve` nodes on one PostgreSQL and one
//! object store folder. A node crashes (a fault point aborts it) after it deleted a file's
//! object and before it removed the row; the other node takes the deletion over and removes
//! the row: no orphaned object, no row left behind. Needs the `fault-points` build.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/nodes.rs"]
mod nodes;
#[path = "support/pg.rs"]
mod pg;
#[macro_use]
#[path = "support/api.rs"]
mod api;
#[path = "support/front.rs"]
mod front;

use std::time::Duration;

use front::Front;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use reqwest::StatusCode;
use serde_json::Value;

async fn row_state(front: &Front, id: &str) -> Option<bool> {
    front
        .server
        .database
        .files
        .deleting(id.parse().unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_between_the_object_and_the_row_leaves_no_orphan_and_the_other_node_finishes()
{
    let front = Front::new().await;
    let server = &front.server;
    let response = server
        .post("/v1/files?name=doomed.txt", &server.owner)
        .header("content-type", "text/plain")
        .body("bytes to delete")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let id = response.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let key = ObjectPath::from(format!("org-{}/{id}", front.organization().await));
    let objects = openbot_server::files::local_objects(server.objects.path()).unwrap();
    assert!(objects.head(&key).await.is_ok());

    let mut crashing = front.node_with(
        "files-crashing",
        1000,
        &[("OPENBOT_FAULT_POINT", "after_object_deleted")],
    );
    let deleted = server
        .delete(&format!("/v1/files/{id}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    assert!(
        crashing.wait_exit(Duration::from_secs(60)),
        "the node reached the fault point"
    );
    assert!(
        matches!(
            objects.head(&key).await,
            Err(object_store::Error::NotFound { .. })
        ),
        "the object went before the crash"
    );
    assert_eq!(
        row_state(&front, &id).await,
        Some(true),
        "the row is still there, deleting"
    );

    let _other = front.node("files-other", 1000);
    let mut gone = false;
    for _ in 0..600 {
        if row_state(&front, &id).await.is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        gone,
        "the other node took the deletion over and removed the row"
    );
    let listed: Value = server
        .get("/v1/files", &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["items"].as_array().unwrap().len(), 0);
}
