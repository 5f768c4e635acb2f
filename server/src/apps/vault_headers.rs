//! Vault references in a manual Connection's headers: `{{vault.<item-id>.<field>}}` inside a
//! header value, saved as written (sealed with the Connection's other header values) and
//! opened only at the call boundary, right before a request to the App, by the same opener
//! HTTP tools use ([`crate::vaults::VaultOpener`]). The reader path is the Turn's Bot and
//! the Connection (rule reader `app_connection`); a discovery run by a member reads through
//! the Connection's rule alone.

use std::collections::{BTreeMap, BTreeSet};

use crate::vaults::{ReferenceError, VaultRef, references_in, replace_references};

/// The references in a Connection's header values.
pub fn header_references(
    headers: &BTreeMap<String, String>,
) -> Result<BTreeSet<VaultRef>, ReferenceError> {
    let mut refs = BTreeSet::new();
    for value in headers.values() {
        refs.extend(references_in(value)?);
    }
    Ok(refs)
}

/// The headers with each reference replaced by its opened value.
pub fn render_headers(
    headers: &BTreeMap<String, String>,
    values: &BTreeMap<VaultRef, String>,
) -> Result<BTreeMap<String, String>, ReferenceError> {
    headers
        .iter()
        .map(|(name, value)| Ok((name.clone(), replace_references(value, values)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_in_header_values_are_found_and_replaced() {
        let item = uuid::Uuid::now_v7();
        let headers = BTreeMap::from([
            (
                "authorization".to_string(),
                format!("Bearer {{{{vault.{item}.token}}}}"),
            ),
            ("x-plain".to_string(), "plain".to_string()),
        ]);
        let refs = header_references(&headers).unwrap();
        assert_eq!(refs.len(), 1);
        let values = BTreeMap::from([(refs.first().unwrap().clone(), "s3cr3t".to_string())]);
        let rendered = render_headers(&headers, &values).unwrap();
        assert_eq!(rendered["authorization"], "Bearer s3cr3t");
        assert_eq!(rendered["x-plain"], "plain");
        let bad = BTreeMap::from([("a".to_string(), "{{vault.name.token}}".to_string())]);
        assert!(header_references(&bad).is_err());
    }
}
