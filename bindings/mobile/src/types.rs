//! The records and enums Kotlin and Swift see, one for each schema type the Client uses.
//!
//! IDs are their canonical UUID text, times are timestamps (`java.time.Instant`, `Date`), and
//! free-form JSON (tool input schemas and arguments, whole events) is JSON text. Every
//! conversion destructures the schema type without `..`, so a field added to the schema does
//! not compile here until the binding carries it too.

use std::str::FromStr;
use std::time::SystemTime;

use chrono::{DateTime, Utc};
use openbot_schema as schema;

use crate::error::{OpenBotError, category_name};

/// Parses an ID given by the caller.
pub(crate) fn parse_id<T: FromStr<Err = schema::IdParseError>>(
    text: &str,
) -> Result<T, OpenBotError> {
    text.parse()
        .map_err(|e: schema::IdParseError| OpenBotError::invalid_input(e.to_string()))
}

/// Parses a plain UUID given by the caller (an approval request's ID); `T` is the type the core
/// takes.
pub(crate) fn parse_uuid<T: FromStr>(what: &str, text: &str) -> Result<T, OpenBotError> {
    text.parse().map_err(|_| {
        OpenBotError::invalid_input(format!(
            "`{}` is not a valid {what}: expected a UUID",
            text.chars().take(64).collect::<String>()
        ))
    })
}

fn parse_json(what: &str, text: &str) -> Result<serde_json::Value, OpenBotError> {
    serde_json::from_str(text)
        .map_err(|e| OpenBotError::invalid_input(format!("{what} is not JSON: {e}")))
}

fn time(at: DateTime<Utc>) -> SystemTime {
    SystemTime::from(at)
}

/// The wire name of a serde enum value, e.g. `max_steps`.
fn wire_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => String::new(),
    }
}

/// A tool a model may call: its name, what it does, and the JSON Schema of its input.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct ToolDefinition {
    /// The name the model calls it by: 1-64 of `a-z A-Z 0-9 _ -`.
    pub name: String,
    /// What the tool does, for the model.
    #[uniffi(default)]
    pub description: String,
    /// The JSON Schema its arguments must match, as JSON text; empty means any object
    /// (`{"type":"object"}`).
    #[uniffi(default)]
    pub input_schema_json: String,
}

impl ToolDefinition {
    fn into_schema(self) -> Result<schema::ToolDefinition, OpenBotError> {
        let Self {
            name,
            description,
            input_schema_json,
        } = self;
        let input_schema = if input_schema_json.trim().is_empty() {
            serde_json::json!({"type": "object"})
        } else {
            parse_json(
                &format!("the input schema of tool `{name}`"),
                &input_schema_json,
            )?
        };
        Ok(schema::ToolDefinition {
            input_schema,
            name,
            description,
        })
    }

    fn from_schema(definition: schema::ToolDefinition) -> Self {
        let schema::ToolDefinition {
            name,
            description,
            input_schema,
        } = definition;
        Self {
            name,
            description,
            input_schema_json: input_schema.to_string(),
        }
    }
}

fn definitions_into_schema(
    tools: Vec<ToolDefinition>,
) -> Result<Vec<schema::ToolDefinition>, OpenBotError> {
    tools.into_iter().map(ToolDefinition::into_schema).collect()
}

/// Limits on one Turn. A limit that is reached ends the Turn with a matching outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, uniffi::Record)]
pub struct Limits {
    /// The most model steps.
    #[uniffi(default)]
    pub max_steps: Option<u32>,
    /// The most wall time in milliseconds, counted from the Turn's start.
    #[uniffi(default)]
    pub max_wall_time_ms: Option<u64>,
    /// The most cost in millionths of a US dollar.
    #[uniffi(default)]
    pub max_cost_micros: Option<u64>,
    /// The loop breaker: how often one tool call (the same tool with the same arguments) may
    /// run in a Turn; asking for it once more ends the Turn with `REPEATED_TOOL_CALL`.
    #[uniffi(default)]
    pub max_repeated_calls: Option<u32>,
}

impl From<Limits> for schema::Limits {
    fn from(limits: Limits) -> Self {
        let Limits {
            max_steps,
            max_wall_time_ms,
            max_cost_micros,
            max_repeated_calls,
        } = limits;
        Self {
            max_steps,
            max_wall_time_ms,
            max_cost_micros,
            max_repeated_calls,
        }
    }
}

impl From<schema::Limits> for Limits {
    fn from(limits: schema::Limits) -> Self {
        let schema::Limits {
            max_steps,
            max_wall_time_ms,
            max_cost_micros,
            max_repeated_calls,
        } = limits;
        Self {
            max_steps,
            max_wall_time_ms,
            max_cost_micros,
            max_repeated_calls,
        }
    }
}

/// What a Bot is made of, to create one.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct BotSpec {
    /// A display name, 1-200 characters.
    pub name: String,
    /// The model, as `provider:model`, e.g. `openai:gpt-4o-mini` or `scripted:/path/answers.json`.
    pub model: String,
    /// The system instructions.
    #[uniffi(default)]
    pub instructions: String,
    /// The tools the Bot may call.
    #[uniffi(default)]
    pub tools: Vec<ToolDefinition>,
    /// Limits on each Turn.
    #[uniffi(default)]
    pub limits: Limits,
    /// On a server: whether every member of the organization may chat with it.
    #[uniffi(default)]
    pub shared: bool,
}

impl BotSpec {
    pub(crate) fn into_schema(self) -> Result<schema::BotSpec, OpenBotError> {
        let Self {
            name,
            model,
            instructions,
            tools,
            limits,
            shared,
        } = self;
        Ok(schema::BotSpec {
            name,
            instructions,
            model,
            tools: definitions_into_schema(tools)?,
            limits: limits.into(),
            shared,
        })
    }

    fn from_schema(spec: schema::BotSpec) -> Self {
        let schema::BotSpec {
            name,
            instructions,
            model,
            tools,
            limits,
            shared,
        } = spec;
        Self {
            name,
            model,
            instructions,
            tools: tools.into_iter().map(ToolDefinition::from_schema).collect(),
            limits: limits.into(),
            shared,
        }
    }
}

/// A change to a Bot; absent fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, uniffi::Record)]
pub struct BotUpdate {
    /// The revision the caller read; a different current revision is a conflict.
    #[uniffi(default)]
    pub revision: Option<u64>,
    /// A new name.
    #[uniffi(default)]
    pub name: Option<String>,
    /// New instructions.
    #[uniffi(default)]
    pub instructions: Option<String>,
    /// A new model.
    #[uniffi(default)]
    pub model: Option<String>,
    /// New tools.
    #[uniffi(default)]
    pub tools: Option<Vec<ToolDefinition>>,
    /// New limits.
    #[uniffi(default)]
    pub limits: Option<Limits>,
    /// Share or unshare it.
    #[uniffi(default)]
    pub shared: Option<bool>,
}

impl BotUpdate {
    pub(crate) fn into_schema(self) -> Result<schema::BotUpdate, OpenBotError> {
        let Self {
            revision,
            name,
            instructions,
            model,
            tools,
            limits,
            shared,
        } = self;
        Ok(schema::BotUpdate {
            revision,
            name,
            instructions,
            model,
            tools: tools.map(definitions_into_schema).transpose()?,
            limits: limits.map(Into::into),
            shared,
        })
    }
}

/// A Bot.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct Bot {
    /// Its ID.
    pub id: String,
    /// Its definition.
    pub spec: BotSpec,
    /// Grows by one with each update.
    pub revision: u64,
    /// When it was created.
    pub created_at: SystemTime,
}

impl From<schema::Bot> for Bot {
    fn from(bot: schema::Bot) -> Self {
        let schema::Bot {
            id,
            spec,
            revision,
            created_at,
        } = bot;
        Self {
            id: id.to_string(),
            spec: BotSpec::from_schema(spec),
            revision,
            created_at: time(created_at),
        }
    }
}

/// A conversation with a Bot.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct Chat {
    /// Its ID.
    pub id: String,
    /// The Bot that answers in it.
    pub bot_id: String,
    /// When it was created.
    pub created_at: SystemTime,
}

impl From<schema::Chat> for Chat {
    fn from(chat: schema::Chat) -> Self {
        let schema::Chat {
            id,
            bot_id,
            created_at,
        } = chat;
        Self {
            id: id.to_string(),
            bot_id: bot_id.to_string(),
            created_at: time(created_at),
        }
    }
}

/// A reference to a stored file.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct FileRef {
    /// The stored file's ID.
    pub id: String,
    /// Its media type, e.g. `image/png`.
    pub media_type: String,
    /// Its display name.
    #[uniffi(default)]
    pub name: Option<String>,
    /// A URL a model provider can read it from (`https:` or `data:`), when one exists.
    #[uniffi(default)]
    pub url: Option<String>,
}

/// One piece of message content.
#[derive(Debug, Clone, PartialEq, uniffi::Enum)]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// A reference to a stored file.
    File {
        /// The file.
        file: FileRef,
    },
}

impl ContentPart {
    fn into_schema(self) -> Result<schema::ContentPart, OpenBotError> {
        Ok(match self {
            Self::Text { text } => schema::ContentPart::Text { text },
            Self::File { file } => {
                let FileRef {
                    id,
                    media_type,
                    name,
                    url,
                } = file;
                schema::ContentPart::File {
                    file: schema::FileRef {
                        id: parse_id(&id)?,
                        media_type,
                        name,
                        url,
                    },
                }
            }
        })
    }

    fn from_schema(part: schema::ContentPart) -> Self {
        match part {
            schema::ContentPart::Text { text } => Self::Text { text },
            schema::ContentPart::File { file } => {
                let schema::FileRef {
                    id,
                    media_type,
                    name,
                    url,
                } = file;
                Self::File {
                    file: FileRef {
                        id: id.to_string(),
                        media_type,
                        name,
                        url,
                    },
                }
            }
        }
    }
}

fn parts_from_schema(parts: Vec<schema::ContentPart>) -> Vec<ContentPart> {
    parts.into_iter().map(ContentPart::from_schema).collect()
}

fn parts_into_schema(parts: Vec<ContentPart>) -> Result<Vec<schema::ContentPart>, OpenBotError> {
    parts.into_iter().map(ContentPart::into_schema).collect()
}

/// Input for a Chat.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct SendInput {
    /// The content: at least one part.
    pub content: Vec<ContentPart>,
    /// The caller's name for this request. A retry with the same key and the same input gets
    /// the same receipt; the same key with other input is a conflict.
    #[uniffi(default)]
    pub command_key: Option<String>,
}

impl SendInput {
    pub(crate) fn into_schema(self) -> Result<schema::SendInput, OpenBotError> {
        let Self {
            content,
            command_key,
        } = self;
        Ok(schema::SendInput {
            content: parts_into_schema(content)?,
            command_key,
        })
    }
}

/// Input of one text part, optionally named by a command key.
#[uniffi::export(default(command_key = None))]
pub fn text_input(text: String, command_key: Option<String>) -> SendInput {
    SendInput {
        content: vec![ContentPart::Text { text }],
        command_key,
    }
}

/// What happened to a sent input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum SendDisposition {
    /// It started a new Turn.
    Started,
    /// A Turn is running; the input waits in order for its own Turn.
    Queued,
    /// It joined the running Turn.
    Steered,
}

/// The answer to a sent input.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct SendReceipt {
    /// The Chat.
    pub chat_id: String,
    /// The execution of the Turn that takes this input.
    pub execution_id: String,
    /// What happened to the input.
    pub disposition: SendDisposition,
}

impl From<schema::SendReceipt> for SendReceipt {
    fn from(receipt: schema::SendReceipt) -> Self {
        let schema::SendReceipt {
            chat_id,
            execution_id,
            disposition,
        } = receipt;
        Self {
            chat_id: chat_id.to_string(),
            execution_id: execution_id.to_string(),
            disposition: match disposition {
                schema::SendDisposition::Started => SendDisposition::Started,
                schema::SendDisposition::Queued => SendDisposition::Queued,
                schema::SendDisposition::Steered => SendDisposition::Steered,
            },
        }
    }
}

/// One tool call asked for by the model.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct ToolCall {
    /// The provider's ID of this call; the result names it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model gave them, as JSON text; not yet checked against the schema.
    pub arguments_json: String,
}

impl From<schema::ToolCall> for ToolCall {
    fn from(call: schema::ToolCall) -> Self {
        let schema::ToolCall {
            id,
            name,
            arguments,
        } = call;
        Self {
            id,
            name,
            arguments_json: arguments.to_string(),
        }
    }
}

/// The result of one tool call, as given back to the model.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct ToolResult {
    /// The ID of the call this answers.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// What the model sees: text and files.
    pub output: Vec<ContentPart>,
    /// Whether the tool failed; the output then says why, for the model.
    #[uniffi(default)]
    pub is_error: bool,
}

impl ToolResult {
    pub(crate) fn into_schema(self) -> Result<schema::ToolResult, OpenBotError> {
        let Self {
            call_id,
            name,
            output,
            is_error,
        } = self;
        Ok(schema::ToolResult {
            call_id,
            name,
            output: parts_into_schema(output)?,
            is_error,
        })
    }
}

impl From<schema::ToolResult> for ToolResult {
    fn from(result: schema::ToolResult) -> Self {
        let schema::ToolResult {
            call_id,
            name,
            output,
            is_error,
        } = result;
        Self {
            call_id,
            name,
            output: parts_from_schema(output),
            is_error,
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, uniffi::Enum)]
pub enum Message {
    /// Input from a person or a service.
    User {
        /// The content.
        content: Vec<ContentPart>,
    },
    /// The model's answer: text and the tool calls it asked for.
    Assistant {
        /// The text content.
        content: Vec<ContentPart>,
        /// The tool calls, in the order the model gave them.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, given back to the model.
    Tool {
        /// The result.
        result: ToolResult,
    },
}

impl From<schema::Message> for Message {
    fn from(message: schema::Message) -> Self {
        match message {
            schema::Message::User { content } => Self::User {
                content: parts_from_schema(content),
            },
            schema::Message::Assistant {
                content,
                tool_calls,
            } => Self::Assistant {
                content: parts_from_schema(content),
                tool_calls: tool_calls.into_iter().map(Into::into).collect(),
            },
            schema::Message::Tool { result } => Self::Tool {
                result: result.into(),
            },
        }
    }
}

/// One entry of a Chat's history.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct ChatEntry {
    /// The message.
    pub message: Message,
    /// The Turn that produced or took it.
    pub execution_id: String,
    /// When it was saved.
    pub at: SystemTime,
}

impl From<schema::ChatEntry> for ChatEntry {
    fn from(entry: schema::ChatEntry) -> Self {
        let schema::ChatEntry {
            message,
            execution_id,
            at,
        } = entry;
        Self {
            message: message.into(),
            execution_id: execution_id.to_string(),
            at: time(at),
        }
    }
}

/// Tokens used and, when the price is known, what they cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, uniffi::Record)]
pub struct Usage {
    /// Input tokens, including cached ones.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens the provider served from its cache.
    pub cached_input_tokens: u64,
    /// The cost in millionths of a US dollar, when the model's price is known.
    pub cost_micros: Option<u64>,
}

impl From<schema::Usage> for Usage {
    fn from(usage: schema::Usage) -> Self {
        let schema::Usage {
            input_tokens,
            output_tokens,
            cached_input_tokens,
            cost_micros,
        } = usage;
        Self {
            input_tokens,
            output_tokens,
            cached_input_tokens,
            cost_micros,
        }
    }
}

/// The state of an execution. The last four are end states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum ExecutionState {
    /// Accepted, not started.
    Queued,
    /// An owner is working on it.
    Running,
    /// Waiting for something outside: a timer, a tool result, a decision.
    Waiting,
    /// A cancel was asked for; it has not yet proved that its work stopped.
    Cancelling,
    /// An outside write's result was lost: waits for a saved result or a decision.
    OutcomeUnknown,
    /// Ended normally.
    Completed,
    /// Ended with a failure.
    Failed,
    /// Ended by cancellation.
    Cancelled,
    /// Ended because it could not be continued.
    Interrupted,
}

impl From<schema::ExecutionState> for ExecutionState {
    fn from(state: schema::ExecutionState) -> Self {
        use schema::ExecutionState as S;
        match state {
            S::Queued => Self::Queued,
            S::Running => Self::Running,
            S::Waiting => Self::Waiting,
            S::Cancelling => Self::Cancelling,
            S::OutcomeUnknown => Self::OutcomeUnknown,
            S::Completed => Self::Completed,
            S::Failed => Self::Failed,
            S::Cancelled => Self::Cancelled,
            S::Interrupted => Self::Interrupted,
        }
    }
}

/// Does nothing: one call through the binding and back, for measuring its cost
/// (`scripts/bench-kotlin`).
#[uniffi::export]
pub fn ping() {}

/// Whether `state` is an end state: nothing changes after it.
#[uniffi::export]
pub fn is_terminal(state: ExecutionState) -> bool {
    matches!(
        state,
        ExecutionState::Completed
            | ExecutionState::Failed
            | ExecutionState::Cancelled
            | ExecutionState::Interrupted
    )
}

/// Why a Turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum TurnOutcome {
    /// The model gave its answer.
    Completed,
    /// The step limit was reached.
    MaxSteps,
    /// The wall-time limit was reached.
    MaxTime,
    /// The cost limit was reached.
    MaxCost,
    /// The organization's credits would not cover the next model request.
    CreditsExhausted,
    /// The model asked for the same tool call more often than `max_repeated_calls` allows.
    RepeatedToolCall,
    /// The Turn was cancelled.
    Cancelled,
}

impl From<schema::TurnOutcome> for TurnOutcome {
    fn from(outcome: schema::TurnOutcome) -> Self {
        use schema::TurnOutcome as O;
        match outcome {
            O::Completed => Self::Completed,
            O::MaxSteps => Self::MaxSteps,
            O::MaxTime => Self::MaxTime,
            O::MaxCost => Self::MaxCost,
            O::CreditsExhausted => Self::CreditsExhausted,
            O::RepeatedToolCall => Self::RepeatedToolCall,
            O::Cancelled => Self::Cancelled,
        }
    }
}

/// The public view of an execution.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct Execution {
    /// Its ID.
    pub id: String,
    /// What kind of work it is, e.g. `turn`.
    pub kind: String,
    /// Its current state.
    pub state: ExecutionState,
    /// The Chat it belongs to, for a Turn.
    pub chat_id: Option<String>,
    /// How a Turn ended, once it has.
    pub outcome: Option<TurnOutcome>,
    /// What it used so far.
    pub usage: Usage,
    /// The sequence of its last event; 0 before the first.
    pub last_sequence: u64,
    /// When it was created.
    pub created_at: SystemTime,
    /// When its state last changed.
    pub updated_at: SystemTime,
    /// Why it was interrupted, when its state is `interrupted`.
    pub reason: Option<String>,
}

impl From<schema::Execution> for Execution {
    fn from(execution: schema::Execution) -> Self {
        let schema::Execution {
            id,
            kind,
            state,
            chat_id,
            outcome,
            usage,
            last_sequence,
            created_at,
            updated_at,
            reason,
        } = execution;
        Self {
            id: id.to_string(),
            kind: wire_name(&kind),
            state: state.into(),
            chat_id: chat_id.map(|c| c.to_string()),
            outcome: outcome.map(Into::into),
            usage: usage.into(),
            last_sequence,
            created_at: time(created_at),
            updated_at: time(updated_at),
            reason,
        }
    }
}

/// What happened in an event. `Other` carries a kind this version of the binding does not know
/// yet; its fields are in the event's `json`.
#[derive(Debug, Clone, PartialEq, uniffi::Enum)]
pub enum EventKind {
    /// `turn_started`: a Turn started with this input.
    TurnStarted {
        /// The input that started it.
        input: Vec<ContentPart>,
    },
    /// `input_steered`: more input reached the running Turn.
    InputSteered {
        /// The input.
        input: Vec<ContentPart>,
    },
    /// `model_step_started`: a model request started.
    ModelStepStarted {
        /// The step, from 1.
        step: u32,
        /// The attempt within the step, from 1.
        attempt: u32,
    },
    /// `text_delta`: text streamed by the model in a step's attempt.
    TextDelta {
        /// The step.
        step: u32,
        /// The attempt.
        attempt: u32,
        /// The new text.
        text: String,
    },
    /// `tool_call`: the model asked for a tool call.
    ToolCallAsked {
        /// The step.
        step: u32,
        /// The call.
        call: ToolCall,
    },
    /// `tool_result`: a tool call's result was saved and given to the model.
    ToolResultSaved {
        /// The step.
        step: u32,
        /// The result.
        result: ToolResult,
    },
    /// `call_outcome_unknown`: a call was maybe sent and its result lost; it is not repeated.
    CallOutcomeUnknown {
        /// The step.
        step: u32,
        /// The call, as `<step>/<slot>/<attempt>`.
        call: String,
    },
    /// `child_started`: a tool call started child work (a tool job or a delegated Turn) with
    /// events of its own; its result reaches the source Chat as a notice.
    ChildStarted {
        /// The ID of the call that started it.
        call_id: String,
        /// The child execution (the event's `execution_id` names the parent).
        child_id: String,
        /// What it is: `tool_job` or `turn`.
        kind: String,
    },
    /// `approval_requested`: a tool call waits for a person's decision; the Turn goes on.
    ApprovalRequested {
        /// The request to decide (`decideApproval`).
        request_id: String,
        /// The call, with its arguments.
        call: ToolCall,
        /// When the request expires unless decided.
        expires_at: SystemTime,
    },
    /// `job_ended`: a tool job ended; the last event of its execution.
    JobEnded {
        /// Its end state: `COMPLETED` or `CANCELLED`.
        state: ExecutionState,
    },
    /// `turn_ended`: the Turn ended; the last event of its execution.
    TurnEnded {
        /// Why it ended.
        outcome: TurnOutcome,
        /// What the whole Turn used.
        usage: Usage,
    },
    /// `failed`: the execution failed; the last event of its execution.
    Failed {
        /// The safe category, e.g. `model_provider`.
        category: String,
        /// The ID of the sealed failure record.
        error_id: String,
    },
    /// A kind this binding does not know yet.
    Other,
}

impl From<schema::EventKind> for EventKind {
    fn from(kind: schema::EventKind) -> Self {
        use schema::EventKind as K;
        match kind {
            K::TurnStarted { input } => Self::TurnStarted {
                input: parts_from_schema(input),
            },
            K::InputSteered { input } => Self::InputSteered {
                input: parts_from_schema(input),
            },
            K::ModelStepStarted { step, attempt } => Self::ModelStepStarted { step, attempt },
            K::TextDelta {
                step,
                attempt,
                text,
            } => Self::TextDelta {
                step,
                attempt,
                text,
            },
            K::ToolCall { step, call } => Self::ToolCallAsked {
                step,
                call: call.into(),
            },
            K::ToolResult { step, result } => Self::ToolResultSaved {
                step,
                result: result.into(),
            },
            K::CallOutcomeUnknown { step, call } => Self::CallOutcomeUnknown { step, call },
            K::ChildStarted {
                call_id,
                child_id,
                kind,
            } => Self::ChildStarted {
                call_id,
                child_id: child_id.to_string(),
                kind,
            },
            K::ApprovalRequested {
                request_id,
                call,
                expires_at,
            } => Self::ApprovalRequested {
                request_id: request_id.to_string(),
                call: call.into(),
                expires_at: time(expires_at),
            },
            K::JobEnded { state } => Self::JobEnded {
                state: state.into(),
            },
            K::TurnEnded { outcome, usage } => Self::TurnEnded {
                outcome: outcome.into(),
                usage: usage.into(),
            },
            K::Failed { category, error_id } => Self::Failed {
                category: category_name(category),
                error_id: error_id.to_string(),
            },
            _ => Self::Other,
        }
    }
}

/// Where an approval request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum ApprovalState {
    /// Waiting for a decision.
    Pending,
    /// Approved: the call runs once, in its own execution.
    Approved,
    /// Denied: the call never runs; the model is told.
    Denied,
    /// No decision came in time: it grants nothing.
    Expired,
    /// Approved, but the rights the call was asked with are gone: it grants nothing.
    Revoked,
    /// The work that asked was cancelled before a decision.
    Cancelled,
}

impl From<schema::ApprovalState> for ApprovalState {
    fn from(state: schema::ApprovalState) -> Self {
        use schema::ApprovalState as S;
        match state {
            S::Pending => Self::Pending,
            S::Approved => Self::Approved,
            S::Denied => Self::Denied,
            S::Expired => Self::Expired,
            S::Revoked => Self::Revoked,
            S::Cancelled => Self::Cancelled,
        }
    }
}

impl From<ApprovalState> for schema::ApprovalState {
    fn from(state: ApprovalState) -> Self {
        use ApprovalState as S;
        match state {
            S::Pending => Self::Pending,
            S::Approved => Self::Approved,
            S::Denied => Self::Denied,
            S::Expired => Self::Expired,
            S::Revoked => Self::Revoked,
            S::Cancelled => Self::Cancelled,
        }
    }
}

/// A person's decision on an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Decision {
    /// Run the call once.
    Approve,
    /// Do not run it.
    Deny,
}

impl From<Decision> for schema::Decision {
    fn from(decision: Decision) -> Self {
        match decision {
            Decision::Approve => Self::Approve,
            Decision::Deny => Self::Deny,
        }
    }
}

/// A tool call that waits for (or got) a person's decision.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct ApprovalRequest {
    /// Its ID.
    pub id: String,
    /// The Turn whose model asked for the call.
    pub source_execution_id: String,
    /// The child execution (a `tool_job`) that runs the call once it is approved.
    pub execution_id: String,
    /// The Chat the decision and the call's result are reported to.
    pub chat_id: Option<String>,
    /// The Bot that asked.
    pub bot_id: String,
    /// The call, with its arguments.
    pub call: ToolCall,
    /// Where it is.
    pub state: ApprovalState,
    /// When it was asked for.
    pub created_at: SystemTime,
    /// When it expires unless decided.
    pub expires_at: SystemTime,
    /// When it was decided.
    pub decided_at: Option<SystemTime>,
    /// The member who decided.
    pub decided_by: Option<String>,
    /// The reason given with the decision.
    pub reason: Option<String>,
}

impl From<schema::ApprovalRequest> for ApprovalRequest {
    fn from(request: schema::ApprovalRequest) -> Self {
        let schema::ApprovalRequest {
            id,
            source_execution_id,
            execution_id,
            chat_id,
            bot_id,
            call,
            state,
            created_at,
            expires_at,
            decided_at,
            decided_by,
            reason,
        } = request;
        Self {
            id: id.to_string(),
            source_execution_id: source_execution_id.to_string(),
            execution_id: execution_id.to_string(),
            chat_id: chat_id.map(|c| c.to_string()),
            bot_id: bot_id.to_string(),
            call: call.into(),
            state: state.into(),
            created_at: time(created_at),
            expires_at: time(expires_at),
            decided_at: decided_at.map(time),
            decided_by: decided_by.map(|m| m.to_string()),
            reason,
        }
    }
}

/// A call whose outcome is unknown (a write without a safe retry rule lost its answer) and the
/// execution that waits in `OUTCOME_UNKNOWN` for a decision on it.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct UnknownOutcome {
    /// The execution that waits.
    pub execution_id: String,
    /// What kind of work it is, e.g. `turn`.
    pub kind: String,
    /// The Chat it belongs to, for a Turn of a Chat.
    pub chat_id: Option<String>,
    /// The call's key, e.g. `1/tool:0/1`; a decision names it.
    pub call: String,
    /// The model step of the call.
    pub step: u32,
    /// The attempt of the call, from 1.
    pub attempt: u32,
    /// What was sent: the tool's name and the arguments, to check in the outside system.
    pub tool_call: ToolCall,
    /// The idempotency key the call was sent with.
    pub idempotency_key: String,
    /// Since when the execution waits.
    pub waiting_since: SystemTime,
}

impl From<schema::UnknownOutcome> for UnknownOutcome {
    fn from(outcome: schema::UnknownOutcome) -> Self {
        let schema::UnknownOutcome {
            execution_id,
            kind,
            chat_id,
            call,
            step,
            attempt,
            tool_call,
            idempotency_key,
            waiting_since,
        } = outcome;
        Self {
            execution_id: execution_id.to_string(),
            kind: wire_name(&kind),
            chat_id: chat_id.map(|c| c.to_string()),
            call,
            step,
            attempt,
            tool_call: tool_call.into(),
            idempotency_key,
            waiting_since: time(waiting_since),
        }
    }
}

/// One page of unknown outcomes, oldest first.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct UnknownOutcomePage {
    /// The outcomes on this page.
    pub items: Vec<UnknownOutcome>,
    /// The cursor of the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

impl From<schema::UnknownOutcomePage> for UnknownOutcomePage {
    fn from(page: schema::UnknownOutcomePage) -> Self {
        let schema::UnknownOutcomePage { items, next_cursor } = page;
        Self {
            items: items.into_iter().map(Into::into).collect(),
            next_cursor,
        }
    }
}

/// What a person found out about a call whose outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum OutcomeDecision {
    /// It was applied, with the given result: the work goes on with it; not sent again.
    Applied,
    /// It was not applied: the call is sent again, as a new attempt.
    NotApplied,
    /// Give up: the execution ends `FAILED`, sending nothing more.
    GiveUp,
}

impl From<OutcomeDecision> for schema::OutcomeDecision {
    fn from(decision: OutcomeDecision) -> Self {
        match decision {
            OutcomeDecision::Applied => Self::Applied,
            OutcomeDecision::NotApplied => Self::NotApplied,
            OutcomeDecision::GiveUp => Self::GiveUp,
        }
    }
}

impl From<schema::OutcomeDecision> for OutcomeDecision {
    fn from(decision: schema::OutcomeDecision) -> Self {
        match decision {
            schema::OutcomeDecision::Applied => Self::Applied,
            schema::OutcomeDecision::NotApplied => Self::NotApplied,
            schema::OutcomeDecision::GiveUp => Self::GiveUp,
        }
    }
}

/// A recorded decision on an unknown outcome: its audit entry.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct OutcomeDecisionRecord {
    /// Its ID.
    pub id: String,
    /// The execution that waited.
    pub execution_id: String,
    /// The call decided.
    pub call: String,
    /// The decision.
    pub decision: OutcomeDecision,
    /// The reason given, if any.
    pub reason: Option<String>,
    /// The member who decided.
    pub decided_by: String,
    /// The API token the member decided with, if any.
    pub token_id: Option<String>,
    /// When.
    pub decided_at: SystemTime,
}

impl From<schema::OutcomeDecisionRecord> for OutcomeDecisionRecord {
    fn from(record: schema::OutcomeDecisionRecord) -> Self {
        let schema::OutcomeDecisionRecord {
            id,
            execution_id,
            call,
            decision,
            reason,
            decided_by,
            token_id,
            decided_at,
        } = record;
        Self {
            id: id.to_string(),
            execution_id: execution_id.to_string(),
            call,
            decision: decision.into(),
            reason,
            decided_by: decided_by.to_string(),
            token_id: token_id.map(|t| t.to_string()),
            decided_at: time(decided_at),
        }
    }
}

/// One event of an execution. Sequences start at 1 with no gaps: a reader that saw `n`
/// resumes with `observe(executionId, n)`.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct Event {
    /// The execution this event belongs to.
    pub execution_id: String,
    /// The position of this event in its execution's log, from 1.
    pub sequence: u64,
    /// When the event was recorded.
    pub at: SystemTime,
    /// The wire name of its kind, e.g. `text_delta`, `turn_ended`.
    pub event_type: String,
    /// What happened, typed.
    pub kind: EventKind,
    /// The whole event as JSON, as the HTTP API sends it.
    pub json: String,
}

impl From<schema::Event> for Event {
    fn from(event: schema::Event) -> Self {
        let json = serde_json::to_value(&event).unwrap_or(serde_json::Value::Null);
        let event_type = json
            .get("type")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string();
        let schema::Event {
            execution_id,
            sequence,
            at,
            kind,
        } = event;
        Self {
            execution_id: execution_id.to_string(),
            sequence,
            at: time(at),
            event_type,
            kind: kind.into(),
            json: json.to_string(),
        }
    }
}
