//! Approval rules on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use sqlx::Row as _;
use uuid::Uuid;

use super::rules::RuleRow;
use super::store::{RuleStore, action_name, parse_action};
use crate::store::{StoreError, both_backends};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const ADD_RULE: &str = "INSERT INTO approval_rules (id, organization_id, tool, arguments, action, bot_id, member_id, expires_after_ms, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
    const RULES: &str =
        "SELECT * FROM approval_rules WHERE organization_id = $1 ORDER BY created_at, id";
    const RULES_PAGE: &str = concat!(
        "SELECT * FROM approval_rules WHERE organization_id = $1 \
             AND (created_at > $2 OR (created_at = $2 AND id > $3)) \
             AND (bot_id IS NULL OR ",
        in_bot_limit!("bot_id", "$5"),
        ") ORDER BY created_at, id LIMIT $4"
    );
    const RULE: &str = "SELECT * FROM approval_rules WHERE organization_id = $1 AND id = $2";
    const DELETE_RULE: &str = "DELETE FROM approval_rules WHERE organization_id = $1 AND id = $2";

    fn rule_row(row: &Row) -> Result<RuleRow, StoreError> {
        let action: String = row.try_get("action")?;
        let bot: Option<Uuid> = row.try_get("bot_id")?;
        Ok(RuleRow {
            id: row.try_get("id")?,
            tool: row.try_get("tool")?,
            arguments: row.try_get("arguments")?,
            action: parse_action(&action)?,
            bot_id: bot.map(Into::into),
            member_id: row.try_get("member_id")?,
            expires_after_ms: row.try_get::<i64, _>("expires_after_ms")?.max(1) as u64,
            created_at: row.try_get("created_at")?,
        })
    }

    #[async_trait]
    impl RuleStore for Store {
        async fn add_rule(&self, organization: Uuid, rule: RuleRow) -> Result<RuleRow, StoreError> {
            sqlx::query(ADD_RULE)
                .bind(rule.id)
                .bind(organization)
                .bind(&rule.tool)
                .bind(&rule.arguments)
                .bind(action_name(rule.action))
                .bind(rule.bot_id.map(|b| b.as_uuid()))
                .bind(rule.member_id)
                .bind(rule.expires_after_ms.min(i64::MAX as u64) as i64)
                .bind(rule.created_at)
                .execute(self.writer())
                .await?;
            Ok(rule)
        }

        async fn rules(&self, organization: Uuid) -> Result<Vec<RuleRow>, StoreError> {
            let rows = sqlx::query(RULES)
                .bind(organization)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(rule_row).collect()
        }

        async fn rules_page(
            &self,
            organization: Uuid,
            bot_ids: Option<&[openbot_schema::BotId]>,
            after: Option<crate::paging::CreatedPosition>,
            limit: i64,
        ) -> Result<Vec<RuleRow>, StoreError> {
            let (after_at, after_id) = after.unwrap_or((i64::MIN, crate::paging::FIRST_ID));
            let rows = sqlx::query(RULES_PAGE)
                .bind(organization)
                .bind(after_at)
                .bind(after_id)
                .bind(limit)
                .bind(crate::store::bot_limit_json(bot_ids)?)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(rule_row).collect()
        }

        async fn rule(&self, organization: Uuid, id: Uuid) -> Result<Option<RuleRow>, StoreError> {
            let row = sqlx::query(RULE)
                .bind(organization)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(rule_row).transpose()
        }

        async fn delete_rule(&self, organization: Uuid, id: Uuid) -> Result<bool, StoreError> {
            let deleted = sqlx::query(DELETE_RULE)
                .bind(organization)
                .bind(id)
                .execute(self.writer())
                .await?
                .rows_affected();
            Ok(deleted > 0)
        }
    }
}
