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

/// What the helper model wants done, checked: every ID is one it was shown, every content and
/// tag list is valid, at most 20 operations of each kind.
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

/// A helper answer that is not a valid plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LearningError {
    /// Not the JSON object asked for.
    #[error("the helper model's answer is not a learning plan: {0}")]
    NotAPlan(String),
    /// A valid object with an operation that may not be applied.
    #[error("the learning plan is refused: {0}")]
    Refused(String),
}

/// Parses and checks a helper model's answer. `known` are the IDs of the memories it was
/// shown: a change or retirement of any other memory is refused (the model cannot reach a
/// memory the conversation's member may not read). A single Markdown code fence around the
/// object is allowed; anything else around it is not.
pub fn parse_plan(
    answer: &str,
    known: &HashSet<uuid::Uuid>,
) -> Result<LearningPlan, LearningError> {
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
    for memory in &plan.add {
        check_content(&memory.content).map_err(LearningError::Refused)?;
        check_tags(&memory.tags).map_err(LearningError::Refused)?;
    }
    let mut touched = HashSet::new();
    for change in &plan.change {
        if !known.contains(&change.id) {
            return Err(LearningError::Refused(format!(
                "memory {} was not shown",
                change.id
            )));
        }
        if !touched.insert(change.id) {
            return Err(LearningError::Refused(format!(
                "memory {} is changed twice",
                change.id
            )));
        }
        if let Some(content) = &change.content {
            check_content(content).map_err(LearningError::Refused)?;
        }
        if let Some(tags) = &change.tags {
            check_tags(tags).map_err(LearningError::Refused)?;
        }
    }
    for id in &plan.retire {
        if !known.contains(id) {
            return Err(LearningError::Refused(format!("memory {id} was not shown")));
        }
        if !touched.insert(*id) {
            return Err(LearningError::Refused(format!(
                "memory {id} is changed and retired"
            )));
        }
    }
    Ok(plan)
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
            &HashSet::new(),
        )
        .unwrap();
        assert_eq!(plan.add[0].content, "likes tea");
    }

    #[test]
    fn prose_unknown_fields_and_unknown_ids_are_refused() {
        let known = HashSet::new();
        assert!(matches!(
            parse_plan("Sure! {\"add\": []}", &known),
            Err(LearningError::NotAPlan(_))
        ));
        assert!(matches!(
            parse_plan("{\"add\": [], \"delete_all\": true}", &known),
            Err(LearningError::NotAPlan(_))
        ));
        let id = uuid::Uuid::now_v7();
        assert!(matches!(
            parse_plan(&format!("{{\"retire\": [\"{id}\"]}}"), &known),
            Err(LearningError::Refused(_))
        ));
        assert!(matches!(
            parse_plan("{\"add\": [{\"content\": \"\"}]}", &known),
            Err(LearningError::Refused(_))
        ));
    }
}
