//! The Bot use cases. Every public method takes the caller and checks its right first; HTTP,
//! the CLI (over HTTP) and the SDKs reach Bots only through them.

use std::sync::Arc;

use openbot_schema::{Action, Bot, BotId, BotPage, BotSpec, BotUpdate, Resource};

use super::store::{BotRow, BotStore, bot_view, check_spec};
use crate::engine::Engine;
use crate::identity::Caller;
use crate::paging::Paging;
use crate::platform::Platform;
use crate::service::ServiceError;

/// The Bot use cases. Cheap to clone.
#[derive(Clone)]
pub struct Bots {
    engine: Arc<Engine>,
    store: Arc<dyn BotStore>,
    platform: Platform,
}

impl Bots {
    /// The use cases on `store`, checking models against `platform`.
    pub fn new(engine: Arc<Engine>, store: Arc<dyn BotStore>, platform: Platform) -> Self {
        Self {
            engine,
            store,
            platform,
        }
    }

    /// A Bot the caller may use (its own or a shared one, within its token's Bot limit).
    pub(crate) async fn visible(&self, caller: &Caller, id: BotId) -> Result<BotRow, ServiceError> {
        self.store
            .visible_bot(caller, id)
            .await?
            .ok_or(ServiceError::NotFound("bot"))
    }

    /// A Bot the caller may change or delete: its owner's, or any for an admin.
    pub(crate) async fn changeable(
        &self,
        caller: &Caller,
        id: BotId,
    ) -> Result<BotRow, ServiceError> {
        let row = self.visible(caller, id).await?;
        if row.owner_member_id == caller.member.member_id || caller.is_admin() {
            Ok(row)
        } else {
            Err(ServiceError::Forbidden(
                "only the Bot's owner or an admin may change it".into(),
            ))
        }
    }

    /// Creates a Bot owned by the caller. A token limited to some Bots creates none.
    pub async fn create(&self, caller: &Caller, spec: &BotSpec) -> Result<Bot, ServiceError> {
        caller.require(Resource::Bots, Action::Write)?;
        check_spec(spec).map_err(ServiceError::Invalid)?;
        self.platform
            .check_model(&spec.model)
            .map_err(ServiceError::Invalid)?;
        if caller.bot_ids.is_some() {
            return Err(ServiceError::Forbidden(
                "a token limited to some Bots cannot create Bots".into(),
            ));
        }
        let row = self.store.create_bot(caller, BotId::new(), spec).await?;
        Ok(bot_view(row)?)
    }

    /// The Bots the caller may use, oldest first, one page.
    pub async fn list(
        &self,
        caller: &Caller,
        paging: &Paging<BotId>,
    ) -> Result<BotPage, ServiceError> {
        caller.require(Resource::Bots, Action::Read)?;
        let rows = self
            .store
            .visible_bots(caller, paging.after, paging.fetch())
            .await?;
        Ok(paging.try_page(rows, |row| row.id, bot_view)?)
    }

    /// A Bot the caller may use.
    pub async fn get(&self, caller: &Caller, id: BotId) -> Result<Bot, ServiceError> {
        caller.require(Resource::Bots, Action::Read)?;
        Ok(bot_view(self.visible(caller, id).await?)?)
    }

    /// Changes a Bot the caller may change. With `revision`, a Bot that changed since is a
    /// conflict; a change that meets a concurrent one is a conflict too, never lost.
    pub async fn update(
        &self,
        caller: &Caller,
        id: BotId,
        update: BotUpdate,
    ) -> Result<Bot, ServiceError> {
        caller.require(Resource::Bots, Action::Write)?;
        let row = self.changeable(caller, id).await?;
        if let Some(revision) = update.revision.filter(|r| *r as i64 != row.revision) {
            return Err(ServiceError::Conflict(format!(
                "the Bot is at revision {}, not {revision}",
                row.revision
            )));
        }
        // A model is checked against the deployment when it changes: a Bot keeps working
        // through changes of its other fields.
        if let Some(model) = &update.model {
            self.platform
                .check_model(model)
                .map_err(ServiceError::Invalid)?;
        }
        let mut spec = row.spec.clone();
        update.apply_to(&mut spec);
        check_spec(&spec).map_err(ServiceError::Invalid)?;
        match self.store.update_bot(row.id, row.revision, &spec).await? {
            Some(row) => Ok(bot_view(row)?),
            None => Err(ServiceError::Conflict(
                "the Bot changed meanwhile; read it again".into(),
            )),
        }
    }

    /// Deletes a Bot the caller may change: from the answer on nobody sees it; its Chats are
    /// closed durably in the background.
    pub async fn delete(&self, caller: &Caller, id: BotId) -> Result<(), ServiceError> {
        caller.require(Resource::Bots, Action::Write)?;
        let row = self.changeable(caller, id).await?;
        super::delete_bot(&self.engine, row.organization_id, row.id).await?;
        Ok(())
    }
}
