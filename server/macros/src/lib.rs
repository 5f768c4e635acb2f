//! `#[both_backends]`: a store body written once, as an ordinary module that rustfmt formats
//! and rust-analyzer reads, expanded for each database by the server's `sql_store!`.
//!
//! ```ignore
//! #[both_backends]
//! mod on_both {
//!     use super::*;
//!     #[async_trait]
//!     impl ChatStore for Store { /* `Store`, `Db`, `Row` and the dialect words */ }
//! }
//! ```
//!
//! becomes `crate::store::sql_store! { /* the items */ }` in the module's place: the items
//! twice, once in `on_sqlite` (with `Store = SqliteStore`) and once in `on_postgres`. The
//! module's `use super::*;` says what the expansion sees: everything the file imports.

use proc_macro::{Delimiter, Group, TokenStream, TokenTree};

/// Expands the items of the inline module it marks once per database (see the crate docs).
/// Anything but an inline module is a compile error.
#[proc_macro_attribute]
pub fn both_backends(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return error("`#[both_backends]` takes no arguments");
    }
    let mut tokens: Vec<TokenTree> = item.into_iter().collect();
    let Some(TokenTree::Group(body)) = tokens.pop() else {
        return error("`#[both_backends]` marks an inline module: `mod name { .. }`");
    };
    if body.delimiter() != Delimiter::Brace
        || !tokens
            .iter()
            .any(|t| matches!(t, TokenTree::Ident(i) if i.to_string() == "mod"))
    {
        return error("`#[both_backends]` marks an inline module: `mod name { .. }`");
    }
    // The items keep their own spans: errors and go-to-definition point at the body as written.
    // They expand in the marked module's place (no module of their own), so the file's imports
    // reach them as they reach the module.
    let mut call: TokenStream = match "crate::store::sql_store!".parse() {
        Ok(path) => path,
        Err(_) => return error("the module's items could not be expanded"),
    };
    let mut items = Group::new(Delimiter::Brace, body.stream());
    items.set_span(body.span());
    call.extend([TokenTree::Group(items)]);
    call
}

fn error(message: &str) -> TokenStream {
    format!("compile_error!({message:?});")
        .parse()
        .unwrap_or_default()
}
