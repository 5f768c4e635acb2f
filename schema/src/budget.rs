//! Budgets: spending caps on everything a Chat, a Bot or an organization runs.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// What a budget caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum BudgetScope {
    /// Every Turn of the organization.
    Organization,
    /// Every Turn of one Bot, in all its Chats.
    Bot,
    /// Every Turn of one Chat.
    Chat,
}

impl BudgetScope {
    /// The scope as it appears in paths, e.g. `bot`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Organization => "organization",
            Self::Bot => "bot",
            Self::Chat => "chat",
        }
    }

    /// Reads a scope from its path form.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "organization" => Some(Self::Organization),
            "bot" => Some(Self::Bot),
            "chat" => Some(Self::Chat),
            _ => None,
        }
    }
}

/// A budget to set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct PutBudget {
    /// The most all Turns in the scope may cost together, in millionths of a US dollar.
    pub max_cost_micros: u64,
}

/// A budget and what its scope spent so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Budget {
    /// What it caps.
    pub scope: BudgetScope,
    /// The organization, Bot or Chat it caps.
    pub target_id: Uuid,
    /// The cap, in millionths of a US dollar.
    pub max_cost_micros: u64,
    /// The known cost of all Turns in the scope so far (usage without a price counts as 0).
    pub spent_micros: u64,
    /// When it was last set.
    pub updated_at: DateTime<Utc>,
}
