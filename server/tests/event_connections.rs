//! Event readers served outside hyper (`http/lean.rs`), over raw HTTP/1.1 on 127.0.0.1 against
//! the node's own server loop, on SQLite and on a real PostgreSQL: the framing a client reads,
//! keep-alive into the next request (another events request, or any other route, which hyper
//! then serves), and the router's rules unchanged (no token, no answer).

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/pg.rs"]
mod pg;
#[macro_use]
#[path = "support/api.rs"]
mod api;

use std::time::Duration;

use fake_openai::{Answer, FakeOpenAi};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use api::{Server, logs, postgres, receipt, server, sqlite};

http_tests!(
    an_sse_reader_gets_every_event_chunked_and_its_connection_then_serves_another_route,
    two_long_polls_share_one_connection_each_answered_with_its_length,
    an_events_request_without_a_token_is_refused_as_on_any_connection,
    a_reader_that_asks_to_close_gets_its_answer_and_then_the_close,
    a_long_poll_that_waits_is_answered_when_the_next_event_is_committed,
    more_long_polls_at_once_than_are_routed_at_once_are_all_answered,
);

/// An ended one-step text Turn: its execution's ID.
async fn ended_turn(server: &Server) -> String {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hello ", "there"])]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "hi", None).await).await;
    let id = sent["execution_id"].as_str().unwrap().to_string();
    server.finish(&server.owner, &id).await;
    id
}

async fn connect(server: &Server) -> TcpStream {
    TcpStream::connect(server.base.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// One answer read off `stream`: its status, its header fields (names in lower case) and its
/// body, de-chunked.
async fn read_answer(stream: &mut TcpStream) -> (u16, Vec<(String, String)>, String) {
    let mut bytes = Vec::new();
    let head_end = loop {
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        read_more(stream, &mut bytes).await;
    };
    let head = String::from_utf8(bytes[..head_end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let fields: Vec<(String, String)> = lines
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (name, value) = line.split_once(':').unwrap();
            (name.to_ascii_lowercase(), value.trim().to_string())
        })
        .collect();
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let mut rest = bytes[head_end..].to_vec();
    let body = if let Some(length) = field("content-length") {
        let length: usize = length.parse().unwrap();
        while rest.len() < length {
            read_more(stream, &mut rest).await;
        }
        assert_eq!(rest.len(), length, "nothing after the body");
        String::from_utf8(rest).unwrap()
    } else {
        assert_eq!(field("transfer-encoding").as_deref(), Some("chunked"));
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
                    break end;
                }
                read_more(stream, &mut rest).await;
            };
            let size =
                usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap(), 16).unwrap();
            while rest.len() < line_end + 2 + size + 2 {
                read_more(stream, &mut rest).await;
            }
            body.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
            assert_eq!(&rest[line_end + 2 + size..line_end + 4 + size], b"\r\n");
            rest.drain(..line_end + 4 + size);
            if size == 0 {
                break;
            }
        }
        assert!(rest.is_empty(), "nothing after the last chunk");
        String::from_utf8(body).unwrap()
    };
    (status, fields, body)
}

async fn read_more(stream: &mut TcpStream, into: &mut Vec<u8>) {
    let mut buf = [0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(n > 0, "the server closed the connection mid-answer");
    into.extend_from_slice(&buf[..n]);
}

async fn an_sse_reader_gets_every_event_chunked_and_its_connection_then_serves_another_route(
    server: Server,
) {
    logs();
    let id = ended_turn(&server).await;
    let mut stream = connect(&server).await;
    let request = format!(
        "GET /v1/executions/{id}/events HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {}\r\n\
         Accept: text/event-stream\r\n\r\n",
        server.owner
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let (status, fields, body) = read_answer(&mut stream).await;
    assert_eq!(status, 200);
    assert!(
        fields
            .iter()
            .any(|(n, v)| n == "content-type" && v.starts_with("text/event-stream"))
    );
    assert!(fields.iter().any(|(n, _)| n == "date"));
    let kinds: Vec<&str> = body
        .lines()
        .filter_map(|line| line.strip_prefix("event:"))
        .map(str::trim)
        .collect();
    assert_eq!(kinds.first(), Some(&"turn_started"));
    assert_eq!(kinds.last(), Some(&"turn_ended"));
    assert!(kinds.contains(&"text_delta"));
    let logged = String::from_utf8(logs().lock().unwrap().clone()).unwrap();
    assert!(
        logged.lines().any(
            |line| line.contains("an events request answered outside hyper")
                && line.contains(&format!("/v1/executions/{id}/events"))
        ),
        "the events request was not answered by the lean connection"
    );
    // The same connection, kept open, serves a request of another route (hyper's).
    stream
        .write_all(b"GET /v1/health HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let (status, _, body) = read_answer(&mut stream).await;
    assert_eq!(status, 200);
    let health: Value = serde_json::from_str(&body).unwrap();
    assert!(health.is_object());
}

async fn two_long_polls_share_one_connection_each_answered_with_its_length(server: Server) {
    let id = ended_turn(&server).await;
    let mut stream = connect(&server).await;
    let mut next_after = 0;
    for _ in 0..2 {
        let request = format!(
            "GET /v1/executions/{id}/events?after={next_after}&wait=1 HTTP/1.1\r\nHost: test\r\n\
             Authorization: Bearer {}\r\n\r\n",
            server.owner
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let (status, fields, body) = read_answer(&mut stream).await;
        assert_eq!(status, 200);
        assert!(fields.iter().any(|(n, _)| n == "content-length"));
        let page: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(page["ended"], true);
        if next_after == 0 {
            assert!(!page["events"].as_array().unwrap().is_empty());
        } else {
            assert!(page["events"].as_array().unwrap().is_empty());
        }
        next_after = page["next_after"].as_u64().unwrap();
    }
}

async fn an_events_request_without_a_token_is_refused_as_on_any_connection(server: Server) {
    let id = ended_turn(&server).await;
    let mut stream = connect(&server).await;
    let request = format!(
        "GET /v1/executions/{id}/events HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let (status, _, body) = read_answer(&mut stream).await;
    assert_eq!(status, 401);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert!(error["code"].is_string(), "{error}");
    assert!(!body.contains("turn_started"));
}

async fn a_reader_that_asks_to_close_gets_its_answer_and_then_the_close(server: Server) {
    let id = ended_turn(&server).await;
    let mut stream = connect(&server).await;
    let request = format!(
        "GET /v1/executions/{id}/events HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\
         Authorization: Bearer {}\r\n\r\n",
        server.owner
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let (status, fields, _) = read_answer(&mut stream).await;
    assert_eq!(status, 200);
    assert!(
        fields
            .iter()
            .any(|(n, v)| n == "connection" && v.eq_ignore_ascii_case("close"))
    );
    let mut rest = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut rest))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 0, "the server closed the connection");
}

async fn a_long_poll_that_waits_is_answered_when_the_next_event_is_committed(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["late"])]).await;
    model.delay(0, Duration::from_millis(700));
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "hi", None).await).await;
    let id = sent["execution_id"].as_str().unwrap().to_string();
    server.wait_started(&id).await;
    let now: Value = server
        .get(&format!("/v1/executions/{id}/events"), &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let after = now["next_after"].as_u64().unwrap();
    assert_eq!(now["ended"], false);
    // Waits (outside the handler, on this connection) until the model's answer is committed.
    let mut stream = connect(&server).await;
    let request = format!(
        "GET /v1/executions/{id}/events?after={after}&wait=30 HTTP/1.1\r\nHost: test\r\n\
         Authorization: Bearer {}\r\n\r\n",
        server.owner
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let (status, _, body) = read_answer(&mut stream).await;
    assert_eq!(status, 200);
    let page: Value = serde_json::from_str(&body).unwrap();
    let events = page["events"].as_array().unwrap();
    assert!(!events.is_empty(), "{page}");
    assert!(
        events
            .iter()
            .all(|e| e["sequence"].as_u64().unwrap() > after)
    );
}

/// More readers at once than the node routes at once (64; the others wait with their head):
/// each is routed in its turn, waits, and is answered with the next event.
async fn more_long_polls_at_once_than_are_routed_at_once_are_all_answered(server: Server) {
    const READERS: usize = 100;
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["late"])]).await;
    model.delay(0, Duration::from_millis(1500));
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "hi", None).await).await;
    let id = sent["execution_id"].as_str().unwrap().to_string();
    server.wait_started(&id).await;
    let now: Value = server
        .get(&format!("/v1/executions/{id}/events"), &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let after = now["next_after"].as_u64().unwrap();
    let request = format!(
        "GET /v1/executions/{id}/events?after={after}&wait=30 HTTP/1.1\r\nHost: test\r\n\
         Authorization: Bearer {}\r\n\r\n",
        server.owner
    );
    let mut streams = Vec::with_capacity(READERS);
    for _ in 0..READERS {
        let mut stream = connect(&server).await;
        stream.write_all(request.as_bytes()).await.unwrap();
        streams.push(stream);
    }
    let readers = streams.into_iter().map(|mut stream| async move {
        let (status, _, body) = read_answer(&mut stream).await;
        (status, serde_json::from_str::<Value>(&body).unwrap())
    });
    let answers = tokio::time::timeout(Duration::from_secs(30), futures::future::join_all(readers))
        .await
        .unwrap();
    assert_eq!(answers.len(), READERS);
    for (status, page) in answers {
        assert_eq!(status, 200, "{page}");
        let events = page["events"].as_array().unwrap();
        assert!(!events.is_empty(), "{page}");
        assert!(
            events
                .iter()
                .all(|e| e["sequence"].as_u64().unwrap() > after)
        );
    }
}
