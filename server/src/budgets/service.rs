//! The budget use cases. Every public method takes the caller and checks its right first.
//! Listing needs the `models` read right; setting and removing need the `models` write right
//! and the owner or admin role. A token limited to some Bots lists the organization's budget
//! and its Bots' and their Chats' budgets, and sets or removes only its Bots' budgets.

use std::sync::Arc;

use openbot_schema::{Action, BotId, Budget, BudgetPage, BudgetScope, PutBudget, Resource};
use uuid::Uuid;

use super::{BudgetRow, BudgetStore};
use crate::identity::Caller;
use crate::paging::Paging;
use crate::service::ServiceError;
use crate::store::{StoreError, stored_time};

fn view(row: BudgetRow) -> Result<Budget, StoreError> {
    Ok(Budget {
        scope: row.scope,
        target_id: row.target_id,
        max_cost_micros: row.max_cost_micros.max(0) as u64,
        spent_micros: row.spent_micros.max(0) as u64,
        updated_at: stored_time(row.updated_at)?,
    })
}

/// The budget use cases. Cheap to clone.
#[derive(Clone)]
pub struct Budgets {
    store: Arc<dyn BudgetStore>,
}

impl Budgets {
    /// The use cases on `store`.
    pub fn new(store: Arc<dyn BudgetStore>) -> Self {
        Self { store }
    }

    /// The right to set or remove the budget of `scope`'s `target`: the `models` write right,
    /// an owner or admin, and (for a token limited to some Bots) one of its Bots' budgets: the
    /// organization's budget and a Chat's reach further than its Bots.
    fn may_change(caller: &Caller, scope: BudgetScope, target: Uuid) -> Result<(), ServiceError> {
        caller.require(Resource::Models, Action::Write)?;
        if !caller.is_admin() {
            return Err(ServiceError::Forbidden(
                "only owners and admins change budgets".into(),
            ));
        }
        if caller.bot_ids.is_some()
            && !(scope == BudgetScope::Bot && caller.may_use(BotId::from(target)))
        {
            caller.require_whole_organization()?;
        }
        Ok(())
    }

    /// The budgets the caller sees with what each scope spent so far, by scope and target.
    pub async fn list(
        &self,
        caller: &Caller,
        paging: &Paging<(String, Uuid)>,
    ) -> Result<BudgetPage, ServiceError> {
        caller.require(Resource::Models, Action::Read)?;
        let rows = self
            .store
            .budgets_page(
                caller.member.organization_id,
                caller.bot_ids.as_deref(),
                paging.after.clone(),
                paging.fetch(),
            )
            .await?;
        Ok(paging.try_page(
            rows,
            |row| (row.scope.as_str().to_string(), row.target_id),
            view,
        )?)
    }

    /// Sets the budget of `scope`'s `target` (of the caller's organization).
    pub async fn put(
        &self,
        caller: &Caller,
        scope: BudgetScope,
        target: Uuid,
        request: &PutBudget,
    ) -> Result<Budget, ServiceError> {
        Self::may_change(caller, scope, target)?;
        let max = i64::try_from(request.max_cost_micros)
            .map_err(|_| ServiceError::Invalid("max_cost_micros is too large".into()))?;
        match self
            .store
            .put_budget(caller.member.organization_id, scope, target, max)
            .await?
        {
            Some(row) => Ok(view(row)?),
            None => Err(ServiceError::NotFound(scope.as_str())),
        }
    }

    /// Removes the budget of `scope`'s `target`.
    pub async fn delete(
        &self,
        caller: &Caller,
        scope: BudgetScope,
        target: Uuid,
    ) -> Result<(), ServiceError> {
        Self::may_change(caller, scope, target)?;
        if self
            .store
            .delete_budget(caller.member.organization_id, scope, target)
            .await?
        {
            Ok(())
        } else {
            Err(ServiceError::NotFound("budget"))
        }
    }
}
