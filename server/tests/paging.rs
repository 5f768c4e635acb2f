//! Every list is paged, on SQLite and on a real PostgreSQL: a walk with any `limit`, following
//! `next_cursor`, returns every row once and in the list's order; `next_cursor` is absent on
//! the last page; a bad `limit` or `cursor` is `400 invalid_input`; a page stays right while
//! rows are added.

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

use std::collections::HashSet;

use fake_openai::{Answer, FakeOpenAi};
use reqwest::StatusCode;
use serde_json::{Value, json};

use api::{Server, error_code, postgres, receipt, server, sqlite};

http_tests!(
    bots_walk_once_in_order,
    chats_walk_once_in_order,
    chats_of_one_bot_walk_once_in_order,
    history_walks_once_in_order_also_inside_a_turn,
    approval_rules_walk_once_in_order,
    budgets_walk_once_in_order,
    prices_walk_once_in_order_with_overrides_in_place_of_the_catalog,
    delegates_walk_once_in_order,
    files_walk_once_in_order,
    invitations_walk_once_in_order,
    members_walk_once_in_order,
    providers_walk_once_in_order,
    organizations_walk_once_in_order,
    tokens_walk_once_in_order,
    tools_walk_once_in_order,
    vault_items_and_rules_walk_once_in_order,
    the_last_page_has_no_next_cursor,
    a_limit_outside_1_to_200_is_invalid_input_on_every_list,
    a_cursor_that_does_not_decode_is_invalid_input_on_every_list,
    rows_added_while_paging_never_shift_the_next_page,
);

/// Every list route (with a Chat for the history).
fn routes(chat: &str) -> Vec<String> {
    [
        "/v1/bots",
        "/v1/chats",
        "/v1/approvals",
        "/v1/approval-rules",
        "/v1/budgets",
        "/v1/billing/prices",
        "/v1/delegates",
        "/v1/files",
        "/v1/invitations",
        "/v1/members",
        "/v1/models/providers",
        "/v1/organizations",
        "/v1/tokens",
        "/v1/tools",
        "/v1/unknown-outcomes",
        "/v1/vault-items",
    ]
    .iter()
    .map(|r| r.to_string())
    .chain([format!("/v1/chats/{chat}/messages")])
    .collect()
}

/// `path` with `query` added (`path` may hold a filter already).
fn with_query(path: &str, query: &str) -> String {
    let joiner = if path.contains('?') { '&' } else { '?' };
    format!("{path}{joiner}{query}")
}

/// Walks `path` with pages of 1, 2 and 200 (one page) items and checks that each walk gives
/// the same items, each once; returns them.
async fn walked(server: &Server, token: &str, path: &str) -> Vec<Value> {
    let whole = server.walk(token, path, 200).await;
    for limit in [1, 2] {
        assert_eq!(
            server.walk(token, path, limit).await,
            whole,
            "{path} with pages of {limit}"
        );
    }
    let distinct: HashSet<String> = whole.iter().map(Value::to_string).collect();
    assert_eq!(distinct.len(), whole.len(), "{path}: an item twice");
    whole
}

fn field(items: &[Value], name: &str) -> Vec<String> {
    items
        .iter()
        .map(|item| item[name].as_str().unwrap().to_string())
        .collect()
}

fn created(items: &[Value], at: &str) -> Vec<chrono::DateTime<chrono::Utc>> {
    items
        .iter()
        .map(|item| item[at].as_str().unwrap().parse().unwrap())
        .collect()
}

fn oldest_first(items: &[Value], at: &str) -> bool {
    created(items, at).windows(2).all(|w| w[0] <= w[1])
}

fn newest_first(items: &[Value], at: &str) -> bool {
    created(items, at).windows(2).all(|w| w[0] >= w[1])
}

async fn ok_json(response: reqwest::Response) -> Value {
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert!(status.is_success(), "{status}: {body}");
    body
}

fn put(server: &Server, path: &str, token: &str) -> reqwest::RequestBuilder {
    server
        .http
        .put(format!("{}{path}", server.base))
        .bearer_auth(token)
}

async fn bots(server: &Server, model: &FakeOpenAi, n: usize) -> Vec<Value> {
    let mut bots = Vec::new();
    for _ in 0..n {
        bots.push(server.bot(&server.owner, model, false).await);
    }
    bots
}

async fn bots_walk_once_in_order(server: Server) {
    let model = FakeOpenAi::start(Vec::new()).await;
    let made = bots(&server, &model, 5).await;
    let listed = walked(&server, &server.owner, "/v1/bots").await;
    assert_eq!(field(&listed, "id"), field(&made, "id"), "oldest first");
}

async fn chats_walk_once_in_order(server: Server) {
    let model = FakeOpenAi::start(Vec::new()).await;
    let bot = &bots(&server, &model, 1).await[0];
    let mut made = Vec::new();
    for _ in 0..5 {
        made.push(server.chat(&server.owner, bot).await);
    }
    let listed = walked(&server, &server.owner, "/v1/chats").await;
    assert_eq!(field(&listed, "id"), made, "oldest first");
}

async fn chats_of_one_bot_walk_once_in_order(server: Server) {
    let model = FakeOpenAi::start(Vec::new()).await;
    let two = bots(&server, &model, 2).await;
    let mut of_first = Vec::new();
    for _ in 0..3 {
        of_first.push(server.chat(&server.owner, &two[0]).await);
        server.chat(&server.owner, &two[1]).await;
    }
    let path = format!("/v1/chats?bot={}", two[0]["id"].as_str().unwrap());
    let listed = walked(&server, &server.owner, &path).await;
    assert_eq!(
        field(&listed, "id"),
        of_first,
        "only that Bot's, oldest first"
    );
    assert_eq!(walked(&server, &server.owner, "/v1/chats").await.len(), 6);
}

async fn history_walks_once_in_order_also_inside_a_turn(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Text(vec!["one"]),
        Answer::Text(vec!["two"]),
        Answer::Text(vec!["three"]),
    ])
    .await;
    let bot = &bots(&server, &model, 1).await[0];
    let chat = server.chat(&server.owner, bot).await;
    for text in ["a", "b", "c"] {
        let sent = receipt(server.send(&server.owner, &chat, text, None).await).await;
        server
            .finish(&server.owner, sent["execution_id"].as_str().unwrap())
            .await;
    }
    // Pages of 1 end inside a Turn's messages: the cursor names the place inside it.
    let listed = walked(
        &server,
        &server.owner,
        &format!("/v1/chats/{chat}/messages"),
    )
    .await;
    let texts: Vec<String> = listed
        .iter()
        .map(|e| {
            e["message"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        texts,
        ["a", "one", "b", "two", "c", "three"],
        "oldest first"
    );
}

async fn approval_rules_walk_once_in_order(server: Server) {
    let mut made = Vec::new();
    for tool in ["pay", "refund", "charge", "send", "delete"] {
        let rule = ok_json(
            server
                .post("/v1/approval-rules", &server.owner)
                .json(&json!({"tool": tool, "action": "ask"}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        made.push(rule);
    }
    let listed = walked(&server, &server.owner, "/v1/approval-rules").await;
    assert_eq!(field(&listed, "id"), field(&made, "id"), "oldest first");
}

async fn budgets_walk_once_in_order(server: Server) {
    let model = FakeOpenAi::start(Vec::new()).await;
    let two = bots(&server, &model, 2).await;
    let chat = server.chat(&server.owner, &two[0]).await;
    let organization = server.owner_member().await.organization_id.to_string();
    let mut made = vec![
        ("organization".to_string(), organization),
        ("chat".to_string(), chat),
    ];
    for bot in &two {
        made.push(("bot".to_string(), bot["id"].as_str().unwrap().to_string()));
    }
    for (scope, target) in &made {
        ok_json(
            put(
                &server,
                &format!("/v1/budgets/{scope}/{target}"),
                &server.owner,
            )
            .json(&json!({"max_cost_micros": 1000}))
            .send()
            .await
            .unwrap(),
        )
        .await;
    }
    let listed = walked(&server, &server.owner, "/v1/budgets").await;
    let keys: Vec<(String, String)> = field(&listed, "scope")
        .into_iter()
        .zip(field(&listed, "target_id"))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "by scope and target");
    made.sort();
    assert_eq!(keys, made, "every budget once");
}

async fn prices_walk_once_in_order_with_overrides_in_place_of_the_catalog(server: Server) {
    let catalog: Vec<String> = openbot_server::billing::catalog()
        .map(|(model, _)| model)
        .collect();
    // Overrides of catalog models and of models the catalog does not know, before, between
    // and after its entries.
    let overridden = [catalog[0].clone(), catalog[catalog.len() - 1].clone()];
    let own = [
        "anthropic:a-custom".to_string(),
        "compatible:http://127.0.0.1:1/v1:m".to_string(),
        "openai:zz-custom".to_string(),
        "aaa:first".to_string(),
    ];
    for model in overridden.iter().chain(own.iter()) {
        ok_json(
            put(&server, "/v1/billing/prices", &server.owner)
                .json(&json!({"model": model, "input_micros_per_million": 1,
                              "output_micros_per_million": 2}))
                .send()
                .await
                .unwrap(),
        )
        .await;
    }
    let listed = walked(&server, &server.owner, "/v1/billing/prices").await;
    let models = field(&listed, "model");
    let mut expected: Vec<String> = catalog.iter().chain(own.iter()).cloned().collect();
    expected.sort();
    assert_eq!(models, expected, "every model once, by model spec");
    for price in &listed {
        let model = price["model"].as_str().unwrap().to_string();
        let source = if overridden.contains(&model) || own.contains(&model) {
            "organization"
        } else {
            "catalog"
        };
        assert_eq!(price["source"], source, "{price}");
    }
}

async fn delegates_walk_once_in_order(server: Server) {
    let model = FakeOpenAi::start(Vec::new()).await;
    let bot = &bots(&server, &model, 1).await[0];
    for name in ["delta", "alpha", "echo", "charlie", "bravo"] {
        ok_json(
            put(&server, &format!("/v1/delegates/{name}"), &server.owner)
                .json(&json!({"bot_id": bot["id"]}))
                .send()
                .await
                .unwrap(),
        )
        .await;
    }
    let listed = walked(&server, &server.owner, "/v1/delegates").await;
    assert_eq!(
        field(&listed, "name"),
        ["alpha", "bravo", "charlie", "delta", "echo"],
        "by name"
    );
}

async fn files_walk_once_in_order(server: Server) {
    let mut made = Vec::new();
    for n in 0..5 {
        let file = ok_json(
            server
                .post(&format!("/v1/files?name=f{n}.txt"), &server.owner)
                .header("content-type", "text/plain")
                .body(format!("file {n}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        made.push(file);
    }
    let listed = walked(&server, &server.owner, "/v1/files").await;
    assert!(newest_first(&listed, "created_at"), "newest first");
    let mut ids = field(&listed, "id");
    let mut made = field(&made, "id");
    ids.sort();
    made.sort();
    assert_eq!(ids, made, "every file once");
}

async fn invitations_walk_once_in_order(server: Server) {
    let mut made = Vec::new();
    for n in 0..5 {
        let created = ok_json(
            server
                .post("/v1/invitations", &server.owner)
                .json(&json!({"email": format!("p{n}@example.com"), "role": "member"}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        made.push(created["invitation"]["id"].as_str().unwrap().to_string());
    }
    let listed = walked(&server, &server.owner, "/v1/invitations").await;
    let mut ids = field(&listed, "id");
    // Created one after another: newest first is the reverse, ties broken by ID (time-ordered).
    made.reverse();
    assert_eq!(ids, made, "newest first");
    ids.dedup();
    assert_eq!(ids.len(), 5);
}

async fn members_walk_once_in_order(server: Server) {
    let owner = server.owner_member().await;
    let mut made = vec![owner.member_id.to_string()];
    for n in 0..4 {
        let member = server
            .database
            .identity
            .add_member(
                owner.organization_id,
                &format!("m{n}@example.com"),
                openbot_server::identity::Role::Member,
            )
            .await
            .unwrap();
        made.push(member.member_id.to_string());
    }
    let listed = walked(&server, &server.owner, "/v1/members").await;
    assert!(oldest_first(&listed, "created_at"), "oldest first");
    assert_eq!(
        field(&listed, "id"),
        made,
        "oldest first, every member once"
    );
}

async fn providers_walk_once_in_order(server: Server) {
    for kind in ["openai", "compatible", "anthropic"] {
        ok_json(
            put(
                &server,
                &format!("/v1/models/providers/{kind}"),
                &server.owner,
            )
            .json(&json!({"api_key": "sk-test", "base_url": "http://127.0.0.1:9/v1"}))
            .send()
            .await
            .unwrap(),
        )
        .await;
    }
    let listed = walked(&server, &server.owner, "/v1/models/providers").await;
    assert_eq!(
        field(&listed, "kind"),
        ["anthropic", "compatible", "openai"],
        "by kind"
    );
}

async fn organizations_walk_once_in_order(server: Server) {
    let first = server.items("/v1/organizations", &server.owner).await;
    let mut made = field(&first, "id");
    for name in ["Second", "Third", "Fourth"] {
        let created = ok_json(
            server
                .post("/v1/organizations", &server.owner)
                .json(&json!({"name": name}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        made.push(created["organization"]["id"].as_str().unwrap().to_string());
    }
    let listed = walked(&server, &server.owner, "/v1/organizations").await;
    assert_eq!(field(&listed, "id"), made, "oldest first");
}

async fn token(server: &Server, name: &str) -> String {
    let created = ok_json(
        server
            .post("/v1/tokens", &server.owner)
            .json(&json!({"name": name, "rights": [{"resource": "bots", "action": "read"}]}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    created["token"]["id"].as_str().unwrap().to_string()
}

async fn tokens_walk_once_in_order(server: Server) {
    let mut made = field(&server.items("/v1/tokens", &server.owner).await, "id");
    for n in 0..4 {
        made.insert(0, token(&server, &format!("t{n}")).await);
    }
    let listed = walked(&server, &server.owner, "/v1/tokens").await;
    assert!(newest_first(&listed, "created_at"), "newest first");
    assert_eq!(field(&listed, "id"), made, "newest first, every token once");
}

async fn tools_walk_once_in_order(server: Server) {
    for name in ["lookup", "fetch", "search", "add", "mail"] {
        ok_json(
            put(&server, &format!("/v1/tools/{name}"), &server.owner)
                .json(
                    &json!({"input_schema": {"type": "object"}, "url": "http://127.0.0.1:9/tool"}),
                )
                .send()
                .await
                .unwrap(),
        )
        .await;
    }
    let listed = walked(&server, &server.owner, "/v1/tools").await;
    assert_eq!(
        field(&listed, "name"),
        ["add", "fetch", "lookup", "mail", "search"],
        "by name"
    );
}

async fn vault_items_and_rules_walk_once_in_order(server: Server) {
    let model = FakeOpenAi::start(Vec::new()).await;
    let made = bots(&server, &model, 4).await;
    let mut items = Vec::new();
    for n in 0..5 {
        let response = server
            .post("/v1/vault-items", &server.owner)
            .json(&json!({"name": format!("item {n}"), "fields": {"token": "v"}}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        items.push(response.json::<Value>().await.unwrap());
    }
    let listed = walked(&server, &server.owner, "/v1/vault-items").await;
    assert_eq!(field(&listed, "id"), field(&items, "id"), "oldest first");
    let item = items[0]["id"].as_str().unwrap();
    let mut rules = Vec::new();
    for bot in &made {
        let response = server
            .post(&format!("/v1/vault-items/{item}/rules"), &server.owner)
            .json(&json!({"field": "token", "reader": {"type": "bot", "bot_id": bot["id"]}}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        rules.push(response.json::<Value>().await.unwrap());
    }
    let listed = walked(
        &server,
        &server.owner,
        &format!("/v1/vault-items/{item}/rules"),
    )
    .await;
    assert_eq!(field(&listed, "id"), field(&rules, "id"), "oldest first");
}

async fn the_last_page_has_no_next_cursor(server: Server) {
    let model = FakeOpenAi::start(Vec::new()).await;
    bots(&server, &model, 2).await;
    let page: Value = server
        .get("/v1/bots?limit=2", &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert!(
        page.get("next_cursor").is_none(),
        "absent, not null: {page}"
    );
    let empty: Value = server
        .get("/v1/tools", &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(empty, json!({"items": []}));
}

async fn a_limit_outside_1_to_200_is_invalid_input_on_every_list(server: Server) {
    let model = FakeOpenAi::start(Vec::new()).await;
    let bot = &bots(&server, &model, 1).await[0];
    let chat = server.chat(&server.owner, bot).await;
    for route in routes(&chat) {
        for limit in ["0", "201", "-1", "many"] {
            let path = with_query(&route, &format!("limit={limit}"));
            let response = server.get(&path, &server.owner).send().await.unwrap();
            assert_eq!(
                error_code(response).await,
                (StatusCode::BAD_REQUEST, "invalid_input".to_string()),
                "{path}"
            );
        }
        let edge = with_query(&route, "limit=200");
        let response = server.get(&edge, &server.owner).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{edge}");
    }
}

async fn a_cursor_that_does_not_decode_is_invalid_input_on_every_list(server: Server) {
    let model = FakeOpenAi::start(Vec::new()).await;
    let bot = &bots(&server, &model, 1).await[0];
    let chat = server.chat(&server.owner, bot).await;
    // Not base64; base64 of `{}`, which is no list's position; base64 of text that is no JSON.
    for route in routes(&chat) {
        for cursor in ["not*a*cursor", "e30", "bm90IGpzb24"] {
            let path = with_query(&route, &format!("cursor={cursor}"));
            let response = server.get(&path, &server.owner).send().await.unwrap();
            let status = response.status();
            let body: Value = response.json().await.unwrap();
            assert_eq!(
                (status, body["code"].as_str().unwrap_or_default()),
                (StatusCode::BAD_REQUEST, "invalid_input"),
                "{path}: {body}"
            );
            assert!(
                body["message"].as_str().unwrap().contains("cursor"),
                "the message names the cursor: {body}"
            );
        }
    }
}

async fn rows_added_while_paging_never_shift_the_next_page(server: Server) {
    let model = FakeOpenAi::start(Vec::new()).await;
    let before = field(&bots(&server, &model, 3).await, "id");
    let first: Value = server
        .get("/v1/bots?limit=2", &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let added = field(&bots(&server, &model, 1).await, "id");
    let cursor = first["next_cursor"].as_str().unwrap();
    let rest = server
        .walk_from(&server.owner, "/v1/bots", 2, Some(cursor.into()))
        .await;
    let mut seen = field(first["items"].as_array().unwrap(), "id");
    seen.extend(field(&rest, "id"));
    let mut expected = before;
    expected.extend(added);
    assert_eq!(seen, expected, "each Bot once, the new one last");

    // Newest first: a token added meanwhile goes before the first page and is not on the next.
    for n in 0..3 {
        token(&server, &format!("t{n}")).await;
    }
    let whole = field(
        &server.items("/v1/tokens?limit=200", &server.owner).await,
        "id",
    );
    let first: Value = server
        .get("/v1/tokens?limit=2", &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let newer = token(&server, "newer").await;
    let cursor = first["next_cursor"].as_str().unwrap();
    let rest = server
        .walk_from(&server.owner, "/v1/tokens", 2, Some(cursor.into()))
        .await;
    let mut seen = field(first["items"].as_array().unwrap(), "id");
    seen.extend(field(&rest, "id"));
    assert_eq!(seen, whole, "the pages after the first hold what they held");
    assert!(!seen.contains(&newer));
}
