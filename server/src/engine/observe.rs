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

/// How long a reader waits for a wake-up before it reads the log anyway; bounds the delay a
/// lost notification can cause.
pub const FALLBACK_POLL: Duration = Duration::from_secs(2);

/// The events of `id` after sequence `after`, ending after the execution's last event.
/// A reader that falls behind reads from its cursor; it costs the writer nothing.
pub fn observe(
    store: Arc<dyn Store>,
    hub: Arc<Hub>,
    id: ExecutionId,
    after: u64,
) -> BoxStream<'static, Result<Event, StoreError>> {
    let watcher = hub.watch(id);
    let state = Reader {
        store,
        watcher,
        id,
        cursor: after as i64,
        page: Vec::new().into_iter(),
        done: false,
    };
    futures::stream::unfold(state, |mut reader| async move {
        let item = reader.next().await?;
        Some((item, reader))
    })
    .boxed()
}

struct Reader {
    store: Arc<dyn Store>,
    watcher: tokio::sync::watch::Receiver<u64>,
    id: ExecutionId,
    cursor: i64,
    page: std::vec::IntoIter<Event>,
    done: bool,
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
            // Mark wake-ups seen before reading, so one that lands during the read is kept.
            self.watcher.borrow_and_update();
            match self.store.events(self.id, self.cursor, OBSERVE_PAGE).await {
                Ok(events) if !events.is_empty() => {
                    self.page = events.into_iter();
                    continue;
                }
                Ok(_) => {}
                Err(err) => {
                    self.done = true;
                    return Some(Err(err));
                }
            }
            match self.store.execution(self.id).await {
                Ok(row) if row.state.is_terminal() && self.cursor >= row.last_sequence => {
                    return None;
                }
                Ok(_) => {}
                Err(err) => {
                    self.done = true;
                    return Some(Err(err));
                }
            }
            tokio::select! {
                _ = self.watcher.changed() => {}
                _ = tokio::time::sleep(FALLBACK_POLL) => {}
            }
        }
    }
}
