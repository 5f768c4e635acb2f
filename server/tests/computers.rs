//! Computers on a server, on SQLite and on a real PostgreSQL: a machine pairs when a member
//! approves its code and claims its own credential; codes expire and are single-use; a
//! member never reaches another member's Computer; removal revokes the credential at once;
//! nothing secret is stored in the clear.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/outside.rs"]
mod outside;
#[path = "support/pg.rs"]
mod pg;
#[macro_use]
#[path = "support/api.rs"]
mod api;

use openbot_server::identity::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};

use api::{Server, error_code, postgres, server, sqlite};

http_tests!(
    a_machine_pairs_when_a_member_approves_its_code_and_claims_its_own_credential,
    a_claim_before_approval_waits_and_a_wrong_secret_is_not_found,
    an_unknown_expired_or_used_code_is_refused_with_its_reason,
    a_second_claim_issues_a_new_credential,
    a_member_never_reaches_another_members_computer_and_sees_shared_ones,
    only_owners_and_admins_share_or_remove_a_shared_computer,
    removing_a_computer_refuses_its_claims_and_hides_it,
    a_token_without_the_computers_right_or_limited_to_bots_reaches_no_computer,
    no_code_secret_or_credential_is_stored_in_the_clear,
    a_computer_credential_is_no_member_token,
);

async fn start(server: &Server, name: &str) -> Value {
    let response = server
        .http
        .post(format!("{}/v1/computers/pairings", server.base))
        .json(&json!({"name": name}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

async fn approve(server: &Server, token: &str, code: &str, shared: bool) -> reqwest::Response {
    server
        .post("/v1/computers/pairings/approve", token)
        .json(&json!({"code": code, "shared": shared}))
        .send()
        .await
        .unwrap()
}

async fn claim(server: &Server, pairing: &Value) -> reqwest::Response {
    server
        .http
        .post(format!(
            "{}/v1/computers/pairings/{}/claim",
            server.base,
            pairing["id"].as_str().unwrap()
        ))
        .json(&json!({"secret": pairing["secret"]}))
        .send()
        .await
        .unwrap()
}

/// A pairing approved by `token`: the pairing and the Computer.
async fn paired(server: &Server, token: &str, name: &str, shared: bool) -> (Value, Value) {
    let pairing = start(server, name).await;
    let response = approve(server, token, pairing["code"].as_str().unwrap(), shared).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    (pairing, response.json().await.unwrap())
}

async fn a_machine_pairs_when_a_member_approves_its_code_and_claims_its_own_credential(
    server: Server,
) {
    let pairing = start(&server, "laptop").await;
    let code = pairing["code"].as_str().unwrap();
    assert_eq!(code.len(), 9, "{code}");
    // Typed back in another case, without the dash.
    let response = approve(
        &server,
        &server.owner,
        &code.replace('-', "").to_lowercase(),
        false,
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let computer: Value = response.json().await.unwrap();
    assert_eq!(computer["name"], "laptop");
    let owner = server.owner_member().await;
    assert_eq!(computer["owner_member_id"], owner.member_id.to_string());
    assert!(computer.get("paired_at").is_none());
    let answer: Value = claim(&server, &pairing).await.json().await.unwrap();
    assert_eq!(answer["approved"], true);
    assert_eq!(answer["computer_id"], computer["id"]);
    assert!(answer["credential"].as_str().unwrap().starts_with("obc_"));
    let id = computer["id"].as_str().unwrap();
    let shown: Value = server
        .get(&format!("/v1/computers/{id}"), &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(shown["paired_at"].is_string(), "{shown}");
    let listed = server.items("/v1/computers", &server.owner).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], computer["id"]);
}

async fn a_claim_before_approval_waits_and_a_wrong_secret_is_not_found(server: Server) {
    let pairing = start(&server, "desk").await;
    let response = claim(&server, &pairing).await;
    assert_eq!(response.status(), StatusCode::OK);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["approved"], false);
    assert!(answer.get("credential").is_none());
    let mut wrong = pairing.clone();
    wrong["secret"] = json!("not-the-secret");
    let (status, code) = error_code(claim(&server, &wrong).await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
}

async fn an_unknown_expired_or_used_code_is_refused_with_its_reason(server: Server) {
    let (status, code) =
        error_code(approve(&server, &server.owner, "ABCD-EFGH", false).await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    let (status, code) = error_code(approve(&server, &server.owner, "0000", false).await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "invalid_input")
    );

    let (pairing, _) = paired(&server, &server.owner, "used", false).await;
    let response = approve(
        &server,
        &server.owner,
        pairing["code"].as_str().unwrap(),
        false,
    )
    .await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let body: Value = response.json().await.unwrap();
    assert!(body["message"].as_str().unwrap().contains("used"), "{body}");

    let late = start(&server, "late").await;
    let id: uuid::Uuid = late["id"].as_str().unwrap().parse().unwrap();
    server
        .raw_execute(
            "UPDATE computer_pairings SET expires_at = 0 WHERE id = $1",
            id,
        )
        .await;
    let response = approve(
        &server,
        &server.owner,
        late["code"].as_str().unwrap(),
        false,
    )
    .await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("expired"),
        "{body}"
    );
    let (status, _) = error_code(claim(&server, &late).await).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(server.items("/v1/computers", &server.owner).await.len() == 1);
}

async fn a_second_claim_issues_a_new_credential(server: Server) {
    let (pairing, computer) = paired(&server, &server.owner, "twice", false).await;
    let first: Value = claim(&server, &pairing).await.json().await.unwrap();
    let second: Value = claim(&server, &pairing).await.json().await.unwrap();
    assert_ne!(first["credential"], second["credential"]);
    let id: uuid::Uuid = computer["id"].as_str().unwrap().parse().unwrap();
    let hash = server
        .raw_text(
            "SELECT CAST(length(credential_hash) AS TEXT) FROM computers WHERE id = $1",
            id,
        )
        .await;
    assert_eq!(hash.as_deref(), Some("32"));
}

async fn a_member_never_reaches_another_members_computer_and_sees_shared_ones(server: Server) {
    let other = server.other_member_token().await;
    let (_, own) = paired(&server, &server.owner, "owner's", false).await;
    let (_, shared) = paired(&server, &server.owner, "team", true).await;
    let (_, theirs) = paired(&server, &other, "other's", false).await;
    let seen: Vec<Value> = server
        .items("/v1/computers", &other)
        .await
        .iter()
        .map(|c| c["id"].clone())
        .collect();
    assert_eq!(seen, vec![shared["id"].clone(), theirs["id"].clone()]);
    let own_id = own["id"].as_str().unwrap();
    let (status, _) = error_code(
        server
            .get(&format!("/v1/computers/{own_id}"), &other)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = error_code(
        server
            .delete(&format!("/v1/computers/{own_id}"), &other)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(server.items("/v1/computers", &server.owner).await.len(), 2);
}

async fn only_owners_and_admins_share_or_remove_a_shared_computer(server: Server) {
    let member = server.member_token_as(Role::Member, "m@example.com").await;
    let pairing = start(&server, "team").await;
    let (status, _) =
        error_code(approve(&server, &member, pairing["code"].as_str().unwrap(), true).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, shared) = paired(&server, &server.owner, "team", true).await;
    let id = shared["id"].as_str().unwrap();
    let (status, _) = error_code(
        server
            .delete(&format!("/v1/computers/{id}"), &member)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let admin = server.member_token_as(Role::Admin, "a@example.com").await;
    let response = server
        .delete(&format!("/v1/computers/{id}"), &admin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
}

async fn removing_a_computer_refuses_its_claims_and_hides_it(server: Server) {
    let (pairing, computer) = paired(&server, &server.owner, "old", false).await;
    let answer: Value = claim(&server, &pairing).await.json().await.unwrap();
    assert!(answer["credential"].is_string());
    let id = computer["id"].as_str().unwrap();
    let response = server
        .delete(&format!("/v1/computers/{id}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    // Revoked at once: the stored credential is gone, and no claim brings one back.
    let uuid: uuid::Uuid = id.parse().unwrap();
    let hash = server
        .raw_text(
            "SELECT CAST(length(credential_hash) AS TEXT) FROM computers WHERE id = $1",
            uuid,
        )
        .await;
    assert_eq!(hash, None);
    let (status, _) = error_code(claim(&server, &pairing).await).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        server
            .items("/v1/computers", &server.owner)
            .await
            .is_empty()
    );
    let (status, _) = error_code(
        server
            .delete(&format!("/v1/computers/{id}"), &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn a_token_without_the_computers_right_or_limited_to_bots_reaches_no_computer(
    server: Server,
) {
    let reader = server
        .token_with(json!([{"resource": "computers", "action": "read"}]))
        .await;
    let pairing = start(&server, "x").await;
    let (status, _) =
        error_code(approve(&server, &reader, pairing["code"].as_str().unwrap(), false).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let response = server.get("/v1/computers", &reader).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bots_only = server
        .token_with(json!([{"resource": "bots", "action": "read"}]))
        .await;
    let (status, _) = error_code(
        server
            .get("/v1/computers", &bots_only)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let model = fake_openai::FakeOpenAi::start(vec![]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let limited = server.bot_limited_token(&bot).await;
    let (status, _) = error_code(server.get("/v1/computers", &limited).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

async fn no_code_secret_or_credential_is_stored_in_the_clear(server: Server) {
    let (pairing, _) = paired(&server, &server.owner, "quiet", false).await;
    let answer: Value = claim(&server, &pairing).await.json().await.unwrap();
    let code = pairing["code"].as_str().unwrap().replace('-', "");
    for needle in [
        code.as_str(),
        pairing["secret"].as_str().unwrap(),
        answer["credential"].as_str().unwrap(),
    ] {
        assert_eq!(
            server.columns_containing(needle).await,
            Vec::<String>::new()
        );
    }
}

async fn a_computer_credential_is_no_member_token(server: Server) {
    let (pairing, _) = paired(&server, &server.owner, "machine", false).await;
    let answer: Value = claim(&server, &pairing).await.json().await.unwrap();
    let credential = answer["credential"].as_str().unwrap();
    for path in ["/v1/bots", "/v1/computers"] {
        let (status, _) = error_code(server.get(path, credential).send().await.unwrap()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }
}
