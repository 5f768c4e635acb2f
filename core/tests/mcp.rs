//! The MCP client on its own, against real servers: server-everything over stdio and streamable
//! HTTP, mcp-server-time over stdio, and the fixture server for cancellation and request IDs.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/mcp_servers.rs"]
mod mcp_servers;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use mcp_servers::*;
use openbot_core::mcp::{McpEndpoint, McpError, McpSession, McpToolSource, OpenOptions};
use openbot_core::outbound::OutboundPolicy;
use openbot_schema::AppTransport;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn endpoint(transport: AppTransport) -> McpEndpoint {
    McpEndpoint {
        transport,
        headers: BTreeMap::new(),
    }
}

fn loopback(allow_stdio: bool) -> OpenOptions {
    OpenOptions {
        outbound: Arc::new(OutboundPolicy::parse("loopback").unwrap()),
        allow_stdio,
        open_timeout: Duration::from_secs(30),
    }
}

#[tokio::test]
async fn discovery_over_stdio_lists_tools_with_schemas_and_annotations() {
    let session = McpSession::open(&endpoint(everything_stdio()), &loopback(true))
        .await
        .unwrap();
    let tools = session.list_tools().await.unwrap();
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.input_schema["type"], "object");
    assert!(echo.input_schema["properties"]["message"].is_object());
    assert_eq!(echo.annotations.read_only_hint, Some(true));
    assert!(echo.annotations.retry_safe());
    session.close().await.unwrap();
}

#[tokio::test]
async fn a_call_over_streamable_http_returns_the_tools_text() {
    let server = everything_http().await;
    let session = McpSession::open(
        &endpoint(AppTransport::Http {
            url: server.url.clone(),
        }),
        &loopback(false),
    )
    .await
    .unwrap();
    let result = session
        .call_tool(
            "echo",
            json!({"message": "hello there"}),
            "r1",
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(!result.is_error);
    assert!(result.content[0].as_text().unwrap().contains("hello there"));
    session.close().await.unwrap();
}

#[tokio::test]
async fn the_time_server_answers_over_stdio() {
    let session = McpSession::open(&endpoint(time_stdio()), &loopback(true))
        .await
        .unwrap();
    let tools = session.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "get_current_time"));
    let result = session
        .call_tool(
            "get_current_time",
            json!({"timezone": "UTC"}),
            "r1",
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(!result.is_error);
    assert!(result.content[0].as_text().unwrap().contains("UTC"));
    session.close().await.unwrap();
}

#[tokio::test]
async fn the_request_id_reaches_the_server_in_meta() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let session = McpSession::open(&endpoint(fixture_stdio(&log, 0.0, None)), &loopback(true))
        .await
        .unwrap();
    session
        .call_tool(
            "write_note",
            json!({"text": "a"}),
            "call-7",
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(fixture_log(&log).contains(&"call write_note call-7 a".to_string()));
    session.close().await.unwrap();
}

#[tokio::test]
async fn cancelling_a_call_sends_notifications_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let session = McpSession::open(&endpoint(fixture_stdio(&log, 30.0, None)), &loopback(true))
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let later = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        later.cancel();
    });
    let result = session
        .call_tool("write_note", json!({"text": "slow"}), "c1", &cancel)
        .await;
    assert_eq!(result, Err(McpError::Cancelled));
    let lines = wait_for_log(&log, "cancelled write_note").await;
    assert!(!lines.iter().any(|l| l.starts_with("done")), "{lines:?}");
    session.close().await.unwrap();
}

#[tokio::test]
async fn an_internal_address_is_refused_without_a_request() {
    let server = everything_http().await;
    let denied = OpenOptions {
        outbound: Arc::new(OutboundPolicy::default()),
        ..loopback(false)
    };
    let result = McpSession::open(
        &endpoint(AppTransport::Http {
            url: server.url.clone(),
        }),
        &denied,
    )
    .await;
    assert!(
        matches!(&result, Err(McpError::Refused(why)) if why.contains("outbound policy")),
        "{:?}",
        result.err()
    );
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_by_the_policy() {
    let server = everything_http().await;
    let url = server.url.replace("127.0.0.1", "localhost");
    let denied = OpenOptions {
        outbound: Arc::new(OutboundPolicy::default()),
        ..loopback(false)
    };
    let result = McpSession::open(&endpoint(AppTransport::Http { url }), &denied).await;
    assert!(
        matches!(&result, Err(McpError::Refused(why)) if why.contains("outbound policy")),
        "{:?}",
        result.err()
    );
}

#[tokio::test]
async fn stdio_is_refused_unless_allowed() {
    let result = McpSession::open(&endpoint(time_stdio()), &loopback(false)).await;
    assert!(
        matches!(&result, Err(McpError::Refused(why)) if why.contains("stdio")),
        "{:?}",
        result.err()
    );
}

#[tokio::test]
async fn a_bad_url_is_refused() {
    let result = McpSession::open(
        &endpoint(AppTransport::Http {
            url: "ftp://example.com/mcp".into(),
        }),
        &loopback(false),
    )
    .await;
    assert!(
        matches!(result, Err(McpError::Refused(_))),
        "{:?}",
        result.err()
    );
}

#[tokio::test]
async fn an_unknown_tool_is_a_protocol_error_or_error_result() {
    let session = McpSession::open(&endpoint(everything_stdio()), &loopback(true))
        .await
        .unwrap();
    let result = session
        .call_tool("no-such-tool", json!({}), "r", &CancellationToken::new())
        .await;
    match result {
        Err(McpError::Protocol(_)) => {}
        Ok(result) => assert!(result.is_error),
        Err(other) => panic!("{other:?}"),
    }
    session.close().await.unwrap();
}

#[tokio::test]
async fn a_tool_source_names_its_tools_with_the_app_prefix() {
    let source = McpToolSource::open("time", &endpoint(time_stdio()), &OpenOptions::standalone())
        .await
        .unwrap();
    let names: Vec<String> = source
        .tools()
        .iter()
        .map(|t| t.definition().name.clone())
        .collect();
    assert!(
        names.contains(&"time__get_current_time".to_string()),
        "{names:?}"
    );
}
