//! The model tools of a Bot with memory: `remember`, `recall` and `forget`, over any backend
//! (the server's memories, or the in-process book of `memory://`).

use std::sync::Arc;

use async_trait::async_trait;
use openbot_schema::ToolDefinition;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::tool::{SharedTool, Tool, ToolContext, ToolError, ToolOutput};

/// The tool that writes a memory.
pub const REMEMBER: &str = "remember";
/// The tool that searches memories.
pub const RECALL: &str = "recall";
/// The tool that retires a memory.
pub const FORGET: &str = "forget";

/// The arguments of `remember`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RememberArgs {
    /// What to remember.
    pub content: String,
    /// Its tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Share it with every member of the Bot (default: the Chat member's own).
    #[serde(default)]
    pub shared: bool,
}

/// The arguments of `recall`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    /// What to look for.
    pub query: String,
    /// Only memories with every one of these tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// The arguments of `forget`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgetArgs {
    /// The memory to retire.
    pub id: uuid::Uuid,
}

/// What the memory tools do, for one Turn: a backend answers as the Turn's member (its reads
/// see only what that member may read).
#[async_trait]
pub trait MemoryTools: Send + Sync + 'static {
    /// Writes a memory and returns its ID. `key` is the call's idempotency key: the same key
    /// writes one memory however often the call is sent.
    async fn remember(&self, key: &str, args: RememberArgs) -> Result<uuid::Uuid, ToolError>;
    /// The best memories for a query, within the recall budget: (ID, content).
    async fn recall(&self, args: RecallArgs) -> Result<Vec<(uuid::Uuid, String)>, ToolError>;
    /// Retires a memory the member may change; `false` when there is none.
    async fn forget(&self, args: ForgetArgs) -> Result<bool, ToolError>;
}

/// The definitions of the three tools.
pub fn tool_definitions() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition {
            name: REMEMBER.into(),
            description:
                "Remember a fact or preference for later conversations. Keep it one short sentence."
                    .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "content": {"type": "string", "minLength": 1, "maxLength": super::MAX_CONTENT_CHARS},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": super::MAX_TAGS},
                    "shared": {"type": "boolean", "description": "true: every user of this assistant may see it"}
                },
                "required": ["content"],
                "additionalProperties": false
            }),
        },
        ToolDefinition {
            name: RECALL.into(),
            description: "Search your memories from earlier conversations.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1},
                    "tags": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        },
        ToolDefinition {
            name: FORGET.into(),
            description: "Forget (retire) a memory that is wrong or no longer true, by its ID."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {"id": {"type": "string", "format": "uuid"}},
                "required": ["id"],
                "additionalProperties": false
            }),
        },
    ]
}

struct MemoryTool {
    definition: ToolDefinition,
    backend: Arc<dyn MemoryTools>,
}

fn args<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ToolError> {
    serde_json::from_value(value).map_err(|e| ToolError::new(format!("bad arguments: {e}")))
}

#[async_trait]
impl Tool for MemoryTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        match self.definition.name.as_str() {
            REMEMBER => {
                let args: RememberArgs = args(arguments)?;
                super::check_content(&args.content).map_err(ToolError::new)?;
                super::check_tags(&args.tags).map_err(ToolError::new)?;
                let id = self
                    .backend
                    .remember(&context.idempotency_key, args)
                    .await?;
                Ok(ToolOutput::json(&json!({"remembered": id})))
            }
            RECALL => {
                let found = self.backend.recall(args(arguments)?).await?;
                let items: Vec<Value> = found
                    .into_iter()
                    .map(|(id, content)| json!({"id": id, "content": content}))
                    .collect();
                Ok(ToolOutput::json(&json!({"memories": items})))
            }
            _ => {
                let args: ForgetArgs = args(arguments)?;
                let id = args.id;
                if self.backend.forget(args).await? {
                    Ok(ToolOutput::json(&json!({"forgotten": id})))
                } else {
                    Err(ToolError::new(format!(
                        "there is no memory {id} you may change"
                    )))
                }
            }
        }
    }
}

/// The three tools over `backend`, to add to a Turn's tool set.
pub fn memory_tool_set(backend: Arc<dyn MemoryTools>) -> Vec<SharedTool> {
    tool_definitions()
        .into_iter()
        .map(|definition| {
            Arc::new(MemoryTool {
                definition,
                backend: Arc::clone(&backend),
            }) as SharedTool
        })
        .collect()
}
