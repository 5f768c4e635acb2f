//! The saved input of a Turn: everything a node needs to run it, also after a takeover.

use openbot_schema::{BotId, ContentPart, ExecutionId, Limits, Message, ToolDefinition};
use serde::{Deserialize, Serialize};

/// How a saved tool's calls reach their handler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolRoute {
    /// The caller delivers each result.
    Host,
    /// An HTTP endpoint: the arguments are POSTed as JSON with an `Idempotency-Key` header.
    Http {
        /// The endpoint.
        url: String,
        /// Whether the endpoint deduplicates by `Idempotency-Key`, so a call whose result was
        /// lost may be sent again with the same key. Without it such a call is never repeated.
        #[serde(default)]
        retry_safe: bool,
        /// Whether each call runs detached in its own execution (a tool job) and reports its
        /// result to the Chat as a notice.
        #[serde(default)]
        background: bool,
        /// Headers and added body fields, with Vault references as written (item IDs and
        /// field names, never values): they are opened only as each call is sent.
        #[serde(default, skip_serializing_if = "crate::tools::CallTemplate::is_empty")]
        template: crate::tools::CallTemplate,
    },
    /// The built-in `propose_plan` of a Turn in plan mode: a call asks a person to approve the
    /// plan; an approved plan switches the Chat out of plan mode.
    Plan,
    /// The built-in `remind` of a Bot with reminders on: a call sets a reminder, committed
    /// with its result, whose text reaches the Chat at its time.
    Remind,
    /// Another Bot: each call starts a Turn of it as a child execution with a private history;
    /// the parent waits for it before it ends, and its answer comes back as a notice.
    Delegate(Box<DelegateRoute>),
    /// A tool of an App (an MCP server): sent over the saved Connection if it is still at the
    /// saved revision, with the saved declaration, without listing the App's tools again.
    App(Box<crate::apps::tool::AppRoute>),
    /// A Computer tool of a Bot granted a Computer: sent through the machine's link once, the
    /// grant checked again at each call.
    Computer(crate::computers::tool::ComputerRoute),
}

/// The Bot a delegate tool starts, as saved when the parent Turn was submitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DelegateRoute {
    /// The Bot.
    pub bot_id: BotId,
    /// Its name, for notices.
    pub name: String,
    /// Its instructions.
    pub instructions: String,
    /// Its model spec.
    pub model: String,
    /// Its tools, each with its route.
    pub tools: Vec<SavedTool>,
    /// Its limits, narrowed by the delegate tool's own.
    pub limits: Limits,
}

/// Where a child Turn comes from: whose budgets it spends and where its answer goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceLink {
    /// The Chat the whole tree works for.
    pub chat_id: Option<uuid::Uuid>,
    /// The Bot of that Chat, whose budgets the whole tree spends.
    pub bot_id: BotId,
    /// Where the child's answer goes when it ends.
    pub notice: SavedNoticeTarget,
    /// How notices name the child, e.g. `the delegate Researcher`.
    pub label: String,
}

/// A notice target as saved in an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SavedNoticeTarget {
    /// A Chat: its Turn that takes input, else its history.
    Chat {
        /// The Chat.
        id: uuid::Uuid,
    },
    /// An execution, while it takes input.
    Execution {
        /// The execution.
        id: ExecutionId,
    },
}

impl From<SavedNoticeTarget> for crate::store::NoticeTarget {
    fn from(target: SavedNoticeTarget) -> Self {
        match target {
            SavedNoticeTarget::Chat { id } => Self::Chat(id),
            SavedNoticeTarget::Execution { id } => Self::Execution(id),
        }
    }
}

/// A tool as saved with the Turn: a later change of the tool list never changes a saved call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedTool {
    /// What the model sees.
    pub definition: ToolDefinition,
    /// Where calls go.
    pub route: ToolRoute,
}

/// The input of a Turn execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnInput {
    /// The system instructions.
    pub instructions: String,
    /// The model spec, e.g. `openai:gpt-4o-mini`.
    pub model: String,
    /// The tools offered.
    pub tools: Vec<SavedTool>,
    /// The limits of the Turn.
    pub limits: Limits,
    /// The conversation before the Turn.
    pub history: Vec<Message>,
    /// The input that starts it.
    pub input: Vec<ContentPart>,
    /// The most tokens of each answer.
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    /// The organization whose model provider settings build the model (keys are looked up
    /// when the Turn runs, never copied into its input).
    #[serde(default)]
    pub organization_id: Option<uuid::Uuid>,
    /// Who the Turn is for and by whom; its current rights are checked when the Turn is
    /// restored and before each outside send. Absent for work with no member (tests, tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<crate::identity::ExecutionIdentity>,
    /// For a delegated Turn: where it comes from and where its answer goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceLink>,
    /// Whether the Turn started in plan mode: while its Chat stays in plan mode it may only
    /// propose a plan.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plan_mode: bool,
    /// Whether the Turn's Bot had memory on when it was submitted: the Turn recalls and has
    /// the memory tools, and its completion starts its learning (the Bot's current setting is
    /// read again only then, so a Turn of a Bot without memory costs no memory query).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memory: bool,
    /// Code Mode: the model is offered `run_code` and calls the tools from its program.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub code_mode: bool,
}

impl TurnInput {
    /// The Chat the Turn's whole tree works for: `own_chat` (a Chat's Turn), else its source's.
    pub fn tree_chat(&self, own_chat: Option<uuid::Uuid>) -> Option<uuid::Uuid> {
        own_chat.or_else(|| self.source.as_ref().and_then(|s| s.chat_id))
    }

    /// The Bot whose budgets the tree spends: its source Chat's Bot, else the Turn's own.
    pub fn budget_bot(&self) -> Option<BotId> {
        self.source
            .as_ref()
            .map(|s| s.bot_id)
            .or_else(|| self.identity.as_ref().map(|i| i.bot_id))
    }
}

/// The name of the built-in tool of plan mode.
pub const PROPOSE_PLAN: &str = "propose_plan";

/// The built-in tool a Turn in plan mode offers.
pub fn propose_plan_tool() -> SavedTool {
    SavedTool {
        definition: ToolDefinition {
            name: PROPOSE_PLAN.into(),
            description: "Plan mode: propose your plan to a person. Nothing else may run until a \
                person approves a plan; then plan mode ends and you carry it out."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {"plan": {"type": "string", "description": "The plan, step by step."}},
                "required": ["plan"]
            }),
        },
        route: ToolRoute::Plan,
    }
}
