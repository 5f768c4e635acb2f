//! Checking tool definitions and the arguments a model gives.

use openbot_schema::ToolDefinition;
use serde_json::Value;

/// A tool definition that cannot be offered to a model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    /// The name is not 1-64 of `a-z A-Z 0-9 _ -`.
    #[error("tool name `{0}` is invalid: use 1-64 letters, digits, `_` or `-`")]
    InvalidName(String),
    /// The input schema is not a valid JSON Schema.
    #[error("tool `{name}` has an invalid input schema: {reason}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// Two tools share a name.
    #[error("two tools are named `{0}`")]
    DuplicateName(String),
}

/// Arguments that do not match a tool's input schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid arguments for tool `{tool}`: {problems}")]
pub struct ArgumentError {
    /// The tool.
    pub tool: String,
    /// What is wrong, one problem per `; `.
    pub problems: String,
}

/// A tool definition whose schema was compiled once, to check many calls.
pub struct CheckedSchema {
    definition: ToolDefinition,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for CheckedSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedSchema")
            .field("definition", &self.definition)
            .finish_non_exhaustive()
    }
}

impl CheckedSchema {
    /// Checks the definition and compiles its schema.
    pub fn new(definition: ToolDefinition) -> Result<Self, SchemaError> {
        if !ToolDefinition::is_valid_name(&definition.name) {
            return Err(SchemaError::InvalidName(
                definition.name.chars().take(80).collect(),
            ));
        }
        if !definition.input_schema.is_object() {
            return Err(SchemaError::InvalidSchema {
                name: definition.name.clone(),
                reason: "the input schema must be a JSON object".into(),
            });
        }
        let validator = jsonschema::validator_for(&definition.input_schema).map_err(|e| {
            SchemaError::InvalidSchema {
                name: definition.name.clone(),
                reason: e.to_string(),
            }
        })?;
        Ok(Self {
            definition,
            validator,
        })
    }

    /// The definition.
    pub fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    /// Checks arguments against the schema; at most five problems are named.
    pub fn check(&self, arguments: &Value) -> Result<(), ArgumentError> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(arguments)
            .take(5)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() {
                    e.to_string()
                } else {
                    format!("{path}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ArgumentError {
                tool: self.definition.name.clone(),
                problems: problems.join("; "),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn definition(schema: Value) -> ToolDefinition {
        ToolDefinition {
            name: "weather".into(),
            description: String::new(),
            input_schema: schema,
        }
    }

    #[test]
    fn arguments_that_break_the_schema_are_named() {
        let schema = CheckedSchema::new(definition(json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"]
        })))
        .unwrap();
        assert!(schema.check(&json!({"city": "Oslo"})).is_ok());
        let err = schema.check(&json!({"city": 5})).unwrap_err();
        assert!(err.problems.contains("/city"), "{}", err.problems);
        let err = schema.check(&json!({})).unwrap_err();
        assert!(err.problems.contains("city"), "{}", err.problems);
    }

    #[test]
    fn a_schema_that_is_not_an_object_is_rejected() {
        for schema in [json!(true), json!([]), json!("object")] {
            let err = CheckedSchema::new(definition(schema)).unwrap_err();
            assert!(matches!(err, SchemaError::InvalidSchema { .. }), "{err}");
        }
    }

    #[test]
    fn an_invalid_schema_or_name_is_rejected() {
        let err = CheckedSchema::new(definition(json!({"type": "nonsense"}))).unwrap_err();
        assert!(matches!(err, SchemaError::InvalidSchema { .. }));
        let bad_name = ToolDefinition {
            name: "has space".into(),
            ..definition(json!({}))
        };
        assert!(matches!(
            CheckedSchema::new(bad_name),
            Err(SchemaError::InvalidName(_))
        ));
    }
}
