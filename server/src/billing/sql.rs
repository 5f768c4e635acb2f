//! Billing on SQL, written once for SQLite and PostgreSQL: the store, and the rows of the
//! reservation, settlement and release that commit inside a Turn's steps.
//!
//! Concurrency: a reservation locks the budget rows above its call and the organization's
//! credit account (`FOR UPDATE` on PostgreSQL, in one order: budgets by scope and target, then
//! the account; SQLite has one writer), and only then, in a later statement with a fresh
//! snapshot, sums what is spent and held. Two reservations against one budget therefore
//! follow each other, and the second sees the first's hold, on any node.

use async_trait::async_trait;
use const_format::concatcp;
use futures::future::BoxFuture;
use openbot_core::model::Pricing;
use openbot_schema::{ExecutionId, Usage, UsageGroup};
use sqlx::{Postgres, Row as _, Sqlite, Transaction};
use uuid::Uuid;

use super::store::{
    BillingStore, CreditsRow, LedgerRow, PriceRow, UsageQuery, UsageRecordRow, UsageSums,
};
use super::writes::{Refusal, Release, Reservation, Settlement, cost_of, estimate_of};
use crate::budgets::parse_scope;
use crate::store::{StoreError, TxWrite, both_backends, now_ms};

fn pricing(input: i64, output: i64, cached: i64) -> Pricing {
    Pricing {
        input_per_million: input.max(0) as u64,
        output_per_million: output.max(0) as u64,
        cached_input_per_million: cached.max(0) as u64,
    }
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    /// What a scope spent and holds: its settled total and the estimates of its held calls.
    macro_rules! used {
        ($scope:literal, $column:literal, $param:literal) => {
            concat!(
                "COALESCE((SELECT t.settled_micros FROM usage_totals t WHERE t.scope = '",
                $scope,
                "' AND t.target_id = ",
                $param,
                "), 0) + (SELECT CAST(COALESCE(SUM(COALESCE(u.estimate_micros, 0)), 0) AS BIGINT) \
             FROM usage_records u WHERE u.",
                $column,
                " = ",
                $param,
                " AND u.state = 'held')"
            )
        };
    }

    /// A usage report grouped by column `$key`.
    macro_rules! report {
    ($key:literal) => {
        concatcp!(
            "SELECT u.", $key, " AS key, CAST(COUNT(*) AS BIGINT) AS calls, \
                 CAST(COALESCE(SUM(CASE WHEN u.state = 'settled' THEN 1 ELSE 0 END), 0) AS BIGINT) AS confirmed_calls, \
                 CAST(COALESCE(SUM(CASE WHEN u.state = 'unknown' THEN 1 ELSE 0 END), 0) AS BIGINT) AS unknown_calls, \
                 CAST(COALESCE(SUM(CASE WHEN u.state = 'settled' THEN u.input_tokens ELSE 0 END), 0) AS BIGINT) AS input_tokens, \
                 CAST(COALESCE(SUM(CASE WHEN u.state = 'settled' THEN u.output_tokens ELSE 0 END), 0) AS BIGINT) AS output_tokens, \
                 CAST(COALESCE(SUM(CASE WHEN u.state = 'settled' THEN u.cached_tokens ELSE 0 END), 0) AS BIGINT) AS cached_tokens, \
                 CAST(COALESCE(SUM(CASE WHEN u.state = 'settled' THEN u.cost_micros ELSE 0 END), 0) AS BIGINT) AS cost_micros, \
                 CAST(COALESCE(SUM(CASE WHEN u.state = 'unknown' THEN COALESCE(u.estimate_micros, 0) ELSE 0 END), 0) AS BIGINT) AS unknown_estimate_micros \
             FROM usage_records u WHERE u.organization_id = $1 \
                 AND (CAST($2 AS BIGINT) IS NULL OR u.created_at >= $2) AND (CAST($3 AS BIGINT) IS NULL OR u.created_at < $3) \
                 AND ", in_bot_limit!("u.budget_bot_id", "$4"), " \
                 AND (", "$5", Store::UUID_CAST, " IS NULL OR u.bot_id = $5) AND (", "$6", Store::UUID_CAST, " IS NULL OR u.chat_id = $6) \
                 AND (", "$7", Store::UUID_CAST, " IS NULL OR u.member_id = $7) AND (", "$8", Store::TEXT_CAST, " IS NULL OR u.model = $8) \
                 AND u.", $key, " IS NOT NULL AND ($9 IS NULL OR u.", $key, " > $9) \
             GROUP BY u.", $key, " ORDER BY u.", $key, " LIMIT $10"
        )
    };
}

    // The statements of this store, by the use that sends them.
    const CHARGE_INSERT_CREDIT_LEDGER: &str = "INSERT INTO credit_ledger (id, organization_id, kind, amount_micros, execution_id, call_key, created_at) \
         SELECT $1, $2, 'charge', $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM credit_accounts WHERE organization_id = $2) \
         ON CONFLICT DO NOTHING";
    const CHARGE_UPDATE_CREDIT_ACCOUNTS: &str = "UPDATE credit_accounts SET balance_micros = balance_micros - $2, updated_at = $3 WHERE organization_id = $1";
    const SETTLE_RECORD: &str = "UPDATE usage_records SET state = 'settled', input_tokens = $3, output_tokens = $4, cached_tokens = $5, \
             cost_micros = $6, settled_at = $7 WHERE execution_id = $1 AND call_key = $2 AND state <> 'settled' \
         RETURNING organization_id, budget_bot_id, chat_id";
    const SAVED_PRICE: &str = concatcp!(
        "SELECT state, input_price, output_price, cached_price \
         FROM usage_records WHERE execution_id = $1 AND call_key = $2",
        Store::FOR_UPDATE
    );
    const ADD_TOTALS_WITH_CHAT: &str = "INSERT INTO usage_totals (scope, target_id, settled_micros) \
             VALUES ('organization', $1, $4), ('bot', $2, $4), ('chat', $3, $4) \
             ON CONFLICT (scope, target_id) DO UPDATE SET settled_micros = usage_totals.settled_micros + EXCLUDED.settled_micros";
    const ADD_TOTALS_WITHOUT_CHAT: &str = "INSERT INTO usage_totals (scope, target_id, settled_micros) \
             VALUES ('organization', $1, $3), ('bot', $2, $3) \
             ON CONFLICT (scope, target_id) DO UPDATE SET settled_micros = usage_totals.settled_micros + EXCLUDED.settled_micros";
    const INSERT_UNRESERVED: &str = "INSERT INTO usage_records (execution_id, call_key, generation, organization_id, bot_id, budget_bot_id, chat_id, \
             member_id, model, input_price, output_price, cached_price, state, input_tokens, output_tokens, cached_tokens, \
             cost_micros, created_at, settled_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $18) \
         ON CONFLICT (execution_id, call_key) DO NOTHING";
    const RESERVE_SELECT_BUDGETS: &str = "SELECT p.input_micros_per_million, p.output_micros_per_million, p.cached_input_micros_per_million, \
             EXISTS (SELECT 1 FROM budgets b WHERE b.organization_id = $1 AND ( \
                 (b.scope = 'organization' AND b.target_id = $1) OR (b.scope = 'bot' AND b.target_id = $3) \
                 OR (b.scope = 'chat' AND b.target_id = $4))) AS has_budgets, \
             EXISTS (SELECT 1 FROM credit_accounts a WHERE a.organization_id = $1) AS has_account \
         FROM (SELECT 1 AS one) o LEFT JOIN model_prices p ON p.organization_id = $1 AND p.model = $2";
    const RESERVE_INSERT_USAGE_RECORDS: &str = "INSERT INTO usage_records (execution_id, call_key, generation, organization_id, bot_id, budget_bot_id, chat_id, \
             member_id, model, input_price, output_price, cached_price, estimate_input_tokens, estimate_output_tokens, \
             estimate_micros, state, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, 'held', $16) \
         ON CONFLICT (execution_id, call_key) DO NOTHING";
    const CHECK_LIMITS_SELECT_BUDGETS: &str = concatcp!(
        "SELECT scope, target_id, max_cost_micros FROM budgets WHERE organization_id = $1 AND ( \
             (scope = 'organization' AND target_id = $1) OR (scope = 'bot' AND target_id = $2) \
             OR (scope = 'chat' AND target_id = $3)) ORDER BY scope, target_id",
        Store::FOR_UPDATE
    );
    const CHECK_LIMITS_SELECT_CREDIT_ACCOUNTS: &str = concatcp!(
        "SELECT balance_micros FROM credit_accounts WHERE organization_id = $1",
        Store::FOR_UPDATE
    );
    const CHECK_LIMITS_SELECT_USAGE_RECORDS: &str = concat!(
        "SELECT CASE WHEN $4 THEN ",
        used!("organization", "organization_id", "$1"),
        " ELSE 0 END AS organization_used, \
             CASE WHEN $5 THEN ",
        used!("bot", "budget_bot_id", "$2"),
        " ELSE 0 END AS bot_used, \
             CASE WHEN $6 THEN ",
        used!("chat", "chat_id", "$3"),
        " ELSE 0 END AS chat_used, \
             CASE WHEN $7 THEN (SELECT CAST(COALESCE(SUM(COALESCE(u.estimate_micros, 0)), 0) AS BIGINT) \
                 FROM usage_records u WHERE u.organization_id = $1 AND u.state = 'held') ELSE 0 END AS held"
    );
    const SETTLE: &str = "UPDATE usage_records SET state = 'unknown', settled_at = $3 \
                 WHERE execution_id = $1 AND call_key = $2 AND state IN ('held', 'released')";
    const RELEASE: &str = "UPDATE usage_records SET state = 'released', settled_at = $2 WHERE execution_id = $1 AND state = 'held'";
    const PRICES: &str = concatcp!(
        "SELECT model, input_micros_per_million, output_micros_per_million, cached_input_micros_per_million, updated_at \
             FROM model_prices WHERE organization_id = $1 AND (",
        "$2",
        Store::TEXT_CAST,
        " IS NULL OR model",
        Store::BYTEWISE,
        " > $2) \
             ORDER BY model",
        Store::BYTEWISE,
        " LIMIT $3"
    );
    const PUT_PRICE: &str = "INSERT INTO model_prices (organization_id, model, input_micros_per_million, output_micros_per_million, \
                 cached_input_micros_per_million, updated_at) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (organization_id, model) DO UPDATE SET input_micros_per_million = EXCLUDED.input_micros_per_million, \
                 output_micros_per_million = EXCLUDED.output_micros_per_million, \
                 cached_input_micros_per_million = EXCLUDED.cached_input_micros_per_million, updated_at = EXCLUDED.updated_at";
    const DELETE_PRICE: &str = "DELETE FROM model_prices WHERE organization_id = $1 AND model = $2";
    const CREDITS: &str = "SELECT (SELECT balance_micros FROM credit_accounts WHERE organization_id = $1) AS balance, \
                 (SELECT CAST(COALESCE(SUM(COALESCE(estimate_micros, 0)), 0) AS BIGINT) FROM usage_records \
                     WHERE organization_id = $1 AND state = 'held') AS held";
    const GRANT_CREDITS_INSERT_CREDIT_ACCOUNTS: &str = "INSERT INTO credit_accounts (organization_id, balance_micros, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (organization_id) DO UPDATE SET balance_micros = credit_accounts.balance_micros + EXCLUDED.balance_micros, \
                 updated_at = EXCLUDED.updated_at";
    const GRANT_CREDITS_INSERT_CREDIT_LEDGER: &str = "INSERT INTO credit_ledger (id, organization_id, kind, amount_micros, member_id, note, created_at) \
             VALUES ($1, $2, 'grant', $3, $4, $5, $6)";
    const LEDGER: &str = concatcp!(
        "SELECT id, kind, amount_micros, execution_id, call_key, member_id, note, created_at FROM credit_ledger \
             WHERE organization_id = $1 AND (",
        "$2",
        Store::UUID_CAST,
        " IS NULL OR id < $2) ORDER BY id DESC LIMIT $3"
    );
    const USAGE_RECORD: &str = "SELECT state, generation, model, estimate_micros, cost_micros, input_tokens, output_tokens \
             FROM usage_records WHERE execution_id = $1 AND call_key = $2";

    fn sums(row: &Row, key: Option<String>) -> Result<UsageSums, StoreError> {
        Ok(UsageSums {
            key,
            calls: row.try_get("calls")?,
            confirmed_calls: row.try_get("confirmed_calls")?,
            unknown_calls: row.try_get("unknown_calls")?,
            input_tokens: row.try_get("input_tokens")?,
            output_tokens: row.try_get("output_tokens")?,
            cached_tokens: row.try_get("cached_tokens")?,
            cost_micros: row.try_get("cost_micros")?,
            unknown_estimate_micros: row.try_get("unknown_estimate_micros")?,
        })
    }

    /// Charges a settled call's cost to its organization's credits, once: the ledger's unique
    /// call identity refuses a second charge, and the balance moves only with a new entry. An
    /// organization without a credit account is not charged.
    async fn charge(
        tx: &mut Transaction<'_, Db>,
        organization: Uuid,
        execution: ExecutionId,
        call_key: &str,
        cost: i64,
    ) -> Result<(), StoreError> {
        if cost <= 0 {
            return Ok(());
        }
        let now = now_ms();
        let written = sqlx::query(CHARGE_INSERT_CREDIT_LEDGER)
            .bind(Uuid::now_v7())
            .bind(organization)
            .bind(-cost)
            .bind(execution.as_uuid())
            .bind(call_key)
            .bind(now)
            .execute(&mut **tx)
            .await?
            .rows_affected();
        if written == 1 {
            sqlx::query(CHARGE_UPDATE_CREDIT_ACCOUNTS)
                .bind(organization)
                .bind(cost)
                .bind(now)
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    /// Settles the record of `call_key` with confirmed `usage` unless it is settled already,
    /// pricing it at its saved price and adding the cost to its scopes' totals; returns the
    /// organization and cost when it did. `known` is the saved price when the caller wrote the
    /// record itself: the `UPDATE … RETURNING` then does it, without reading the record first.
    async fn settle_record(
        tx: &mut Transaction<'_, Db>,
        execution: ExecutionId,
        call_key: &str,
        usage: &Usage,
        known: Option<Option<Pricing>>,
    ) -> Result<Option<(Uuid, i64)>, StoreError> {
        let price = match known {
            Some(price) => price,
            None => match saved_price(tx, execution, call_key).await? {
                Some(price) => price,
                None => return Ok(None),
            },
        };
        let cost = cost_of(price, usage);
        let row = sqlx::query(SETTLE_RECORD)
            .bind(execution.as_uuid())
            .bind(call_key)
            .bind(to_i64(usage.input_tokens))
            .bind(to_i64(usage.output_tokens))
            .bind(to_i64(usage.cached_input_tokens))
            .bind(cost)
            .bind(now_ms())
            .fetch_optional(&mut **tx)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let organization: Uuid = row.try_get("organization_id")?;
        add_totals(
            tx,
            organization,
            row.try_get("budget_bot_id")?,
            row.try_get("chat_id")?,
            cost,
        )
        .await?;
        Ok(Some((organization, cost)))
    }

    /// The price saved with the record of `call_key`, locked (`None`: no record, or settled
    /// already; `Some(None)`: the model had no price).
    async fn saved_price(
        tx: &mut Transaction<'_, Db>,
        execution: ExecutionId,
        call_key: &str,
    ) -> Result<Option<Option<Pricing>>, StoreError> {
        let row = sqlx::query(SAVED_PRICE)
            .bind(execution.as_uuid())
            .bind(call_key)
            .fetch_optional(&mut **tx)
            .await?;
        let Some(row) = row else { return Ok(None) };
        if row.try_get::<String, _>("state")? == "settled" {
            return Ok(None);
        }
        Ok(Some(
            match (
                row.try_get::<Option<i64>, _>("input_price")?,
                row.try_get::<Option<i64>, _>("output_price")?,
                row.try_get::<Option<i64>, _>("cached_price")?,
            ) {
                (Some(input), Some(output), Some(cached)) => Some(pricing(input, output, cached)),
                _ => None,
            },
        ))
    }

    /// Adds a settled call's cost to the totals of its organization, Bot and Chat, in that order
    /// (one order for every writer).
    async fn add_totals(
        tx: &mut Transaction<'_, Db>,
        organization: Uuid,
        bot: Uuid,
        chat: Option<Uuid>,
        cost: i64,
    ) -> Result<(), StoreError> {
        if cost <= 0 {
            return Ok(());
        }
        let query = match chat {
            Some(chat) => sqlx::query(ADD_TOTALS_WITH_CHAT)
                .bind(organization)
                .bind(bot)
                .bind(chat)
                .bind(cost),
            None => sqlx::query(ADD_TOTALS_WITHOUT_CHAT)
                .bind(organization)
                .bind(bot)
                .bind(cost),
        };
        query.execute(&mut **tx).await?;
        Ok(())
    }

    /// Inserts a call's record in `state` when it has none (a call with no reservation: its
    /// estimates stay NULL); returns whether it inserted.
    async fn insert_unreserved(
        tx: &mut Transaction<'_, Db>,
        settlement: &Settlement,
        state: &str,
        cost: Option<i64>,
    ) -> Result<bool, StoreError> {
        let call = &settlement.call;
        let usage = settlement.usage.unwrap_or_default();
        let has_usage = settlement.usage.is_some();
        let now = now_ms();
        let written = sqlx::query(INSERT_UNRESERVED)
            .bind(call.execution.as_uuid())
            .bind(&call.call_key)
            .bind(call.generation)
            .bind(call.organization)
            .bind(call.bot)
            .bind(call.budget_bot)
            .bind(call.chat)
            .bind(call.member)
            .bind(&call.model)
            .bind(call.catalog.map(|p| to_i64(p.input_per_million)))
            .bind(call.catalog.map(|p| to_i64(p.output_per_million)))
            .bind(call.catalog.map(|p| to_i64(p.cached_input_per_million)))
            .bind(state)
            .bind(has_usage.then(|| to_i64(usage.input_tokens)))
            .bind(has_usage.then(|| to_i64(usage.output_tokens)))
            .bind(has_usage.then(|| to_i64(usage.cached_input_tokens)))
            .bind(cost)
            .bind(now)
            .execute(&mut **tx)
            .await?
            .rows_affected();
        Ok(written == 1)
    }

    /// The reservation's body (see [`Reservation`]).
    pub(super) async fn reserve(
        tx: &mut Transaction<'_, Db>,
        reservation: &Reservation,
    ) -> Result<(), StoreError> {
        let call = &reservation.call;
        let now = now_ms();
        // Model requests of one execution go one at a time: a hold still there is of an attempt
        // that ended otherwise, or of an older owner (a takeover).
        if reservation.release_earlier {
            release(tx, call.execution).await?;
        }
        // One read for what most organizations lack: a price override, budgets, a credit account.
        let found = sqlx::query(RESERVE_SELECT_BUDGETS)
            .bind(call.organization)
            .bind(&call.model)
            .bind(call.budget_bot)
            .bind(call.chat)
            .fetch_one(&mut **tx)
            .await?;
        let price = match (
            found.try_get::<Option<i64>, _>("input_micros_per_million")?,
            found.try_get::<Option<i64>, _>("output_micros_per_million")?,
            found.try_get::<Option<i64>, _>("cached_input_micros_per_million")?,
        ) {
            (Some(input), Some(output), Some(cached)) => Some(pricing(input, output, cached)),
            _ => call.catalog,
        };
        let estimate = estimate_of(price, reservation.estimate);
        if found.try_get("has_budgets")? || found.try_get("has_account")? {
            check_limits(tx, reservation, estimate).await?;
        }
        let written = sqlx::query(RESERVE_INSERT_USAGE_RECORDS)
            .bind(call.execution.as_uuid())
            .bind(&call.call_key)
            .bind(call.generation)
            .bind(call.organization)
            .bind(call.bot)
            .bind(call.budget_bot)
            .bind(call.chat)
            .bind(call.member)
            .bind(&call.model)
            .bind(price.map(|p| to_i64(p.input_per_million)))
            .bind(price.map(|p| to_i64(p.output_per_million)))
            .bind(price.map(|p| to_i64(p.cached_input_per_million)))
            .bind(to_i64(reservation.estimate.input_tokens))
            .bind(to_i64(reservation.estimate.output_tokens))
            .bind(estimate)
            .bind(now)
            .execute(&mut **tx)
            .await?
            .rows_affected();
        reservation.set_written(price, written == 1);
        Ok(())
    }

    /// Locks the budgets above the call and the credit account, then, in a statement with a
    /// fresh snapshot, checks the call's estimate against what is spent and held; refuses the
    /// transaction when it would overspend.
    async fn check_limits(
        tx: &mut Transaction<'_, Db>,
        reservation: &Reservation,
        estimate: i64,
    ) -> Result<(), StoreError> {
        let call = &reservation.call;
        let budgets = sqlx::query(CHECK_LIMITS_SELECT_BUDGETS)
            .bind(call.organization)
            .bind(call.budget_bot)
            .bind(call.chat)
            .fetch_all(&mut **tx)
            .await?;
        let balance: Option<i64> = sqlx::query_scalar(CHECK_LIMITS_SELECT_CREDIT_ACCOUNTS)
            .bind(call.organization)
            .fetch_optional(&mut **tx)
            .await?;
        if budgets.is_empty() && balance.is_none() {
            return Ok(());
        }
        // A statement after the locks: it sees every hold committed before them. Only the sums
        // of scopes with a budget (and the holds, on credits) are read.
        let has = |name: &str| {
            budgets
                .iter()
                .any(|b| b.try_get::<String, _>("scope").is_ok_and(|s| s == name))
        };
        let used = sqlx::query(CHECK_LIMITS_SELECT_USAGE_RECORDS)
            .bind(call.organization)
            .bind(call.budget_bot)
            .bind(call.chat)
            .bind(has("organization"))
            .bind(has("bot"))
            .bind(has("chat"))
            .bind(balance.is_some())
            .fetch_one(&mut **tx)
            .await?;
        for budget in &budgets {
            let scope = parse_scope(&budget.try_get::<String, _>("scope")?)?;
            let max: i64 = budget.try_get("max_cost_micros")?;
            let used_micros: i64 = used.try_get(match scope {
                openbot_schema::BudgetScope::Organization => "organization_used",
                openbot_schema::BudgetScope::Bot => "bot_used",
                openbot_schema::BudgetScope::Chat => "chat_used",
            })?;
            if used_micros >= max || used_micros.saturating_add(estimate) > max {
                reservation.set_refused(Refusal::Budget {
                    scope,
                    max_micros: max,
                    used_micros,
                    estimate_micros: estimate,
                });
                return Err(StoreError::Refused(format!(
                    "the {} budget would be overspent",
                    scope.as_str()
                )));
            }
        }
        if let Some(balance) = balance {
            let held: i64 = used.try_get("held")?;
            let available = balance.saturating_sub(held);
            if available <= 0 || available < estimate {
                reservation.set_refused(Refusal::Credits {
                    available_micros: available,
                    estimate_micros: estimate,
                });
                return Err(StoreError::Refused(
                    "the organization's credits are used up".into(),
                ));
            }
        }
        Ok(())
    }

    /// The settlement's body (see [`Settlement`]).
    pub(super) async fn settle(
        tx: &mut Transaction<'_, Db>,
        settlement: &Settlement,
    ) -> Result<(), StoreError> {
        let call = &settlement.call;
        match &settlement.usage {
            Some(usage) => {
                if let Some((organization, cost)) = settle_record(
                    tx,
                    call.execution,
                    &call.call_key,
                    usage,
                    settlement.record_price,
                )
                .await?
                {
                    return charge(tx, organization, call.execution, &call.call_key, cost).await;
                }
                let cost = cost_of(call.catalog, usage);
                if insert_unreserved(tx, settlement, "settled", Some(cost)).await? {
                    add_totals(tx, call.organization, call.budget_bot, call.chat, cost).await?;
                    charge(tx, call.organization, call.execution, &call.call_key, cost).await?;
                }
                Ok(())
            }
            None => {
                // No usage: the call's usage is unknown, never a successful zero. Its estimate
                // stays; its hold no longer counts.
                let written = sqlx::query(SETTLE)
                    .bind(call.execution.as_uuid())
                    .bind(&call.call_key)
                    .bind(now_ms())
                    .execute(&mut **tx)
                    .await?
                    .rows_affected();
                if written == 0 {
                    insert_unreserved(tx, settlement, "unknown", None).await?;
                }
                Ok(())
            }
        }
    }

    /// Releases execution `id`'s holds.
    pub(super) async fn release(
        tx: &mut Transaction<'_, Db>,
        id: ExecutionId,
    ) -> Result<(), StoreError> {
        sqlx::query(RELEASE)
            .bind(id.as_uuid())
            .bind(now_ms())
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    #[async_trait]
    impl BillingStore for Store {
        async fn prices(
            &self,
            organization: Uuid,
            after: Option<&str>,
            limit: i64,
        ) -> Result<Vec<PriceRow>, StoreError> {
            let rows = sqlx::query(PRICES)
                .bind(organization)
                .bind(after)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(PriceRow {
                        model: row.try_get("model")?,
                        price: pricing(
                            row.try_get("input_micros_per_million")?,
                            row.try_get("output_micros_per_million")?,
                            row.try_get("cached_input_micros_per_million")?,
                        ),
                        updated_at: row.try_get("updated_at")?,
                    })
                })
                .collect()
        }

        async fn put_price(
            &self,
            organization: Uuid,
            model: &str,
            price: Pricing,
        ) -> Result<PriceRow, StoreError> {
            let now = now_ms();
            sqlx::query(PUT_PRICE)
                .bind(organization)
                .bind(model)
                .bind(to_i64(price.input_per_million))
                .bind(to_i64(price.output_per_million))
                .bind(to_i64(price.cached_input_per_million))
                .bind(now)
                .execute(self.writer())
                .await?;
            Ok(PriceRow {
                model: model.to_string(),
                price,
                updated_at: now,
            })
        }

        async fn delete_price(&self, organization: Uuid, model: &str) -> Result<bool, StoreError> {
            let deleted = sqlx::query(DELETE_PRICE)
                .bind(organization)
                .bind(model)
                .execute(self.writer())
                .await?
                .rows_affected();
            Ok(deleted > 0)
        }

        async fn credits(&self, organization: Uuid) -> Result<CreditsRow, StoreError> {
            let row = sqlx::query(CREDITS)
                .bind(organization)
                .fetch_one(self.reader())
                .await?;
            let balance: Option<i64> = row.try_get("balance")?;
            Ok(CreditsRow {
                enabled: balance.is_some(),
                balance_micros: balance.unwrap_or(0),
                held_micros: row.try_get("held")?,
            })
        }

        async fn grant_credits(
            &self,
            organization: Uuid,
            amount_micros: i64,
            member: Option<Uuid>,
            note: Option<&str>,
        ) -> Result<CreditsRow, StoreError> {
            let now = now_ms();
            let mut tx = self.writer().begin().await?;
            sqlx::query(GRANT_CREDITS_INSERT_CREDIT_ACCOUNTS)
                .bind(organization)
                .bind(amount_micros)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            sqlx::query(GRANT_CREDITS_INSERT_CREDIT_LEDGER)
                .bind(Uuid::now_v7())
                .bind(organization)
                .bind(amount_micros)
                .bind(member)
                .bind(note)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            self.credits(organization).await
        }

        async fn ledger(
            &self,
            organization: Uuid,
            before: Option<Uuid>,
            limit: i64,
        ) -> Result<Vec<LedgerRow>, StoreError> {
            let rows = sqlx::query(LEDGER)
                .bind(organization)
                .bind(before)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(LedgerRow {
                        id: row.try_get("id")?,
                        kind: row.try_get("kind")?,
                        amount_micros: row.try_get("amount_micros")?,
                        execution_id: row.try_get("execution_id")?,
                        call_key: row.try_get("call_key")?,
                        member_id: row.try_get("member_id")?,
                        note: row.try_get("note")?,
                        created_at: row.try_get("created_at")?,
                    })
                })
                .collect()
        }

        async fn usage_report(&self, query: &UsageQuery) -> Result<Vec<UsageSums>, StoreError> {
            let sql = match query.group {
                UsageGroup::Organization => report!("organization_id"),
                UsageGroup::Bot => report!("bot_id"),
                UsageGroup::Chat => report!("chat_id"),
                UsageGroup::Member => report!("member_id"),
                UsageGroup::Model => report!("model"),
            };
            let statement = sqlx::query(sql)
                .bind(query.organization)
                .bind(query.from)
                .bind(query.to)
                .bind(query.bot_limit.as_deref())
                .bind(query.bot)
                .bind(query.chat)
                .bind(query.member)
                .bind(query.model.as_deref());
            let by_model = query.group == UsageGroup::Model;
            let statement = if by_model {
                statement.bind(query.after.clone())
            } else {
                let after = query
                    .after
                    .as_deref()
                    .map(str::parse::<Uuid>)
                    .transpose()
                    .map_err(|_| StoreError::Invalid("a usage cursor that is not a UUID".into()))?;
                statement.bind(after)
            };
            let rows = statement.bind(query.limit).fetch_all(self.reader()).await?;
            rows.iter()
                .map(|row| {
                    let key = if by_model {
                        row.try_get::<Option<String>, _>("key")?
                    } else {
                        row.try_get::<Option<Uuid>, _>("key")?
                            .map(|id| id.to_string())
                    };
                    sums(row, key)
                })
                .collect()
        }

        async fn usage_record(
            &self,
            execution: ExecutionId,
            call_key: &str,
        ) -> Result<Option<UsageRecordRow>, StoreError> {
            let row = sqlx::query(USAGE_RECORD)
                .bind(execution.as_uuid())
                .bind(call_key)
                .fetch_optional(self.reader())
                .await?;
            row.map(|row| {
                Ok(UsageRecordRow {
                    state: row.try_get("state")?,
                    generation: row.try_get("generation")?,
                    model: row.try_get("model")?,
                    estimate_micros: row.try_get("estimate_micros")?,
                    cost_micros: row.try_get("cost_micros")?,
                    input_tokens: row.try_get("input_tokens")?,
                    output_tokens: row.try_get("output_tokens")?,
                })
            })
            .transpose()
        }

        async fn settle_receipt(
            &self,
            execution: ExecutionId,
            call_key: &str,
            usage: Usage,
        ) -> Result<bool, StoreError> {
            let mut tx = self.writer().begin().await?;
            let settled = settle_record(&mut tx, execution, call_key, &usage, None).await?;
            if let Some((organization, cost)) = settled {
                charge(&mut tx, organization, execution, call_key, cost).await?;
            }
            tx.commit().await?;
            Ok(settled.is_some())
        }
    }
}

impl TxWrite for Reservation {
    fn on_sqlite<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Sqlite>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(on_sqlite::reserve(tx, self))
    }

    fn on_postgres<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Postgres>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(on_postgres::reserve(tx, self))
    }
}

impl TxWrite for Settlement {
    fn on_sqlite<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Sqlite>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(on_sqlite::settle(tx, self))
    }

    fn on_postgres<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Postgres>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(on_postgres::settle(tx, self))
    }
}

impl TxWrite for Release {
    fn on_sqlite<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Sqlite>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(on_sqlite::release(tx, self.execution))
    }

    fn on_postgres<'a, 'c>(
        &'a self,
        tx: &'a mut Transaction<'c, Postgres>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(on_postgres::release(tx, self.execution))
    }
}
