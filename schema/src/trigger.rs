//! Triggers and reminders: input that reaches a Chat on a schedule, on a signed webhook call,
//! or at a time a Bot chose.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{ChatId, ExecutionId};

/// What makes a trigger fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum TriggerKind {
    /// A cron expression in a time zone.
    Schedule,
    /// A signed HTTP call to the trigger's own URL.
    Webhook,
}

/// Whether a trigger fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum TriggerState {
    /// It fires.
    Active,
    /// It does not fire until it is resumed (by its creator, or after its creator lost the
    /// right to send to its Chat).
    Paused,
}

/// A trigger to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct CreateTrigger {
    /// The Chat it sends input to: one of the caller's.
    pub chat_id: ChatId,
    /// Schedule or webhook.
    pub kind: TriggerKind,
    /// A schedule's cron expression: five fields (minute hour day month weekday), or six with
    /// seconds first, or a nickname such as `@hourly`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub cron: Option<String>,
    /// A schedule's IANA time zone, e.g. `Europe/Berlin`; `UTC` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub time_zone: Option<String>,
    /// The text sent at each firing (1-4000 characters): a schedule needs it; a webhook sends
    /// it before the body it received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub text: Option<String>,
}

/// A trigger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Trigger {
    /// Its ID.
    pub id: Uuid,
    /// The Chat it sends input to.
    pub chat_id: ChatId,
    /// Schedule or webhook.
    pub kind: TriggerKind,
    /// Active or paused.
    pub state: TriggerState,
    /// A schedule's cron expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub cron: Option<String>,
    /// A schedule's time zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub time_zone: Option<String>,
    /// The text sent at each firing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub text: Option<String>,
    /// A webhook's path on this server, `/v1/hooks/{id}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub hook_path: Option<String>,
    /// When a schedule fires next (absent while paused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub next_fire_at: Option<DateTime<Utc>>,
    /// Why it was paused, when the server paused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub paused_reason: Option<String>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// A trigger just created, with a webhook's signing secret: shown only here, once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct CreatedTrigger {
    /// The trigger.
    pub trigger: Trigger,
    /// A webhook's signing secret (`whsec_...`): the HMAC-SHA256 key of its signatures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub signing_secret: Option<String>,
}

/// What became of one firing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum FiringOutcome {
    /// The input was sent to the Chat.
    Sent,
    /// The creator may no longer send to the Chat: nothing was sent and the trigger paused.
    Refused,
}

/// One firing of a trigger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct TriggerFiring {
    /// Its ID.
    pub id: Uuid,
    /// The trigger.
    pub trigger_id: Uuid,
    /// When it fired.
    pub fired_at: DateTime<Utc>,
    /// A schedule's slot this firing stands for; earlier than `fired_at` by the time the
    /// server was down, for a catch-up firing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub scheduled_for: Option<DateTime<Utc>>,
    /// Whether it stands for one or more slots that passed while no node ran it.
    pub catch_up: bool,
    /// A webhook delivery's ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub delivery_id: Option<String>,
    /// Sent or refused.
    pub outcome: FiringOutcome,
    /// Why it was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub reason: Option<String>,
    /// The Turn the input went to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub execution_id: Option<ExecutionId>,
}

/// Where a reminder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum ReminderState {
    /// Waiting for its time.
    Pending,
    /// Its text reached the Chat.
    Delivered,
    /// Cancelled (by a person, or because its Chat was deleted).
    Cancelled,
    /// Its time came but the Chat's owner may no longer send to it.
    Refused,
}

/// A reminder a Bot set with its `remind` tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Reminder {
    /// Its ID.
    pub id: Uuid,
    /// The Chat its text goes to.
    pub chat_id: ChatId,
    /// When its text reaches the Chat.
    pub due_at: DateTime<Utc>,
    /// The text.
    pub text: String,
    /// Pending, delivered, cancelled or refused.
    pub state: ReminderState,
    /// The Turn that set it.
    pub source_execution_id: ExecutionId,
    /// The Turn its text went to, once delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub delivered_execution_id: Option<ExecutionId>,
    /// When it was set.
    pub created_at: DateTime<Utc>,
}
