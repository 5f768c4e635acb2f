use std::sync::Arc;

use openbot_core::codemode::{RunInput, Sandbox, ToolHost, ToolReply};
use openbot_core::tool::{CheckedSchema, ToolContext};
use openbot_schema::{
    Action, BotId, CodeConsoleLine, CodeRun, CodeRunError as RunError, CodeRunResult, ContentPart,
    ExecutionId, Resource, RuleAction, ToolCall,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::approvals::{ApprovalError, Approvals, RuleRow, verdict};
use crate::chats::{ChatError, Chats};
use crate::identity::Caller;
use crate::platform::Platform;
use crate::tools::{TemplateParts, ToolVault};
use crate::turns::{HttpTool, SavedTool, ToolRoute};
use crate::vaults::Vaults;

/// Why a program could not be run (its own failures are in the result).
#[derive(Debug, thiserror::Error)]
pub enum CodeRunError {
    /// The Bot or its tools could not be read, or the caller may not use them.
    #[error(transparent)]
    Chat(#[from] ChatError),
    /// The approval rules could not be read.
    #[error(transparent)]
    Rules(#[from] ApprovalError),
    /// The caller's token lacks the right.
    #[error("{0}")]
    Forbidden(String),
    /// The sandbox could not run.
    #[error("{0}")]
    Sandbox(String),
}

/// Calls a Bot's tools for a program with no Turn: only tools that run here and now (HTTP
/// tools that are not background) and that the approval rules allow without asking.
struct DirectTools {
    tools: Vec<SavedTool>,
    rules: Vec<RuleRow>,
    bot: BotId,
    member: uuid::Uuid,
    http: reqwest::Client,
    outbound: Arc<openbot_core::outbound::OutboundPolicy>,
    run: ExecutionId,
    /// Where references in headers, body fields and the program's arguments open.
    vault: ToolVault,
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
        let Some(tool) = self.tools.iter().find(|t| t.definition.name == name) else {
            return failed("tool.not_found", format!("there is no tool named {name:?}"));
        };
        let call = ToolCall {
            id: format!("{}.{index}", self.run),
            name: name.into(),
            arguments,
        };
        match CheckedSchema::new(tool.definition.clone()) {
            Ok(schema) => {
                if let Err(err) = schema.check(&call.arguments) {
                    return failed("tool.invalid_arguments", err.to_string());
                }
            }
            Err(err) => return failed("tool.invalid_definition", err.to_string()),
        }
        match verdict(&self.rules, &call, self.bot, self.member).action {
            RuleAction::Allow => {}
            RuleAction::Deny => {
                return failed("tool.denied", "the approval rules do not allow this call");
            }
            RuleAction::Ask => {
                return failed(
                    "tool.needs_approval",
                    "this call needs approval: run it in a Turn of a Chat",
                );
            }
        }
        let ToolRoute::Http {
            url,
            background: false,
            template,
            ..
        } = &tool.route
        else {
            return failed(
                "tool.needs_turn",
                format!("`{name}` runs only in a Turn of a Chat"),
            );
        };
        let handler = HttpTool::new(
            tool.definition.clone(),
            url.clone(),
            self.http.clone(),
            Arc::clone(&self.outbound),
        )
        .with_parts(Arc::new(TemplateParts {
            template: template.clone(),
            vault: Some(self.vault.clone()),
            url: url.clone(),
        }));
        let context = ToolContext {
            execution_id: self.run,
            step: 0,
            call_id: call.id.clone(),
            idempotency_key: call.id.clone(),
            cancel: CancellationToken::new(),
            from_code: true,
        };
        match openbot_core::tool::Tool::call(&handler, call.arguments, context).await {
            Ok(output) => {
                let text: Vec<&str> = output
                    .content
                    .iter()
                    .filter_map(|p| match p {
                        ContentPart::Text { text } => Some(text.as_str()),
                        ContentPart::File { .. } | ContentPart::Media { .. } => None,
                    })
                    .collect();
                let text = text.join("\n");
                ToolReply::Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
            }
            Err(err) => failed("tool.error", err.message),
        }
    }
}

/// Runs `run.code` against the tools of Bot `bot_id` with Code Mode's limits, with no model
/// and no Turn: the caller needs the right to chat (`chats` write) and may use the Bot; each
/// call is checked against the tool's schema and the approval rules (a call that would ask
/// for approval is refused) and goes out through the outbound policy.
pub async fn run_program(
    chats: &Chats,
    approvals: &Approvals,
    vaults: &Vaults,
    platform: &Platform,
    caller: &Caller,
    bot_id: BotId,
    run: CodeRun,
) -> Result<CodeRunResult, CodeRunError> {
    caller
        .require(Resource::Chats, Action::Write)
        .map_err(|e| CodeRunError::Forbidden(e.to_string()))?;
    let (bot, tools) = chats.bot_tools(caller, bot_id).await?;
    let rules = approvals.organization_rules(caller).await?;
    let id = ExecutionId::new();
    let input = RunInput {
        code: run.code,
        tools: tools.iter().map(|t| t.definition.name.clone()).collect(),
        seed: openbot_core::codemode::derive_seed(&id.to_string()),
        now_ms: chrono::Utc::now().timestamp_millis(),
    };
    let host = DirectTools {
        tools,
        rules,
        bot: bot.id,
        member: caller.member.member_id,
        http: platform.tool_client(),
        outbound: Arc::clone(platform.outbound()),
        run: id,
        vault: ToolVault {
            opener: vaults.opener(),
            organization: caller.member.organization_id,
            member: caller.member.member_id,
            bot: bot.id,
        },
    };
    let sandbox = Sandbox::shared().map_err(|e| CodeRunError::Sandbox(e.to_string()))?;
    let outcome = sandbox
        .run(input, platform.code_limits(), &host)
        .await
        .map_err(|e| CodeRunError::Sandbox(e.to_string()))?;
    let console = outcome
        .console
        .iter()
        .map(|l| CodeConsoleLine {
            level: l.level.clone(),
            text: l.text.clone(),
        })
        .collect();
    Ok(match outcome.result {
        Ok(value) => CodeRunResult {
            ok: true,
            value: Some(value),
            error: None,
            console,
            tool_calls: outcome.tool_calls,
        },
        Err(e) => CodeRunResult {
            ok: false,
            value: None,
            error: Some(RunError {
                code: e.code(),
                message: e.message(),
            }),
            console,
            tool_calls: outcome.tool_calls,
        },
    })
}
