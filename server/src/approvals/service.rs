//! The approval use cases: rules, and the requests a person decides.

use std::sync::Arc;

use openbot_schema::{
    Action, ApprovalRequest, ApprovalRequestPage, ApprovalRule, ApprovalRulePage, ApprovalState,
    BotId, CreateApprovalRule, DecideApproval, Decision, Resource, ToolCall,
};
use uuid::Uuid;

use super::rules::{DEFAULT_EXPIRY_MS, RuleRow};
use super::store::RuleStore;
use crate::engine::{Engine, EngineError, Wake};
use crate::identity::{AccessError, Caller, IdentityCheckError, IdentityStore};
use crate::paging::{CreatedPosition, Paging};
use crate::store::{
    NoticeTarget, NoticeWrite, RequestAccess, RequestDecision, RequestRow, StoreError, TxWrites,
    now_ms, stored_time, stored_time_opt,
};
use crate::work::{JobInput, notice_content};

/// The most rules an organization keeps.
pub const MAX_RULES: usize = 1_000;

/// Why an approval use case failed.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    /// Not there, or not visible to the caller.
    #[error("{0} was not found")]
    NotFound(&'static str),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// The caller's token lacks a right, or its role may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// The request is no longer pending (decided, expired or cancelled): nothing was granted.
    #[error("{0}")]
    Closed(String),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<AccessError> for ApprovalError {
    fn from(err: AccessError) -> Self {
        ApprovalError::Forbidden(err.to_string())
    }
}

impl From<EngineError> for ApprovalError {
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::Store(err) => ApprovalError::Store(err),
            other => ApprovalError::Store(StoreError::Invalid(other.to_string())),
        }
    }
}

/// The approval use cases.
#[derive(Clone)]
pub struct Approvals {
    engine: Arc<Engine>,
    rules: Arc<dyn RuleStore>,
    identity: Arc<dyn IdentityStore>,
}

fn rule_view(row: RuleRow) -> Result<ApprovalRule, StoreError> {
    Ok(ApprovalRule {
        id: row.id,
        tool: row.tool,
        arguments: row.arguments,
        action: row.action,
        bot_id: row.bot_id,
        member_id: row.member_id,
        expires_after_ms: row.expires_after_ms,
        created_at: stored_time(row.created_at)?,
    })
}

fn request_view(row: RequestRow) -> Result<ApprovalRequest, StoreError> {
    let call: ToolCall = serde_json::from_str(&row.payload)
        .map_err(|e| StoreError::Invalid(format!("request {}: {e}", row.id)))?;
    let state = ApprovalState::parse(&row.state)
        .ok_or_else(|| StoreError::Invalid(format!("request state `{}`", row.state)))?;
    Ok(ApprovalRequest {
        id: row.id,
        source_execution_id: row.source_execution_id,
        execution_id: row.execution_id,
        chat_id: row.chat_id.map(Into::into),
        bot_id: row.bot_id.into(),
        call,
        state,
        created_at: stored_time(row.created_at)?,
        expires_at: stored_time(row.expires_at)?,
        decided_at: stored_time_opt(row.decided_at)?,
        decided_by: row.decided_by.filter(|m| !m.is_nil()),
        reason: row.reason,
    })
}

/// The requests a caller may see and decide: its organization's; only its own work's unless it
/// is an admin; only work for a Chat of one of its Bots when its token is limited to some.
fn access(caller: &Caller) -> RequestAccess {
    RequestAccess {
        organization_id: caller.member.organization_id,
        member: (!caller.is_admin()).then_some(caller.member.member_id),
        bot_ids: caller.bot_ids.clone(),
    }
}

impl Approvals {
    /// The use cases on these stores.
    pub fn new(
        engine: Arc<Engine>,
        rules: Arc<dyn RuleStore>,
        identity: Arc<dyn IdentityStore>,
    ) -> Self {
        Self {
            engine,
            rules,
            identity,
        }
    }

    /// Adds a rule. Rules for the whole organization or a Bot need an admin; a member may add
    /// rules for themselves (a rule only ever narrows what runs: the strictest one wins).
    pub async fn add_rule(
        &self,
        caller: &Caller,
        rule: CreateApprovalRule,
    ) -> Result<ApprovalRule, ApprovalError> {
        caller.require(Resource::Chats, Action::Write)?;
        within_bot_limit(caller, rule.bot_id)?;
        let own = rule.member_id == Some(caller.member.member_id) && rule.bot_id.is_none();
        if !own && !caller.is_admin() {
            return Err(ApprovalError::Forbidden(
                "only an owner or admin may add rules beyond their own".into(),
            ));
        }
        if rule.tool.is_empty() || rule.tool.len() > 200 {
            return Err(ApprovalError::Invalid(
                "tool must have 1-200 characters".into(),
            ));
        }
        if rule.arguments.as_ref().is_some_and(|a| a.len() > 1000) {
            return Err(ApprovalError::Invalid(
                "arguments may have at most 1000 characters".into(),
            ));
        }
        if rule.expires_after_ms == Some(0) {
            return Err(ApprovalError::Invalid(
                "expires_after_ms must be at least 1".into(),
            ));
        }
        let organization = caller.member.organization_id;
        if self.rules.rules(organization).await?.len() >= MAX_RULES {
            return Err(ApprovalError::Invalid(format!(
                "an organization keeps at most {MAX_RULES} rules"
            )));
        }
        let row = RuleRow {
            id: Uuid::now_v7(),
            tool: rule.tool,
            arguments: rule.arguments,
            action: rule.action,
            bot_id: rule.bot_id,
            member_id: rule.member_id,
            expires_after_ms: rule.expires_after_ms.unwrap_or(DEFAULT_EXPIRY_MS),
            created_at: now_ms(),
        };
        Ok(rule_view(self.rules.add_rule(organization, row).await?)?)
    }

    /// One page of the organization's rules, oldest first; a token limited to some Bots sees
    /// the rules for every Bot and those for its Bots, never another Bot's.
    pub async fn rules(
        &self,
        caller: &Caller,
        paging: &Paging<CreatedPosition>,
    ) -> Result<ApprovalRulePage, ApprovalError> {
        caller.require(Resource::Chats, Action::Read)?;
        let rows = self
            .rules
            .rules_page(
                caller.member.organization_id,
                caller.bot_ids.as_deref(),
                paging.after,
                paging.fetch(),
            )
            .await?;
        Ok(paging.try_page(rows, |row| (row.created_at, row.id), rule_view)?)
    }

    /// Removes a rule: an admin any, a member their own.
    pub async fn delete_rule(&self, caller: &Caller, id: Uuid) -> Result<(), ApprovalError> {
        caller.require(Resource::Chats, Action::Write)?;
        let organization = caller.member.organization_id;
        let rule = self
            .rules
            .rule(organization, id)
            .await?
            .ok_or(ApprovalError::NotFound("rule"))?;
        within_bot_limit(caller, rule.bot_id)?;
        let own = rule.member_id == Some(caller.member.member_id) && rule.bot_id.is_none();
        if !own && !caller.is_admin() {
            return Err(ApprovalError::Forbidden(
                "only an owner or admin may remove this rule".into(),
            ));
        }
        self.rules.delete_rule(organization, id).await?;
        Ok(())
    }

    /// The requests the caller may decide (an admin: all of the organization; a member: their
    /// own work's; a token limited to some Bots: only those of work for a Chat of one of its
    /// Bots), newest first, optionally only in one state: one page of them.
    pub async fn list(
        &self,
        caller: &Caller,
        state: Option<ApprovalState>,
        paging: &Paging<CreatedPosition>,
    ) -> Result<ApprovalRequestPage, ApprovalError> {
        caller.require(Resource::Chats, Action::Read)?;
        let rows = self
            .engine
            .context()
            .store
            .requests(
                &access(caller),
                state.map(ApprovalState::as_str),
                paging.after,
                paging.fetch(),
            )
            .await?;
        let (rows, next_cursor) = paging.finish(rows, |row| (row.created_at, row.id));
        let items = rows
            .into_iter()
            .map(request_view)
            .collect::<Result<_, _>>()?;
        Ok(ApprovalRequestPage { items, next_cursor })
    }

    async fn visible(&self, caller: &Caller, id: Uuid) -> Result<RequestRow, ApprovalError> {
        self.engine
            .context()
            .store
            .visible_request(&access(caller), id)
            .await?
            .ok_or(ApprovalError::NotFound("approval request"))
    }

    /// One request the caller may decide.
    pub async fn get(&self, caller: &Caller, id: Uuid) -> Result<ApprovalRequest, ApprovalError> {
        caller.require(Resource::Chats, Action::Read)?;
        Ok(request_view(self.visible(caller, id).await?)?)
    }

    /// Decides a pending request. Approving checks, now, that the rights the call was asked
    /// with still hold: if they are gone the request closes `revoked` and grants nothing. The
    /// decision, its audit entry and its notice commit together (for a plan, so does switching
    /// the Chat out of plan mode), and a request that expired before the decision held its
    /// lock grants nothing.
    pub async fn decide(
        &self,
        caller: &Caller,
        id: Uuid,
        decision: DecideApproval,
    ) -> Result<ApprovalRequest, ApprovalError> {
        caller.require(Resource::Chats, Action::Write)?;
        if decision.reason.as_ref().is_some_and(|r| r.len() > 1000) {
            return Err(ApprovalError::Invalid(
                "reason may have at most 1000 characters".into(),
            ));
        }
        let row = self.visible(caller, id).await?;
        if row.state != ApprovalState::Pending.as_str() {
            return Err(ApprovalError::Closed(format!(
                "the request is {} and takes no decision",
                row.state
            )));
        }
        let call: ToolCall = serde_json::from_str(&row.payload)
            .map_err(|e| StoreError::Invalid(format!("request {id}: {e}")))?;
        let cx = self.engine.context();
        let state = match decision.decision {
            Decision::Deny => ApprovalState::Denied,
            Decision::Approve => {
                let job = cx.store.execution(row.execution_id).await?;
                let input: JobInput = cx.open_json(job.input_record).await?;
                match &input.identity {
                    Some(identity) => match identity.check_current(self.identity.as_ref()).await {
                        Ok(()) => ApprovalState::Approved,
                        Err(IdentityCheckError::Denied(_)) => ApprovalState::Revoked,
                        Err(IdentityCheckError::Store(err)) => return Err(err.into()),
                    },
                    // Work a server cannot check is never released by an approval.
                    None => ApprovalState::Revoked,
                }
            }
        };
        let reason = decision
            .reason
            .clone()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        let plan = row.kind == "plan";
        let text = match state {
            ApprovalState::Approved if plan => {
                format!("[notice] Your plan was approved{reason}. Plan mode is off: carry it out.")
            }
            ApprovalState::Denied if plan => format!(
                "[notice] Your plan was denied{reason}. Plan mode stays on: propose another plan."
            ),
            ApprovalState::Approved => format!(
                "[notice] The call `{}` ({}) was approved{reason}. It runs now; its result comes as another notice.",
                call.name, call.id
            ),
            ApprovalState::Revoked => format!(
                "[notice] The call `{}` ({}) was approved, but the rights it was asked with are gone; it did not run.",
                call.name, call.id
            ),
            _ => format!(
                "[notice] The call `{}` ({}) was denied{reason}. It did not run.",
                call.name, call.id
            ),
        };
        let target = match row.chat_id {
            Some(chat) => NoticeTarget::Chat(chat),
            None => NoticeTarget::Execution(row.source_execution_id),
        };
        let written = cx
            .store
            .decide_request(
                id,
                RequestDecision {
                    state: state.as_str().into(),
                    member_id: caller.member.member_id,
                    reason: decision.reason,
                    notice: Some(NoticeWrite {
                        target,
                        content: notice_content(&text),
                    }),
                    writes: if plan && state == ApprovalState::Approved {
                        TxWrites::one(crate::chats::PlanApproved { request: id })
                    } else {
                        TxWrites::default()
                    },
                },
            )
            .await
            .map_err(|err| match err {
                StoreError::RequestClosed(_) => {
                    ApprovalError::Closed("the request was decided meanwhile".into())
                }
                other => other.into(),
            })?;
        cx.hub.announce(Wake::Work);
        cx.hub.announce(Wake::Signal(row.source_execution_id));
        if written.state == ApprovalState::Expired.as_str() {
            return Err(ApprovalError::Closed(
                "the request expired before the decision; nothing was granted".into(),
            ));
        }
        Ok(request_view(written)?)
    }
}

/// A token limited to some Bots adds and removes only rules for one of its Bots: any other
/// rule reaches Bots beyond its limit.
fn within_bot_limit(caller: &Caller, bot: Option<BotId>) -> Result<(), ApprovalError> {
    match bot {
        _ if caller.bot_ids.is_none() => Ok(()),
        Some(bot) if caller.may_use(bot) => Ok(()),
        _ => Err(ApprovalError::Forbidden(
            "a token limited to some Bots changes only rules for one of its Bots".into(),
        )),
    }
}
