//! Vault references: `{{vault.<item-id>.<field>}}` inside a header value or a body string.
//! A reference names the item by its ID, so a new item under an old name never replaces it.

use std::collections::BTreeMap;

use uuid::Uuid;

/// One field of one item, as a saved call names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VaultRef {
    /// The item's ID.
    pub item: Uuid,
    /// The field's name.
    pub field: String,
}

impl std::fmt::Display for VaultRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "field `{}` of Vault item {}", self.field, self.item)
    }
}

/// A reference that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// The text holds `{{vault.` that is not a whole reference, or the template is unusable.
    #[error("{0}")]
    Invalid(String),
}

const OPEN: &str = "{{vault.";
const CLOSE: &str = "}}";

/// Whether `name` is a field name: 1-64 of a-z A-Z 0-9 _ -.
pub fn valid_field_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn parse_one(inner: &str) -> Result<VaultRef, ReferenceError> {
    let bad = || {
        ReferenceError::Invalid(format!(
            "`{{{{vault.{}}}}}` is not a Vault reference: write {{{{vault.<item-id>.<field>}}}}",
            inner.chars().take(80).collect::<String>()
        ))
    };
    let (item, field) = inner.split_once('.').ok_or_else(bad)?;
    let item = Uuid::parse_str(item).map_err(|_| bad())?;
    if !valid_field_name(field) {
        return Err(bad());
    }
    Ok(VaultRef {
        item,
        field: field.to_string(),
    })
}

/// Splits `text` into literal pieces and references, in order.
fn pieces(text: &str) -> Result<Vec<Result<&str, VaultRef>>, ReferenceError> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push(Ok(&rest[..start]));
        let after = &rest[start + OPEN.len()..];
        let end = after.find(CLOSE).ok_or_else(|| {
            ReferenceError::Invalid(
                "an unclosed Vault reference: write {{vault.<item-id>.<field>}}".into(),
            )
        })?;
        out.push(Err(parse_one(&after[..end])?));
        rest = &after[end + CLOSE.len()..];
    }
    out.push(Ok(rest));
    Ok(out)
}

/// The references in `text`.
pub fn references_in(text: &str) -> Result<Vec<VaultRef>, ReferenceError> {
    Ok(pieces(text)?
        .into_iter()
        .filter_map(|piece| piece.err())
        .collect())
}

/// `text` with each reference replaced by its value in `values`.
pub fn replace_references(
    text: &str,
    values: &BTreeMap<VaultRef, String>,
) -> Result<String, ReferenceError> {
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text)? {
        match piece {
            Ok(literal) => out.push_str(literal),
            Err(reference) => {
                out.push_str(values.get(&reference).ok_or_else(|| {
                    ReferenceError::Invalid(format!("{reference} was not opened"))
                })?)
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_found_between_literal_text() {
        let item = Uuid::now_v7();
        let text = format!("Bearer {{{{vault.{item}.api_token}}}} and more");
        let refs = references_in(&text).unwrap();
        assert_eq!(
            refs,
            vec![VaultRef {
                item,
                field: "api_token".into()
            }]
        );
        let values = BTreeMap::from([(refs[0].clone(), "s3cr3t".to_string())]);
        assert_eq!(
            replace_references(&text, &values).unwrap(),
            "Bearer s3cr3t and more"
        );
    }

    #[test]
    fn a_reference_by_name_or_unclosed_is_refused() {
        assert!(references_in("{{vault.github.token}}").is_err());
        assert!(references_in(&format!("{{{{vault.{}.token", Uuid::now_v7())).is_err());
        assert!(references_in(&format!("{{{{vault.{}.a b}}}}", Uuid::now_v7())).is_err());
        assert!(references_in("plain {{other}} text").unwrap().is_empty());
    }
}
