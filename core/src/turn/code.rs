//! Code Mode in a Turn: the model gets one tool, `run_code`, whose description declares the
//! Bot's tools as a TypeScript API; the program it writes runs in the sandbox
//! (openbot-codemode) and each `await tools.x(args)` is a call of the Turn's call log, keyed by
//! the code call's slot plus its index ([`CallSlot::Code`]) and run with the same rules as a
//! direct call (arguments checked, admission, intent, sending, result).
//!
//! Replay: when the code call runs again (a takeover, a restart), the program runs again from
//! the start and gets the saved result of each call it already made. A call is the same call
//! when its tool and arguments are (its ID carries their fingerprint); a program that asks for
//! a different call at a saved index ends with `code_mode.call_order`.
//!
//! Time: `Date.now()` is fixed per run. Its value is saved in the call log when the program
//! first starts (slot `Code { tool, call: CODE_CLOCK_CALL }`, see [`program_clock`]) and read
//! back on every replay, so a program that runs again after a pause, a takeover or a restart
//! sees exactly the time it saw before (and makes the same calls).

use std::sync::{Mutex, PoisonError};
use std::time::UNIX_EPOCH;

use openbot_codemode::{
    Limits as CodeLimits, RunInput, Sandbox, ToolHost, ToolReply, ToolSignature,
};
use openbot_schema::{ContentPart, EventKind, ToolCall, ToolDefinition, ToolResult};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::call::{CallKey, CallResult, CallSlot, CallStatus};
use super::host::{Host, HostError};
use super::tools::ToolSet;

/// The name of the one tool a Bot with Code Mode on offers the model.
pub const CODE_TOOL: &str = "run_code";

/// Code Mode's settings in a [`ToolSet`]: the generated tool and the sandbox limits.
#[derive(Debug, Clone)]
pub(crate) struct CodeMode {
    pub limits: CodeLimits,
}

/// A check of each new call a program makes, before anything of it is recorded: a refusal
/// answers the program's `await` with a `ToolError` of that code and message, records nothing
/// and sends nothing. A run again asks again for a call with no saved record, so a check
/// should decide by the call and what it was given (the model-free run's approval rules and
/// routes: `server/src/codemode`). A Turn has none: its host's admission decides.
pub trait ProgramCallCheck: Send + Sync {
    /// `Some((code, message))` refuses the call.
    fn refuse(&self, call: &ToolCall) -> Option<(String, String)>;
}

/// The `run_code` definition for these tools: its description carries their TypeScript
/// declaration.
pub fn code_tool_definition(api: &[ToolDefinition], limits: &CodeLimits) -> ToolDefinition {
    let signatures: Vec<ToolSignature> = api
        .iter()
        .map(|d| ToolSignature {
            name: d.name.clone(),
            description: d.description.clone(),
            parameters: d.input_schema.clone(),
        })
        .collect();
    let declaration = openbot_codemode::declaration(&signatures);
    let description = format!(
        "Runs a JavaScript program that calls the tools below and returns its result. \
         Write the body of an async function: `await tools.<name>(args)` calls a tool and \
         resolves with its result (a failed call throws a ToolError with `code` and `message`); \
         `return` gives the program's result; console.log lines are returned too. There is no \
         file system, network, environment, timer or module import; Date and Math.random are \
         fixed per run. Limits: {} tool calls, {} bytes of output, {} MiB of memory.\n\n```ts\n{declaration}```",
        limits.max_tool_calls,
        limits.max_output_bytes,
        limits.memory_bytes >> 20,
    );
    ToolDefinition {
        name: CODE_TOOL.into(),
        description,
        input_schema: json!({
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The body of an async JavaScript function."}
            },
            "required": ["code"],
            "additionalProperties": false
        }),
    }
}

/// The call index under which a code call's program keeps its fixed time (`Date.now()`) in
/// the call log: `CallSlot::Code { tool, call: CODE_CLOCK_CALL }`, beyond any index a program
/// can reach (its calls are limited far below). Its record is a saved tool result whose text
/// is the time in milliseconds since the epoch; nothing is sent for it and it has no events.
pub const CODE_CLOCK_CALL: u32 = u32::MAX;

/// The fixed time of the program of the code call at position `tool` of `step`: the time saved
/// when the program first started, or, on its first start, `now_ms`, saved now (before the
/// program runs, so every later run reads the same). A pause, a takeover or a restart never
/// moves it.
pub async fn program_clock(
    host: &dyn Host,
    step: u32,
    tool: u32,
    parent: &ToolCall,
    now_ms: i64,
) -> Result<i64, HostError> {
    let slot = CallSlot::Code {
        tool,
        call: CODE_CLOCK_CALL,
    };
    if let Some(record) = host.saved_call(step, slot).await? {
        return match record.status {
            CallStatus::Done {
                result: CallResult::Tool { result },
            } => text_of(&result).trim().parse::<i64>().map_err(|_| {
                HostError::Storage(format!(
                    "the saved time {} of a program is no time",
                    record.key
                ))
            }),
            _ => Err(HostError::Storage(format!(
                "the saved time {} of a program holds no result",
                record.key
            ))),
        };
    }
    let key = CallKey {
        step,
        slot,
        attempt: 1,
    };
    let result = ToolResult {
        call_id: format!("{}.clock", parent.id),
        name: "Date.now".into(),
        output: vec![ContentPart::text(now_ms.to_string())],
        is_error: false,
    };
    host.record_result(key, CallResult::Tool { result }, Vec::new())
        .await?;
    Ok(now_ms)
}

/// The ID of call `index` of the code call `parent`: the same call (tool and arguments) always
/// gets the same ID, so a replay can tell whether the program asks for the saved call.
pub fn code_call_id(parent: &str, index: u32, name: &str, arguments: &Value) -> String {
    let fingerprint = openbot_codemode::derive_seed(&format!("{name}\u{0}{arguments}"));
    format!("{parent}.{index}.{fingerprint:016x}")
}

fn text_of(result: &ToolResult) -> String {
    result
        .output
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text { text } => Some(text.as_str()),
            ContentPart::File { .. } | ContentPart::Media { .. } => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What `await tools.x()` gets for a tool result: JSON text becomes its value.
fn reply_of(result: &ToolResult) -> ToolReply {
    let text = text_of(result);
    if result.is_error {
        return ToolReply::Failed {
            code: "tool.error".into(),
            message: text,
        };
    }
    ToolReply::Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The sandbox's view of the Turn: each call goes through the call log.
struct Bridge<'a> {
    tools: &'a ToolSet,
    host: &'a dyn Host,
    step: u32,
    tool: u32,
    parent: &'a ToolCall,
    cancel: &'a CancellationToken,
    /// Refuses new calls before the call log (see [`ProgramCallCheck`]).
    check: Option<&'a dyn ProgramCallCheck>,
    /// A host failure stops the run; the code call then fails with it, not with a result.
    failure: Mutex<Option<HostError>>,
}

impl Bridge<'_> {
    fn stop(&self, err: HostError) -> ToolReply {
        let message = err.to_string();
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(err);
        ToolReply::Stop {
            code: "code_mode.host_stopped".into(),
            message,
        }
    }

    async fn run(&self, index: u32, call: ToolCall) -> Result<ToolReply, HostError> {
        let slot = CallSlot::Code {
            tool: self.tool,
            call: index,
        };
        let attempt = match self.host.saved_call(self.step, slot).await? {
            Some(record) => match record.status {
                CallStatus::Done {
                    result: CallResult::Tool { result },
                } => {
                    if result.call_id != call.id {
                        return Ok(ToolReply::Stop {
                            code: "code_mode.call_order".into(),
                            message: format!(
                                "call {index} of the program asked for `{}` with other arguments than \
                                 the saved call `{}`: a program that runs again must make the same \
                                 calls in the same order",
                                call.name, result.name
                            ),
                        });
                    }
                    return Ok(reply_of(&result));
                }
                CallStatus::Done { .. } => {
                    return Err(HostError::Storage(format!(
                        "call {} holds a model result",
                        record.key
                    )));
                }
                CallStatus::Intent => record.key.attempt,
                // Maybe sent, result lost: a retry-safe tool is sent again under the same key
                // (its endpoint deduplicates), as a direct call would be.
                CallStatus::Sending if self.host.tool_retry_safe(&call.name) => record.key.attempt,
                // Otherwise never repeated here (as for a direct call).
                CallStatus::Sending | CallStatus::Unknown => {
                    return Err(HostError::OutcomeUnknown { key: record.key });
                }
            },
            None => {
                if let Some((code, message)) = self.check.and_then(|check| check.refuse(&call)) {
                    return Ok(ToolReply::Failed { code, message });
                }
                self.host
                    .publish(EventKind::ToolCall {
                        step: self.step,
                        call: call.clone(),
                    })
                    .await?;
                1
            }
        };
        let key = CallKey {
            step: self.step,
            slot,
            attempt,
        };
        let result = self
            .tools
            .resolve(self.host, key, &call, self.cancel)
            .await?;
        let events = vec![EventKind::ToolResult {
            step: self.step,
            result: result.clone(),
        }];
        self.host
            .record_result(
                key,
                CallResult::Tool {
                    result: result.clone(),
                },
                events,
            )
            .await?;
        Ok(reply_of(&result))
    }
}

#[async_trait::async_trait]
impl ToolHost for Bridge<'_> {
    async fn call(&self, index: u32, name: &str, arguments: Value) -> ToolReply {
        let call = ToolCall {
            id: code_call_id(&self.parent.id, index, name, &arguments),
            name: name.to_string(),
            arguments,
        };
        match self.run(index, call).await {
            Ok(reply) => reply,
            Err(err) => self.stop(err),
        }
    }
}

impl ToolSet {
    /// Runs the code call at `index` of `step`, or returns its saved result.
    pub(crate) async fn run_code(
        &self,
        code: &CodeMode,
        host: &dyn Host,
        step: u32,
        index: u32,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> Result<ToolResult, HostError> {
        let slot = CallSlot::Tool(index);
        let (attempt, recorded) = match host.saved_call(step, slot).await? {
            Some(record) => match record.status {
                CallStatus::Done {
                    result: CallResult::Tool { result },
                } => return Ok(result),
                CallStatus::Done { .. } => {
                    return Err(HostError::Storage(format!(
                        "call {} holds a model result",
                        record.key
                    )));
                }
                // The program sends nothing itself: it runs again, and its calls replay.
                _ => (record.key.attempt, true),
            },
            None => (1, false),
        };
        let key = CallKey {
            step,
            slot,
            attempt,
        };
        let result = match call.arguments.get("code").and_then(Value::as_str) {
            None => ToolResult::error(call, "run_code needs {\"code\": \"<JavaScript>\"}"),
            Some(source) => {
                if !recorded {
                    host.record_intent(key).await?;
                }
                let bridge = Bridge {
                    tools: self,
                    host,
                    step,
                    tool: index,
                    parent: call,
                    cancel,
                    check: self.program_check(),
                    failure: Mutex::new(None),
                };
                // The Turn's start as it reads when the program first starts, saved then: a
                // later run reads the saved time (a pause moves the start a time limit counts
                // from, never the program's clock).
                let started = host
                    .started_at()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(0);
                let started = program_clock(host, step, index, call, started).await?;
                let input = RunInput {
                    code: source.to_string(),
                    tools: self
                        .api_definitions()
                        .iter()
                        .map(|d| d.name.clone())
                        .collect(),
                    seed: openbot_codemode::derive_seed(&format!(
                        "{}:{step}:{index}",
                        host.execution_id()
                    )),
                    now_ms: started,
                };
                let ran = match Sandbox::shared() {
                    Ok(sandbox) => sandbox.run(input, code.limits, &bridge).await,
                    Err(err) => Err(err),
                };
                if let Some(err) = bridge
                    .failure
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                {
                    return Err(err);
                }
                match ran {
                    Ok(outcome) => ToolResult {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        output: vec![ContentPart::text(outcome.to_tool_result().to_string())],
                        is_error: outcome.result.is_err(),
                    },
                    Err(err) => {
                        tracing::warn!(error = %err, "the Code Mode sandbox failed");
                        ToolResult::error(call, "Code Mode is unavailable on this server")
                    }
                }
            }
        };
        host.record_result(
            key,
            CallResult::Tool {
                result: result.clone(),
            },
            vec![EventKind::ToolResult {
                step,
                result: result.clone(),
            }],
        )
        .await?;
        Ok(result)
    }
}
