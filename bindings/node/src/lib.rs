//! The Node.js binding of OpenBot: the native part of the npm package `@openbot/sdk`.
//!
//! It is thin on purpose. [`connect`] wraps `openbot_core::connect` and returns a
//! [`NativeClient`] over the core `Client` trait, in both modes (`memory://` in this process,
//! `http://` a server). Every operation of the API goes through its one generic `call` (the
//! core's `Client::call`, by `operationId`): the TypeScript methods are generated from
//! schema/openapi.json, so a new operation needs no code here. Values cross as JSON through
//! serde, in the schema's wire format, so nothing of the schema is copied here. Every failure becomes a JavaScript `Error` whose
//! message starts with [`error::MARKER`] followed by the public error body as JSON; the
//! TypeScript layer turns it into an `OpenBotError` subclass with `code`, `category` and
//! `errorId`. JavaScript functions become core tools through a weak threadsafe function
//! ([`tool::JsTool`]), so a registered tool never keeps the process alive.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![warn(missing_docs)]

mod answer;
mod client;
mod error;
mod stream;
mod tool;

use std::sync::Arc;

use napi::bindgen_prelude::Result;
use napi_derive::napi;
use openbot_core::ConnectOptions;
use openbot_core::tool::SharedTool;

pub use client::NativeClient;
pub use stream::EventStream;
pub use tool::{JsTool, ToolAbort, ToolHandler, ToolInvocation, ToolReply};

/// Does nothing: the cost of one call from JavaScript into this addon, for the benchmark.
#[napi]
pub fn noop() {}

/// Turns on the export of this process's agent spans over OTLP/HTTP (docs/observability.md):
/// to `endpoint` (a base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT`), else to what the standard
/// `OTEL_*` variables name. Answers whether export is on: `false` when no endpoint is named.
#[napi]
pub fn enable_tracing(endpoint: Option<String>, service_name: Option<String>) -> Result<bool> {
    let config = openbot_core::telemetry::export::ExportConfig {
        endpoint,
        service_name,
    };
    openbot_core::telemetry::export::enable_tracing(&config)
        .map_err(|err| napi::Error::from_reason(err.to_string()))
}

/// The Computer tools' names, as the core declares them (docs/computers.md).
#[napi]
pub fn computer_tools() -> Vec<String> {
    openbot_core::computer::TOOL_NAMES
        .iter()
        .map(|name| name.to_string())
        .collect()
}

/// Exports the spans queued so far, now (before a short-lived process exits).
#[napi]
pub fn flush_tracing() {
    openbot_core::telemetry::export::flush_tracing();
}

/// Connects to OpenBot: `memory://` runs Bots and Chats in this process, `http://host:port`
/// (or `https://`) talks to a server with `token`. `tools` are the JavaScript functions that
/// serve the Bots' tools of the same name, in both modes. `outbound` is the allow list of
/// internal addresses the Bots' HTTP tools may reach in memory mode (as
/// `OPENBOT_OUTBOUND_ALLOW`: `loopback, 10.1.0.0/16`); a server keeps its own policy.
/// `computerFolders` attaches this machine as a Computer in memory mode (the Computer tools on
/// these folders; terminal sessions unless `computerTerminal` is false); see docs/computers.md.
#[napi]
pub async fn connect(
    uri: String,
    token: Option<String>,
    tools: Vec<ToolHandler>,
    outbound: Option<String>,
    computer_folders: Option<Vec<String>>,
    computer_terminal: Option<bool>,
) -> Result<NativeClient> {
    let tools = tools
        .into_iter()
        .map(|handler| Arc::new(JsTool::new(handler)) as SharedTool)
        .collect();
    let options = ConnectOptions {
        token,
        tools,
        ..ConnectOptions::default()
    }
    .with_outbound_allow(outbound.as_deref())
    .and_then(|o| o.with_computer(computer_folders, computer_terminal.unwrap_or(true)))
    .map_err(error::to_js)?;
    let client = openbot_core::connect(&uri, options)
        .await
        .map_err(error::to_js)?;
    Ok(NativeClient::new(client))
}
