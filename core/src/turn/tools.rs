//! The tools a Turn offers, and running one tool call.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use openbot_schema::{ToolCall, ToolDefinition, ToolResult};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::call::{CallKey, CallResult, CallSlot, CallStatus};
use super::code::{CODE_TOOL, CodeMode, ProgramCallCheck, code_tool_definition};
use super::host::{Host, HostError};
use crate::telemetry;
use crate::tool::{CheckedSchema, SchemaError, SharedTool, ToolContext};

struct Entry {
    schema: CheckedSchema,
    handler: Option<SharedTool>,
}

/// The tools of a Turn: each with a checked schema, and a handler unless the caller delivers
/// its results (a host tool).
#[derive(Default)]
pub struct ToolSet {
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
    definitions: Arc<[ToolDefinition]>,
    /// With Code Mode on: the settings, and the one definition the model sees (`run_code`).
    code: Option<(CodeMode, Arc<[ToolDefinition]>)>,
    /// What refuses a program's new calls before the call log, if anything.
    program_check: Option<Arc<dyn ProgramCallCheck>>,
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.definitions.iter().map(|d| &d.name))
            .finish()
    }
}

impl ToolSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool with a handler in this process.
    pub fn add(&mut self, tool: SharedTool) -> Result<(), SchemaError> {
        self.insert(tool.definition().clone(), Some(tool))
    }

    /// Adds a host tool: the model may call it, and the caller delivers each result.
    pub fn declare(&mut self, definition: ToolDefinition) -> Result<(), SchemaError> {
        self.insert(definition, None)
    }

    /// Adds a tool offered with `definition` whose calls run `handler` when one is given,
    /// and otherwise wait for the caller to deliver the result.
    pub fn insert(
        &mut self,
        definition: ToolDefinition,
        handler: Option<SharedTool>,
    ) -> Result<(), SchemaError> {
        if self.by_name.contains_key(&definition.name) {
            return Err(SchemaError::DuplicateName(definition.name));
        }
        let schema = CheckedSchema::new(definition)?;
        self.by_name
            .insert(schema.definition().name.clone(), self.entries.len());
        let mut definitions = self.definitions.to_vec();
        definitions.push(schema.definition().clone());
        self.definitions = definitions.into();
        self.entries.push(Entry { schema, handler });
        if let Some((code, _)) = self.code.take() {
            self.enable_code_mode(code.limits);
        }
        Ok(())
    }

    /// The tool's type as the GenAI conventions name it: `function` for a handler in this
    /// process, `extension` for a tool whose result the caller delivers.
    fn tool_type(&self, name: &str) -> &'static str {
        match self.by_name.get(name).map(|&i| &self.entries[i].handler) {
            Some(None) => "extension",
            _ => "function",
        }
    }

    /// Turns Code Mode on: the model is offered only `run_code`, whose description declares
    /// these tools as a TypeScript API, and the tools are called from the program it writes,
    /// within `limits`. Tools added later join the declaration.
    pub fn enable_code_mode(&mut self, limits: openbot_codemode::Limits) {
        let definition = code_tool_definition(&self.definitions, &limits);
        self.code = Some((CodeMode { limits }, vec![definition].into()));
    }

    /// Checks each new call a Code Mode program makes with `check` before the call log: a
    /// refused call answers the program with the check's error and records nothing.
    pub fn check_program_calls(&mut self, check: Arc<dyn ProgramCallCheck>) {
        self.program_check = Some(check);
    }

    pub(crate) fn program_check(&self) -> Option<&dyn ProgramCallCheck> {
        self.program_check.as_deref()
    }

    /// Whether Code Mode is on.
    pub fn code_mode(&self) -> bool {
        self.code.is_some()
    }

    /// The definitions the model sees, in the order added (only `run_code` with Code Mode on).
    pub fn definitions(&self) -> &[ToolDefinition] {
        match &self.code {
            Some((_, offered)) => offered,
            None => &self.definitions,
        }
    }

    /// The definitions the model sees, shared: every model request of a Turn refers to the
    /// same list.
    pub fn shared_definitions(&self) -> Arc<[ToolDefinition]> {
        match &self.code {
            Some((_, offered)) => Arc::clone(offered),
            None => Arc::clone(&self.definitions),
        }
    }

    /// The tools themselves, in the order added (what a program calls with Code Mode on).
    pub fn api_definitions(&self) -> &[ToolDefinition] {
        &self.definitions
    }

    /// Whether the set has no tools.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Runs call `index` of `step`, or returns its saved result. Every failure the model can
    /// act on (unknown tool, invalid arguments, a tool error, a panic) becomes an error result.
    pub async fn run_call(
        self: &Arc<Self>,
        host: &dyn Host,
        step: u32,
        index: u32,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> Result<ToolResult, HostError> {
        if let Some((code, _)) = &self.code
            && call.name == CODE_TOOL
        {
            return self.run_code(code, host, step, index, call, cancel).await;
        }
        self.run_in_slot(host, step, CallSlot::Tool(index), call, cancel)
            .await
    }

    /// Runs, apart from its program, a call that a Code Mode program made (a background
    /// tool's job runs it): in slot `Code { tool: 0, call: index }` of `step`, so its handler
    /// sees [`ToolContext::from_code`] (a Vault reference in its arguments opens as the
    /// program's would), and a retry-safe tool found `Sending` is sent again under its key
    /// as the program's bridge does.
    pub async fn run_program_call(
        &self,
        host: &dyn Host,
        step: u32,
        index: u32,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> Result<ToolResult, HostError> {
        let slot = CallSlot::Code {
            tool: 0,
            call: index,
        };
        self.run_in_slot(host, step, slot, call, cancel).await
    }

    async fn run_in_slot(
        &self,
        host: &dyn Host,
        step: u32,
        slot: CallSlot,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> Result<ToolResult, HostError> {
        let from_code = matches!(slot, CallSlot::Code { .. });
        let attempt = match host.saved_call(step, slot).await? {
            Some(record) => match record.status {
                CallStatus::Done {
                    result: CallResult::Tool { result },
                } => return Ok(result),
                // Never sent: the same attempt can go now.
                CallStatus::Intent => record.key.attempt,
                // A program's call is not in the model's answer: the host tells by the tool's
                // name whether its endpoint deduplicates.
                CallStatus::Sending if from_code && host.tool_retry_safe(&call.name) => {
                    record.key.attempt
                }
                // Maybe sent, result lost: never repeated here. A host that knows the tool is
                // safe to repeat reports such a call as `Intent` instead.
                CallStatus::Sending | CallStatus::Unknown => {
                    return Err(HostError::OutcomeUnknown { key: record.key });
                }
                CallStatus::Done { .. } => {
                    return Err(HostError::Storage(format!(
                        "call {} holds a model result",
                        record.key
                    )));
                }
            },
            None => 1,
        };
        let key = CallKey {
            step,
            slot,
            attempt,
        };
        let span = telemetry::execute_tool(call, step, self.tool_type(&call.name));
        let result = self
            .resolve(host, key, call, cancel)
            .instrument(span.clone())
            .await?;
        telemetry::record_tool_result(&span, &result);
        host.record_result(
            key,
            CallResult::Tool {
                result: result.clone(),
            },
            vec![openbot_schema::EventKind::ToolResult {
                step,
                result: result.clone(),
            }],
        )
        .await?;
        Ok(result)
    }

    /// Runs one call under `key` (checked arguments, admission, intent, sending, handler or
    /// delivery) and returns its result, unrecorded.
    pub(crate) async fn resolve(
        &self,
        host: &dyn Host,
        key: CallKey,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> Result<ToolResult, HostError> {
        let Some(entry) = self.by_name.get(&call.name).map(|&i| &self.entries[i]) else {
            let known: Vec<&str> = self.definitions.iter().map(|d| d.name.as_str()).collect();
            return Ok(ToolResult::error(
                call,
                format!(
                    "unknown tool `{}`; the tools are: {}",
                    call.name,
                    known.join(", ")
                ),
            ));
        };
        // With Code Mode on the model calls tools from its program only.
        if self.code.is_some() && matches!(key.slot, CallSlot::Tool(_)) {
            return Ok(ToolResult::error(
                call,
                format!(
                    "call `{}` from a program: run_code({{\"code\": \"await tools.{}(...)\"}})",
                    call.name, call.name
                ),
            ));
        }
        if let Err(err) = entry.schema.check(&call.arguments) {
            return Ok(ToolResult::error(call, err.to_string()));
        }
        if let Some(answer) = host.admit_tool(key, call).await? {
            return Ok(answer);
        }
        host.record_intent(key).await?;
        host.record_sending(key, Vec::new()).await?;
        let Some(handler) = &entry.handler else {
            return host.wait_for_delivery(key, call).await;
        };
        let context = ToolContext {
            execution_id: host.execution_id(),
            step: key.step,
            call_id: call.id.clone(),
            idempotency_key: key.idempotency_key(host.execution_id()),
            cancel: cancel.child_token(),
            from_code: matches!(key.slot, CallSlot::Code { .. }),
        };
        let outcome = AssertUnwindSafe(handler.call(call.arguments.clone(), context))
            .catch_unwind()
            .await;
        Ok(match outcome {
            Ok(Ok(output)) => ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                output: output.content,
                is_error: false,
            },
            // Maybe applied, result lost: never answered with a guess; the host decides.
            Ok(Err(err)) if err.outcome_unknown => {
                return Err(HostError::OutcomeUnknown { key });
            }
            Ok(Err(err)) => ToolResult::error(call, err.message),
            Err(_) => {
                tracing::warn!(tool = %call.name, "a tool handler panicked");
                ToolResult::error(
                    call,
                    format!("the tool `{}` failed unexpectedly", call.name),
                )
            }
        })
    }
}
