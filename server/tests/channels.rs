//! Channels end to end over the HTTP API, on SQLite and on a real PostgreSQL, against fakes
//! of Slack's and Telegram's APIs on 127.0.0.1 that speak their wire formats: Slack request
//! signatures checked against Slack's own `slack_sdk.signature.SignatureVerifier`, retried
//! events taken once, Telegram's secret token, replies as saved sends (a lost answer ends
//! `unknown` and is never sent again; a proven rate limit is sent again after Retry-After),
//! removal that closes admission at once and ends only after a pending send, and a SIGKILL of
//! the owner between receiving and answering (real `openbot serve` processes).

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/fake_platforms.rs"]
mod fake_platforms;
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

use api::{Server, error_code, postgres, server, sqlite};
use fake_openai::{Answer, FakeOpenAi};
use fake_platforms::{FakePlatform, Mode};
use front::Front;
use hmac::{Hmac, Mac};
use openbot_server::engine::Clock;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;

http_tests!(
    slack_signatures_are_accepted_and_refused_exactly_as_slack_sdk_does,
    a_slack_message_is_answered_once_in_its_thread_with_its_speaker,
    a_telegram_update_is_answered_and_a_wrong_secret_refused,
    a_send_whose_answer_is_lost_ends_unknown_and_is_not_sent_again,
    a_rate_limited_send_is_sent_again_after_retry_after_and_then_once,
    a_rejected_send_is_final_and_not_retried,
    removal_refuses_input_at_once_and_ends_only_after_the_pending_send,
    bad_channels_are_refused,
    channels_are_listed_in_pages_and_only_to_their_creator,
    a_token_limited_to_one_bot_reaches_only_that_bots_channels,
    the_cli_creates_lists_shows_and_removes_a_channel,
    concurrent_retries_of_one_event_give_one_input,
    input_is_refused_once_the_creator_token_is_revoked,
    a_linked_speaker_keeps_its_member_with_its_input,
    removal_waits_for_a_running_turn_and_its_reply,
    removal_waits_for_a_pending_send_whose_result_turns_out_unknown,
);

const SLACK_TOKEN: &str = "xoxb-test-token-1";
const TELEGRAM_TOKEN: &str = "123456:ABC-test_token";
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const SECRET_TOKEN: &str = "tg_secret-token_1";

async fn bot(s: &Server, model: &FakeOpenAi) -> Value {
    s.bot(&s.owner, model, false).await
}

async fn create(s: &Server, token: &str, body: Value) -> reqwest::Response {
    s.post("/v1/channels", token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn slack_channel(s: &Server, bot: &Value, fake: &FakePlatform) -> Value {
    let response = create(
        s,
        &s.owner,
        json!({"kind": "slack", "bot_id": bot["id"], "bot_token": SLACK_TOKEN,
               "signing_secret": SIGNING_SECRET, "api_base_url": format!("{}/api", fake.base)}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    response.json().await.unwrap()
}

async fn telegram_channel(s: &Server, bot: &Value, fake: &FakePlatform) -> Value {
    let response = create(
        s,
        &s.owner,
        json!({"kind": "telegram", "bot_id": bot["id"], "bot_token": TELEGRAM_TOKEN,
               "secret_token": SECRET_TOKEN, "api_base_url": fake.base}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    response.json().await.unwrap()
}

/// Slack's signature, computed here with HMAC-SHA256 as Slack documents it.
fn slack_signature(secret: &str, timestamp: &str, body: &str) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("v0={hex}")
}

fn now_seconds(s: &Server) -> i64 {
    s.clock.now_ms() / 1000
}

async fn post_slack(
    s: &Server,
    channel: &Value,
    headers: &[(&str, String)],
    body: &str,
) -> reqwest::Response {
    let mut request = s
        .http
        .post(format!(
            "{}{}",
            s.base,
            channel["webhook_path"].as_str().unwrap()
        ))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    request.send().await.unwrap()
}

/// Posts `body` signed now with the Channel's signing secret, as Slack does.
async fn slack_event(
    s: &Server,
    channel: &Value,
    body: &str,
    retry: Option<u32>,
) -> reqwest::Response {
    let ts = now_seconds(s).to_string();
    let mut headers = vec![
        ("x-slack-request-timestamp", ts.clone()),
        (
            "x-slack-signature",
            slack_signature(SIGNING_SECRET, &ts, body),
        ),
    ];
    if let Some(n) = retry {
        headers.push(("x-slack-retry-num", n.to_string()));
        headers.push(("x-slack-retry-reason", "http_timeout".into()));
    }
    post_slack(s, channel, &headers, body).await
}

fn slack_message(event_id: &str, text: &str, thread: Option<&str>) -> String {
    let mut event = json!({"type": "message", "channel": "C0123", "user": "U0ADA", "text": text,
                           "ts": "1700000001.000200", "channel_type": "channel",
                           "user_profile": {"display_name": "Ada", "real_name": "Ada L."}});
    if let Some(ts) = thread {
        event["thread_ts"] = json!(ts);
    }
    json!({"token": "legacy", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
           "event_id": event_id, "event_time": 1700000001, "event": event})
    .to_string()
}

async fn post_telegram(
    s: &Server,
    channel: &Value,
    secret: Option<&str>,
    body: &Value,
) -> reqwest::Response {
    let mut request = s
        .http
        .post(format!(
            "{}{}",
            s.base,
            channel["webhook_path"].as_str().unwrap()
        ))
        .json(body);
    if let Some(secret) = secret {
        request = request.header("x-telegram-bot-api-secret-token", secret);
    }
    request.send().await.unwrap()
}

fn telegram_update(update_id: i64, text: &str) -> Value {
    json!({"update_id": update_id, "message": {"message_id": 10, "date": 1700000000,
           "from": {"id": 4242, "is_bot": false, "first_name": "Grace", "username": "grace"},
           "chat": {"id": -1001, "type": "group", "title": "Ops"}, "text": text}})
}

async fn sends(s: &Server, channel: &Value) -> Vec<Value> {
    s.walk(
        &s.owner,
        &format!("/v1/channels/{}/sends", channel["id"].as_str().unwrap()),
        50,
    )
    .await
}

/// Waits (a bounded poll, not a timing) until `check` holds.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..600 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("never: {what}");
}

/// Waits until the Channel's newest input's send is in `state`; answers it.
async fn send_in(s: &Server, channel: &Value, state: &str) -> Value {
    for _ in 0..600 {
        if let Some(first) = sends(s, channel).await.first()
            && first["state"] == state
        {
            return first.clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("never: a send is {state}: {:#?}", sends(s, channel).await);
}

async fn channel_status(s: &Server, channel: &Value) -> String {
    let got: Value = s
        .get(
            &format!("/v1/channels/{}", channel["id"].as_str().unwrap()),
            &s.owner,
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    got["status"].as_str().unwrap().to_string()
}

/// The venv python with Slack's SDK (installed once by scripts/channels-deps).
fn slack_python() -> String {
    let script = format!(
        "{}/../scripts/channels-deps",
        std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR")
    );
    let out = std::process::Command::new(&script).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// slack_sdk's verdict on each case: `{secret, timestamp?, signature?, body, now}`.
fn slack_sdk_verdicts(cases: &[Value]) -> Vec<bool> {
    let program = r#"
import json, sys
from slack_sdk.signature import SignatureVerifier
class Fixed:
    def __init__(self, now): self._now = now
    def now(self): return self._now
out = []
for case in json.load(sys.stdin):
    verifier = SignatureVerifier(case["secret"], clock=Fixed(case["now"]))
    headers = {}
    if case.get("timestamp") is not None: headers["X-Slack-Request-Timestamp"] = case["timestamp"]
    if case.get("signature") is not None: headers["X-Slack-Signature"] = case["signature"]
    out.append(verifier.is_valid_request(case["body"], headers))
print(json.dumps(out))
"#;
    let mut child = std::process::Command::new(slack_python())
        .args(["-c", program])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(cases).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

/// slack_sdk's own signature of a request.
fn slack_sdk_signature(secret: &str, timestamp: &str, body: &str) -> String {
    let program = "import sys; from slack_sdk.signature import SignatureVerifier; print(SignatureVerifier(sys.argv[1]).generate_signature(timestamp=sys.argv[2], body=sys.argv[3]))";
    let out = std::process::Command::new(slack_python())
        .args(["-c", program, secret, timestamp, body])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

async fn slack_signatures_are_accepted_and_refused_exactly_as_slack_sdk_does(s: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let fake = FakePlatform::start(SLACK_TOKEN).await;
    let bot = bot(&s, &model).await;
    let channel = slack_channel(&s, &bot, &fake).await;
    let now = now_seconds(&s);
    let body = r#"{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let ts = now.to_string();
    let good = slack_sdk_signature(SIGNING_SECRET, &ts, body);
    assert_eq!(good, slack_signature(SIGNING_SECRET, &ts, body));
    let sign_at = |at: i64| {
        (
            at.to_string(),
            slack_sdk_signature(SIGNING_SECRET, &at.to_string(), body),
        )
    };
    // Inside the 5 minutes with room to spare: the route checks it on the real clock, later.
    let (recent, recent_sig) = sign_at(now - 240);
    let (stale, stale_sig) = sign_at(now - 400);
    let (future, future_sig) = sign_at(now + 400);
    let wrong = slack_sdk_signature("another-signing-secret", &ts, body);
    let tampered = body.replace("url_verification", "url_verificatiom");
    let case = |name: &str, timestamp: Option<&str>, signature: Option<&str>, body: &str| {
        json!({"name": name, "secret": SIGNING_SECRET, "timestamp": timestamp,
               "signature": signature, "body": body, "now": now})
    };
    let cases = vec![
        case("valid", Some(&ts), Some(&good), body),
        case(
            "valid, signed 240 s ago",
            Some(&recent),
            Some(&recent_sig),
            body,
        ),
        case("wrong secret", Some(&ts), Some(&wrong), body),
        case("tampered body", Some(&ts), Some(&good), &tampered),
        case("stale timestamp", Some(&stale), Some(&stale_sig), body),
        case(
            "timestamp in the future",
            Some(&future),
            Some(&future_sig),
            body,
        ),
        case("no timestamp", None, Some(&good), body),
        case("no signature", Some(&ts), None, body),
        case(
            "v1 prefix",
            Some(&ts),
            Some(&good.replace("v0=", "v1=")),
            body,
        ),
        case(
            "upper-case hex",
            Some(&ts),
            Some(&good.to_uppercase().replace("V0=", "v0=")),
            body,
        ),
    ];
    let verdicts = slack_sdk_verdicts(&cases);
    assert_eq!(verdicts.iter().filter(|v| **v).count(), 2, "{verdicts:?}");
    for (case, expected) in cases.iter().zip(&verdicts) {
        // Ours, as a function, on the same clock.
        let ours = openbot_server::channels::slack::verify(
            SIGNING_SECRET,
            case["timestamp"].as_str(),
            case["signature"].as_str(),
            case["body"].as_str().unwrap().as_bytes(),
            now * 1000,
        );
        assert_eq!(ours.is_ok(), *expected, "{}: {ours:?}", case["name"]);
        // And over HTTP: the route accepts exactly what slack_sdk accepts.
        let mut headers = Vec::new();
        if let Some(ts) = case["timestamp"].as_str() {
            headers.push(("x-slack-request-timestamp", ts.to_string()));
        }
        if let Some(sig) = case["signature"].as_str() {
            headers.push(("x-slack-signature", sig.to_string()));
        }
        let response = post_slack(&s, &channel, &headers, case["body"].as_str().unwrap()).await;
        let status = response.status();
        if *expected {
            assert_eq!(status, StatusCode::OK, "{}", case["name"]);
            let answer: Value = response.json().await.unwrap();
            assert_eq!(
                answer["challenge"],
                "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
            );
        } else {
            assert!(
                status == StatusCode::UNAUTHORIZED || status == StatusCode::BAD_REQUEST,
                "{}: {status}",
                case["name"]
            );
            let text = response.text().await.unwrap();
            assert!(
                !text.contains(SIGNING_SECRET) && !text.contains(&good[3..]),
                "{text}"
            );
        }
    }
    assert!(sends(&s, &channel).await.is_empty());
}

async fn a_slack_message_is_answered_once_in_its_thread_with_its_speaker(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Hello ", "Ada."])]).await;
    let fake = FakePlatform::start(SLACK_TOKEN).await;
    let bot = bot(&s, &model).await;
    let channel = slack_channel(&s, &bot, &fake).await;
    assert_eq!(channel["status"], "active");
    assert!(channel.get("bot_token").is_none() && !channel.to_string().contains(SLACK_TOKEN));
    let body = slack_message("Ev0001", "hi bot", Some("1700000000.000100"));
    let first = slack_event(&s, &channel, &body, None).await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.json::<Value>().await.unwrap()["repeated"], false);
    // Slack retries the same event (it did not see our answer in time): taken once.
    for n in 1..=3 {
        let again = slack_event(&s, &channel, &body, Some(n)).await;
        assert_eq!(again.status(), StatusCode::OK);
        assert_eq!(again.json::<Value>().await.unwrap()["repeated"], true);
    }
    let sent = send_in(&s, &channel, "sent").await;
    assert_eq!(fake.count(), 1);
    let seen = &fake.seen()[0];
    assert_eq!(seen.path, "/api/chat.postMessage");
    assert_eq!(
        seen.authorization.as_deref(),
        Some(&*format!("Bearer {SLACK_TOKEN}"))
    );
    assert_eq!(
        seen.body,
        json!({"channel": "C0123", "text": "Hello Ada.", "thread_ts": "1700000000.000100"})
    );
    assert_eq!(sent["platform_message_id"], "1700000000.000001");
    assert_eq!(
        sent["speaker"],
        json!({"platform": "slack", "user_id": "U0ADA", "display_name": "Ada"})
    );
    assert_eq!(sent["event_id"], "Ev0001");
    assert_eq!(sent["conversation"], "C0123:1700000000.000100");
    assert_eq!(sent["attempts"], 1);
    let chat = sent["chat_id"].as_str().unwrap();
    assert_eq!(
        s.history(&s.owner, chat).await,
        vec!["hi bot".to_string(), "Hello Ada.".to_string()]
    );
    assert_eq!(model.total_requests(), 1);
    assert_eq!(sends(&s, &channel).await.len(), 1);
    // A second message in the same thread reaches the same Chat; a bot's own message and an
    // edit are answered 200 and dropped.
    let next = slack_message("Ev0002", "and again", Some("1700000000.000100"));
    assert_eq!(
        slack_event(&s, &channel, &next, None).await.status(),
        StatusCode::OK
    );
    let own = json!({"type": "event_callback", "event_id": "Ev0003",
                     "event": {"type": "message", "channel": "C0123", "bot_id": "B1", "text": "Hello Ada."}})
    .to_string();
    let ignored = slack_event(&s, &channel, &own, None).await;
    assert_eq!(ignored.json::<Value>().await.unwrap()["ignored"], true);
    eventually("the second reply is sent", || async { fake.count() == 2 }).await;
    let all = sends(&s, &channel).await;
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["chat_id"], all[1]["chat_id"]);
    // No log line holds the bot token or the signing secret.
    let logs = String::from_utf8_lossy(&api::logs().lock().unwrap()).to_string();
    assert!(!logs.contains(SLACK_TOKEN) && !logs.contains(SIGNING_SECRET));
}

async fn a_telegram_update_is_answered_and_a_wrong_secret_refused(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Hi Grace."])]).await;
    let fake = FakePlatform::start(TELEGRAM_TOKEN).await;
    let bot = bot(&s, &model).await;
    let channel = telegram_channel(&s, &bot, &fake).await;
    assert_eq!(
        channel["webhook_path"],
        format!("/v1/channels/{}/telegram", channel["id"].as_str().unwrap())
    );
    let update = telegram_update(900001, "status?");
    let wrong = post_telegram(&s, &channel, Some("not-the-secret"), &update).await;
    assert_eq!(
        error_code(wrong).await,
        (StatusCode::UNAUTHORIZED, "unauthorized".into())
    );
    let missing = post_telegram(&s, &channel, None, &update).await;
    assert_eq!(error_code(missing).await.0, StatusCode::BAD_REQUEST);
    // The Slack route of a Telegram Channel does not exist.
    let other = s
        .http
        .post(format!(
            "{}/v1/channels/{}/slack/events",
            s.base,
            channel["id"].as_str().unwrap()
        ))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
    assert!(sends(&s, &channel).await.is_empty());
    let taken = post_telegram(&s, &channel, Some(SECRET_TOKEN), &update).await;
    assert_eq!(taken.status(), StatusCode::OK);
    let again = post_telegram(&s, &channel, Some(SECRET_TOKEN), &update).await;
    assert_eq!(again.json::<Value>().await.unwrap()["repeated"], true);
    let sent = send_in(&s, &channel, "sent").await;
    assert_eq!(fake.count(), 1);
    let seen = &fake.seen()[0];
    assert_eq!(seen.path, format!("/bot{TELEGRAM_TOKEN}/sendMessage"));
    assert_eq!(seen.body, json!({"chat_id": "-1001", "text": "Hi Grace."}));
    assert_eq!(
        sent["speaker"],
        json!({"platform": "telegram", "user_id": "4242", "display_name": "Grace"})
    );
    assert_eq!(sent["event_id"], "900001");
    assert_eq!(sent["platform_message_id"], "1");
    assert_eq!(model.total_requests(), 1);
}

async fn a_send_whose_answer_is_lost_ends_unknown_and_is_not_sent_again(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["On it."])]).await;
    let fake = FakePlatform::start(TELEGRAM_TOKEN).await;
    fake.then(&[Mode::Lose]);
    let bot = bot(&s, &model).await;
    let channel = telegram_channel(&s, &bot, &fake).await;
    let taken = post_telegram(
        &s,
        &channel,
        Some(SECRET_TOKEN),
        &telegram_update(5, "deploy"),
    )
    .await;
    assert_eq!(taken.status(), StatusCode::OK);
    let unknown = send_in(&s, &channel, "unknown").await;
    assert_eq!(unknown["attempts"], 1);
    let error = unknown["error"].as_str().unwrap();
    assert!(
        !error.contains(TELEGRAM_TOKEN) && !error.contains("http"),
        "{error}"
    );
    // Its delivery ended: later timers find nothing to send again.
    s.clock.advance(Duration::from_secs(3600));
    eventually("no work runs", || async { s.engine.running().await == 0 }).await;
    assert_eq!(
        fake.count(),
        1,
        "the fake read one request: it is never sent again"
    );
    assert_eq!(sends(&s, &channel).await[0]["state"], "unknown");
    let logs = String::from_utf8_lossy(&api::logs().lock().unwrap()).to_string();
    assert!(!logs.contains(TELEGRAM_TOKEN), "the token is in the log");
    // Its one saved call ends `unknown`, with no result.
    let event = sends(&s, &channel).await[0]["event_id"]
        .as_str()
        .unwrap()
        .to_string();
    let calls = delivery_calls(&s, &channel, &event).await;
    let log: Vec<_> = calls.iter().map(|c| (c.key.attempt, c.phase)).collect();
    assert_eq!(log, [(1, openbot_server::store::CallPhase::Unknown)]);
}

async fn a_rate_limited_send_is_sent_again_after_retry_after_and_then_once(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Later."])]).await;
    let fake = FakePlatform::start(SLACK_TOKEN).await;
    fake.then(&[Mode::RateLimit(30)]);
    let bot = bot(&s, &model).await;
    let channel = slack_channel(&s, &bot, &fake).await;
    let body = slack_message("Ev-rl", "hello", None);
    assert_eq!(
        slack_event(&s, &channel, &body, None).await.status(),
        StatusCode::OK
    );
    eventually("the rate limit was answered", || async {
        let all = sends(&s, &channel).await;
        all.first()
            .is_some_and(|f| f["error"] == "ratelimited" && f["state"] == "pending")
    })
    .await;
    // It waits on a durable timer for Retry-After: nothing more until the clock gets there.
    s.clock.advance(Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(fake.count(), 1);
    s.clock.advance(Duration::from_secs(21));
    let sent = send_in(&s, &channel, "sent").await;
    assert_eq!(sent["attempts"], 2);
    assert_eq!(fake.count(), 2);
    let seen = fake.seen();
    assert_eq!(seen[0].body, seen[1].body);
    assert_eq!(seen[1].body, json!({"channel": "C0123", "text": "Later."}));
    // Each request is one saved call of the delivery (saved `sending` before it left), which
    // ends with its result: one attempt after the other.
    let calls = delivery_calls(&s, &channel, "Ev-rl").await;
    let log: Vec<_> = calls
        .iter()
        .map(|c| (c.key.attempt, c.phase, c.result_record.is_some(), c.late))
        .collect();
    use openbot_server::store::CallPhase::Done;
    assert_eq!(log, [(1, Done, true, false), (2, Done, true, false)]);
}

/// The call log of the delivery of the Channel's input `event`.
async fn delivery_calls(
    s: &Server,
    channel: &Value,
    event: &str,
) -> Vec<openbot_server::store::CallRow> {
    let channel_id: uuid::Uuid = channel["id"].as_str().unwrap().parse().unwrap();
    let row = s
        .database
        .channels
        .channel(channel_id)
        .await
        .unwrap()
        .unwrap();
    let scope = openbot_server::channels::channels_service(row.organization_id).scope();
    let key = format!("channel-input:{channel_id}:{event}");
    let delivery = s
        .engine
        .context()
        .store
        .command_key(&scope, &key)
        .await
        .unwrap()
        .expect("the delivery's command key");
    s.engine
        .context()
        .store
        .calls(delivery.execution_id)
        .await
        .unwrap()
}

async fn a_rejected_send_is_final_and_not_retried(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Hi."])]).await;
    let fake = FakePlatform::start(SLACK_TOKEN).await;
    fake.then(&[Mode::Refuse]);
    let bot = bot(&s, &model).await;
    let channel = slack_channel(&s, &bot, &fake).await;
    let body = slack_message("Ev-refused", "hello", None);
    assert_eq!(
        slack_event(&s, &channel, &body, None).await.status(),
        StatusCode::OK
    );
    let rejected = send_in(&s, &channel, "rejected").await;
    assert_eq!(rejected["error"], "channel_not_found");
    s.clock.advance(Duration::from_secs(3600));
    eventually("no work runs", || async { s.engine.running().await == 0 }).await;
    assert_eq!(fake.count(), 1);
}

async fn removal_refuses_input_at_once_and_ends_only_after_the_pending_send(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Bye."])]).await;
    let fake = FakePlatform::start(SLACK_TOKEN).await;
    fake.then(&[Mode::Hold]);
    let bot = bot(&s, &model).await;
    let channel = slack_channel(&s, &bot, &fake).await;
    let id = channel["id"].as_str().unwrap();
    let body = slack_message("Ev-rm", "last words", None);
    assert_eq!(
        slack_event(&s, &channel, &body, None).await.status(),
        StatusCode::OK
    );
    eventually("the send is on its way", || async { fake.count() == 1 }).await;
    let deleted = s
        .delete(&format!("/v1/channels/{id}"), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::ACCEPTED);
    assert_eq!(deleted.json::<Value>().await.unwrap()["status"], "removing");
    // Admission closed at once: a new event and a retry of the first are refused.
    let late = slack_event(
        &s,
        &channel,
        &slack_message("Ev-late", "one more", None),
        None,
    )
    .await;
    assert_eq!(
        error_code(late).await,
        (StatusCode::CONFLICT, "conflict".into())
    );
    let retry = slack_event(&s, &channel, &body, Some(1)).await;
    assert_eq!(error_code(retry).await.0, StatusCode::CONFLICT);
    // The removal looks again (its timer) while the send is pending: it stays removing.
    s.clock.advance(Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(channel_status(&s, &channel).await, "removing");
    assert_eq!(sends(&s, &channel).await[0]["state"], "pending");
    // A second delete answers the Channel as it is.
    let twice = s
        .delete(&format!("/v1/channels/{id}"), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(twice.json::<Value>().await.unwrap()["status"], "removing");
    fake.release();
    send_in(&s, &channel, "sent").await;
    eventually("the channel is removed", || async {
        channel_status(&s, &channel).await == "removed"
    })
    .await;
    assert_eq!(fake.count(), 1);
    assert_eq!(sends(&s, &channel).await.len(), 1);
    let after = slack_event(
        &s,
        &channel,
        &slack_message("Ev-after", "hello?", None),
        None,
    )
    .await;
    assert_eq!(error_code(after).await.0, StatusCode::CONFLICT);
}

async fn bad_channels_are_refused(s: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let fake = FakePlatform::start(SLACK_TOKEN).await;
    let bot = bot(&s, &model).await;
    let base = format!("{}/api", fake.base);
    let cases = [
        json!({"kind": "slack", "bot_id": bot["id"], "bot_token": SLACK_TOKEN, "api_base_url": base}),
        json!({"kind": "slack", "bot_id": bot["id"], "bot_token": SLACK_TOKEN, "signing_secret": "s", "secret_token": "t", "api_base_url": base}),
        json!({"kind": "telegram", "bot_id": bot["id"], "bot_token": TELEGRAM_TOKEN, "api_base_url": fake.base}),
        json!({"kind": "telegram", "bot_id": bot["id"], "bot_token": TELEGRAM_TOKEN, "secret_token": "has spaces", "api_base_url": fake.base}),
        json!({"kind": "telegram", "bot_id": bot["id"], "bot_token": "12/../x", "secret_token": "ok", "api_base_url": fake.base}),
        json!({"kind": "slack", "bot_id": bot["id"], "bot_token": "", "signing_secret": "s", "api_base_url": base}),
        // Not https, and not this machine.
        json!({"kind": "slack", "bot_id": bot["id"], "bot_token": SLACK_TOKEN, "signing_secret": "s", "api_base_url": "http://example.com/api"}),
        // An internal address the outbound policy denies.
        json!({"kind": "slack", "bot_id": bot["id"], "bot_token": SLACK_TOKEN, "signing_secret": "s", "api_base_url": "https://169.254.169.254/api"}),
        json!({"kind": "slack", "bot_id": bot["id"], "bot_token": SLACK_TOKEN, "signing_secret": "s", "api_base_url": "ftp://slack.com/api"}),
    ];
    for case in cases {
        let response = create(&s, &s.owner, case.clone()).await;
        assert_eq!(
            error_code(response).await,
            (StatusCode::BAD_REQUEST, "invalid_input".into()),
            "{case}"
        );
    }
    let unknown_bot = create(&s, &s.owner, json!({"kind": "slack", "bot_id": uuid::Uuid::now_v7(), "bot_token": SLACK_TOKEN, "signing_secret": "s"})).await;
    assert_eq!(error_code(unknown_bot).await.0, StatusCode::NOT_FOUND);
    let reader = s.token_with(json!([{"resource": "chats", "action": "read"}, {"resource": "bots", "action": "read"}])).await;
    let forbidden = create(&s, &reader, json!({"kind": "slack", "bot_id": bot["id"], "bot_token": SLACK_TOKEN, "signing_secret": "s", "api_base_url": base})).await;
    assert_eq!(error_code(forbidden).await.0, StatusCode::FORBIDDEN);
    let no_token = s
        .http
        .post(format!("{}/v1/channels", s.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_token.status(), StatusCode::UNAUTHORIZED);
    let unknown = s
        .http
        .post(format!(
            "{}/v1/channels/{}/slack/events",
            s.base,
            uuid::Uuid::now_v7()
        ))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    let unknown_field = create(&s, &s.owner, json!({"kind": "slack", "bot_id": bot["id"], "bot_token": SLACK_TOKEN, "signing_secret": "s", "extra": 1})).await;
    assert_eq!(error_code(unknown_field).await.0, StatusCode::BAD_REQUEST);
    // The default base URL is the platform's.
    let default = create(&s, &s.owner, json!({"kind": "telegram", "bot_id": bot["id"], "bot_token": TELEGRAM_TOKEN, "secret_token": SECRET_TOKEN})).await;
    assert_eq!(default.status(), StatusCode::CREATED);
    assert_eq!(
        default.json::<Value>().await.unwrap()["api_base_url"],
        "https://api.telegram.org"
    );
}

/// A token limited to Bot A neither lists, reads, deletes nor reads the sends of Bot B's
/// Channel, though the same member made both.
async fn a_token_limited_to_one_bot_reaches_only_that_bots_channels(s: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let fake = FakePlatform::start(SLACK_TOKEN).await;
    let a = bot(&s, &model).await;
    let b = bot(&s, &model).await;
    let mine = slack_channel(&s, &a, &fake).await["id"].clone();
    let other = slack_channel(&s, &b, &fake).await["id"].clone();
    let limited = s.bot_limited_token(&a).await;
    let listed: Vec<Value> = s
        .walk(&limited, "/v1/channels", 10)
        .await
        .into_iter()
        .map(|c| c["id"].clone())
        .collect();
    assert_eq!(listed, std::slice::from_ref(&mine));
    let other = other.as_str().unwrap();
    for path in [
        format!("/v1/channels/{other}"),
        format!("/v1/channels/{other}/sends"),
    ] {
        let hidden = s.get(&path, &limited).send().await.unwrap();
        assert_eq!(hidden.status(), StatusCode::NOT_FOUND, "{path}");
    }
    let delete = s
        .delete(&format!("/v1/channels/{other}"), &limited)
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), StatusCode::NOT_FOUND);
    let still = s
        .get(&format!("/v1/channels/{other}"), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(still.json::<Value>().await.unwrap()["status"], "active");
    let own = s
        .get(
            &format!("/v1/channels/{}", mine.as_str().unwrap()),
            &limited,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), StatusCode::OK);
}

async fn channels_are_listed_in_pages_and_only_to_their_creator(s: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let fake = FakePlatform::start(SLACK_TOKEN).await;
    let bot = bot(&s, &model).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(slack_channel(&s, &bot, &fake).await["id"].clone());
    }
    let listed: Vec<Value> = s
        .walk(&s.owner, "/v1/channels", 2)
        .await
        .into_iter()
        .map(|c| c["id"].clone())
        .collect();
    assert_eq!(listed, ids);
    let other = s.other_member_token().await;
    assert!(s.walk(&other, "/v1/channels", 2).await.is_empty());
    let id = ids[0].as_str().unwrap();
    let hidden = s
        .get(&format!("/v1/channels/{id}"), &other)
        .send()
        .await
        .unwrap();
    assert_eq!(hidden.status(), StatusCode::NOT_FOUND);
    let not_theirs = s
        .delete(&format!("/v1/channels/{id}"), &other)
        .send()
        .await
        .unwrap();
    assert_eq!(not_theirs.status(), StatusCode::NOT_FOUND);
    let sends = s
        .get(&format!("/v1/channels/{id}/sends"), &other)
        .send()
        .await
        .unwrap();
    assert_eq!(sends.status(), StatusCode::NOT_FOUND);
    let bad_page = s
        .get("/v1/channels?limit=0", &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(bad_page.status(), StatusCode::BAD_REQUEST);
}

/// Two real `openbot serve` nodes on one PostgreSQL run the work an HTTP front (no runner of
/// its own) takes in. The owner of the Turn is killed (SIGKILL) after the input was taken and
/// before the Bot answered; the other node takes over: the input is kept once (a Slack retry
/// while the owner is down adds nothing) and the reply is sent exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_between_receiving_and_answering_keeps_the_input_once_and_replies_once() {
    let front = Front::new().await;
    let s = &front.server;
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Recovered."])]).await;
    // The first owner's model request never answers: it is killed while it waits.
    model.delay_first(0, Duration::from_secs(600));
    let fake = FakePlatform::start(SLACK_TOKEN).await;
    let bot = bot(s, &model).await;
    let channel = slack_channel(s, &bot, &fake).await;
    let mut owner = front.node("channels-killed", 1000);
    let body = slack_message("Ev-kill", "are you there?", None);
    assert_eq!(
        slack_event(s, &channel, &body, None).await.status(),
        StatusCode::OK
    );
    eventually("the Turn asked the model", || async {
        model.total_requests() == 1
    })
    .await;
    owner.kill();
    let retry = slack_event(s, &channel, &body, Some(1)).await;
    assert_eq!(retry.json::<Value>().await.unwrap()["repeated"], true);
    let _taker = front.node("channels-taker", 1000);
    let sent = send_in(s, &channel, "sent").await;
    assert_eq!(sent["attempts"], 1);
    assert_eq!(fake.count(), 1, "the reply is sent exactly once");
    assert_eq!(model.total_requests(), 2, "the taker asked the model again");
    assert_eq!(
        fake.seen()[0].body,
        json!({"channel": "C0123", "text": "Recovered."})
    );
    assert_eq!(sends(s, &channel).await.len(), 1);
    let chat = sent["chat_id"].as_str().unwrap();
    assert_eq!(
        s.history(&s.owner, chat).await,
        vec!["are you there?".to_string(), "Recovered.".to_string()]
    );
}

fn cli(s: &Server, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let config = tempfile::tempdir().unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_openbot"))
        .args(args)
        .args(["--server", &s.base, "--token", &s.owner])
        .env("OPENBOT_CONFIG_DIR", config.path())
        .env_remove("OPENBOT_SERVER")
        .env_remove("OPENBOT_TOKEN")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

async fn the_cli_creates_lists_shows_and_removes_a_channel(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Hi from the CLI."])]).await;
    let fake = FakePlatform::start(TELEGRAM_TOKEN).await;
    let bot = bot(&s, &model).await;
    let bot_id = bot["id"].as_str().unwrap().to_string();
    let base = fake.base.clone();
    let (s, made) = tokio::task::spawn_blocking(move || {
        let made = cli(
            &s,
            &[
                "channels",
                "create",
                "--kind",
                "telegram",
                "--bot",
                &bot_id,
                "--api-base-url",
                &base,
                "--json",
            ],
            &[
                ("OPENBOT_CHANNEL_BOT_TOKEN", TELEGRAM_TOKEN),
                ("OPENBOT_CHANNEL_SECRET", SECRET_TOKEN),
            ],
        );
        (s, made)
    })
    .await
    .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let channel: Value = serde_json::from_slice(&made.stdout).unwrap();
    assert_eq!(channel["kind"], "telegram");
    let id = channel["id"].as_str().unwrap().to_string();
    // Without the secret's variable nothing is created.
    let missing = cli(
        &s,
        &["channels", "create", "--kind", "slack", "--bot", &id],
        &[],
    );
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("OPENBOT_CHANNEL_BOT_TOKEN"));
    let taken = post_telegram(
        &s,
        &channel,
        Some(SECRET_TOKEN),
        &telegram_update(77, "ping"),
    )
    .await;
    assert_eq!(taken.status(), StatusCode::OK);
    send_in(&s, &channel, "sent").await;
    let listed = cli(&s, &["channels", "list"], &[]);
    let text = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(text.contains(&id) && text.contains("active"), "{text}");
    assert!(!text.contains(TELEGRAM_TOKEN) && !text.contains(SECRET_TOKEN));
    let sent = cli(&s, &["channels", "sends", &id], &[]);
    let text = String::from_utf8_lossy(&sent.stdout).to_string();
    assert!(
        text.contains("event 77") && text.contains("from 4242 (Grace)") && text.contains("sent"),
        "{text}"
    );
    let removed = cli(&s, &["channels", "delete", &id, "--json"], &[]);
    let removed: Value = serde_json::from_slice(&removed.stdout).unwrap();
    assert!(removed["status"] == "removing" || removed["status"] == "removed");
    eventually("the channel is removed", || async {
        channel_status(&s, &channel).await == "removed"
    })
    .await;
    let shown = cli(&s, &["channels", "show", &id], &[]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("removed"));
}

async fn concurrent_retries_of_one_event_give_one_input(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Once."])]).await;
    let fake = FakePlatform::start(SLACK_TOKEN).await;
    let bot = bot(&s, &model).await;
    let channel = slack_channel(&s, &bot, &fake).await;
    let body = slack_message("Ev-race", "at once", None);
    let answers = futures::future::join_all(
        (0..6).map(|n| slack_event(&s, &channel, &body, (n > 0).then_some(n))),
    )
    .await;
    let mut taken = 0;
    for answer in answers {
        assert_eq!(answer.status(), StatusCode::OK);
        if answer.json::<Value>().await.unwrap()["repeated"] == false {
            taken += 1;
        }
    }
    assert_eq!(taken, 1, "one request took the event");
    send_in(&s, &channel, "sent").await;
    assert_eq!(sends(&s, &channel).await.len(), 1);
    assert_eq!(fake.count(), 1);
    assert_eq!(model.total_requests(), 1);
}

async fn input_is_refused_once_the_creator_token_is_revoked(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["never"])]).await;
    let fake = FakePlatform::start(TELEGRAM_TOKEN).await;
    let bot = bot(&s, &model).await;
    let response = s
        .post("/v1/tokens", &s.owner)
        .json(&json!({"name": "channel maker", "rights": openbot_server::identity::Right::all()}))
        .send()
        .await
        .unwrap();
    let created: Value = response.json().await.unwrap();
    let token = created["secret"].as_str().unwrap().to_string();
    let made = create(
        &s,
        &token,
        json!({"kind": "telegram", "bot_id": bot["id"], "bot_token": TELEGRAM_TOKEN,
               "secret_token": SECRET_TOKEN, "api_base_url": fake.base}),
    )
    .await;
    assert_eq!(made.status(), StatusCode::CREATED);
    let channel: Value = made.json().await.unwrap();
    let revoked = s
        .delete(
            &format!("/v1/tokens/{}", created["token"]["id"].as_str().unwrap()),
            &s.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::NO_CONTENT);
    let taken = post_telegram(
        &s,
        &channel,
        Some(SECRET_TOKEN),
        &telegram_update(1, "hello"),
    )
    .await;
    assert_eq!(taken.status(), StatusCode::OK);
    let refused = send_in(&s, &channel, "refused").await;
    assert!(refused["turn_id"].is_null());
    assert!(!refused["error"].as_str().unwrap().is_empty());
    assert_eq!(model.total_requests(), 0);
    assert_eq!(fake.count(), 0);
}

async fn a_linked_speaker_keeps_its_member_with_its_input(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Hi."])]).await;
    let fake = FakePlatform::start(TELEGRAM_TOKEN).await;
    let bot = bot(&s, &model).await;
    let channel = telegram_channel(&s, &bot, &fake).await;
    let id = channel["id"].as_str().unwrap();
    let member = s.owner_member().await.member_id;
    let link = |user: &str, member: serde_json::Value| {
        s.http
            .put(format!("{}/v1/channels/{id}/speakers/{user}", s.base))
            .bearer_auth(&s.owner)
            .json(&json!({"member_id": member}))
            .send()
    };
    let linked = link("4242", json!(member)).await.unwrap();
    assert_eq!(linked.status(), StatusCode::OK);
    assert_eq!(
        linked.json::<Value>().await.unwrap()["member_id"],
        json!(member)
    );
    // A member of no organization of the Channel, and a malformed user ID, are refused.
    let stranger = link("4242", json!(uuid::Uuid::now_v7())).await.unwrap();
    assert_eq!(stranger.status(), StatusCode::NOT_FOUND);
    let bad = link("a%20b", json!(member)).await.unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    post_telegram(
        &s,
        &channel,
        Some(SECRET_TOKEN),
        &telegram_update(1, "hello"),
    )
    .await;
    let first = send_in(&s, &channel, "sent").await;
    assert_eq!(first["speaker"]["member_id"], json!(member));
    let unlinked = s
        .delete(&format!("/v1/channels/{id}/speakers/4242"), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(unlinked.status(), StatusCode::NO_CONTENT);
    post_telegram(
        &s,
        &channel,
        Some(SECRET_TOKEN),
        &telegram_update(2, "again"),
    )
    .await;
    eventually("the second reply is sent", || async { fake.count() == 2 }).await;
    let all = sends(&s, &channel).await;
    assert!(all[0]["speaker"].get("member_id").is_none(), "{:#}", all[0]);
    assert_eq!(
        all[1]["speaker"]["member_id"],
        json!(member),
        "an earlier input keeps its link"
    );
}

async fn removal_waits_for_a_running_turn_and_its_reply(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Done thinking."])]).await;
    // The Turn runs while the Channel is deleted.
    model.delay(0, Duration::from_millis(1500));
    let fake = FakePlatform::start(TELEGRAM_TOKEN).await;
    let bot = bot(&s, &model).await;
    let channel = telegram_channel(&s, &bot, &fake).await;
    let id = channel["id"].as_str().unwrap();
    post_telegram(
        &s,
        &channel,
        Some(SECRET_TOKEN),
        &telegram_update(3, "think"),
    )
    .await;
    eventually("the Turn asked the model", || async {
        model.total_requests() == 1
    })
    .await;
    let deleted = s
        .delete(&format!("/v1/channels/{id}"), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.json::<Value>().await.unwrap()["status"], "removing");
    s.clock.advance(Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        channel_status(&s, &channel).await,
        "removing",
        "the Turn still runs"
    );
    assert_eq!(fake.count(), 0);
    // The admitted input is still answered, once, and then the removal ends.
    send_in(&s, &channel, "sent").await;
    eventually("the channel is removed", || async {
        channel_status(&s, &channel).await == "removed"
    })
    .await;
    assert_eq!(fake.count(), 1);
}

async fn removal_waits_for_a_pending_send_whose_result_turns_out_unknown(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Maybe."])]).await;
    let fake = FakePlatform::start(SLACK_TOKEN).await;
    fake.then(&[Mode::HoldLose]);
    let bot = bot(&s, &model).await;
    let channel = slack_channel(&s, &bot, &fake).await;
    let id = channel["id"].as_str().unwrap();
    let body = slack_message("Ev-unknown", "are you sure?", None);
    assert_eq!(
        slack_event(&s, &channel, &body, None).await.status(),
        StatusCode::OK
    );
    eventually("the send is on its way", || async { fake.count() == 1 }).await;
    s.delete(&format!("/v1/channels/{id}"), &s.owner)
        .send()
        .await
        .unwrap();
    s.clock.advance(Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(channel_status(&s, &channel).await, "removing");
    fake.release();
    send_in(&s, &channel, "unknown").await;
    eventually("the channel is removed", || async {
        channel_status(&s, &channel).await == "removed"
    })
    .await;
    assert_eq!(
        fake.count(),
        1,
        "an unknown result is recorded, never sent again"
    );
}
