//! Delegation: the child Turn a delegate tool starts.

use openbot_schema::{ContentPart, ExecutionId, ToolCall};

use crate::turns::{DelegateRoute, SavedNoticeTarget, SourceLink, TurnInput};

use openbot_core::delegation::{child_limits, task_of};

/// The input of the child Turn of `route` started by a call of the parent Turn `parent`.
///
/// The child has a private history (only its task), the delegate Bot's saved definition, and
/// every limit of its source: the parent's limits narrow the Bot's, never widen them. It acts
/// with the parent's identity for the delegate Bot, so its own current rights are checked, and
/// it spends the budgets of the Chat the whole tree works for.
pub(crate) fn child_turn(
    parent: &TurnInput,
    parent_id: ExecutionId,
    parent_chat: Option<uuid::Uuid>,
    route: &DelegateRoute,
    call: &ToolCall,
) -> TurnInput {
    let tree_chat = parent.tree_chat(parent_chat);
    let budget_bot = parent.budget_bot().unwrap_or(route.bot_id);
    let notice = match parent_chat {
        Some(id) => SavedNoticeTarget::Chat { id },
        None => SavedNoticeTarget::Execution { id: parent_id },
    };
    let identity = parent.identity.clone().map(|mut identity| {
        identity.bot_id = route.bot_id;
        identity.source_execution = Some(parent_id);
        identity
    });
    TurnInput {
        instructions: route.instructions.clone(),
        model: route.model.clone(),
        tools: route.tools.clone(),
        limits: child_limits(route.limits, parent.limits),
        history: Vec::new(),
        input: vec![ContentPart::text(task_of(call))],
        max_output_tokens: parent.max_output_tokens,
        organization_id: parent.organization_id,
        identity,
        source: Some(SourceLink {
            chat_id: tree_chat,
            bot_id: budget_bot,
            notice,
            label: format!("the delegate {} ({})", route.name, call.id),
        }),
        // A child works on its task; plan mode is its parent's Chat's.
        plan_mode: false,
        memory: false,
        code_mode: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openbot_schema::{BotId, Limits};
    use serde_json::json;

    fn parent(limits: Limits) -> TurnInput {
        TurnInput {
            instructions: String::new(),
            model: "scripted:x".into(),
            tools: Vec::new(),
            limits,
            history: Vec::new(),
            input: vec![ContentPart::text("hi")],
            max_output_tokens: None,
            organization_id: None,
            identity: None,
            source: None,
            plan_mode: false,
            memory: false,
            code_mode: false,
        }
    }

    fn route(limits: Limits) -> DelegateRoute {
        DelegateRoute {
            bot_id: BotId::new(),
            name: "Helper".into(),
            instructions: "Help.".into(),
            model: "scripted:y".into(),
            tools: Vec::new(),
            limits,
        }
    }

    fn call() -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: "helper".into(),
            arguments: json!({"task": "Sum it up"}),
        }
    }

    #[test]
    fn a_child_keeps_every_limit_of_its_source_and_its_bot() {
        let source = parent(Limits {
            max_steps: Some(3),
            max_cost_micros: Some(500),
            ..Limits::default()
        });
        let bot = route(Limits {
            max_steps: Some(10),
            max_wall_time_ms: Some(60_000),
            ..Limits::default()
        });
        let child = child_turn(&source, ExecutionId::new(), None, &bot, &call());
        assert_eq!(child.limits.max_steps, Some(3));
        assert_eq!(child.limits.max_cost_micros, Some(500));
        assert_eq!(child.limits.max_wall_time_ms, Some(60_000));
    }

    #[test]
    fn a_child_has_a_private_history_with_only_its_task() {
        let mut source = parent(Limits::default());
        source.history = vec![openbot_schema::Message::User {
            content: vec![ContentPart::text("secret")],
        }];
        let child = child_turn(
            &source,
            ExecutionId::new(),
            None,
            &route(Limits::default()),
            &call(),
        );
        assert!(child.history.is_empty());
        assert_eq!(child.input, vec![ContentPart::text("Sum it up")]);
    }

    #[test]
    fn a_grandchild_reports_to_its_parent_and_spends_the_chats_budgets() {
        let chat = uuid::Uuid::now_v7();
        let root = ExecutionId::new();
        let child = child_turn(
            &parent(Limits::default()),
            root,
            Some(chat),
            &route(Limits::default()),
            &call(),
        );
        let source = child.source.clone().unwrap();
        assert_eq!(source.notice, SavedNoticeTarget::Chat { id: chat });
        let child_id = ExecutionId::new();
        let grandchild = child_turn(&child, child_id, None, &route(Limits::default()), &call());
        let link = grandchild.source.unwrap();
        assert_eq!(link.chat_id, Some(chat));
        assert_eq!(link.bot_id, source.bot_id);
        assert_eq!(link.notice, SavedNoticeTarget::Execution { id: child_id });
    }
}
