//! Observation: an execution's events after a cursor, from the event log, in order.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use openbot_schema::{Event, ExecutionId};

use super::signals::Hub;
use crate::store::{Store, StoreError};

/// How many events a reader copies out of the log at a time: its whole buffer.
pub const OBSERVE_PAGE: i64 = 256;

/// How often the readers of an execution are woken without a notification (one timer per
/// execution, in the hub); bounds the delay a lost notification can cause.
pub const FALLBACK_POLL: Duration = Duration::from_secs(2);

/// The events of `id` after sequence `after`, ending after the execution's last event.
/// A reader that falls behind reads from its cursor; it costs the writer nothing.
pub fn observe(
    store: Arc<dyn Store>,
    hub: Arc<Hub>,
    id: ExecutionId,
    after: u64,
) -> BoxStream<'static, Result<Event, StoreError>> {
    let tail = hub.tail(id);
    let state = Reader {
        store,
        hub,
        tail,
        watcher: None,
        id,
        cursor: after as i64,
        page: Vec::new().into_iter(),
        done: false,
        _open: crate::telemetry::metrics::ObserverOpen::open(),
    };
    futures::stream::unfold(state, |mut reader| async move {
        let item = reader.next().await?;
        Some((item, reader))
    })
    .boxed()
}

/// What the execution's fallback timer compares from tick to tick: its last sequence and
/// whether it ended, from its row.
fn probe(store: Arc<dyn Store>, id: ExecutionId) -> super::signals::Probe {
    Arc::new(move || {
        let store = Arc::clone(&store);
        Box::pin(async move {
            let row = store.execution(id).await.ok()?;
            Some((row.last_sequence, row.state.is_terminal()))
        })
    })
}

/// One reader's state; while it waits it holds no page and no timer of its own.
struct Reader {
    store: Arc<dyn Store>,
    hub: Arc<Hub>,
    tail: Arc<Tail>,
    /// The execution's wake-ups, subscribed at the first read (inside the runtime).
    watcher: Option<tokio::sync::watch::Receiver<u64>>,
    id: ExecutionId,
    cursor: i64,
    /// The events read and not yet handed out; empty (no allocation) while waiting.
    page: std::vec::IntoIter<Event>,
    done: bool,
    /// Counts this reader in `openbot_observers_open` while it lives.
    _open: crate::telemetry::metrics::ObserverOpen,
}

impl Reader {
    async fn next(&mut self) -> Option<Result<Event, StoreError>> {
        loop {
            if let Some(event) = self.page.next() {
                self.cursor = event.sequence as i64;
                self.done = event.kind.is_terminal();
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            let (hub, id, store) = (&self.hub, self.id, &self.store);
            let watch = || hub.watch_probed(id, Some(probe(Arc::clone(store), id)));
            let watcher = self.watcher.get_or_insert_with(watch);
            // Mark wake-ups seen before reading, so one that lands during the read is kept.
            let wake = *watcher.borrow_and_update();
            // Readers at the head share one read of the log per wake-up; others read their own.
            // The reads are boxed: a waiting reader keeps room only for its wake-up.
            match Box::pin(
                self.tail
                    .read(self.store.as_ref(), self.id, self.cursor, wake),
            )
            .await
            {
                Ok(events) if !events.is_empty() => {
                    self.page = events.into_iter();
                    continue;
                }
                Ok(_) => self.page = Vec::new().into_iter(),
                Err(err) => {
                    self.done = true;
                    return Some(Err(err));
                }
            }
            // Nothing after the cursor: the end, if the execution ended (one shared read of its
            // row per wake-up).
            match Box::pin(self.tail.ended(self.store.as_ref(), self.id, wake)).await {
                Ok(Some(last)) if self.cursor >= last => return None,
                Ok(_) => {}
                Err(err) => {
                    self.done = true;
                    return Some(Err(err));
                }
            }
            let watch = || hub.watch_probed(id, Some(probe(Arc::clone(store), id)));
            let watcher = self.watcher.get_or_insert_with(watch);
            if watcher.changed().await.is_err() {
                // The hub dropped the channel; read again with a new one.
                self.watcher = None;
                Box::pin(tokio::time::sleep(FALLBACK_POLL)).await;
            } else {
                crate::telemetry::spans::woke(id);
            }
        }
    }
}

/// The newest events of one execution, shared by the readers of a node that follow its head:
/// one read of the log per wake-up serves them all.
#[derive(Debug, Default)]
pub struct Tail {
    /// Held while one reader refreshes, so the others wait for its read instead of querying.
    refresh: tokio::sync::Mutex<()>,
    state: std::sync::Mutex<TailState>,
}

#[derive(Debug, Default)]
struct TailState {
    /// Contiguous events, oldest first, at most two pages.
    events: std::collections::VecDeque<Event>,
    /// The wake-up count seen before the last read of the log started.
    read_at_wake: Option<u64>,
    /// The last read of the execution's row: the wake-up count seen before it started, and
    /// its last sequence if it had ended.
    ended: Option<(u64, Option<i64>)>,
}

impl Tail {
    /// Events after `cursor` held here, or `None` when the cursor is outside the tail.
    fn held_after(&self, cursor: i64) -> Option<Vec<Event>> {
        let state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let first = state.events.front()?.sequence as i64;
        let last = state.events.back()?.sequence as i64;
        if cursor + 1 < first || cursor > last {
            return None;
        }
        Some(
            state
                .events
                .iter()
                .filter(|e| e.sequence as i64 > cursor)
                .take(OBSERVE_PAGE as usize)
                .cloned()
                .collect(),
        )
    }

    /// The events after `cursor`: from the tail when it holds them and is fresh for wake-up
    /// `wake`; otherwise one reader reads the log and refreshes the tail for all.
    async fn read(
        &self,
        store: &dyn Store,
        id: ExecutionId,
        cursor: i64,
        wake: u64,
    ) -> Result<Vec<Event>, StoreError> {
        let behind = {
            let state = self
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            state
                .events
                .front()
                .is_some_and(|first| cursor + 1 < first.sequence as i64)
        };
        if behind {
            // A slow reader reads its own page and leaves the head's tail alone.
            return store.events(id, cursor, OBSERVE_PAGE).await;
        }
        let fresh = |tail: &Tail| {
            let state = tail
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            state.read_at_wake.is_some_and(|at| at >= wake)
        };
        if let Some(events) = self.held_after(cursor)
            && (!events.is_empty() || fresh(self))
        {
            return Ok(events);
        }
        let _refreshing = self.refresh.lock().await;
        if fresh(self)
            && let Some(events) = self.held_after(cursor)
        {
            return Ok(events);
        }
        let from = {
            let state = self
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match state.events.back() {
                Some(last)
                    if cursor + 1 >= state.events.front().map_or(0, |e| e.sequence as i64) =>
                {
                    (last.sequence as i64).max(cursor)
                }
                _ => cursor,
            }
        };
        // The execution's end comes with the events: no second read for it at this wake-up.
        let page = store.events_to_end(id, from, OBSERVE_PAGE).await?;
        let read = page.events;
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !matches!(state.ended, Some((_, Some(_)))) {
            state.ended = Some((wake, page.ended_at));
        }
        let contiguous = state
            .events
            .back()
            .is_some_and(|last| last.sequence as i64 == from);
        if !contiguous {
            state.events.clear();
        }
        state.events.extend(read.iter().cloned());
        while state.events.len() > 2 * OBSERVE_PAGE as usize {
            state.events.pop_front();
        }
        state.read_at_wake = Some(wake);
        drop(state);
        // From the tail when the cursor is inside it, else exactly what was read.
        Ok(self.held_after(cursor).unwrap_or(
            read.into_iter()
                .filter(|e| e.sequence as i64 > cursor)
                .collect(),
        ))
    }

    /// The last sequence of the execution if it ended, from one read of its row per wake-up
    /// shared by the readers at its head; the tail's read of the log at that wake-up counts
    /// as one. An execution that ended stays ended.
    async fn ended(
        &self,
        store: &dyn Store,
        id: ExecutionId,
        wake: u64,
    ) -> Result<Option<i64>, StoreError> {
        let known = || {
            let state = self
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match state.ended {
                Some((_, Some(last))) => Some(Some(last)),
                Some((at, None)) if at >= wake => Some(None),
                _ => None,
            }
        };
        if let Some(ended) = known() {
            return Ok(ended);
        }
        let _refreshing = self.refresh.lock().await;
        if let Some(ended) = known() {
            return Ok(ended);
        }
        let row = store.execution(id).await?;
        let ended = row.state.is_terminal().then_some(row.last_sequence);
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .ended = Some((wake, ended));
        Ok(ended)
    }
}
