//! The tool registry on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use openbot_schema::ToolDefinition;
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{DelegateToolRow, HttpToolRow, ToolStore};
use super::template::CallTemplate;
use crate::store::{StoreError, both_backends, now_ms};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const PUT_TOOL: &str = "INSERT INTO http_tools (organization_id, name, description, input_schema, url, retry_safe, background, call_template, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $8, $9, $7) \
             ON CONFLICT (organization_id, name) DO UPDATE SET description = EXCLUDED.description, \
                 input_schema = EXCLUDED.input_schema, url = EXCLUDED.url, retry_safe = EXCLUDED.retry_safe, background = EXCLUDED.background, call_template = EXCLUDED.call_template, \
                 updated_at = EXCLUDED.updated_at \
             RETURNING name, description, input_schema, url, retry_safe, background, call_template, updated_at";
    const TOOLS: &str = "SELECT name, description, input_schema, url, retry_safe, background, call_template, updated_at FROM http_tools \
             WHERE organization_id = $1 ORDER BY name";
    const TOOLS_PAGE: &str = "SELECT name, description, input_schema, url, retry_safe, background, call_template, updated_at FROM http_tools \
             WHERE organization_id = $1 AND name > $2 ORDER BY name LIMIT $3";
    const DELETE_TOOL: &str = "DELETE FROM http_tools WHERE organization_id = $1 AND name = $2";
    const PUT_DELEGATE: &str = "INSERT INTO delegate_tools (organization_id, name, description, bot_id, limits, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (organization_id, name) DO UPDATE SET description = EXCLUDED.description, \
                 bot_id = EXCLUDED.bot_id, limits = EXCLUDED.limits, updated_at = EXCLUDED.updated_at \
             RETURNING name, description, bot_id, limits, updated_at";
    const DELEGATES: &str = "SELECT name, description, bot_id, limits, updated_at FROM delegate_tools \
             WHERE organization_id = $1 ORDER BY name";
    const DELEGATES_PAGE: &str = "SELECT name, description, bot_id, limits, updated_at FROM delegate_tools \
             WHERE organization_id = $1 AND name > $2 ORDER BY name LIMIT $3";
    const DELETE_DELEGATE: &str =
        "DELETE FROM delegate_tools WHERE organization_id = $1 AND name = $2";

    fn tool_row(row: &Row) -> Result<HttpToolRow, StoreError> {
        let schema: String = row.try_get("input_schema")?;
        Ok(HttpToolRow {
            definition: ToolDefinition {
                name: row.try_get("name")?,
                description: row.try_get("description")?,
                input_schema: serde_json::from_str(&schema)
                    .map_err(|e| StoreError::Invalid(format!("tool schema: {e}")))?,
            },
            url: row.try_get("url")?,
            retry_safe: row.try_get("retry_safe")?,
            background: row.try_get("background")?,
            template: CallTemplate::from_column(row.try_get("call_template")?)?,
            updated_at: row.try_get("updated_at")?,
        })
    }

    fn delegate_row(row: &Row) -> Result<DelegateToolRow, StoreError> {
        let bot: Uuid = row.try_get("bot_id")?;
        let limits: String = row.try_get("limits")?;
        Ok(DelegateToolRow {
            name: row.try_get("name")?,
            description: row.try_get("description")?,
            bot_id: bot.into(),
            limits: serde_json::from_str(&limits)
                .map_err(|e| StoreError::Invalid(format!("delegate limits: {e}")))?,
            updated_at: row.try_get("updated_at")?,
        })
    }

    #[async_trait]
    impl ToolStore for Store {
        async fn put_tool(
            &self,
            organization: Uuid,
            tool: HttpToolRow,
        ) -> Result<HttpToolRow, StoreError> {
            let row = sqlx::query(PUT_TOOL)
                .bind(organization)
                .bind(&tool.definition.name)
                .bind(&tool.definition.description)
                .bind(tool.definition.input_schema.to_string())
                .bind(&tool.url)
                .bind(tool.retry_safe)
                .bind(now_ms())
                .bind(tool.background)
                .bind(tool.template.to_column()?)
                .fetch_one(self.writer())
                .await?;
            tool_row(&row)
        }

        async fn tools(&self, organization: Uuid) -> Result<Vec<HttpToolRow>, StoreError> {
            let rows = sqlx::query(TOOLS)
                .bind(organization)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(tool_row).collect()
        }

        async fn tools_page(
            &self,
            organization: Uuid,
            after: Option<&str>,
            limit: i64,
        ) -> Result<Vec<HttpToolRow>, StoreError> {
            // Names are never empty, so the empty name is before every one.
            let rows = sqlx::query(TOOLS_PAGE)
                .bind(organization)
                .bind(after.unwrap_or_default())
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(tool_row).collect()
        }

        async fn delete_tool(&self, organization: Uuid, name: &str) -> Result<bool, StoreError> {
            let deleted = sqlx::query(DELETE_TOOL)
                .bind(organization)
                .bind(name)
                .execute(self.writer())
                .await?
                .rows_affected();
            Ok(deleted > 0)
        }

        async fn put_delegate(
            &self,
            organization: Uuid,
            tool: DelegateToolRow,
        ) -> Result<DelegateToolRow, StoreError> {
            let limits = serde_json::to_string(&tool.limits)
                .map_err(|e| StoreError::Invalid(format!("delegate limits: {e}")))?;
            let row = sqlx::query(PUT_DELEGATE)
                .bind(organization)
                .bind(&tool.name)
                .bind(&tool.description)
                .bind(tool.bot_id.as_uuid())
                .bind(limits)
                .bind(now_ms())
                .fetch_one(self.writer())
                .await?;
            delegate_row(&row)
        }

        async fn delegates(&self, organization: Uuid) -> Result<Vec<DelegateToolRow>, StoreError> {
            let rows = sqlx::query(DELEGATES)
                .bind(organization)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(delegate_row).collect()
        }

        async fn delegates_page(
            &self,
            organization: Uuid,
            after: Option<&str>,
            limit: i64,
        ) -> Result<Vec<DelegateToolRow>, StoreError> {
            let rows = sqlx::query(DELEGATES_PAGE)
                .bind(organization)
                .bind(after.unwrap_or_default())
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(delegate_row).collect()
        }

        async fn delete_delegate(
            &self,
            organization: Uuid,
            name: &str,
        ) -> Result<bool, StoreError> {
            let deleted = sqlx::query(DELETE_DELEGATE)
                .bind(organization)
                .bind(name)
                .execute(self.writer())
                .await?
                .rows_affected();
            Ok(deleted > 0)
        }
    }
}
