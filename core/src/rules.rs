//! Pure rules on the schema's request types, shared by `memory://` and the server so that
//! both refuse the same input with the same words.

use std::collections::HashSet;

use openbot_schema::{BotSpec, SendInput};

use crate::model::ModelSpec;
use crate::tool::{CheckedSchema, SchemaError};

/// The longest Bot name, in characters.
pub const MAX_BOT_NAME_CHARS: usize = 200;

/// The longest command key, in bytes.
pub const MAX_COMMAND_KEY_BYTES: usize = 200;

/// Checks a Bot definition: a name of 1-200 characters (not only spaces), a model spec that
/// parses (or, in one process, a model registered under that name: `registered`), tool
/// definitions a model can take with no name given twice, and valid limits. The error says
/// what is wrong, for a 400 answer.
pub fn check_bot_spec(spec: &BotSpec, registered: impl Fn(&str) -> bool) -> Result<(), String> {
    if spec.name.trim().is_empty() || spec.name.chars().count() > MAX_BOT_NAME_CHARS {
        return Err(format!(
            "a Bot's name must have 1-{MAX_BOT_NAME_CHARS} characters"
        ));
    }
    if !registered(&spec.model) {
        ModelSpec::parse(&spec.model).map_err(|e| e.to_string())?;
    }
    let mut names = HashSet::new();
    for tool in &spec.tools {
        if !names.insert(tool.name.as_str()) {
            return Err(SchemaError::DuplicateName(tool.name.clone()).to_string());
        }
        CheckedSchema::new(tool.clone()).map_err(|e| e.to_string())?;
    }
    spec.limits.check()?;
    Ok(())
}

/// Checks input sent to a Chat: at least one content part, and a command key (when given) of
/// 1-200 bytes.
pub fn check_send_input(input: &SendInput) -> Result<(), String> {
    if input.content.is_empty() {
        return Err("input needs at least one content part".into());
    }
    if input
        .command_key
        .as_ref()
        .is_some_and(|k| k.is_empty() || k.len() > MAX_COMMAND_KEY_BYTES)
    {
        return Err(format!(
            "a command key must have 1-{MAX_COMMAND_KEY_BYTES} characters"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use openbot_schema::{BotSpec, ContentPart, SendInput};

    use super::{check_bot_spec, check_send_input};

    fn spec(name: &str, model: &str) -> BotSpec {
        serde_json::from_value(serde_json::json!({"name": name, "model": model})).unwrap()
    }

    #[test]
    fn a_bot_name_of_only_spaces_or_over_200_characters_is_refused() {
        let none = |_: &str| false;
        assert!(check_bot_spec(&spec("   ", "openai:gpt-4o-mini"), none).is_err());
        assert!(check_bot_spec(&spec(&"é".repeat(201), "openai:gpt-4o-mini"), none).is_err());
        // 200 characters of two bytes each are 200 characters, not 400.
        assert!(check_bot_spec(&spec(&"é".repeat(200), "openai:gpt-4o-mini"), none).is_ok());
    }

    #[test]
    fn a_registered_model_name_passes_only_where_it_is_registered() {
        let bot = spec("Helper", "my-local-model");
        assert!(check_bot_spec(&bot, |name| name == "my-local-model").is_ok());
        assert!(check_bot_spec(&bot, |_| false).is_err());
    }

    #[test]
    fn a_tool_name_given_twice_is_refused() {
        let bot: BotSpec = serde_json::from_value(serde_json::json!({
            "name": "Helper", "model": "openai:gpt-4o-mini",
            "tools": [
                {"name": "look", "description": "", "input_schema": {"type": "object"}},
                {"name": "look", "description": "", "input_schema": {"type": "object"}}
            ]
        }))
        .unwrap();
        let why = check_bot_spec(&bot, |_| false).unwrap_err();
        assert!(why.contains("two tools are named `look`"), "{why}");
    }

    #[test]
    fn empty_input_and_an_empty_or_long_command_key_are_refused() {
        let mut input = SendInput {
            content: Vec::new(),
            command_key: None,
        };
        assert!(check_send_input(&input).is_err());
        input.content.push(ContentPart::text("hi"));
        assert!(check_send_input(&input).is_ok());
        input.command_key = Some(String::new());
        assert!(check_send_input(&input).is_err());
        input.command_key = Some("k".repeat(201));
        assert!(check_send_input(&input).is_err());
    }
}
