//! Agents: a model, instructions, tools and limits, run in this process with no server.

use std::sync::Arc;

use openbot_schema::{ContentPart, ExecutionId, Limits, Message, ToolDefinition, ToolResult};
use tokio::task::JoinHandle;
use tracing::Instrument as _;

use crate::error::Error;
use crate::events::EventStream;
use crate::memory::{MemoryHost, SealedErrors};
use crate::model::Model;
use crate::tool::{SchemaError, SharedTool, Tool};
use crate::turn::{HostError, ToolSet, TurnEnd, TurnSpec, run_turn};

/// An agent definition that runs Turns in this process.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use openbot_core::{Agent, model::ScriptedModel};
///
/// let model = Arc::new(ScriptedModel::from_json(r#"[{"text": "Hello!"}]"#)?);
/// let agent = Agent::builder(model).instructions("Be brief.").build()?;
/// let end = agent.start("Hi").wait().await?;
/// assert_eq!(end.text(), "Hello!");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Agent {
    instructions: String,
    model: Arc<dyn Model>,
    tools: Arc<ToolSet>,
    limits: Limits,
    max_output_tokens: Option<u32>,
    errors: SealedErrors,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.model.name())
            .field("tools", &self.tools)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Agent`].
pub struct AgentBuilder {
    instructions: String,
    model: Arc<dyn Model>,
    tools: ToolSet,
    error: Option<SchemaError>,
    limits: Limits,
    max_output_tokens: Option<u32>,
}

impl AgentBuilder {
    /// Sets the system instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = instructions.into();
        self
    }

    /// Adds a tool with a handler in this process.
    pub fn tool(self, tool: impl Tool + 'static) -> Self {
        self.shared_tool(Arc::new(tool))
    }

    /// Adds a shared tool with a handler in this process.
    pub fn shared_tool(mut self, tool: SharedTool) -> Self {
        if let Err(err) = self.tools.add(tool) {
            self.error.get_or_insert(err);
        }
        self
    }

    /// Gives the agent a Computer: the Computer tools (`computer_file_read`, ...; see
    /// [`crate::computer::computer_tools`]), with the terminal ones when `terminal` is set.
    pub fn computer(
        mut self,
        computer: Arc<dyn crate::computer::Computer>,
        terminal: bool,
    ) -> Self {
        for tool in crate::computer::computer_tools(computer, terminal) {
            self = self.shared_tool(tool);
        }
        self
    }

    /// Adds a host tool: the model may call it and the caller delivers each result with
    /// [`TurnHandle::deliver`].
    pub fn host_tool(mut self, definition: ToolDefinition) -> Self {
        if let Err(err) = self.tools.declare(definition) {
            self.error.get_or_insert(err);
        }
        self
    }

    /// Sets the limits of each Turn.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Turns Code Mode on: the model gets one `run_code` tool and calls the tools from a
    /// JavaScript program run in the sandbox within `limits` (see docs/code-mode.md).
    pub fn code_mode(mut self, limits: openbot_codemode::Limits) -> Self {
        self.tools.enable_code_mode(limits);
        self
    }

    /// Sets the most tokens of each model answer.
    pub fn max_output_tokens(mut self, tokens: u32) -> Self {
        self.max_output_tokens = Some(tokens);
        self
    }

    /// The agent, or the first invalid tool definition.
    pub fn build(self) -> Result<Agent, SchemaError> {
        if let Some(err) = self.error {
            return Err(err);
        }
        Ok(Agent {
            instructions: self.instructions,
            model: self.model,
            tools: Arc::new(self.tools),
            limits: self.limits,
            max_output_tokens: self.max_output_tokens,
            errors: SealedErrors::default(),
        })
    }
}

impl Agent {
    /// Starts building an agent on `model`.
    pub fn builder(model: Arc<dyn Model>) -> AgentBuilder {
        AgentBuilder {
            instructions: String::new(),
            model,
            tools: ToolSet::new(),
            error: None,
            limits: Limits::default(),
            max_output_tokens: None,
        }
    }

    /// Where the full causes of this agent's failures are kept.
    pub fn sealed_errors(&self) -> &SealedErrors {
        &self.errors
    }

    /// Starts a Turn with text input and no earlier conversation.
    pub fn start(&self, input: &str) -> TurnHandle {
        self.start_with(vec![ContentPart::text(input)], Vec::new())
    }

    /// Starts a Turn with this input after `history`. Must be called within a Tokio runtime.
    pub fn start_with(&self, input: Vec<ContentPart>, history: Vec<Message>) -> TurnHandle {
        let host = Arc::new(MemoryHost::new(
            MemoryHost::new_execution(None),
            self.errors.clone(),
        ));
        host.start(input.clone());
        let spec = TurnSpec {
            instructions: self.instructions.clone(),
            model: Arc::clone(&self.model),
            tools: Arc::clone(&self.tools),
            limits: self.limits,
            history,
            input,
            max_output_tokens: self.max_output_tokens,
        };
        let task_host = Arc::clone(&host);
        let span = crate::telemetry::invoke_agent(&crate::telemetry::AgentLabel::default());
        let task =
            tokio::spawn(async move { run_turn(spec, task_host.as_ref()).await }.instrument(span));
        TurnHandle { host, task }
    }
}

/// A running Turn of an [`Agent`].
pub struct TurnHandle {
    host: Arc<MemoryHost>,
    task: JoinHandle<Result<TurnEnd, HostError>>,
}

impl TurnHandle {
    /// The Turn's execution.
    pub fn execution_id(&self) -> ExecutionId {
        self.host.log().execution_id()
    }

    /// The Turn's events after sequence `after`, ending after the last one.
    pub fn observe(&self, after: u64) -> EventStream {
        self.host.log().observe(after)
    }

    /// Asks the Turn to stop; it ends with the outcome `cancelled`.
    pub fn cancel(&self) {
        self.host.cancel();
    }

    /// Adds input to the running Turn; gives it back if the Turn is ending.
    pub fn steer(&self, input: Vec<ContentPart>) -> Result<(), Vec<ContentPart>> {
        self.host.steer(input)
    }

    /// Delivers the result of a host-tool call.
    pub fn deliver(&self, result: ToolResult) -> Result<(), Error> {
        self.host.deliver(result)
    }

    /// Waits for the Turn to end.
    pub async fn wait(self) -> Result<TurnEnd, Error> {
        match self.task.await {
            Ok(Ok(end)) => Ok(end),
            Ok(Err(err)) => Err(Error::new(
                openbot_schema::ErrorCode::Closed,
                err.to_string(),
            )),
            Err(join) => {
                let id = self.host.log().execution_id();
                tracing::error!(execution = %id, panicked = join.is_panic(), "the turn task ended abnormally");
                Err(Error::new(
                    openbot_schema::ErrorCode::Closed,
                    "the turn task ended abnormally",
                ))
            }
        }
    }
}

impl TurnEnd {
    /// The text of the Turn's last answer.
    pub fn text(&self) -> String {
        self.messages
            .iter()
            .rev()
            .find(|m| matches!(m, Message::Assistant { .. }))
            .map(Message::text)
            .unwrap_or_default()
    }
}
