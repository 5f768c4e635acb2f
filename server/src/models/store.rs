//! The model registry store and how a Turn reads it.

use async_trait::async_trait;
use uuid::Uuid;

use crate::engine::EngineContext;
use crate::platform::OrganizationProvider;
use crate::store::{Millis, SealedBlob, StoreError};

/// The provider kinds an organization can configure: the provider part of a model spec.
pub const PROVIDER_KINDS: &[&str] = &["openai", "anthropic", "compatible"];

/// One organization's settings for one provider kind.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderRow {
    /// The kind: `openai`, `anthropic` or `compatible`.
    pub kind: String,
    /// A base URL instead of the provider's default.
    pub base_url: Option<String>,
    /// The sealed API key.
    pub key_record: Option<Uuid>,
    /// When it last changed.
    pub updated_at: Millis,
}

/// Provider settings per organization.
#[async_trait]
pub trait ModelRegistryStore: Send + Sync + 'static {
    /// Sets an organization's settings for a kind, replacing earlier ones; the key is stored
    /// sealed.
    async fn put_provider(
        &self,
        organization: Uuid,
        kind: &str,
        base_url: Option<&str>,
        key: Option<SealedBlob>,
    ) -> Result<ProviderRow, StoreError>;

    /// An organization's settings.
    async fn providers(&self, organization: Uuid) -> Result<Vec<ProviderRow>, StoreError>;

    /// Up to `limit` of an organization's settings by kind, after the kind `after` when given.
    async fn providers_page(
        &self,
        organization: Uuid,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<ProviderRow>, StoreError>;

    /// Removes an organization's settings for a kind; returns whether they existed.
    async fn delete_provider(&self, organization: Uuid, kind: &str) -> Result<bool, StoreError>;
}

/// An organization's provider settings with their keys opened (here, at the boundary where
/// the model is built), and the time they last changed.
pub async fn organization_providers(
    cx: &EngineContext,
    registry: &dyn ModelRegistryStore,
    organization: Uuid,
) -> Result<(Vec<OrganizationProvider>, Millis), StoreError> {
    let mut providers = Vec::new();
    let mut version = 0;
    for row in registry.providers(organization).await? {
        version = version.max(row.updated_at);
        let api_key = match row.key_record {
            Some(record) => {
                let blob = cx.store.sealed(record).await?.ok_or_else(|| {
                    StoreError::Invalid(format!("provider key {record} is missing"))
                })?;
                let key = cx
                    .keys
                    .open(&blob)
                    .map_err(|e| StoreError::Invalid(e.to_string()))?;
                Some(
                    String::from_utf8(key)
                        .map_err(|_| StoreError::Invalid("provider key is not text".into()))?,
                )
            }
            None => None,
        };
        providers.push(OrganizationProvider {
            kind: row.kind,
            base_url: row.base_url,
            api_key,
        });
    }
    Ok((providers, version))
}
