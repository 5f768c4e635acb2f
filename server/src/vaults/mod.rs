//! Vaults: items of named secret fields, owned by an organization or a member, every value
//! sealed for its row; rules that say which reader (a Bot, an HTTP tool, an App connection;
//! Code Mode runs next) may read which field. Values are write-only through the API and are
//! opened only at the call boundary, in the HTTP tool's send (docs/vaults.md).
//!
//! - `reference`: the `{{vault.<item-id>.<field>}}` syntax;
//! - `store`: the rows and the [`VaultStore`] trait; `sql`: its one body for both databases;
//! - `service`: [`Vaults`], the use cases behind `/v1/vault-items` and `openbot vaults`;
//! - `opener`: [`VaultOpener`], the checks and the opening at each send.

mod opener;
mod reference;
mod service;
mod sql;
mod store;

pub use opener::{OpenError, ReaderPath, Through, VaultOpener};
pub use reference::{
    ReferenceError, VaultRef, references_in, replace_references, valid_field_name,
};
pub use service::{MAX_FIELDS, MAX_VALUE_BYTES, VaultError, Vaults, item_view};
pub use store::{
    FieldForSend, ItemRow, Reader, RuleRow, SealedField, VaultStore, Visibility, field_place,
};
