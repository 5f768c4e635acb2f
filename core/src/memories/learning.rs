//! Learning: what a helper model is asked after a Turn, and the strict JSON plan it answers with.

use std::collections::HashSet;

use openbot_schema::{ContentPart, Message};
use serde::Deserialize;

use super::{check_content, check_tags};

/// The instructions of the helper model that learns from a conversation.
pub const LEARNING_INSTRUCTIONS: &str = "You maintain the long-term memory of an assistant. \
You get the memories it has now (each with its ID) and the new part of a conversation. \
Answer with ONE JSON object and nothing else: \
{\"add\": [{\"content\": \"...\", \"tags\": [\"...\"], \"shared\": false}], \
\"change\": [{\"id\": \"<memory id>\", \"content\": \"...\", \"tags\": [\"...\"]}], \
\"retire\": [\"<memory id>\"]}. \
Add durable facts and preferences worth knowing in later conversations; change a memory the \
conversation corrects; retire one it shows is wrong or obsolete. Keep each memory one short \
sentence. `shared` true only for facts about the Bot's work that every user may see. \
Answer {\"add\": [], \"change\": [], \"retire\": []} when there is nothing to learn.";

/// The most operations of each kind a plan may hold.
const MAX_OPERATIONS: usize = 20;

/// A memory the helper model wants added.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LearnedMemory {
    /// What it says.
    pub content: String,
    /// Its tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Whether every member of the Bot shares it (else it is the Chat's member's own).
    #[serde(default)]
    pub shared: bool,
}

/// A change of a memory the helper model was shown.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LearnedChange {
    /// The memory.
    pub id: uuid::Uuid,
    /// Its new content.
    #[serde(default)]
    pub content: Option<String>,
    /// Its new tags.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
}

/// What the helper model answered, as it answered it (see [`parse_plan`] for the checks).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LearningPlan {
    /// Memories to add.
    #[serde(default)]
    pub add: Vec<LearnedMemory>,
    /// Memories to change.
    #[serde(default)]
    pub change: Vec<LearnedChange>,
    /// Memories to retire.
    #[serde(default)]
    pub retire: Vec<uuid::Uuid>,
}

/// What the learner may do: the rules a plan's operations are checked against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanRights {
    /// The memories it may change or retire: the ones the helper was shown (the Chat member's
    /// own, whose evidence it may read).
    pub changeable: HashSet<uuid::Uuid>,
    /// Whether it may add shared memories (the Bot's owner or an admin, as by hand).
    pub may_share: bool,
}

/// One operation of a plan that is not applied, and why (kept with the learning's result).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct RefusedOperation {
    /// `add`, `change` or `retire`.
    pub kind: String,
    /// Its place among the plan's operations of that kind.
    pub index: usize,
    /// The memory it names (`change` and `retire`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_id: Option<uuid::Uuid>,
    /// Why it is refused (never the memory's content).
    pub reason: String,
}

/// A plan after its checks: the operations to apply, each with its place in the plan (a new
/// memory's ID is derived from it, so it stays the same however the plan is filtered), and
/// the ones refused.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckedPlan {
    /// Memories to add, by their place among the plan's additions.
    pub add: Vec<(usize, LearnedMemory)>,
    /// Memories to change.
    pub change: Vec<LearnedChange>,
    /// Memories to retire.
    pub retire: Vec<uuid::Uuid>,
    /// What is not applied.
    pub refused: Vec<RefusedOperation>,
}

/// A helper answer that is not a valid plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LearningError {
    /// Not the JSON object asked for.
    #[error("the helper model's answer is not a learning plan: {0}")]
    NotAPlan(String),
    /// A valid object that may not be applied at all.
    #[error("the learning plan is refused: {0}")]
    Refused(String),
}

fn refused(
    kind: &str,
    index: usize,
    memory_id: Option<uuid::Uuid>,
    reason: String,
) -> RefusedOperation {
    RefusedOperation {
        kind: kind.into(),
        index,
        memory_id,
        reason,
    }
}

/// Parses and checks a helper model's answer against what the learner may do. The answer as
/// a whole must be the JSON object asked for (one Markdown code fence around it is allowed,
/// nothing else) with at most 20 operations of each kind; else nothing is applied. Each
/// operation is then checked on its own, and one that may not be applied is refused while
/// the others are kept: an invalid content or tag list, a shared addition by a learner that
/// may not write shared memories, a change or retirement of a memory it was not shown (the
/// model cannot reach a memory the conversation's member may not change or whose evidence it
/// may not read), or a memory named twice.
pub fn parse_plan(answer: &str, rights: &PlanRights) -> Result<CheckedPlan, LearningError> {
    let mut text = answer.trim();
    if let Some(inner) = text.strip_prefix("```") {
        let inner = inner.strip_prefix("json").unwrap_or(inner);
        text = inner
            .strip_suffix("```")
            .ok_or_else(|| LearningError::NotAPlan("an unclosed code fence".into()))?
            .trim();
    }
    let plan: LearningPlan = serde_json::from_str(text)
        .map_err(|e| LearningError::NotAPlan(e.to_string().chars().take(200).collect()))?;
    if plan.add.len() > MAX_OPERATIONS
        || plan.change.len() > MAX_OPERATIONS
        || plan.retire.len() > MAX_OPERATIONS
    {
        return Err(LearningError::Refused(format!(
            "at most {MAX_OPERATIONS} operations of each kind"
        )));
    }
    let mut out = CheckedPlan::default();
    for (index, memory) in plan.add.into_iter().enumerate() {
        let checked = check_content(&memory.content).and_then(|()| check_tags(&memory.tags));
        match checked {
            Err(reason) => out.refused.push(refused("add", index, None, reason)),
            Ok(_) if memory.shared && !rights.may_share => out.refused.push(refused(
                "add",
                index,
                None,
                "only the Bot's owner and admins write shared memories".into(),
            )),
            Ok(_) => out.add.push((index, memory)),
        }
    }
    let mut touched = HashSet::new();
    let mut name = |kind: &str, index: usize, id: uuid::Uuid| -> Option<RefusedOperation> {
        if !rights.changeable.contains(&id) {
            return Some(refused(
                kind,
                index,
                Some(id),
                "not a memory this learning may change (it was not shown)".into(),
            ));
        }
        if !touched.insert(id) {
            return Some(refused(
                kind,
                index,
                Some(id),
                "the memory is named twice".into(),
            ));
        }
        None
    };
    for (index, change) in plan.change.into_iter().enumerate() {
        if let Some(refusal) = name("change", index, change.id) {
            out.refused.push(refusal);
            continue;
        }
        let content = change.content.as_deref().map_or(Ok(()), check_content);
        let tags = change.tags.as_deref().map_or(Ok(Vec::new()), check_tags);
        match content.and(tags) {
            Ok(_) => out.change.push(change),
            Err(reason) => out
                .refused
                .push(refused("change", index, Some(change.id), reason)),
        }
    }
    for (index, id) in plan.retire.into_iter().enumerate() {
        match name("retire", index, id) {
            Some(refusal) => out.refused.push(refusal),
            None => out.retire.push(id),
        }
    }
    Ok(out)
}

/// The helper model's input: the memories it may change, then the new messages as text
/// (tool calls and files named, not copied).
pub fn learning_input(memories: &[(uuid::Uuid, String)], messages: &[Message]) -> String {
    let mut out = String::from("Memories now:\n");
    if memories.is_empty() {
        out.push_str("(none)\n");
    }
    for (id, content) in memories {
        out.push_str(&format!("- {id}: {}\n", content.replace('\n', " ")));
    }
    out.push_str("\nNew conversation:\n");
    for message in messages {
        let (who, parts): (&str, Vec<&ContentPart>) = match message {
            Message::User { content } => ("user", content.iter().collect()),
            Message::Assistant { content, .. } => ("assistant", content.iter().collect()),
            Message::Tool { .. } => ("tool", Vec::new()),
        };
        let text: String = parts
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" ");
        if !text.is_empty() {
            out.push_str(&format!("{who}: {text}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_in_a_code_fence_is_read() {
        let plan = parse_plan(
            "```json\n{\"add\": [{\"content\": \"likes tea\"}]}\n```",
            &PlanRights::default(),
        )
        .unwrap();
        assert_eq!(plan.add[0].1.content, "likes tea");
    }

    #[test]
    fn prose_unknown_fields_and_too_many_operations_refuse_the_whole_plan() {
        let rights = PlanRights::default();
        assert!(matches!(
            parse_plan("Sure! {\"add\": []}", &rights),
            Err(LearningError::NotAPlan(_))
        ));
        assert!(matches!(
            parse_plan("{\"add\": [], \"delete_all\": true}", &rights),
            Err(LearningError::NotAPlan(_))
        ));
        let many: Vec<_> = (0..21)
            .map(|_| serde_json::json!({"content": "x"}))
            .collect();
        assert!(matches!(
            parse_plan(&serde_json::json!({"add": many}).to_string(), &rights),
            Err(LearningError::Refused(_))
        ));
    }

    #[test]
    fn operations_the_learner_may_not_do_are_refused_one_by_one() {
        let own = uuid::Uuid::now_v7();
        let other = uuid::Uuid::now_v7();
        let rights = PlanRights {
            changeable: HashSet::from([own]),
            may_share: false,
        };
        let answer = serde_json::json!({
            "add": [{"content": "kept"}, {"content": "everyone's", "shared": true}, {"content": ""}],
            "change": [{"id": other, "content": "taken over"}, {"id": own, "tags": ["a"]}],
            "retire": [other, own],
        });
        let plan = parse_plan(&answer.to_string(), &rights).unwrap();
        assert_eq!(plan.add.len(), 1);
        assert_eq!(plan.add[0].0, 0);
        assert_eq!(plan.change.len(), 1);
        assert_eq!(plan.change[0].id, own);
        assert!(
            plan.retire.is_empty(),
            "own is changed already; other was not shown"
        );
        let refused: Vec<_> = plan
            .refused
            .iter()
            .map(|r| (r.kind.as_str(), r.index, r.memory_id))
            .collect();
        assert_eq!(
            refused,
            [
                ("add", 1, None),
                ("add", 2, None),
                ("change", 0, Some(other)),
                ("retire", 0, Some(other)),
                ("retire", 1, Some(own)),
            ]
        );
        let sharer = PlanRights {
            may_share: true,
            ..rights
        };
        let plan = parse_plan(&answer.to_string(), &sharer).unwrap();
        assert_eq!(
            plan.add.len(),
            2,
            "an owner or admin may add shared memories"
        );
    }
}
