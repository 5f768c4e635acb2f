//! Budgets on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use const_format::concatcp;
use openbot_schema::{BotId, BudgetScope, ChatId};
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{BudgetRow, BudgetStore, Exhausted, parse_scope};
use crate::store::{StoreError, both_backends, now_ms};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    /// The spending of a budget row `b`: the confirmed cost of every model call of its Chat, Bot
    /// (the Bot of the Chat the call's tree works for) or organization, kept as a running total
    /// by each call's settlement (`crate::billing`).
    macro_rules! spent {
    () => {
        "COALESCE((SELECT t.settled_micros FROM usage_totals t WHERE t.scope = b.scope AND t.target_id = b.target_id), 0)"
    };
}

    // The statements of this store, by the use that sends them.
    const PUT_BUDGET: &str = "INSERT INTO budgets (organization_id, scope, target_id, max_cost_micros, updated_at) \
             SELECT $1, $2, $3, $4, $5 WHERE \
                 (CAST($2 AS TEXT) = 'organization' AND $3 = $1) \
                 OR (CAST($2 AS TEXT) = 'bot' AND EXISTS (SELECT 1 FROM bots WHERE id = $3 AND organization_id = $1 AND deleted_at IS NULL)) \
                 OR (CAST($2 AS TEXT) = 'chat' AND EXISTS (SELECT 1 FROM chats c JOIN bots bo ON bo.id = c.bot_id \
                     WHERE c.id = $3 AND bo.organization_id = $1 AND c.deleted_at IS NULL)) \
             ON CONFLICT (organization_id, scope, target_id) DO UPDATE SET \
                 max_cost_micros = EXCLUDED.max_cost_micros, updated_at = EXCLUDED.updated_at";
    const BUDGETS: &str = concat!(
        "SELECT b.scope, b.target_id, b.max_cost_micros, b.updated_at, ",
        spent!(),
        " AS spent_micros FROM budgets b WHERE b.organization_id = $1 ORDER BY b.scope, b.target_id"
    );
    const BUDGETS_PAGE: &str = concatcp!(
        "SELECT b.scope, b.target_id, b.max_cost_micros, b.updated_at, ",
        spent!(),
        " AS spent_micros FROM budgets b WHERE b.organization_id = $1 \
             AND (b.scope > $2 OR (b.scope = $2 AND b.target_id > $3)) \
             AND (",
        "$5",
        Store::TEXT_CAST,
        " IS NULL OR b.scope = 'organization' OR (b.scope = 'bot' AND ",
        bot_in!("b.target_id", "$5"),
        ") OR (b.scope = 'chat' AND EXISTS (SELECT 1 FROM chats c WHERE c.id = b.target_id AND ",
        bot_in!("c.bot_id", "$5"),
        "))) ORDER BY b.scope, b.target_id LIMIT $4"
    );
    const DELETE_BUDGET: &str =
        "DELETE FROM budgets WHERE organization_id = $1 AND scope = $2 AND target_id = $3";
    const EXHAUSTED: &str = concat!(
        "SELECT b.scope, b.target_id, b.max_cost_micros, b.updated_at, ",
        spent!(),
        " AS spent_micros FROM budgets b WHERE b.organization_id = $1 AND ( \
                 (b.scope = 'organization' AND b.target_id = $1) \
                 OR (b.scope = 'bot' AND b.target_id = $2) \
                 OR (b.scope = 'chat' AND b.target_id = $3))"
    );

    fn budget_row(row: &Row) -> Result<BudgetRow, StoreError> {
        let scope: String = row.try_get("scope")?;
        Ok(BudgetRow {
            scope: parse_scope(&scope)?,
            target_id: row.try_get("target_id")?,
            max_cost_micros: row.try_get("max_cost_micros")?,
            spent_micros: row.try_get("spent_micros")?,
            updated_at: row.try_get("updated_at")?,
        })
    }

    #[async_trait]
    impl BudgetStore for Store {
        async fn put_budget(
            &self,
            organization: Uuid,
            scope: BudgetScope,
            target: Uuid,
            max_cost_micros: i64,
        ) -> Result<Option<BudgetRow>, StoreError> {
            let written = sqlx::query(PUT_BUDGET)
                .bind(organization)
                .bind(scope.as_str())
                .bind(target)
                .bind(max_cost_micros)
                .bind(now_ms())
                .execute(self.writer())
                .await?
                .rows_affected();
            if written == 0 {
                return Ok(None);
            }
            Ok(self
                .budgets(organization)
                .await?
                .into_iter()
                .find(|b| b.scope == scope && b.target_id == target))
        }

        async fn budgets(&self, organization: Uuid) -> Result<Vec<BudgetRow>, StoreError> {
            let rows = sqlx::query(BUDGETS)
                .bind(organization)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(budget_row).collect()
        }

        async fn budgets_page(
            &self,
            organization: Uuid,
            bot_ids: Option<&[openbot_schema::BotId]>,
            after: Option<(String, Uuid)>,
            limit: i64,
        ) -> Result<Vec<BudgetRow>, StoreError> {
            let (after_scope, after_target) =
                after.unwrap_or((String::new(), crate::paging::FIRST_ID));
            let rows = sqlx::query(BUDGETS_PAGE)
                .bind(organization)
                .bind(after_scope)
                .bind(after_target)
                .bind(limit)
                .bind(crate::store::bot_limit_json(bot_ids)?)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(budget_row).collect()
        }

        async fn delete_budget(
            &self,
            organization: Uuid,
            scope: BudgetScope,
            target: Uuid,
        ) -> Result<bool, StoreError> {
            let deleted = sqlx::query(DELETE_BUDGET)
                .bind(organization)
                .bind(scope.as_str())
                .bind(target)
                .execute(self.writer())
                .await?
                .rows_affected();
            Ok(deleted > 0)
        }

        async fn exhausted(
            &self,
            organization: Uuid,
            bot: BotId,
            chat: ChatId,
        ) -> Result<Option<Exhausted>, StoreError> {
            let rows = sqlx::query(EXHAUSTED)
                .bind(organization)
                .bind(bot.as_uuid())
                .bind(chat.as_uuid())
                .fetch_all(self.reader())
                .await?;
            let mut budgets = rows.iter().map(budget_row).collect::<Result<Vec<_>, _>>()?;
            budgets.sort_by_key(|b| b.scope as u8);
            Ok(budgets
                .into_iter()
                .find(|b| b.spent_micros >= b.max_cost_micros)
                .map(|b| Exhausted {
                    scope: b.scope,
                    max_cost_micros: b.max_cost_micros,
                    spent_micros: b.spent_micros,
                }))
        }
    }
}
