//! The use cases of an organization's model provider settings. Every public method takes the
//! caller and checks its right first: reading needs the `models` read right; changing needs
//! the `models` write right, the owner or admin role and a token not limited to some Bots.
//! Keys are sealed and never returned.

use std::sync::Arc;

use openbot_schema::{Action, ProviderSettings, ProviderSettingsPage, PutProvider, Resource};

use super::{ModelRegistryStore, PROVIDER_KINDS, ProviderRow};
use crate::identity::Caller;
use crate::paging::Paging;
use crate::platform::Platform;
use crate::sealed::KeyRing;
use crate::service::ServiceError;
use crate::store::{StoreError, stored_time};

fn view(row: ProviderRow) -> Result<ProviderSettings, StoreError> {
    Ok(ProviderSettings {
        kind: row.kind,
        base_url: row.base_url,
        has_key: row.key_record.is_some(),
        updated_at: stored_time(row.updated_at)?,
    })
}

/// A provider kind's name as the registry stores it.
fn kind(kind: &str) -> Result<&'static str, ServiceError> {
    PROVIDER_KINDS
        .iter()
        .find(|k| **k == kind)
        .copied()
        .ok_or_else(|| {
            ServiceError::Invalid(format!(
                "unknown provider `{kind}`: use {}",
                PROVIDER_KINDS.join(", ")
            ))
        })
}

/// The provider settings use cases. Cheap to clone.
#[derive(Clone)]
pub struct Providers {
    store: Arc<dyn ModelRegistryStore>,
    keys: KeyRing,
    platform: Platform,
}

impl Providers {
    /// The use cases on `store`, sealing keys with `keys` and checking URLs against
    /// `platform`'s outbound policy.
    pub fn new(store: Arc<dyn ModelRegistryStore>, keys: KeyRing, platform: Platform) -> Self {
        Self {
            store,
            keys,
            platform,
        }
    }

    fn may_change(caller: &Caller) -> Result<(), ServiceError> {
        caller.require(Resource::Models, Action::Write)?;
        if !caller.is_admin() {
            return Err(ServiceError::Forbidden(
                "only owners and admins change model providers".into(),
            ));
        }
        caller.require_whole_organization()?;
        Ok(())
    }

    /// The organization's provider settings (without keys), by kind, one page.
    pub async fn list(
        &self,
        caller: &Caller,
        paging: &Paging<String>,
    ) -> Result<ProviderSettingsPage, ServiceError> {
        caller.require(Resource::Models, Action::Read)?;
        let rows = self
            .store
            .providers_page(
                caller.member.organization_id,
                paging.after.as_deref(),
                paging.fetch(),
            )
            .await?;
        Ok(paging.try_page(rows, |row| row.kind.clone(), view)?)
    }

    /// Sets the organization's settings for provider `kind`: its key (sealed) and base URL.
    /// The key rule (`crate::platform`): a platform key never goes to an organization's URL,
    /// and a compatible key goes only to the URL saved with it.
    pub async fn put(
        &self,
        caller: &Caller,
        kind_name: &str,
        request: &PutProvider,
    ) -> Result<ProviderSettings, ServiceError> {
        Self::may_change(caller)?;
        let kind = kind(kind_name)?;
        if let Some(url) = &request.base_url {
            let valid = reqwest::Url::parse(url)
                .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
            if !valid {
                return Err(ServiceError::Invalid(
                    "base_url must be an http:// or https:// URL".into(),
                ));
            }
            self.platform
                .outbound()
                .check_url(url)
                .map_err(|e| ServiceError::Invalid(e.to_string()))?;
        }
        let key = request.api_key.as_deref().filter(|k| !k.is_empty());
        if request.base_url.is_some() && key.is_none() {
            return Err(ServiceError::Invalid(
                "a base_url needs the organization's own api_key: a platform key is only sent to the platform's endpoint".into(),
            ));
        }
        if kind == "compatible" && key.is_some() && request.base_url.is_none() {
            return Err(ServiceError::Invalid(
                "a compatible api_key needs its base_url: the key is sent only to that endpoint"
                    .into(),
            ));
        }
        let key = key
            .map(|key| self.keys.seal(uuid::Uuid::now_v7(), key.as_bytes()))
            .transpose()?;
        let row = self
            .store
            .put_provider(
                caller.member.organization_id,
                kind,
                request.base_url.as_deref(),
                key,
            )
            .await?;
        Ok(view(row)?)
    }

    /// Removes the organization's settings for provider `kind`; its Bots then use the
    /// server's.
    pub async fn delete(&self, caller: &Caller, kind_name: &str) -> Result<(), ServiceError> {
        Self::may_change(caller)?;
        let kind = kind(kind_name)?;
        if self
            .store
            .delete_provider(caller.member.organization_id, kind)
            .await?
        {
            Ok(())
        } else {
            Err(ServiceError::NotFound("model provider"))
        }
    }
}
