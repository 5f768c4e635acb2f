//! Notices: a child's report to the work that started it, in the form of Turn input.

use openbot_schema::{ContentPart, Message, ToolResult};

/// The stored form of a notice's text: the content parts of Turn input, as JSON.
pub fn notice_content(text: &str) -> String {
    // A Vec of one text part always serializes.
    serde_json::to_string(&[ContentPart::text(text)]).unwrap_or_default()
}

/// The text of a tool result, for a notice.
pub(crate) fn result_text(result: &ToolResult) -> String {
    result
        .output
        .iter()
        .filter_map(|part| match part {
            ContentPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The last answer of a Turn's messages, for a notice.
pub(crate) fn final_answer(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .find_map(|message| match message {
            Message::Assistant { content, .. } => {
                let text: Vec<&str> = content
                    .iter()
                    .filter_map(|part| match part {
                        ContentPart::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                (!text.is_empty()).then(|| text.join(""))
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// The notice of a finished tool job.
pub(crate) fn job_finished(tool: &str, call_id: &str, result: &ToolResult) -> String {
    let outcome = if result.is_error {
        "failed"
    } else {
        "finished"
    };
    format!(
        "[notice] The tool call `{tool}` ({call_id}) {outcome}. Result:\n{}",
        result_text(result)
    )
}
