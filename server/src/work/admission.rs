//! Admission: how a Turn's new tool call goes, decided before anything is recorded for it.

use std::sync::Arc;

use openbot_core::turn::{CallKey, CallSlot};
use openbot_schema::{EventKind, ExecutionId, RuleAction, ToolCall, ToolResult};
use uuid::Uuid;

use super::delegation::child_turn;
use super::job::{JobInput, TOOL_JOB};
use crate::approvals::{DEFAULT_EXPIRY_MS, RuleStore, verdict};
use crate::engine::EngineContext;
use crate::store::{
    ChildStart, NewChild, NewExecution, NewRequest, Scope, StoreError, now_ms, stored_time,
};
use crate::turns::{SavedNoticeTarget, SavedTool, TURN, ToolRoute, TurnInput};

/// A call answered at admission, with the child work it starts: the Turn saves the result
/// and starts the children (and their events) in one commit.
#[derive(Debug, Clone)]
pub struct Admitted {
    /// The call's result, for the model.
    pub result: ToolResult,
    /// The children to start with it.
    pub children: Vec<NewChild>,
    /// Events published with it (after the result).
    pub events: Vec<EventKind>,
    /// Rows a capability writes with it (a reminder's).
    pub writes: crate::store::TxWrites,
}

/// A call's answer for the model (not an error): what happens to it instead of its result.
fn answer(call: &ToolCall, text: String) -> ToolResult {
    ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        output: vec![openbot_schema::ContentPart::text(text)],
        is_error: false,
    }
}

/// Decides the new tool calls of one Turn.
pub struct Admission {
    cx: Arc<EngineContext>,
    parent: ExecutionId,
    scope: Scope,
    chat_id: Option<Uuid>,
    input: Arc<TurnInput>,
    rules: Option<Arc<dyn RuleStore>>,
    chats: Option<Arc<dyn crate::chats::ChatStore>>,
}

impl Admission {
    /// Admission for the Turn `parent` with its saved input; `rules` are read for each call
    /// of a Turn with an identity, `chats` for the current plan mode of a Turn in plan mode.
    pub fn new(
        cx: Arc<EngineContext>,
        parent: &crate::store::ExecutionRow,
        input: Arc<TurnInput>,
        rules: Option<Arc<dyn RuleStore>>,
        chats: Option<Arc<dyn crate::chats::ChatStore>>,
    ) -> Self {
        Self {
            cx,
            parent: parent.id,
            scope: parent.scope.clone(),
            chat_id: parent.chat_id,
            input,
            rules,
            chats,
        }
    }

    /// `None` runs the call inline; otherwise the call is answered now: refused by a rule,
    /// waiting for approval in a tool job, running detached in a tool job, or delegated to a
    /// child Turn.
    pub async fn admit(
        &self,
        key: CallKey,
        call: &ToolCall,
    ) -> Result<Option<Admitted>, StoreError> {
        let Some(saved) = self
            .input
            .tools
            .iter()
            .find(|t| t.definition.name == call.name)
        else {
            return Ok(None);
        };
        if let Some(answer) = self.plan_mode(key, call, saved).await? {
            return Ok(Some(answer));
        }
        let verdict = match (&self.input.identity, &self.rules) {
            (Some(identity), Some(rules)) => {
                // A failed read of the rules stops the call rather than allow it.
                let rules = rules.rules(identity.organization_id).await?;
                Some(verdict(
                    &rules,
                    call,
                    identity.bot_id,
                    identity.owner_member_id,
                ))
            }
            _ => None,
        };
        let decided = verdict.map(|v| (v.action, v.expires_after_ms));
        // A granted Computer's calls that change the machine ask first, unless a rule denies
        // them or the grant turned asking off.
        let decided = match (&saved.route, decided) {
            (ToolRoute::Computer(route), Some((RuleAction::Allow, expires))) if route.ask => {
                Some((RuleAction::Ask, expires))
            }
            (ToolRoute::Computer(route), None) if route.ask => {
                Some((RuleAction::Ask, crate::approvals::DEFAULT_EXPIRY_MS))
            }
            (_, decided) => decided,
        };
        match decided {
            Some((RuleAction::Deny, _)) => Ok(Some(Admitted {
                result: ToolResult::error(
                    call,
                    format!(
                        "The approval rules do not allow the call `{}`; it did not run.",
                        call.name
                    ),
                ),
                children: Vec::new(),
                events: Vec::new(),
                writes: Default::default(),
            })),
            Some((RuleAction::Ask, _)) if matches!(saved.route, ToolRoute::Remind) => {
                Ok(Some(self.refused(
                    call,
                    "A reminder cannot wait for approval; the rules ask for one, so none was set.",
                )))
            }
            Some((RuleAction::Ask, expires_after_ms)) => {
                if matches!(saved.route, ToolRoute::Delegate(_)) {
                    return Ok(Some(Admitted {
                        result: ToolResult::error(
                            call,
                            "A delegate tool cannot wait for approval; the rules ask for one, so it did not run.",
                        ),
                        children: Vec::new(),
                        events: Vec::new(),
                        writes: Default::default(),
                    }));
                }
                self.ask("approval", key, call, saved, expires_after_ms)
                    .await
                    .map(Some)
            }
            _ => match &saved.route {
                ToolRoute::Remind => self.remind(call).map(Some),
                ToolRoute::Http {
                    background: true, ..
                } => self.background(key, call, saved).map(Some),
                ToolRoute::Delegate(route) => self.delegate(call, route).map(Some),
                _ => Ok(None),
            },
        }
    }

    /// In plan mode: `propose_plan` asks for approval, every other call is refused. Out of
    /// plan mode (also once a plan was approved during this Turn) calls go on as usual.
    async fn plan_mode(
        &self,
        key: CallKey,
        call: &ToolCall,
        saved: &SavedTool,
    ) -> Result<Option<Admitted>, StoreError> {
        if !self.input.plan_mode {
            return Ok(None);
        }
        let on = match (self.tree_chat(), &self.chats) {
            (Some(chat), Some(chats)) => chats.plan_mode_on(chat.into()).await?,
            _ => false,
        };
        let refuse = |text: &str| {
            Some(Admitted {
                result: ToolResult::error(call, text),
                children: Vec::new(),
                events: Vec::new(),
                writes: Default::default(),
            })
        };
        Ok(match (on, matches!(saved.route, ToolRoute::Plan)) {
            (true, true) => Some(
                self.ask("plan", key, call, saved, DEFAULT_EXPIRY_MS)
                    .await?,
            ),
            (true, false) => refuse(
                "Plan mode: nothing runs until a person approves a plan. Propose it with propose_plan.",
            ),
            (false, true) => refuse("Plan mode is off: carry out the approved plan."),
            (false, false) => None,
        })
    }

    fn refused(&self, call: &ToolCall, text: &str) -> Admitted {
        Admitted {
            result: ToolResult::error(call, text),
            children: Vec::new(),
            events: Vec::new(),
            writes: Default::default(),
        }
    }

    /// A `remind` call: the reminder's rows and timer commit with the call's result; a
    /// mistake in the arguments is an error result the model can fix.
    fn remind(&self, call: &ToolCall) -> Result<Admitted, StoreError> {
        let (Some(identity), Some(chat)) = (&self.input.identity, self.tree_chat()) else {
            return Ok(self.refused(call, "Reminders need a Chat; this Turn has none."));
        };
        if let Err(why) = identity.credential.for_long_lived_work("a reminder") {
            return Ok(self.refused(call, &why));
        }
        let args = match crate::reminders::parse_args(&call.arguments, self.cx.clock.now_ms()) {
            Ok(args) => args,
            Err(why) => return Ok(self.refused(call, &why)),
        };
        let due = stored_time(args.due_at)?;
        let set = crate::reminders::set_reminder(
            &self.cx,
            self.parent,
            self.scope.clone(),
            chat.into(),
            identity,
            args,
        )?;
        let child_id = set.child.execution.id;
        Ok(Admitted {
            result: answer(
                call,
                format!(
                    "Reminder {} set for {}; its text comes back to this Chat then.",
                    set.id,
                    due.to_rfc3339()
                ),
            ),
            children: vec![set.child],
            events: vec![EventKind::ChildStarted {
                call_id: call.id.clone(),
                child_id,
                kind: crate::reminders::REMINDER.into(),
            }],
            writes: crate::store::TxWrites::one(set.write),
        })
    }

    /// Where the children of this Turn report.
    fn notice_target(&self) -> SavedNoticeTarget {
        match self.chat_id {
            Some(id) => SavedNoticeTarget::Chat { id },
            None => SavedNoticeTarget::Execution { id: self.parent },
        }
    }

    /// The Chat the whole tree works for (its admission gate keeps a deleted Chat's tree from
    /// starting anything new).
    fn tree_chat(&self) -> Option<Uuid> {
        self.input.tree_chat(self.chat_id)
    }

    fn job(
        &self,
        key: CallKey,
        call: &ToolCall,
        saved: &SavedTool,
        request_id: Option<Uuid>,
    ) -> JobInput {
        JobInput {
            tool: saved.clone(),
            call: call.clone(),
            identity: self.input.identity.clone().map(|mut identity| {
                identity.source_execution = Some(self.parent);
                identity
            }),
            organization_id: self.input.organization_id,
            notice: self.notice_target(),
            request_id,
            budget: self.input.budget_bot().map(|bot| (self.tree_chat(), bot)),
            from_code: matches!(key.slot, CallSlot::Code { .. }),
        }
    }

    fn child<T: serde::Serialize>(
        &self,
        kind: &str,
        input: &T,
        events: Vec<EventKind>,
    ) -> Result<NewExecution, StoreError> {
        Ok(
            NewExecution::sealed(&self.cx.keys, kind, self.scope.clone(), input)?
                .child_of(self.parent)
                .behind_gate(self.tree_chat())
                .with_events(events),
        )
    }

    /// A waiting tool job for `call` with a request of `kind` (`approval` or `plan`).
    async fn ask(
        &self,
        kind: &str,
        key: CallKey,
        call: &ToolCall,
        saved: &SavedTool,
        expires_after_ms: u64,
    ) -> Result<Admitted, StoreError> {
        let Some(identity) = &self.input.identity else {
            return Err(StoreError::Invalid("an approval needs an identity".into()));
        };
        let request_id = Uuid::now_v7();
        let expires_at = now_ms().saturating_add(expires_after_ms.min(i64::MAX as u64) as i64);
        let execution = self.child(
            TOOL_JOB,
            &self.job(key, call, saved, Some(request_id)),
            Vec::new(),
        )?;
        let job_id = execution.id;
        let payload =
            serde_json::to_string(call).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let child = NewChild {
            execution,
            start: ChildStart::Waiting,
            attached: false,
            request: Some(NewRequest {
                id: request_id,
                kind: kind.into(),
                organization_id: identity.organization_id,
                owner_member_id: identity.owner_member_id,
                chat_id: self.tree_chat(),
                bot_id: identity.bot_id.as_uuid(),
                payload,
                expires_at,
            }),
        };
        let text = format!(
            "The call `{}` waits for a person's approval (request {request_id}); it has not run. \
             Its result comes as a notice once it is decided. Go on with other work meanwhile.",
            call.name
        );
        Ok(Admitted {
            result: answer(call, text),
            children: vec![child],
            events: vec![
                EventKind::ApprovalRequested {
                    request_id,
                    call: call.clone(),
                    expires_at: stored_time(expires_at)?,
                },
                EventKind::ChildStarted {
                    call_id: call.id.clone(),
                    child_id: job_id,
                    kind: TOOL_JOB.into(),
                },
            ],
            writes: Default::default(),
        })
    }

    fn background(
        &self,
        key: CallKey,
        call: &ToolCall,
        saved: &SavedTool,
    ) -> Result<Admitted, StoreError> {
        let execution = self.child(TOOL_JOB, &self.job(key, call, saved, None), Vec::new())?;
        let id = execution.id;
        let text = format!(
            "The call `{}` runs in the background (execution {id}); its result comes as a notice.",
            call.name
        );
        Ok(Admitted {
            result: answer(call, text),
            children: vec![NewChild {
                execution,
                start: ChildStart::Queued,
                attached: false,
                request: None,
            }],
            events: vec![EventKind::ChildStarted {
                call_id: call.id.clone(),
                child_id: id,
                kind: TOOL_JOB.into(),
            }],
            writes: Default::default(),
        })
    }

    fn delegate(
        &self,
        call: &ToolCall,
        route: &crate::turns::DelegateRoute,
    ) -> Result<Admitted, StoreError> {
        let input = child_turn(&self.input, self.parent, self.chat_id, route, call);
        let started = EventKind::TurnStarted {
            input: input.input.clone(),
        };
        let execution = self.child(TURN, &input, vec![started])?;
        let id = execution.id;
        let text = format!(
            "Delegated to {} (execution {id}); its answer comes as a notice before this Turn ends.",
            route.name
        );
        Ok(Admitted {
            result: answer(call, text),
            children: vec![NewChild {
                execution,
                start: ChildStart::Queued,
                attached: true,
                request: None,
            }],
            events: vec![EventKind::ChildStarted {
                call_id: call.id.clone(),
                child_id: id,
                kind: TURN.into(),
            }],
            writes: Default::default(),
        })
    }
}
