//! The TypeScript declaration of a Bot's tools that the code tool's description carries:
//! the model reads `declare const tools: { name(args: {...}): Promise<...> }` and writes
//! `await tools.name({...})`.

use serde_json::{Map, Value};

/// How deep a schema is rendered before it becomes `unknown` (cycles, huge schemas).
const MAX_DEPTH: usize = 6;

/// One tool as the declaration shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSignature {
    /// The tool's name: `tools.<name>`.
    pub name: String,
    /// What the tool does (a JSDoc comment).
    pub description: String,
    /// The JSON schema of its arguments.
    pub parameters: Value,
}

/// Whether `name` can be written as `tools.<name>` (a plain JavaScript identifier).
pub fn identifier_ok(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// The declaration of `tools` for these tools, in the order given.
pub fn declaration(tools: &[ToolSignature]) -> String {
    let mut out = String::from("declare const tools: {\n");
    for tool in tools {
        comment(&mut out, &tool.description, "  ");
        let key = if identifier_ok(&tool.name) {
            tool.name.clone()
        } else {
            quote(&tool.name)
        };
        let args = render(&tool.parameters, 1, 0);
        out.push_str(&format!("  {key}(args: {args}): Promise<any>;\n"));
    }
    out.push_str("};\n");
    out
}

fn comment(out: &mut String, text: &str, indent: &str) {
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    // A description cannot end the comment early.
    let text = text.replace("*/", "* /");
    out.push_str(indent);
    out.push_str("/** ");
    out.push_str(&text.replace('\n', &format!("\n{indent} * ")));
    out.push_str(" */\n");
}

fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn render(schema: &Value, indent: usize, depth: usize) -> String {
    if depth > MAX_DEPTH {
        return "unknown".into();
    }
    let Some(obj) = schema.as_object() else {
        return if schema == &Value::Bool(false) {
            "never".into()
        } else {
            "unknown".into()
        };
    };
    if let Some(value) = obj.get("const") {
        return literal(value);
    }
    if let Some(Value::Array(values)) = obj.get("enum") {
        let parts: Vec<String> = values.iter().map(literal).collect();
        return if parts.is_empty() {
            "never".into()
        } else {
            parts.join(" | ")
        };
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = obj.get(key) {
            let parts: Vec<String> = options
                .iter()
                .map(|o| render(o, indent, depth + 1))
                .collect();
            return union(parts);
        }
    }
    match obj.get("type") {
        Some(Value::String(t)) => render_type(t, obj, indent, depth),
        Some(Value::Array(types)) => union(
            types
                .iter()
                .filter_map(Value::as_str)
                .map(|t| render_type(t, obj, indent, depth))
                .collect(),
        ),
        _ if obj.contains_key("properties") => render_type("object", obj, indent, depth),
        _ => "unknown".into(),
    }
}

fn union(parts: Vec<String>) -> String {
    if parts.is_empty() {
        return "unknown".into();
    }
    let mut seen: Vec<String> = Vec::new();
    for p in parts {
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    seen.join(" | ")
}

fn literal(value: &Value) -> String {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => value.to_string(),
        _ => "unknown".into(),
    }
}

fn render_type(t: &str, obj: &Map<String, Value>, indent: usize, depth: usize) -> String {
    match t {
        "string" => "string".into(),
        "number" | "integer" => "number".into(),
        "boolean" => "boolean".into(),
        "null" => "null".into(),
        "array" => match obj.get("items") {
            Some(items) => {
                let inner = render(items, indent, depth + 1);
                if inner.contains(' ') && !inner.starts_with('{') {
                    format!("Array<{inner}>")
                } else {
                    format!("{inner}[]")
                }
            }
            None => "unknown[]".into(),
        },
        "object" => render_object(obj, indent, depth),
        _ => "unknown".into(),
    }
}

fn render_object(obj: &Map<String, Value>, indent: usize, depth: usize) -> String {
    let required: Vec<&str> = match obj.get("required") {
        Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let properties = obj.get("properties").and_then(Value::as_object);
    let extra = match obj.get("additionalProperties") {
        Some(Value::Bool(false)) => None,
        Some(schema @ Value::Object(_)) => Some(render(schema, indent + 1, depth + 1)),
        _ if properties.is_none() => Some("unknown".into()),
        _ => None,
    };
    let Some(properties) = properties.filter(|p| !p.is_empty()) else {
        return match extra {
            Some(v) => format!("{{ [key: string]: {v} }}"),
            None => "{}".into(),
        };
    };
    let pad = "  ".repeat(indent + 1);
    let mut out = String::from("{\n");
    for (name, schema) in properties {
        if let Some(d) = schema.get("description").and_then(Value::as_str) {
            comment(&mut out, d, &pad);
        }
        let key = if identifier_ok(name) {
            name.clone()
        } else {
            quote(name)
        };
        let optional = if required.contains(&name.as_str()) {
            ""
        } else {
            "?"
        };
        out.push_str(&format!(
            "{pad}{key}{optional}: {};\n",
            render(schema, indent + 1, depth + 1)
        ));
    }
    if let Some(v) = extra {
        out.push_str(&format!("{pad}[key: string]: {v};\n"));
    }
    out.push_str(&"  ".repeat(indent));
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn declares_required_optional_enum_and_array_arguments() {
        let d = declaration(&[ToolSignature {
            name: "get_weather".into(),
            description: "The weather in a city.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "units": {"enum": ["c", "f"]},
                    "days": {"type": "array", "items": {"type": "integer"}}
                },
                "required": ["city"]
            }),
        }]);
        assert!(d.contains("/** The weather in a city. */"), "{d}");
        assert!(d.contains("get_weather(args: {"), "{d}");
        assert!(d.contains("city: string;"), "{d}");
        assert!(d.contains("units?: \"c\" | \"f\";"), "{d}");
        assert!(d.contains("days?: number[];"), "{d}");
        assert!(d.contains("/** City name */"), "{d}");
    }

    #[test]
    fn quotes_names_that_are_not_identifiers_and_defuses_comment_ends() {
        let d = declaration(&[ToolSignature {
            name: "my-tool".into(),
            description: "ends */ early".into(),
            parameters: json!({"type": "object"}),
        }]);
        assert!(
            d.contains("\"my-tool\"(args: { [key: string]: unknown })"),
            "{d}"
        );
        assert!(!d.contains("ends */"), "{d}");
    }

    #[test]
    fn deep_schemas_end_in_unknown() {
        let mut schema = json!({"type": "string"});
        for _ in 0..20 {
            schema = json!({"type": "object", "properties": {"a": schema}});
        }
        let d = declaration(&[ToolSignature {
            name: "deep".into(),
            description: String::new(),
            parameters: schema,
        }]);
        assert!(d.contains("unknown"), "{d}");
    }
}
