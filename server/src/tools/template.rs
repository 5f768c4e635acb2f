//! What an HTTP tool adds to each call besides its arguments: headers and body fields, which
//! may hold Vault references. The template is saved with a Turn's tools as written, so a saved
//! call keeps item IDs and field names, never values.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::store::StoreError;
use crate::vaults::{ReferenceError, VaultRef, references_in, replace_references};

/// Headers and added body fields of an HTTP tool's calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallTemplate {
    /// Header name to value, Vault references as written.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Fields added to the JSON body (they win over arguments of the same name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Map<String, Value>>,
}

/// Headers the tool may not set: the transport's own, and the key that deduplicates retries.
const RESERVED_HEADERS: [&str; 6] = [
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "idempotency-key",
];

impl CallTemplate {
    /// Whether the template adds nothing.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty() && self.body.as_ref().is_none_or(Map::is_empty)
    }

    /// Checks headers and body as a member registers them; the Vault references they hold.
    pub fn check(&self) -> Result<BTreeSet<VaultRef>, ReferenceError> {
        let mut refs = BTreeSet::new();
        if self.headers.len() > 32 {
            return Err(ReferenceError::Invalid("at most 32 headers".into()));
        }
        for (name, value) in &self.headers {
            let valid_name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok();
            if !valid_name || RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                return Err(ReferenceError::Invalid(format!(
                    "`{name}` is not a header a tool may set"
                )));
            }
            // Only the written text is checked here; a resolved value is checked when sent.
            if reqwest::header::HeaderValue::from_str(value).is_err() {
                return Err(ReferenceError::Invalid(format!(
                    "the value of header `{name}` is not a valid header value"
                )));
            }
            refs.extend(references_in(value)?);
        }
        if let Some(body) = &self.body {
            let mut strings = Vec::new();
            collect_strings(&Value::Object(body.clone()), &mut strings);
            for text in strings {
                refs.extend(references_in(&text)?);
            }
        }
        Ok(refs)
    }

    /// Every Vault reference in headers and body (a saved template was checked when it was
    /// registered; one that no longer parses is refused as the call is sent).
    pub fn references(&self) -> Result<BTreeSet<VaultRef>, ReferenceError> {
        self.check()
    }

    /// The headers and the body for one call: `arguments` with the body fields added, every
    /// reference replaced by its value from `values` (which holds each one; see
    /// [`CallTemplate::references`]).
    pub fn render(
        &self,
        arguments: &Value,
        values: &BTreeMap<VaultRef, String>,
    ) -> Result<(Vec<(String, String)>, Value), ReferenceError> {
        let headers = self
            .headers
            .iter()
            .map(|(name, value)| Ok((name.clone(), replace_references(value, values)?)))
            .collect::<Result<Vec<_>, ReferenceError>>()?;
        let Some(fields) = &self.body else {
            return Ok((headers, arguments.clone()));
        };
        let mut body = match arguments {
            Value::Object(map) => map.clone(),
            Value::Null => Map::new(),
            // Arguments are an object by their schema; anything else is kept under its name.
            other => Map::from_iter([("arguments".to_string(), other.clone())]),
        };
        for (name, value) in fields {
            body.insert(name.clone(), render_value(value, values)?);
        }
        Ok((headers, Value::Object(body)))
    }

    /// The column form: JSON, or NULL when the template adds nothing.
    pub fn to_column(&self) -> Result<Option<String>, StoreError> {
        if self.is_empty() {
            return Ok(None);
        }
        serde_json::to_string(self)
            .map(Some)
            .map_err(|e| StoreError::Invalid(format!("tool template: {e}")))
    }

    /// Reads the column form.
    pub fn from_column(column: Option<String>) -> Result<Self, StoreError> {
        match column {
            None => Ok(Self::default()),
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| StoreError::Invalid(format!("tool template: {e}"))),
        }
    }
}

/// The Vault references in the strings of a Code Mode call's arguments (at any depth).
pub fn argument_references(arguments: &Value) -> Result<BTreeSet<VaultRef>, ReferenceError> {
    let mut strings = Vec::new();
    collect_strings(arguments, &mut strings);
    let mut refs = BTreeSet::new();
    for text in strings {
        refs.extend(references_in(&text)?);
    }
    Ok(refs)
}

/// `arguments` with every reference in its strings replaced by its value from `values`.
pub fn render_arguments(
    arguments: &Value,
    values: &BTreeMap<VaultRef, String>,
) -> Result<Value, ReferenceError> {
    render_value(arguments, values)
}

fn collect_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

fn render_value(
    value: &Value,
    values: &BTreeMap<VaultRef, String>,
) -> Result<Value, ReferenceError> {
    Ok(match value {
        Value::String(text) => Value::String(replace_references(text, values)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| render_value(v, values))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), render_value(v, values)?)))
                .collect::<Result<_, ReferenceError>>()?,
        ),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_template_renders_references_into_headers_and_body_fields() {
        let item = uuid::Uuid::now_v7();
        let template = CallTemplate {
            headers: BTreeMap::from([(
                "Authorization".to_string(),
                format!("Bearer {{{{vault.{item}.token}}}}"),
            )]),
            body: Some(Map::from_iter([(
                "auth".to_string(),
                json!({"key": format!("{{{{vault.{item}.key}}}}")}),
            )])),
        };
        let refs = template.check().unwrap();
        assert_eq!(refs.len(), 2);
        let values = refs
            .iter()
            .map(|r| (r.clone(), format!("value-of-{}", r.field)))
            .collect();
        let (headers, body) = template.render(&json!({"q": 1}), &values).unwrap();
        assert_eq!(
            headers,
            vec![("Authorization".into(), "Bearer value-of-token".into())]
        );
        assert_eq!(body, json!({"q": 1, "auth": {"key": "value-of-key"}}));
    }

    #[test]
    fn reserved_headers_are_refused() {
        let template = CallTemplate {
            headers: BTreeMap::from([("Idempotency-Key".to_string(), "x".to_string())]),
            body: None,
        };
        assert!(template.check().is_err());
    }
}
