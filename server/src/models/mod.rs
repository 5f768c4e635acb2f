//! The model registry: each organization's provider settings (API key sealed, base URL). A
//! Turn resolves its Bot's `provider:model` through its organization's settings or the
//! platform's, by the key rule of [`crate::platform`]; the key is opened only when the model
//! is built and is never returned by any endpoint or written to a log.

mod service;
mod sql;
mod store;

pub use service::Providers;
pub use store::{ModelRegistryStore, PROVIDER_KINDS, ProviderRow, organization_providers};
