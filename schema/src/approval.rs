//! Approvals: rules that allow, ask for or deny tool calls, and the requests an `ask` creates.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::ids::{BotId, ChatId, ExecutionId};
use crate::tool::ToolCall;

/// What a rule does with a matching tool call. When several rules match, the strictest wins:
/// `deny` over `ask` over `allow`. A call no rule matches is allowed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum RuleAction {
    /// The call runs.
    Allow,
    /// The call waits for a person's decision; the Turn goes on meanwhile.
    Ask,
    /// The call does not run; the model gets the refusal as the call's result.
    Deny,
}

/// A rule to add. Without `bot_id` and `member_id` it holds for the whole organization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct CreateApprovalRule {
    /// The tool names it matches: a name, or a pattern where `*` stands for any text.
    #[schema(min_length = 1, max_length = 200)]
    pub tool: String,
    /// A pattern (with `*`) the call's arguments, as compact JSON, must match; absent matches
    /// any arguments. E.g. `*"amount":1000*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub arguments: Option<String>,
    /// What happens to a matching call.
    pub action: RuleAction,
    /// Only calls of this Bot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub bot_id: Option<BotId>,
    /// Only calls made for this member. Members may add rules for themselves; other rules
    /// need an admin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub member_id: Option<Uuid>,
    /// How long an `ask` waits for a decision before it expires and grants nothing, in
    /// milliseconds (default one day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    #[schema(minimum = 1)]
    pub expires_after_ms: Option<u64>,
}

/// A rule of an organization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ApprovalRule {
    /// Its ID.
    pub id: Uuid,
    /// The tool names it matches.
    pub tool: String,
    /// The arguments pattern, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub arguments: Option<String>,
    /// What it does.
    pub action: RuleAction,
    /// The Bot it is limited to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub bot_id: Option<BotId>,
    /// The member it is limited to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub member_id: Option<Uuid>,
    /// How long its requests wait, in milliseconds.
    pub expires_after_ms: u64,
    /// When it was added.
    pub created_at: DateTime<Utc>,
}

/// Where an approval request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for a decision.
    Pending,
    /// Approved: the call runs once, in its own execution.
    Approved,
    /// Denied: the call never runs; the model is told.
    Denied,
    /// No decision came in time: it grants nothing.
    Expired,
    /// Approved by a person, but the rights the call was asked with are gone (a revoked token,
    /// a removed member): it grants nothing.
    Revoked,
    /// The work that asked was cancelled before a decision.
    Cancelled,
}

impl ApprovalState {
    /// The state's wire name, e.g. `pending`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
            Self::Revoked => "revoked",
            Self::Cancelled => "cancelled",
        }
    }

    /// Reads a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pending" => Self::Pending,
            "approved" => Self::Approved,
            "denied" => Self::Denied,
            "expired" => Self::Expired,
            "revoked" => Self::Revoked,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }
}

/// A tool call that waits for (or got) a person's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ApprovalRequest {
    /// Its ID.
    pub id: Uuid,
    /// The Turn whose model asked for the call.
    pub source_execution_id: ExecutionId,
    /// The execution that runs the call once it is approved.
    pub execution_id: ExecutionId,
    /// The Chat the decision and the call's result are reported to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub chat_id: Option<ChatId>,
    /// The Bot that asked.
    pub bot_id: BotId,
    /// The call, with its arguments.
    pub call: ToolCall,
    /// Where it is.
    pub state: ApprovalState,
    /// When it was asked for.
    pub created_at: DateTime<Utc>,
    /// When it expires unless decided.
    pub expires_at: DateTime<Utc>,
    /// When it was decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub decided_at: Option<DateTime<Utc>>,
    /// The member who decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub decided_by: Option<Uuid>,
    /// The reason given with the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub reason: Option<String>,
}

/// A person's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run the call once.
    Approve,
    /// Do not run it.
    Deny,
}

/// A decision on a pending request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct DecideApproval {
    /// Approve or deny.
    pub decision: Decision,
    /// Why, for the audit log and the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    #[schema(max_length = 1000)]
    pub reason: Option<String>,
}
