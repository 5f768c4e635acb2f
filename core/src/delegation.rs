//! Delegation rules both hosts keep: a delegate tool hands a task to another Bot as a child
//! Turn. The server (durable child executions) and the in-memory Client (a child Turn in this
//! process) check a registration, describe the tool to the model, read the task and narrow the
//! child's limits with these functions, so the two modes cannot drift apart.

use openbot_schema::{Limits, PutDelegateTool, ToolCall, ToolDefinition};

use crate::tool::CheckedSchema;

/// How many levels of delegate tools a Turn offers: a delegate's delegates, and so on. A
/// delegate tool deeper than this is not offered at all, so the chain ends there.
pub const MAX_DELEGATION_DEPTH: usize = 3;

/// Whether a Turn `depth` levels below its root (0: the Chat's own Turn) offers its delegate
/// tools.
pub fn offers_delegates(depth: usize) -> bool {
    depth < MAX_DELEGATION_DEPTH
}

/// Checks a delegate tool registration under `name`: the name follows the rules of every
/// tool name and the limits let a Turn do something. Whether the caller may use the named
/// Bot is the host's check. The error is for the caller (`invalid_input`).
pub fn check_delegate(name: &str, request: &PutDelegateTool) -> Result<(), String> {
    CheckedSchema::new(ToolDefinition {
        name: name.to_string(),
        description: String::new(),
        input_schema: serde_json::json!({"type": "object"}),
    })
    .map_err(|e| e.to_string())?;
    request.limits.check()
}

/// What the model sees of the delegate tool `name` that hands tasks to the Bot `bot_name`:
/// one `task` argument, and the registration's description (or one naming the Bot).
pub fn delegate_definition(name: &str, description: &str, bot_name: &str) -> ToolDefinition {
    let description = if description.is_empty() {
        format!(
            "Hands a task to the Bot {bot_name}, which works on it with its own tools and answers."
        )
    } else {
        description.to_string()
    };
    ToolDefinition {
        name: name.to_string(),
        description,
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {"task": {"type": "string", "description": "What to do, in full."}},
            "required": ["task"]
        }),
    }
}

/// The task a delegate call gives: its `task` argument, or the arguments as JSON.
pub fn task_of(call: &ToolCall) -> String {
    call.arguments
        .get("task")
        .and_then(|t| t.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| call.arguments.to_string())
}

/// The limits of a delegate Bot's child Turn before its parent's: the Bot's own, narrowed by
/// the delegate tool's.
pub fn route_limits(bot: Limits, delegate: Limits) -> Limits {
    bot.tightened_by(delegate)
}

/// The limits of a child Turn: its route's ([`route_limits`]) narrowed by its parent Turn's.
/// A child keeps every limit of its source; a caller may add limits, never remove one.
pub fn child_limits(route: Limits, parent: Limits) -> Limits {
    route.tightened_by(parent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn delegation_stops_at_its_depth() {
        assert!(offers_delegates(0));
        assert!(offers_delegates(MAX_DELEGATION_DEPTH - 1));
        assert!(!offers_delegates(MAX_DELEGATION_DEPTH));
    }

    #[test]
    fn a_child_keeps_every_limit_of_its_bot_its_tool_and_its_parent() {
        let bot = Limits {
            max_steps: Some(10),
            ..Limits::default()
        };
        let tool = Limits {
            max_wall_time_ms: Some(60_000),
            ..Limits::default()
        };
        let parent = Limits {
            max_steps: Some(3),
            max_cost_micros: Some(500),
            ..Limits::default()
        };
        let child = child_limits(route_limits(bot, tool), parent);
        assert_eq!(child.max_steps, Some(3));
        assert_eq!(child.max_wall_time_ms, Some(60_000));
        assert_eq!(child.max_cost_micros, Some(500));
    }

    #[test]
    fn a_registration_with_a_bad_name_or_limits_is_refused() {
        let request = PutDelegateTool {
            description: String::new(),
            bot_id: openbot_schema::BotId::new(),
            limits: Limits::default(),
        };
        assert!(check_delegate("helper", &request).is_ok());
        assert!(check_delegate("no spaces", &request).is_err());
        let zero = PutDelegateTool {
            limits: Limits {
                max_steps: Some(0),
                ..Limits::default()
            },
            ..request
        };
        assert!(check_delegate("helper", &zero).is_err());
    }

    #[test]
    fn the_task_is_the_task_argument_or_the_arguments() {
        let call = |arguments| ToolCall {
            id: "c".into(),
            name: "d".into(),
            arguments,
        };
        assert_eq!(task_of(&call(json!({"task": "Sum it"}))), "Sum it");
        assert_eq!(task_of(&call(json!({"n": 1}))), r#"{"n":1}"#);
    }
}
