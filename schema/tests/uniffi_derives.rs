//! Every public type of the schema is also a Kotlin and Swift record or enum: each
//! `#[derive(.. ToSchema ..)]` in `src/` is followed by the uniffi derive of its kind, behind the
//! feature `uniffi`. A type added without it would build here and break only the mobile SDK.

use std::fs;
use std::path::Path;

#[test]
fn every_schema_type_derives_its_uniffi_record_or_enum() {
    let src = Path::new(
        &std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"),
    )
    .join("src");
    let mut missing = Vec::new();
    let mut checked = 0;
    for entry in fs::read_dir(&src).expect("schema/src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("a source file is readable");
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            // The derive may span lines: it ends at the first `)]`.
            if !line.trim_start().starts_with("#[derive(") {
                continue;
            }
            let end = (i..lines.len())
                .find(|&j| lines[j].contains(")]"))
                .unwrap_or(i);
            let derive = lines[i..=end].join(" ");
            if !derive.contains("ToSchema") || line.starts_with(' ') {
                // Not a schema type, or one inside a macro (the IDs are custom types).
                continue;
            }
            let item = lines[end + 1..]
                .iter()
                .find(|l| l.starts_with("pub struct ") || l.starts_with("pub enum "))
                .copied()
                .unwrap_or_default();
            let kind = if item.starts_with("pub struct ") {
                "Record"
            } else {
                "Enum"
            };
            let wanted = format!("#[cfg_attr(feature = \"uniffi\", derive(uniffi::{kind}))]");
            let attributes = lines[end + 1..].iter().take_while(|l| l.starts_with("#["));
            checked += 1;
            if !attributes.clone().any(|l| l.trim() == wanted) {
                missing.push(format!("{}: {item}", path.display()));
            }
        }
    }
    assert!(checked > 50, "only {checked} schema types were found");
    assert!(
        missing.is_empty(),
        "schema types without their uniffi derive (add the line below their derive): {missing:#?}"
    );
}
