//! `run_code` in `memory://`: a program run against a Bot's tools with no model and no Turn,
//! answered as a server answers `POST /v1/bots/{id}/code-runs`: only registered HTTP tools
//! that are not background run (each call checked against the tool's schema, sent through the
//! outbound policy); every other tool answers `tool.needs_turn`. There are no approval rules
//! in one process, so nothing asks.

use std::sync::Arc;

use openbot_codemode::{Limits, RunInput, Sandbox, ToolHost, ToolReply};
use openbot_schema::{
    BotId, CodeConsoleLine, CodeRun, CodeRunError, CodeRunResult, ContentPart, ExecutionId,
    ToolDefinition,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::MemoryClient;
use crate::client::api::{ApiAnswer, ApiRequest};
use crate::error::Error;
use crate::tool::{CheckedSchema, HttpTool, Tool, ToolContext};

/// One Bot tool as a model-free run reaches it.
enum Route {
    /// A registered HTTP tool that runs now.
    Http(HttpTool),
    /// Needs a Turn (a host, delegate, App or background tool).
    NeedsTurn,
}

struct DirectTools {
    tools: Vec<(String, Route)>,
    run: ExecutionId,
}

fn failed(code: &str, message: impl Into<String>) -> ToolReply {
    ToolReply::Failed {
        code: code.into(),
        message: message.into(),
    }
}

#[async_trait::async_trait]
impl ToolHost for DirectTools {
    async fn call(&self, index: u32, name: &str, arguments: Value) -> ToolReply {
        let Some((_, route)) = self.tools.iter().find(|(n, _)| n == name) else {
            return failed("tool.not_found", format!("there is no tool named {name:?}"));
        };
        let Route::Http(tool) = route else {
            return failed(
                "tool.needs_turn",
                format!("`{name}` runs only in a Turn of a Chat"),
            );
        };
        match CheckedSchema::new(tool.definition().clone()) {
            Ok(schema) => {
                if let Err(err) = schema.check(&arguments) {
                    return failed("tool.invalid_arguments", err.to_string());
                }
            }
            Err(err) => return failed("tool.invalid_definition", err.to_string()),
        }
        let id = format!("{}.{index}", self.run);
        let context = ToolContext {
            execution_id: self.run,
            step: 0,
            call_id: id.clone(),
            idempotency_key: id,
            cancel: CancellationToken::new(),
            from_code: true,
        };
        match tool.call(arguments, context).await {
            Ok(output) => {
                let text = output
                    .content
                    .iter()
                    .filter_map(|p| match p {
                        ContentPart::Text { text } => Some(text.as_str()),
                        ContentPart::File { .. } | ContentPart::Media { .. } => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                ToolReply::Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
            }
            Err(err) => failed("tool.error", err.message),
        }
    }
}

impl MemoryClient {
    /// Answers `run_code` (`POST /v1/bots/{id}/code-runs`).
    pub(super) async fn run_code_operation(
        &self,
        request: &ApiRequest,
    ) -> Result<ApiAnswer, Error> {
        const OP: &str = "run_code";
        let id: BotId = request
            .text(OP, "id")?
            .parse()
            .map_err(|e: openbot_schema::IdParseError| Error::invalid_input(e.to_string()))?;
        // As a server answers a request without a JSON body.
        if request.body.is_none() {
            return Err(Error::new(
                openbot_schema::ErrorCode::UnsupportedMediaType,
                format!("{OP} takes a JSON body"),
            ));
        }
        let run: CodeRun = request.body_as(OP)?;
        let host = {
            let state = self.state()?;
            let bot = state
                .bots
                .get(&id)
                .ok_or_else(|| Error::not_found("bot", id))?;
            let tools = bot
                .spec
                .tools
                .iter()
                .map(|definition| {
                    let route = match state.http_tools.get(&definition.name) {
                        Some(tool) if !tool.background => Route::Http(HttpTool::new(
                            ToolDefinition {
                                name: tool.name.clone(),
                                description: tool.description.clone(),
                                input_schema: tool.input_schema.clone(),
                            },
                            tool.url.clone(),
                            self.inner.tool_client.clone(),
                            Arc::clone(&self.inner.outbound),
                        )),
                        _ => Route::NeedsTurn,
                    };
                    (definition.name.clone(), route)
                })
                .collect();
            DirectTools {
                tools,
                run: ExecutionId::new(),
            }
        };
        let input = RunInput {
            code: run.code,
            tools: host.tools.iter().map(|(name, _)| name.clone()).collect(),
            seed: openbot_codemode::derive_seed(&host.run.to_string()),
            now_ms: chrono::Utc::now().timestamp_millis(),
        };
        let unavailable = |e: openbot_codemode::SandboxError| {
            Error::new(openbot_schema::ErrorCode::Unavailable, e.to_string())
        };
        let outcome = Sandbox::shared()
            .map_err(unavailable)?
            .run(input, Limits::default(), &host)
            .await
            .map_err(unavailable)?;
        let console = outcome
            .console
            .iter()
            .map(|l| CodeConsoleLine {
                level: l.level.clone(),
                text: l.text.clone(),
            })
            .collect();
        let result = match outcome.result {
            Ok(value) => CodeRunResult {
                ok: true,
                value: Some(value),
                error: None,
                console,
                tool_calls: outcome.tool_calls,
                // In process: no execution to observe.
                execution_id: None,
            },
            Err(e) => CodeRunResult {
                ok: false,
                value: None,
                error: Some(CodeRunError {
                    code: e.code(),
                    message: e.message(),
                }),
                console,
                tool_calls: outcome.tool_calls,
                // In process: no execution to observe.
                execution_id: None,
            },
        };
        ApiAnswer::of(&result)
    }
}
