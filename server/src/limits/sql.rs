//! Limits on SQL, written once for SQLite and PostgreSQL.
//!
//! A take locks the holder's execution row (shared) and the limits' rows (in scope order, so
//! two takers never wait on each other in a circle), removes the permits whose holders lost
//! their lease or generation, counts the rest, refills the buckets and takes room in all of
//! them or in none. Bucket levels are kept in thousandths and refilled lazily from
//! `refilled_at`.

use async_trait::async_trait;
use const_format::concatcp;
use openbot_schema::ExecutionId;
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{Holder, LimitRow, LimitSettings, LimitStore, Take};
use crate::store::{Millis, StoreError, both_backends, now_ms};

/// One unit of a bucket, in the thousandths the levels are kept in.
const UNIT: i64 = 1000;

/// When to ask again after another taker held a limit's row (it holds it for a few ms).
const CONTENDED_RETRY_MS: i64 = 10;

/// A bucket's level at `now`: what it held at `since` plus what the window refilled since,
/// never above full.
fn refilled(level: i64, per_window: i64, window_ms: i64, since: Millis, now: Millis) -> i64 {
    let full = i128::from(per_window) * i128::from(UNIT);
    let elapsed = i128::from((now - since).max(0));
    let gained = full * elapsed / i128::from(window_ms.max(1));
    (i128::from(level) + gained).min(full) as i64
}

/// How long until a bucket at `level` holds `need` thousandths.
fn wait_for(level: i64, need: i64, per_window: i64, window_ms: i64) -> i64 {
    let missing = i128::from(need - level).max(0);
    let rate = i128::from(per_window.max(1)) * i128::from(UNIT);
    (missing * i128::from(window_ms) + rate - 1).div_euclid(rate) as i64
}

fn json(scopes: &[String]) -> Result<String, StoreError> {
    serde_json::to_string(scopes).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// A limit's row as read for a take.
struct Bucketed {
    scope: String,
    max_concurrent: Option<i64>,
    requests: Option<i64>,
    tokens: Option<i64>,
    window_ms: i64,
    max_wait_ms: i64,
    request_level: i64,
    token_level: i64,
    refilled_at: Millis,
}

/// What one more request at `now` leaves each of `limits` at (scope, request level, token
/// level; only limits with a rate), or the `Busy` answer of the first that cannot take it
/// (`held`: the permits others hold, by scope).
fn levels_after_take<'a>(
    limits: &'a [Bucketed],
    held: &std::collections::HashMap<String, i64>,
    now: Millis,
) -> Result<Vec<(&'a String, i64, i64)>, Take> {
    let max_wait_ms = limits.iter().map(|l| l.max_wait_ms).min().unwrap_or(0);
    let mut levels = Vec::with_capacity(limits.len());
    for limit in limits {
        let busy = |retry_in_ms| Take::Busy {
            scope: limit.scope.clone(),
            retry_in_ms,
            max_wait_ms,
        };
        if let Some(max) = limit.max_concurrent
            && held.get(&limit.scope).copied().unwrap_or(0) >= max
        {
            return Err(busy(None));
        }
        let mut request_level = limit.request_level;
        if let Some(per_window) = limit.requests {
            request_level = refilled(
                limit.request_level,
                per_window,
                limit.window_ms,
                limit.refilled_at,
                now,
            );
            if request_level < UNIT {
                return Err(busy(Some(wait_for(
                    request_level,
                    UNIT,
                    per_window,
                    limit.window_ms,
                ))));
            }
            request_level -= UNIT;
        }
        let mut token_level = limit.token_level;
        if let Some(per_window) = limit.tokens {
            token_level = refilled(
                limit.token_level,
                per_window,
                limit.window_ms,
                limit.refilled_at,
                now,
            );
            // Admitted while above zero: its confirmed usage is taken after the call.
            if token_level <= 0 {
                return Err(busy(Some(wait_for(
                    token_level,
                    1,
                    per_window,
                    limit.window_ms,
                ))));
            }
        }
        if limit.requests.is_some() || limit.tokens.is_some() {
            levels.push((&limit.scope, request_level, token_level));
        }
    }
    Ok(levels)
}

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    /// Whether the permit row `p` belongs to the current owner of its execution, whose lease is
    /// live at `$param`.
    macro_rules! live {
    ($param:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM executions e WHERE e.id = p.execution_id AND e.generation = p.generation \
             AND e.owner_node IS NOT NULL AND e.lease_expires_at >= ", $param,
            " AND e.state IN ('running', 'cancelling'))"
        )
    };
}

    fn limit_row(row: &Row) -> Result<LimitRow, StoreError> {
        Ok(LimitRow {
            scope: row.try_get("scope")?,
            settings: LimitSettings {
                max_concurrent: row.try_get("max_concurrent")?,
                requests_per_window: row.try_get("requests_per_window")?,
                tokens_per_window: row.try_get("tokens_per_window")?,
                window_ms: row.try_get("window_ms")?,
                max_wait_ms: row.try_get("max_wait_ms")?,
            },
            in_use: row.try_get("in_use")?,
            updated_at: row.try_get("updated_at")?,
        })
    }

    fn bucketed(row: &Row) -> Result<Bucketed, StoreError> {
        Ok(Bucketed {
            scope: row.try_get("scope")?,
            max_concurrent: row.try_get("max_concurrent")?,
            requests: row.try_get("requests_per_window")?,
            tokens: row.try_get("tokens_per_window")?,
            window_ms: row.try_get("window_ms")?,
            max_wait_ms: row.try_get("max_wait_ms")?,
            request_level: row.try_get("request_level")?,
            token_level: row.try_get("token_level")?,
            refilled_at: row.try_get("refilled_at")?,
        })
    }

    /// The listed columns of limits `l` of organization `$1`, with the permits in use at `$2`.
    macro_rules! listed {
    () => { concat!(
    "SELECT l.scope, l.max_concurrent, l.requests_per_window, l.tokens_per_window, l.window_ms, \
     l.max_wait_ms, l.updated_at, (SELECT COUNT(*) FROM limit_permits p WHERE p.organization_id = l.organization_id \
     AND p.scope = l.scope AND ", live!("$2"), ") AS in_use FROM limits l WHERE l.organization_id = $1"
    ) };
}

    /// The columns of limits `$2` of organization `$1`, locked for a change.
    macro_rules! locked {
    ($lock:expr) => {
        concatcp!(
            "SELECT scope, max_concurrent, requests_per_window, tokens_per_window, window_ms, max_wait_ms, \
             request_level, token_level, refilled_at FROM limits WHERE organization_id = $1 AND ",
            text_in!("scope", "$2"),
            " ORDER BY scope",
            $lock
        )
    };
}

    // The statements of this store, by the use that sends them.
    const PUT_LIMIT_INSERT_LIMITS: &str = "INSERT INTO limits (organization_id, scope, max_concurrent, requests_per_window, tokens_per_window, \
                 window_ms, max_wait_ms, request_level, token_level, refilled_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) \
             ON CONFLICT (organization_id, scope) DO UPDATE SET \
                 max_concurrent = EXCLUDED.max_concurrent, requests_per_window = EXCLUDED.requests_per_window, \
                 tokens_per_window = EXCLUDED.tokens_per_window, window_ms = EXCLUDED.window_ms, \
                 max_wait_ms = EXCLUDED.max_wait_ms, request_level = EXCLUDED.request_level, \
                 token_level = EXCLUDED.token_level, refilled_at = EXCLUDED.refilled_at, \
                 updated_at = EXCLUDED.updated_at";
    const PUT_LIMIT_READ_BACK: &str = concat!(listed!(), " AND l.scope = $3");
    const LIMITS: &str = concatcp!(
        listed!(),
        " AND (",
        "$3",
        Store::TEXT_CAST,
        " IS NULL OR l.scope > $3) AND (",
        "$5",
        Store::TEXT_CAST,
        " IS NULL OR substr(l.scope, 1, 4) <> 'bot:' OR ",
        text_in!("l.scope", "$5"),
        ") ORDER BY l.scope LIMIT $4"
    );
    const DELETE_LIMIT_DELETE_LIMITS: &str =
        "DELETE FROM limits WHERE organization_id = $1 AND scope = $2";
    const DELETE_LIMIT_DELETE_LIMIT_PERMITS: &str =
        "DELETE FROM limit_permits WHERE organization_id = $1 AND scope = $2";
    const LIMITED_SCOPES: &str = concat!(
        "SELECT scope FROM limits WHERE organization_id = $1 AND ",
        text_in!("scope", "$2"),
        " ORDER BY scope"
    );
    const TRY_TAKE_SELECT_EXECUTIONS: &str = concatcp!(
        "SELECT id FROM executions WHERE id = $1 AND generation = $2 AND owner_node IS NOT NULL \
             AND lease_expires_at >= $3 AND state IN ('running', 'cancelling')",
        Store::FOR_SHARE
    );
    const TRY_TAKE_SELECT_LIMITS: &str = concat!(
        "SELECT COUNT(*) FROM limits WHERE organization_id = $1 AND ",
        text_in!("scope", "$2")
    );
    const TRY_TAKE_DELETE_LIMIT_PERMITS: &str = concat!(
        "DELETE FROM limit_permits AS p WHERE p.organization_id = $1 AND ",
        text_in!("p.scope", "$2"),
        " AND NOT ",
        live!("$3")
    );
    const TRY_TAKE_SELECT_LIMIT_PERMITS: &str = concat!(
        "SELECT scope, COUNT(*) AS held FROM limit_permits WHERE organization_id = $1 AND ",
        text_in!("scope", "$2"),
        " AND NOT (execution_id = $3 AND slot = $4) GROUP BY scope"
    );
    const TRY_TAKE_UPDATE_LIMITS: &str = "UPDATE limits SET request_level = $3, token_level = $4, refilled_at = $5 \
                 WHERE organization_id = $1 AND scope = $2";
    const TRY_TAKE_INSERT_LIMIT_PERMITS: &str = "INSERT INTO limit_permits (organization_id, scope, execution_id, slot, generation, acquired_at) \
                 VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (organization_id, scope, execution_id, slot) DO UPDATE SET \
                     generation = EXCLUDED.generation, acquired_at = EXCLUDED.acquired_at";
    const GIVE_BACK_DELETE_LIMIT_PERMITS: &str = "DELETE FROM limit_permits WHERE organization_id = $1 AND execution_id = $2 \
             AND slot = $3 AND generation <= $4";
    const GIVE_BACK_UPDATE_LIMITS: &str = "UPDATE limits SET request_level = $3, token_level = $4, refilled_at = $5 \
                     WHERE organization_id = $1 AND scope = $2";
    const RELEASE_EXECUTION: &str =
        "DELETE FROM limit_permits WHERE execution_id = $1 AND generation <= $2";

    #[async_trait]
    impl LimitStore for Store {
        async fn put_limit(
            &self,
            organization: Uuid,
            scope: &str,
            settings: &LimitSettings,
        ) -> Result<LimitRow, StoreError> {
            let now = now_ms();
            sqlx::query(PUT_LIMIT_INSERT_LIMITS)
                .bind(organization)
                .bind(scope)
                .bind(settings.max_concurrent)
                .bind(settings.requests_per_window)
                .bind(settings.tokens_per_window)
                .bind(settings.window_ms)
                .bind(settings.max_wait_ms)
                .bind(
                    settings
                        .requests_per_window
                        .unwrap_or(0)
                        .saturating_mul(UNIT),
                )
                .bind(settings.tokens_per_window.unwrap_or(0).saturating_mul(UNIT))
                .bind(now)
                .execute(self.writer())
                .await?;
            let row = sqlx::query(PUT_LIMIT_READ_BACK)
                .bind(organization)
                .bind(now)
                .bind(scope)
                .fetch_one(self.writer())
                .await?;
            limit_row(&row)
        }

        async fn limits(
            &self,
            organization: Uuid,
            bot_scopes: Option<&[String]>,
            after: Option<&str>,
            count: i64,
        ) -> Result<Vec<LimitRow>, StoreError> {
            let bot_scopes = bot_scopes.map(json).transpose()?;
            let rows = sqlx::query(LIMITS)
                .bind(organization)
                .bind(now_ms())
                .bind(after)
                .bind(count)
                .bind(bot_scopes)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(limit_row).collect()
        }

        async fn delete_limit(&self, organization: Uuid, scope: &str) -> Result<bool, StoreError> {
            let mut tx = self.writer().begin().await?;
            let deleted = sqlx::query(DELETE_LIMIT_DELETE_LIMITS)
                .bind(organization)
                .bind(scope)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            sqlx::query(DELETE_LIMIT_DELETE_LIMIT_PERMITS)
                .bind(organization)
                .bind(scope)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(deleted > 0)
        }

        async fn limited_scopes(
            &self,
            organization: Uuid,
            scopes: &[String],
        ) -> Result<Vec<String>, StoreError> {
            if scopes.is_empty() {
                return Ok(Vec::new());
            }
            let rows = sqlx::query(LIMITED_SCOPES)
                .bind(organization)
                .bind(json(scopes)?)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(|row| Ok(row.try_get("scope")?)).collect()
        }

        async fn try_take(&self, holder: &Holder, scopes: &[String]) -> Result<Take, StoreError> {
            let now = now_ms();
            let names = json(scopes)?;
            let mut tx = self.writer().begin().await?;
            // The owner check holds the execution's row, so no takeover commits before this take
            // does: a permit is only ever written for the current generation.
            let owner = sqlx::query(TRY_TAKE_SELECT_EXECUTIONS)
                .bind(holder.execution.as_uuid())
                .bind(holder.generation)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
            if owner.is_none() {
                return Ok(Take::NotOwner);
            }
            // A limit another taker holds right now is skipped, not waited for: a waiting taker
            // holds no connection and no lock (the caller asks again after a pause).
            let limits = sqlx::query(locked!(Store::SKIP_LOCKED))
                .bind(holder.organization)
                .bind(&names)
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(bucketed)
                .collect::<Result<Vec<_>, _>>()?;
            let configured = sqlx::query_scalar::<_, i64>(TRY_TAKE_SELECT_LIMITS)
                .bind(holder.organization)
                .bind(&names)
                .fetch_one(&mut *tx)
                .await?;
            if (limits.len() as i64) < configured {
                let busy = scopes
                    .iter()
                    .find(|name| !limits.iter().any(|l| &l.scope == *name))
                    .cloned()
                    .unwrap_or_default();
                tx.commit().await?;
                return Ok(Take::Busy {
                    scope: busy,
                    retry_in_ms: Some(CONTENDED_RETRY_MS),
                    max_wait_ms: limits
                        .iter()
                        .map(|l| l.max_wait_ms)
                        .min()
                        .unwrap_or(i64::MAX),
                });
            }
            if limits.is_empty() {
                tx.commit().await?;
                return Ok(Take::Granted { scopes: Vec::new() });
            }
            let permits: Vec<&Bucketed> = limits
                .iter()
                .filter(|l| l.max_concurrent.is_some())
                .collect();
            let mut held = std::collections::HashMap::new();
            if !permits.is_empty() {
                // Permits of owners that lost their lease or generation pass on.
                sqlx::query(TRY_TAKE_DELETE_LIMIT_PERMITS)
                    .bind(holder.organization)
                    .bind(&names)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                let counts = sqlx::query(TRY_TAKE_SELECT_LIMIT_PERMITS)
                    .bind(holder.organization)
                    .bind(&names)
                    .bind(holder.execution.as_uuid())
                    .bind(&holder.slot)
                    .fetch_all(&mut *tx)
                    .await?;
                for row in &counts {
                    held.insert(
                        row.try_get::<String, _>("scope")?,
                        row.try_get::<i64, _>("held")?,
                    );
                }
            }
            let levels = match levels_after_take(&limits, &held, now) {
                Ok(levels) => levels,
                Err(busy) => {
                    tx.commit().await?;
                    return Ok(busy);
                }
            };
            for (scope, request_level, token_level) in levels {
                sqlx::query(TRY_TAKE_UPDATE_LIMITS)
                    .bind(holder.organization)
                    .bind(scope)
                    .bind(request_level)
                    .bind(token_level)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            for limit in permits {
                sqlx::query(TRY_TAKE_INSERT_LIMIT_PERMITS)
                    .bind(holder.organization)
                    .bind(&limit.scope)
                    .bind(holder.execution.as_uuid())
                    .bind(&holder.slot)
                    .bind(holder.generation)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(Take::Granted {
                scopes: limits.into_iter().map(|l| l.scope).collect(),
            })
        }

        async fn give_back(
            &self,
            holder: &Holder,
            scopes: &[String],
            used_tokens: u64,
        ) -> Result<(), StoreError> {
            let now = now_ms();
            let mut tx = self.writer().begin().await?;
            sqlx::query(GIVE_BACK_DELETE_LIMIT_PERMITS)
                .bind(holder.organization)
                .bind(holder.execution.as_uuid())
                .bind(&holder.slot)
                .bind(holder.generation)
                .execute(&mut *tx)
                .await?;
            if used_tokens > 0 && !scopes.is_empty() {
                let used = i64::try_from(used_tokens)
                    .unwrap_or(i64::MAX / UNIT)
                    .saturating_mul(UNIT);
                let limits = sqlx::query(locked!(Store::FOR_UPDATE))
                    .bind(holder.organization)
                    .bind(json(scopes)?)
                    .fetch_all(&mut *tx)
                    .await?
                    .iter()
                    .map(bucketed)
                    .collect::<Result<Vec<_>, _>>()?;
                for limit in limits.iter().filter(|l| l.tokens.is_some()) {
                    let per_window = limit.tokens.unwrap_or(0);
                    let request_level = match limit.requests {
                        Some(requests) => refilled(
                            limit.request_level,
                            requests,
                            limit.window_ms,
                            limit.refilled_at,
                            now,
                        ),
                        None => limit.request_level,
                    };
                    let full = per_window.saturating_mul(UNIT);
                    // One call's debt is at most one window: a huge answer never blocks for long.
                    let token_level = (refilled(
                        limit.token_level,
                        per_window,
                        limit.window_ms,
                        limit.refilled_at,
                        now,
                    )
                    .saturating_sub(used))
                    .max(-full);
                    sqlx::query(GIVE_BACK_UPDATE_LIMITS)
                        .bind(holder.organization)
                        .bind(&limit.scope)
                        .bind(request_level)
                        .bind(token_level)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                }
            }
            tx.commit().await?;
            Ok(())
        }

        async fn release_execution(
            &self,
            execution: ExecutionId,
            generation: i64,
        ) -> Result<u64, StoreError> {
            Ok(sqlx::query(RELEASE_EXECUTION)
                .bind(execution.as_uuid())
                .bind(generation)
                .execute(self.writer())
                .await?
                .rows_affected())
        }
    }
}
