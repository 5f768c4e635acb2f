//! The shared schema of OpenBot.
//!
//! Every public type lives here exactly once: the IDs, messages and content parts, tool
//! definitions and results, usage, the event log, execution states, Bot and Chat resources and
//! the public error body. The standalone runtime, the server and every language binding use
//! these types, so the wire format of the in-memory and the remote Client cannot drift.

mod access;
mod app;
mod app_oauth;
mod approval;
mod billing;
mod bot;
mod budget;
mod channel;
mod chat;
mod cluster;
mod code;
mod computer;
mod error;
mod event;
mod execution;
#[cfg(feature = "uniffi")]
mod ffi;
#[cfg(feature = "uniffi")]
mod ffi_error;
mod file;
mod ids;
mod limit;
mod memory;
mod message;
mod models;
mod node;
mod organization;
mod outcome;
mod page;
mod tool;
mod tool_registry;
mod trigger;
mod usage;
mod vault;

// The scaffolding of the uniffi records (see `ffi`), at the crate root where uniffi wants it.
#[cfg(feature = "uniffi")]
uniffi::setup_scaffolding!("openbot_schema");

pub use access::{Action, ApiToken, CreateToken, CreatedToken, Resource, Right};
pub use app::{
    APP_TOOL_SEPARATOR, App, AppAuthKind, AppConnection, AppConnectionStatus, AppDiscovery,
    AppToolAnnotations, AppToolDeclaration, AppTransport, NewApp, NewAppConnection,
    split_app_tool_name,
};
pub use app_oauth::{
    BeginOAuth, CompleteOAuth, OAuthAuthorization, OAuthCleanup, OAuthConnection, OAuthRemoval,
};
pub use approval::{
    ApprovalRequest, ApprovalRule, ApprovalState, CreateApprovalRule, DecideApproval, Decision,
    RuleAction,
};
pub use billing::{
    CreditBalance, CreditEntry, CreditKind, CreditLedgerPage, GrantCredits, ModelPrice,
    PriceSource, PutModelPrice, UsageGroup, UsagePage, UsageRow,
};
pub use bot::{Bot, BotSpec, BotUpdate, Limits};
pub use budget::{Budget, BudgetScope, PutBudget};
pub use channel::{
    Channel, ChannelAck, ChannelKind, ChannelSend, ChannelStatus, CreateChannel, LinkSpeaker,
    SendState, Speaker,
};
pub use chat::{Chat, ChatEntry, CreateChat, PlanMode, SendDisposition, SendInput, SendReceipt};
pub use cluster::{
    ClusterNode, ClusterNodes, PhysicalResource, PhysicalResources, ResourceFilter, ResourceState,
};
pub use code::{CodeConsoleLine, CodeRun, CodeRunError, CodeRunResult};
pub use computer::{
    ApprovePairing, ClaimPairing, Computer, ComputerFile, ComputerGrant, GrantComputer,
    OutputChunk, OutputQuery, Pairing, PairingClaim, StartPairing, TerminalOutput, TerminalSession,
};
pub use error::{ErrorBody, ErrorCategory, ErrorCode, ErrorRecord};
pub use event::{Event, EventKind, EventPage};
pub use execution::{Execution, ExecutionKind, ExecutionState, TurnOutcome};
#[cfg(feature = "uniffi")]
pub use ffi_error::{OpenBotError, category_name};
pub use file::{FileRetention, PutFileRetention, StoredFile};
pub use ids::{BotId, ChatId, ErrorId, ExecutionId, FileId, IdParseError, TokenId};
pub use limit::{PutScopeLimit, ScopeLimit};
pub use memory::{
    CreateMemory, Memory, MemoryEvidence, MemoryFilter, MemoryHit, MemorySearch,
    MemorySearchResult, MemorySettings, MemoryStatus, MemoryUpdate,
};
pub use message::{ContentPart, FileRef, Message};
pub use models::{ProviderSettings, PutProvider};
pub use node::{Health, Session};
pub use organization::{
    AcceptInvitation, AcceptedInvitation, CreateInvitation, CreateOrganization, CreatedInvitation,
    CreatedOrganization, Invitation, Member, MemberRole, Organization,
};
pub use outcome::{DecideOutcome, OutcomeDecision, OutcomeDecisionRecord, UnknownOutcome};
pub use page::{
    ApiTokenPage, AppConnectionPage, AppPage, ApprovalRequestPage, ApprovalRulePage, BotPage,
    BudgetPage, ChannelPage, ChannelSendPage, ChatEntryPage, ChatFilter, ChatPage, ComputerPage,
    DEFAULT_PAGE_LIMIT, DelegateToolPage, HttpToolPage, InvitationPage, MAX_PAGE_LIMIT, MemberPage,
    MemoryPage, ModelPricePage, OrganizationPage, Page, PageQuery, ProviderSettingsPage,
    ReminderPage, ScopeLimitPage, StoredFilePage, TriggerFiringPage, TriggerPage,
    UnknownOutcomePage, VaultItemPage, VaultRulePage,
};
pub use tool::{ToolCall, ToolDefinition, ToolResult};
pub use tool_registry::{DelegateTool, HttpTool, PutDelegateTool, PutHttpTool};
pub use trigger::{
    CreateTrigger, CreatedTrigger, FiringOutcome, Reminder, ReminderState, Trigger, TriggerFiring,
    TriggerKind, TriggerState,
};
pub use usage::Usage;
pub use vault::{
    CreateVaultItem, CreateVaultRule, PutVaultField, VaultField, VaultItem, VaultOwner,
    VaultReader, VaultRule,
};
