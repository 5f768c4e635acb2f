//! Vaults on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{FieldForSend, ItemRow, Reader, RuleRow, SealedField, VaultStore, Visibility};
use crate::sealed::SealedValue;
use crate::store::{Millis, StoreError, both_backends, now_ms};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    fn rule_row(row: &Row) -> Result<RuleRow, StoreError> {
        Ok(RuleRow {
            id: row.try_get("id")?,
            item_id: row.try_get("item_id")?,
            field: row.try_get("field")?,
            reader_kind: row.try_get("reader_kind")?,
            reader_id: row.try_get("reader_id")?,
            reader_scope: row.try_get("reader_scope")?,
            created_at: row.try_get("created_at")?,
        })
    }

    /// Items with their fields, one row per field (an item without fields has one row with a NULL
    /// field), ordered by item, folded into items.
    fn fold_items(rows: &[Row]) -> Result<Vec<ItemRow>, StoreError> {
        let mut items: Vec<ItemRow> = Vec::new();
        for row in rows {
            let id: Uuid = row.try_get("id")?;
            if items.last().is_none_or(|item| item.id != id) {
                items.push(ItemRow {
                    id,
                    organization_id: row.try_get("organization_id")?,
                    owner_member_id: row.try_get("owner_member_id")?,
                    name: row.try_get("name")?,
                    fields: Vec::new(),
                    created_at: row.try_get("created_at")?,
                    updated_at: row.try_get("updated_at")?,
                });
            }
            let field: Option<String> = row.try_get("field")?;
            let field_updated: Option<Millis> = row.try_get("field_updated")?;
            if let (Some(field), Some(at), Some(item)) = (field, field_updated, items.last_mut()) {
                item.fields.push((field, at));
            }
        }
        Ok(items)
    }

    /// Whether a rule of item `i` lets the reader (kind, id, scope) read field `$3`.
    macro_rules! allowed {
    ($kind:literal, $id:literal, $scope:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM vault_rules r WHERE r.item_id = i.id AND (r.field = $3 OR r.field = '*') \
             AND r.reader_kind = ", $kind, " AND r.reader_id = ", $id, " AND r.reader_scope = ", $scope, ")"
        )
    };
}

    /// Items `i` (a subquery) with their fields.
    macro_rules! with_fields {
    ($items:literal) => {
        concat!(
            "SELECT i.id, i.organization_id, i.owner_member_id, i.name, i.created_at, i.updated_at, \
             f.name AS field, f.updated_at AS field_updated FROM (", $items, ") i \
             LEFT JOIN vault_fields f ON f.item_id = i.id ORDER BY i.id, f.name"
        )
    };
}

    // The statements of this store, by the use that sends them.
    const CREATE_ITEM_INSERT_VAULT_ITEMS: &str = "INSERT INTO vault_items (id, organization_id, owner_member_id, name, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $5)";
    const CREATE_ITEM_INSERT_VAULT_FIELDS: &str = "INSERT INTO vault_fields (item_id, name, key_id, sealed, updated_at) VALUES ($1, $2, $3, $4, $5)";
    const PUT_FIELD_UPDATE_VAULT_ITEMS: &str =
        "UPDATE vault_items SET updated_at = $2 WHERE id = $1";
    const PUT_FIELD_INSERT_VAULT_FIELDS: &str = "INSERT INTO vault_fields (item_id, name, key_id, sealed, updated_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (item_id, name) DO UPDATE SET key_id = EXCLUDED.key_id, sealed = EXCLUDED.sealed, \
                 updated_at = EXCLUDED.updated_at";
    const DELETE_FIELD_DELETE_VAULT_FIELDS: &str =
        "DELETE FROM vault_fields WHERE item_id = $1 AND name = $2";
    const DELETE_FIELD_DELETE_VAULT_RULES: &str =
        "DELETE FROM vault_rules WHERE item_id = $1 AND field = $2";
    const DELETE_FIELD_UPDATE_VAULT_ITEMS: &str =
        "UPDATE vault_items SET updated_at = $2 WHERE id = $1";
    const DELETE_ITEM_DELETE_VAULT_RULES: &str = "DELETE FROM vault_rules WHERE item_id = $1";
    const DELETE_ITEM_DELETE_VAULT_FIELDS: &str = "DELETE FROM vault_fields WHERE item_id = $1";
    const DELETE_ITEM_DELETE_VAULT_ITEMS: &str = "DELETE FROM vault_items WHERE id = $1";
    const CREATE_RULE_INSERT_VAULT_RULES: &str = "INSERT INTO vault_rules (id, item_id, field, reader_kind, reader_id, reader_scope, created_at) \
             VALUES ($1, $2, $3, $4, $5, $7, $6) ON CONFLICT (item_id, field, reader_kind, reader_id, reader_scope) DO NOTHING";
    const CREATE_RULE_SELECT_VAULT_RULES: &str = "SELECT id, item_id, field, reader_kind, reader_id, reader_scope, created_at FROM vault_rules \
             WHERE item_id = $1 AND field = $2 AND reader_kind = $3 AND reader_id = $4 AND reader_scope = $5";
    const RULES: &str = "SELECT id, item_id, field, reader_kind, reader_id, reader_scope, created_at FROM vault_rules \
             WHERE item_id = $1 AND id > $2 ORDER BY id LIMIT $3";
    const RULE: &str = "SELECT id, item_id, field, reader_kind, reader_id, reader_scope, created_at FROM vault_rules WHERE id = $1";
    const DELETE_RULE: &str = "DELETE FROM vault_rules WHERE id = $1";
    const FIELD_FOR_SEND: &str = concat!(
        "SELECT i.owner_member_id, f.key_id, f.sealed, ",
        allowed!("$4", "$5", "$6"),
        " AS first_allowed, ",
        allowed!("$7", "$8", "$9"),
        " AS second_allowed, ",
        allowed!("$10", "$11", "$12"),
        " AS third_allowed \
             FROM vault_items i LEFT JOIN vault_fields f ON f.item_id = i.id AND f.name = $3 \
             WHERE i.id = $1 AND i.organization_id = $2"
    );

    #[async_trait]
    impl VaultStore for Store {
        async fn create_item(
            &self,
            item: &ItemRow,
            fields: &[SealedField],
        ) -> Result<(), StoreError> {
            let mut tx = self.writer().begin().await?;
            sqlx::query(CREATE_ITEM_INSERT_VAULT_ITEMS)
                .bind(item.id)
                .bind(item.organization_id)
                .bind(item.owner_member_id)
                .bind(&item.name)
                .bind(item.created_at)
                .execute(&mut *tx)
                .await?;
            for field in fields {
                sqlx::query(CREATE_ITEM_INSERT_VAULT_FIELDS)
                    .bind(item.id)
                    .bind(&field.name)
                    .bind(&field.value.key_id)
                    .bind(&field.value.bytes)
                    .bind(item.created_at)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        }

        async fn item(&self, seen: Visibility, id: Uuid) -> Result<Option<ItemRow>, StoreError> {
            let rows = sqlx::query(with_fields!(
                "SELECT * FROM vault_items WHERE id = $3 AND organization_id = $1 \
             AND (owner_member_id IS NULL OR owner_member_id = $2)"
            ))
            .bind(seen.organization)
            .bind(seen.member)
            .bind(id)
            .fetch_all(self.reader())
            .await?;
            Ok(fold_items(&rows)?.into_iter().next())
        }

        async fn items(
            &self,
            seen: Visibility,
            after: Option<Uuid>,
            limit: i64,
        ) -> Result<Vec<ItemRow>, StoreError> {
            let rows = sqlx::query(with_fields!(
                "SELECT * FROM vault_items WHERE organization_id = $1 \
             AND (owner_member_id IS NULL OR owner_member_id = $2) AND id > $3 ORDER BY id LIMIT $4"
            ))
            .bind(seen.organization)
            .bind(seen.member)
            // Every v7 ID is after the nil UUID.
            .bind(after.unwrap_or(Uuid::nil()))
            .bind(limit)
            .fetch_all(self.reader())
            .await?;
            fold_items(&rows)
        }

        async fn put_field(&self, item: Uuid, field: &SealedField) -> Result<bool, StoreError> {
            let now = now_ms();
            let mut tx = self.writer().begin().await?;
            // The item's row first: an item deleted meanwhile gets no orphan field.
            let touched = sqlx::query(PUT_FIELD_UPDATE_VAULT_ITEMS)
                .bind(item)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if touched == 0 {
                return Ok(false);
            }
            sqlx::query(PUT_FIELD_INSERT_VAULT_FIELDS)
                .bind(item)
                .bind(&field.name)
                .bind(&field.value.key_id)
                .bind(&field.value.bytes)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(true)
        }

        async fn delete_field(&self, item: Uuid, name: &str) -> Result<bool, StoreError> {
            let mut tx = self.writer().begin().await?;
            let deleted = sqlx::query(DELETE_FIELD_DELETE_VAULT_FIELDS)
                .bind(item)
                .bind(name)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            sqlx::query(DELETE_FIELD_DELETE_VAULT_RULES)
                .bind(item)
                .bind(name)
                .execute(&mut *tx)
                .await?;
            sqlx::query(DELETE_FIELD_UPDATE_VAULT_ITEMS)
                .bind(item)
                .bind(now_ms())
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(deleted > 0)
        }

        async fn delete_item(&self, item: Uuid) -> Result<bool, StoreError> {
            let mut tx = self.writer().begin().await?;
            sqlx::query(DELETE_ITEM_DELETE_VAULT_RULES)
                .bind(item)
                .execute(&mut *tx)
                .await?;
            sqlx::query(DELETE_ITEM_DELETE_VAULT_FIELDS)
                .bind(item)
                .execute(&mut *tx)
                .await?;
            let deleted = sqlx::query(DELETE_ITEM_DELETE_VAULT_ITEMS)
                .bind(item)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            Ok(deleted > 0)
        }

        async fn create_rule(&self, rule: &RuleRow) -> Result<RuleRow, StoreError> {
            sqlx::query(CREATE_RULE_INSERT_VAULT_RULES)
                .bind(rule.id)
                .bind(rule.item_id)
                .bind(&rule.field)
                .bind(&rule.reader_kind)
                .bind(&rule.reader_id)
                .bind(rule.created_at)
                .bind(&rule.reader_scope)
                .execute(self.writer())
                .await?;
            let row = sqlx::query(CREATE_RULE_SELECT_VAULT_RULES)
                .bind(rule.item_id)
                .bind(&rule.field)
                .bind(&rule.reader_kind)
                .bind(&rule.reader_id)
                .bind(&rule.reader_scope)
                .fetch_one(self.writer())
                .await?;
            rule_row(&row)
        }

        async fn rules(
            &self,
            item: Uuid,
            after: Option<Uuid>,
            limit: i64,
        ) -> Result<Vec<RuleRow>, StoreError> {
            let rows = sqlx::query(RULES)
                .bind(item)
                .bind(after.unwrap_or(Uuid::nil()))
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(rule_row).collect()
        }

        async fn rule(&self, id: Uuid) -> Result<Option<RuleRow>, StoreError> {
            let row = sqlx::query(RULE)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(rule_row).transpose()
        }

        async fn delete_rule(&self, id: Uuid) -> Result<bool, StoreError> {
            let deleted = sqlx::query(DELETE_RULE)
                .bind(id)
                .execute(self.writer())
                .await?
                .rows_affected();
            Ok(deleted > 0)
        }

        async fn field_for_send(
            &self,
            organization: Uuid,
            item: Uuid,
            field: &str,
            readers: [&Reader; 3],
        ) -> Result<Option<FieldForSend>, StoreError> {
            // One statement, so the item, the value and the rules are of the same moment.
            let row = sqlx::query(FIELD_FOR_SEND)
                .bind(item)
                .bind(organization)
                .bind(field)
                .bind(readers[0].kind)
                .bind(&readers[0].id)
                .bind(&readers[0].scope)
                .bind(readers[1].kind)
                .bind(&readers[1].id)
                .bind(&readers[1].scope)
                .bind(readers[2].kind)
                .bind(&readers[2].id)
                .bind(&readers[2].scope)
                .fetch_optional(self.reader())
                .await?;
            let Some(row) = row else {
                return Ok(None);
            };
            let key_id: Option<String> = row.try_get("key_id")?;
            let sealed: Option<Vec<u8>> = row.try_get("sealed")?;
            Ok(Some(FieldForSend {
                owner_member_id: row.try_get("owner_member_id")?,
                value: key_id
                    .zip(sealed)
                    .map(|(key_id, bytes)| SealedValue { key_id, bytes }),
                allowed: vec![
                    row.try_get("first_allowed")?,
                    row.try_get("second_allowed")?,
                    row.try_get("third_allowed")?,
                ],
            }))
        }
    }
}
