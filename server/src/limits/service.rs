//! The limits' use cases: taking and giving back room (the one path every outside call that
//! is limited takes), and configuring limits (owners and admins).

use std::sync::Arc;
use std::time::{Duration, Instant};

use openbot_schema::{Action, ExecutionId, PutScopeLimit, Resource, ScopeLimit, ScopeLimitPage};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::store::{Holder, LimitRow, LimitSettings, LimitStore, Take, valid_scope};
use crate::identity::{AccessError, Caller};
use crate::paging::Paging;
use crate::store::{StoreError, stored_time};

/// The window of both buckets unless configured: a minute.
pub const DEFAULT_WINDOW_MS: u64 = 60_000;
/// How long a call waits for room unless configured.
pub const DEFAULT_MAX_WAIT_MS: u64 = 60_000;
/// The first and the longest pause between two takes while a limit is full. Room another
/// node frees is seen within the longest pause; room this node frees wakes its waiters at once.
const FIRST_POLL: Duration = Duration::from_millis(20);
const LONGEST_POLL: Duration = Duration::from_millis(400);

/// The scopes a model request takes: the organization, its provider kind (the part of the
/// model spec before the first `:`) and, for work of a Bot, that Bot.
pub fn model_scopes(model_spec: &str, bot: Option<Uuid>) -> Vec<String> {
    let provider = model_spec.split(':').next().unwrap_or(model_spec);
    let mut scopes = vec!["organization".to_string(), format!("provider:{provider}")];
    if let Some(bot) = bot {
        scopes.push(bot_scope(bot));
    }
    scopes
}

/// The name of a Bot's own scope.
pub fn bot_scope(bot: Uuid) -> String {
    format!("bot:{bot}")
}

/// Why no room was taken.
#[derive(Debug, thiserror::Error)]
pub enum AcquireError {
    /// A limit stayed full for as long as its callers may wait. Retryable: the call may be
    /// sent again later.
    #[error("the limit `{scope}` had no room within {waited_ms} ms")]
    Deadline {
        /// The limit that was full last.
        scope: String,
        /// How long the call waited.
        waited_ms: u64,
    },
    /// The wait was cancelled (the work is cancelled or paused).
    #[error("the wait for room in a limit was cancelled")]
    Cancelled,
    /// The holder's generation no longer owns its execution: a newer owner takes its own room.
    #[error("execution {0} has a newer owner")]
    NotOwner(ExecutionId),
    /// Storage failed; nothing was taken.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AcquireError {
    /// Whether the same call may try again later and pass.
    pub fn is_retryable(&self) -> bool {
        match self {
            AcquireError::Deadline { .. } => true,
            AcquireError::Store(err) => err.is_transient(),
            AcquireError::Cancelled | AcquireError::NotOwner(_) => false,
        }
    }
}

/// Room taken in the limits of some scopes, for one holder. Give it back with
/// [`Limits::release`]; if the holder's owner stops first, the room passes on once its lease
/// lapses or its generation is replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permit {
    holder: Holder,
    scopes: Vec<String>,
}

impl Permit {
    /// The scopes whose limits applied (empty when none of the named scopes has a limit).
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }
}

/// Shared admission: every limited outside call takes room here, on every node the same way.
#[derive(Clone)]
pub struct Limits {
    store: Arc<dyn LimitStore>,
    /// Wakes this node's waiters when this node gives room back.
    released: Arc<Notify>,
}

impl Limits {
    /// Admission on `store`'s limits.
    pub fn new(store: Arc<dyn LimitStore>) -> Self {
        Self {
            store,
            released: Arc::new(Notify::new()),
        }
    }

    /// Takes room for `holder` in the limits of every scope in `scopes` (those without a limit
    /// are free), waiting while one is full: until there is room, `stop` is cancelled, `open`
    /// says the work may no longer send, or the shortest `max_wait_ms` of the limits passed.
    /// Room is taken in all limits at once or in none. When no scope has a limit it costs one
    /// read and takes nothing.
    pub async fn acquire(
        &self,
        holder: &Holder,
        scopes: &[String],
        stop: &CancellationToken,
        open: &(dyn Fn() -> bool + Send + Sync),
    ) -> Result<Permit, AcquireError> {
        let limited = self
            .store
            .limited_scopes(holder.organization, scopes)
            .await?;
        if limited.is_empty() {
            return Ok(Permit {
                holder: holder.clone(),
                scopes: Vec::new(),
            });
        }
        let started = Instant::now();
        let mut pause = FIRST_POLL;
        // The shortest wait the limits allow, as far as the takes have seen them.
        let mut allowed = Duration::MAX;
        loop {
            if stop.is_cancelled() || !open() {
                return Err(AcquireError::Cancelled);
            }
            // Registered before the take, so a release between the take and the wait wakes it.
            let released = self.released.notified();
            match self.store.try_take(holder, &limited).await? {
                Take::Granted { scopes } => {
                    return Ok(Permit {
                        holder: holder.clone(),
                        scopes,
                    });
                }
                Take::NotOwner => return Err(AcquireError::NotOwner(holder.execution)),
                Take::Busy {
                    scope,
                    retry_in_ms,
                    max_wait_ms,
                } => {
                    let waited = started.elapsed();
                    if pause == FIRST_POLL {
                        // The first time this take found the limit full: one wait.
                        crate::telemetry::metrics::permit_wait();
                    }
                    allowed = allowed.min(Duration::from_millis(max_wait_ms.max(0) as u64));
                    if waited >= allowed {
                        return Err(AcquireError::Deadline {
                            scope,
                            waited_ms: waited.as_millis() as u64,
                        });
                    }
                    let next = retry_in_ms
                        .map(|ms| Duration::from_millis(ms.max(1) as u64))
                        .unwrap_or(pause)
                        .min(pause)
                        .min(allowed - waited);
                    tokio::select! {
                        _ = tokio::time::sleep(jittered(next)) => {}
                        _ = released => {}
                        _ = stop.cancelled() => return Err(AcquireError::Cancelled),
                    }
                    pause = (pause * 2).min(LONGEST_POLL);
                }
            }
        }
    }

    /// Gives `permit` back and takes `used_tokens` (the call's confirmed usage) from the token
    /// buckets of its limits; this node's waiters wake at once.
    pub async fn release(&self, permit: &Permit, used_tokens: u64) -> Result<(), StoreError> {
        if permit.scopes.is_empty() {
            return Ok(());
        }
        self.store
            .give_back(&permit.holder, &permit.scopes, used_tokens)
            .await?;
        self.released.notify_waiters();
        Ok(())
    }

    /// Gives back every permit an execution's owner `generation` (or an older one) holds: a
    /// phase that ends, pauses or is cancelled closes with this.
    pub async fn release_execution(
        &self,
        execution: ExecutionId,
        generation: i64,
    ) -> Result<(), StoreError> {
        if self.store.release_execution(execution, generation).await? > 0 {
            self.released.notify_waiters();
        }
        Ok(())
    }
}

/// Up to a quarter more, so waiters on several nodes do not ask in step.
fn jittered(pause: Duration) -> Duration {
    let spread = (pause.as_micros() as u64 / 4).max(1);
    // The low 62 bits of a v7 UUID are random.
    let random = (Uuid::now_v7().as_u128() as u64) % spread;
    pause + Duration::from_micros(random)
}

/// Why a limit could not be listed, set or deleted.
#[derive(Debug, thiserror::Error)]
pub enum LimitsError {
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// The caller's token lacks the right.
    #[error(transparent)]
    Forbidden(#[from] AccessError),
    /// Only owners and admins change limits.
    #[error("only owners and admins change limits")]
    NotAdmin,
    /// No such limit.
    #[error("limit not found")]
    NotFound,
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Configuring an organization's limits: listing needs the `models` read right; setting and
/// deleting the `models` write right and the owner or admin role.
#[derive(Clone)]
pub struct LimitsAdmin {
    store: Arc<dyn LimitStore>,
}

fn view(row: LimitRow) -> Result<ScopeLimit, StoreError> {
    let settings = row.settings;
    Ok(ScopeLimit {
        scope: row.scope,
        max_concurrent: settings
            .max_concurrent
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        requests_per_window: settings.requests_per_window.map(|n| n.max(0) as u64),
        tokens_per_window: settings.tokens_per_window.map(|n| n.max(0) as u64),
        window_ms: settings.window_ms.max(0) as u64,
        max_wait_ms: settings.max_wait_ms.max(0) as u64,
        in_use: row.in_use.max(0) as u64,
        updated_at: stored_time(row.updated_at)?,
    })
}

fn checked_scope(scope: &str) -> Result<(), LimitsError> {
    if valid_scope(scope) {
        Ok(())
    } else {
        Err(LimitsError::Invalid(
            "a scope is 1 to 200 characters of letters, digits and `: . _ -`".into(),
        ))
    }
}

fn settings(request: &PutScopeLimit) -> Result<LimitSettings, LimitsError> {
    let positive = |value: Option<u64>, name: &str| -> Result<Option<i64>, LimitsError> {
        match value {
            None => Ok(None),
            Some(0) => Err(LimitsError::Invalid(format!("{name} must be at least 1"))),
            Some(n) => i64::try_from(n)
                .ok()
                .filter(|n| *n <= i64::MAX / 1000)
                .map(Some)
                .ok_or_else(|| LimitsError::Invalid(format!("{name} is too large"))),
        }
    };
    let max_concurrent = positive(request.max_concurrent.map(u64::from), "max_concurrent")?;
    let requests_per_window = positive(request.requests_per_window, "requests_per_window")?;
    let tokens_per_window = positive(request.tokens_per_window, "tokens_per_window")?;
    if max_concurrent.is_none() && requests_per_window.is_none() && tokens_per_window.is_none() {
        return Err(LimitsError::Invalid(
            "set max_concurrent, requests_per_window or tokens_per_window".into(),
        ));
    }
    let window_ms = request.window_ms.unwrap_or(DEFAULT_WINDOW_MS);
    if !(100..=86_400_000).contains(&window_ms) {
        return Err(LimitsError::Invalid(
            "window_ms must be between 100 and 86400000".into(),
        ));
    }
    let max_wait_ms = request.max_wait_ms.unwrap_or(DEFAULT_MAX_WAIT_MS);
    if max_wait_ms > 3_600_000 {
        return Err(LimitsError::Invalid(
            "max_wait_ms must be at most 3600000".into(),
        ));
    }
    Ok(LimitSettings {
        max_concurrent,
        requests_per_window,
        tokens_per_window,
        window_ms: window_ms as i64,
        max_wait_ms: max_wait_ms as i64,
    })
}

impl LimitsAdmin {
    /// The use cases on `store`.
    pub fn new(store: Arc<dyn LimitStore>) -> Self {
        Self { store }
    }

    /// The caller's organization's limits by scope name, `limit` (default 50, at most 200) a
    /// page, after `cursor` (a page's `next_cursor`). A token limited to some Bots sees the
    /// scopes of every Bot and its own Bots' `bot:<id>` scopes, never another Bot's.
    pub async fn list(
        &self,
        caller: &Caller,
        paging: &Paging<String>,
    ) -> Result<ScopeLimitPage, LimitsError> {
        caller.require(Resource::Models, Action::Read)?;
        if let Some(cursor) = &paging.after {
            checked_scope(cursor).map_err(|_| {
                LimitsError::Invalid("cursor must be a `next_cursor` of this list".into())
            })?;
        }
        let bot_scopes: Option<Vec<String>> = caller
            .bot_ids
            .as_ref()
            .map(|bots| bots.iter().map(|bot| bot_scope(bot.as_uuid())).collect());
        let rows = self
            .store
            .limits(
                caller.member.organization_id,
                bot_scopes.as_deref(),
                paging.after.as_deref(),
                paging.fetch(),
            )
            .await?;
        let (rows, next_cursor) = paging.finish(rows, |row| row.scope.clone());
        Ok(ScopeLimitPage {
            items: rows.into_iter().map(view).collect::<Result<_, _>>()?,
            next_cursor,
        })
    }

    /// Sets the limit of `scope` (its buckets start full), replacing an earlier one.
    pub async fn put(
        &self,
        caller: &Caller,
        scope: &str,
        request: &PutScopeLimit,
    ) -> Result<ScopeLimit, LimitsError> {
        caller.require(Resource::Models, Action::Write)?;
        caller.require_whole_organization()?;
        if !caller.is_admin() {
            return Err(LimitsError::NotAdmin);
        }
        checked_scope(scope)?;
        let settings = settings(request)?;
        let row = self
            .store
            .put_limit(caller.member.organization_id, scope, &settings)
            .await?;
        Ok(view(row)?)
    }

    /// Removes the limit of `scope` and its permits: calls of the scope are no longer limited.
    pub async fn delete(&self, caller: &Caller, scope: &str) -> Result<(), LimitsError> {
        caller.require(Resource::Models, Action::Write)?;
        caller.require_whole_organization()?;
        if !caller.is_admin() {
            return Err(LimitsError::NotAdmin);
        }
        checked_scope(scope)?;
        if self
            .store
            .delete_limit(caller.member.organization_id, scope)
            .await?
        {
            Ok(())
        } else {
            Err(LimitsError::NotFound)
        }
    }
}
