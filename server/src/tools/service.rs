//! The use cases of the organization's tool registry: HTTP tools and delegate tools. Every
//! public method takes the caller and checks its right first. Reading needs the `bots` read
//! right; changing needs the `bots` write right, the owner or admin role and a token not
//! limited to some Bots (the registry is the whole organization's).

use std::sync::Arc;

use openbot_schema::{
    Action, DelegateTool, DelegateToolPage, HttpTool, HttpToolPage, PutDelegateTool, PutHttpTool,
    Resource,
};

use super::{CallTemplate, DelegateToolRow, HttpToolRow, ToolStore};
use crate::bots::Bots;
use crate::identity::Caller;
use crate::paging::Paging;
use crate::platform::Platform;
use crate::service::ServiceError;
use crate::store::{StoreError, stored_time};
use crate::vaults::Vaults;

fn http_view(row: HttpToolRow) -> Result<HttpTool, StoreError> {
    Ok(HttpTool {
        name: row.definition.name,
        description: row.definition.description,
        input_schema: row.definition.input_schema,
        url: row.url,
        retry_safe: row.retry_safe,
        background: row.background,
        headers: row.template.headers.into_iter().collect(),
        body: row.template.body.map(serde_json::Value::Object),
        updated_at: stored_time(row.updated_at)?,
    })
}

fn delegate_view(row: DelegateToolRow) -> Result<DelegateTool, StoreError> {
    Ok(DelegateTool {
        name: row.name,
        description: row.description,
        bot_id: row.bot_id,
        limits: row.limits,
        updated_at: stored_time(row.updated_at)?,
    })
}

/// The tool registry use cases. Cheap to clone.
#[derive(Clone)]
pub struct Tools {
    store: Arc<dyn ToolStore>,
    platform: Platform,
    vaults: Vaults,
    bots: Bots,
}

impl Tools {
    /// The use cases on `store`, checking URLs against `platform`, Vault references with
    /// `vaults` and delegate Bots with `bots`.
    pub fn new(store: Arc<dyn ToolStore>, platform: Platform, vaults: Vaults, bots: Bots) -> Self {
        Self {
            store,
            platform,
            vaults,
            bots,
        }
    }

    /// The right to change the registry.
    fn may_change(caller: &Caller) -> Result<(), ServiceError> {
        caller.require(Resource::Bots, Action::Write)?;
        if !caller.is_admin() {
            return Err(ServiceError::Forbidden(
                "only owners and admins change the organization's tools".into(),
            ));
        }
        caller.require_whole_organization()?;
        Ok(())
    }

    /// The organization's HTTP tools by name, one page.
    pub async fn list_http(
        &self,
        caller: &Caller,
        paging: &Paging<String>,
    ) -> Result<HttpToolPage, ServiceError> {
        caller.require(Resource::Bots, Action::Read)?;
        let rows = self
            .store
            .tools_page(
                caller.member.organization_id,
                paging.after.as_deref(),
                paging.fetch(),
            )
            .await?;
        Ok(paging.try_page(rows, |row| row.definition.name.clone(), http_view)?)
    }

    /// Registers an HTTP tool under `name` (replacing an earlier one). Its Vault references
    /// must each be a field the caller sees now.
    pub async fn put_http(
        &self,
        caller: &Caller,
        name: &str,
        request: PutHttpTool,
    ) -> Result<HttpTool, ServiceError> {
        Self::may_change(caller)?;
        // The one check of a registration, shared with the in-memory Client.
        let definition =
            openbot_core::tool::check_http_tool(name, &request, self.platform.outbound())
                .map_err(ServiceError::Invalid)?;
        let body = match request.body {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Object(map)) => Some(map),
            Some(_) => return Err(ServiceError::Invalid("body must be a JSON object".into())),
        };
        let template = CallTemplate {
            headers: request.headers.into_iter().collect(),
            body,
        };
        let refs = template
            .check()
            .map_err(|e| ServiceError::Invalid(e.to_string()))?;
        self.vaults.check_references(caller, &refs).await?;
        let row = HttpToolRow {
            definition,
            url: request.url,
            retry_safe: request.retry_safe,
            background: request.background,
            template,
            updated_at: 0,
        };
        let row = self
            .store
            .put_tool(caller.member.organization_id, row)
            .await?;
        Ok(http_view(row)?)
    }

    /// Removes an HTTP tool; Bot tools of that name become host tools for later Turns.
    pub async fn delete_http(&self, caller: &Caller, name: &str) -> Result<(), ServiceError> {
        Self::may_change(caller)?;
        if self
            .store
            .delete_tool(caller.member.organization_id, name)
            .await?
        {
            Ok(())
        } else {
            Err(ServiceError::NotFound("tool"))
        }
    }

    /// The organization's delegate tools by name, one page.
    pub async fn list_delegates(
        &self,
        caller: &Caller,
        paging: &Paging<String>,
    ) -> Result<DelegateToolPage, ServiceError> {
        caller.require(Resource::Bots, Action::Read)?;
        let rows = self
            .store
            .delegates_page(
                caller.member.organization_id,
                paging.after.as_deref(),
                paging.fetch(),
            )
            .await?;
        Ok(paging.try_page(rows, |row| row.name.clone(), delegate_view)?)
    }

    /// Registers a delegate tool under `name`: a Bot tool of this name hands its task to a
    /// Bot the caller may use.
    pub async fn put_delegate(
        &self,
        caller: &Caller,
        name: &str,
        request: PutDelegateTool,
    ) -> Result<DelegateTool, ServiceError> {
        Self::may_change(caller)?;
        // The one check of a registration, shared with the in-memory Client.
        openbot_core::delegation::check_delegate(name, &request).map_err(ServiceError::Invalid)?;
        self.bots.visible(caller, request.bot_id).await?;
        let row = DelegateToolRow {
            name: name.to_string(),
            description: request.description,
            bot_id: request.bot_id,
            limits: request.limits,
            updated_at: 0,
        };
        let row = self
            .store
            .put_delegate(caller.member.organization_id, row)
            .await?;
        Ok(delegate_view(row)?)
    }

    /// Removes a delegate tool; Bot tools of that name become host tools for later Turns.
    pub async fn delete_delegate(&self, caller: &Caller, name: &str) -> Result<(), ServiceError> {
        Self::may_change(caller)?;
        if self
            .store
            .delete_delegate(caller.member.organization_id, name)
            .await?
        {
            Ok(())
        } else {
            Err(ServiceError::NotFound("delegate"))
        }
    }
}
