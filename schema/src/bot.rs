//! Bots: an agent definition with instructions, a model, tools and limits.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ids::BotId;
use crate::tool::ToolDefinition;

/// Limits on one Turn. A limit that is reached ends the Turn with a matching outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// The most model steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    #[schema(minimum = 1)]
    pub max_steps: Option<u32>,
    /// The most wall time in milliseconds, counted from the Turn's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub max_wall_time_ms: Option<u64>,
    /// The most cost in millionths of a US dollar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub max_cost_micros: Option<u64>,
    /// The loop breaker: how often one tool call (the same tool with the same arguments) may
    /// run in a Turn; asking for it once more ends the Turn with `repeated_tool_call`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    #[schema(minimum = 1)]
    pub max_repeated_calls: Option<u32>,
}

impl Limits {
    /// Checks the limits: each that is set must let a Turn do something (at least 1).
    pub fn check(&self) -> Result<(), String> {
        if self.max_steps == Some(0) {
            return Err("max_steps must be at least 1".into());
        }
        if self.max_repeated_calls == Some(0) {
            return Err("max_repeated_calls must be at least 1".into());
        }
        Ok(())
    }

    /// The tighter of two limit sets, field by field: a caller may add limits, never remove one.
    pub fn tightened_by(self, other: Limits) -> Limits {
        fn min<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        Limits {
            max_steps: min(self.max_steps, other.max_steps),
            max_wall_time_ms: min(self.max_wall_time_ms, other.max_wall_time_ms),
            max_cost_micros: min(self.max_cost_micros, other.max_cost_micros),
            max_repeated_calls: min(self.max_repeated_calls, other.max_repeated_calls),
        }
    }
}

/// What a Bot is made of, to create one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct BotSpec {
    /// A display name, 1-200 characters.
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    /// The system instructions.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub instructions: String,
    /// The model, as `provider:model`, e.g. `openai:gpt-4o-mini` or `scripted:answers.json`.
    #[schema(
        pattern = "^((openai|openai-responses|anthropic|scripted):.+|compatible:https?://.+:.+)$"
    )]
    pub model: String,
    /// The tools the Bot may call.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub tools: Vec<ToolDefinition>,
    /// Limits on each Turn.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub limits: Limits,
    /// On a server: whether every member of the organization may chat with it (each in
    /// Chats of their own). A Bot that is not shared is its owner's alone.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub shared: bool,
    /// Whether the Bot has memory: it recalls memories before each Turn's model requests, has
    /// the tools `remember`, `recall` and `forget`, and learns after each Turn (on a server).
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub memory: bool,
    /// On a server: whether the Bot is offered the `remind` tool, to set reminders whose
    /// text reaches the Chat later as input.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub reminders: bool,
    /// Code Mode: the model is offered one tool, `run_code`, whose description declares the
    /// Bot's tools as a TypeScript API, and calls them from a JavaScript program run in a
    /// sandbox (see docs/code-mode.md).
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub code_mode: bool,
}

/// A change to a Bot; absent fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct BotUpdate {
    /// The revision the caller read; a different current revision is a conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub revision: Option<u64>,
    /// A new name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub name: Option<String>,
    /// New instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub instructions: Option<String>,
    /// A new model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub model: Option<String>,
    /// New tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub tools: Option<Vec<ToolDefinition>>,
    /// New limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub limits: Option<Limits>,
    /// Share or unshare it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub shared: Option<bool>,
    /// Switch memory on or off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub memory: Option<bool>,
    /// Offer the `remind` tool, or stop offering it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub reminders: Option<bool>,
    /// Turn Code Mode on or off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub code_mode: Option<bool>,
}

impl BotUpdate {
    /// `spec` with this change's present fields (the revision is the caller's to check).
    pub fn apply_to(self, spec: &mut BotSpec) {
        let Self {
            revision: _,
            name,
            instructions,
            model,
            tools,
            limits,
            shared,
            memory,
            reminders,
            code_mode,
        } = self;
        if let Some(name) = name {
            spec.name = name;
        }
        if let Some(instructions) = instructions {
            spec.instructions = instructions;
        }
        if let Some(model) = model {
            spec.model = model;
        }
        if let Some(tools) = tools {
            spec.tools = tools;
        }
        if let Some(limits) = limits {
            spec.limits = limits;
        }
        if let Some(shared) = shared {
            spec.shared = shared;
        }
        if let Some(memory) = memory {
            spec.memory = memory;
        }
        if let Some(reminders) = reminders {
            spec.reminders = reminders;
        }
        if let Some(on) = code_mode {
            spec.code_mode = on;
        }
    }
}

/// A Bot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Bot {
    /// Its ID.
    pub id: BotId,
    /// Its definition.
    pub spec: BotSpec,
    /// Grows by one with each update.
    pub revision: u64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_of_zero_steps_or_repeats_is_refused() {
        let steps = Limits {
            max_steps: Some(0),
            ..Limits::default()
        };
        let repeats = Limits {
            max_repeated_calls: Some(0),
            ..Limits::default()
        };
        assert!(steps.check().is_err());
        assert!(repeats.check().is_err());
        assert!(Limits::default().check().is_ok());
    }

    #[test]
    fn tightening_limits_never_removes_one() {
        let source = Limits {
            max_steps: Some(5),
            max_wall_time_ms: None,
            max_cost_micros: Some(9),
            max_repeated_calls: None,
        };
        let caller = Limits {
            max_steps: Some(8),
            max_wall_time_ms: Some(100),
            max_cost_micros: None,
            max_repeated_calls: Some(3),
        };
        let both = source.tightened_by(caller);
        assert_eq!(both.max_steps, Some(5));
        assert_eq!(both.max_wall_time_ms, Some(100));
        assert_eq!(both.max_cost_micros, Some(9));
        assert_eq!(both.max_repeated_calls, Some(3));
    }
}
