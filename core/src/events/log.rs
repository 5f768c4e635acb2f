//! The in-memory event log of one execution.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::Utc;
use futures::StreamExt;
use futures::stream::BoxStream;
use openbot_schema::{Event, EventKind, ExecutionId};
use tokio::sync::watch;

/// How many events a reader copies out of the log at a time. A reader holds at most this many
/// events of its own, however far behind it is.
pub const OBSERVE_PAGE: usize = 256;

/// A stream of events that ends after the execution's last event.
pub type EventStream = BoxStream<'static, Event>;

/// The ordered events of one execution, with sequences from 1 and no gaps.
///
/// Appending never waits for readers: each reader keeps only its cursor and reads pages from
/// the log, so a slow reader costs no memory in the log and never blocks the writer.
#[derive(Debug, Clone)]
pub struct EventLog {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    execution_id: ExecutionId,
    events: Mutex<Vec<Event>>,
    /// The sequence of the last event and whether it was the terminal one.
    last: watch::Sender<Last>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Last {
    sequence: u64,
    ended: bool,
}

impl EventLog {
    /// An empty log for `execution_id`.
    pub fn new(execution_id: ExecutionId) -> Self {
        let (last, _) = watch::channel(Last {
            sequence: 0,
            ended: false,
        });
        Self {
            inner: Arc::new(Inner {
                execution_id,
                events: Mutex::new(Vec::new()),
                last,
            }),
        }
    }

    /// The execution this log belongs to.
    pub fn execution_id(&self) -> ExecutionId {
        self.inner.execution_id
    }

    /// Appends an event and returns its sequence. After a terminal event nothing is appended
    /// and `None` is returned.
    pub fn append(&self, kind: EventKind) -> Option<u64> {
        let mut events = self
            .inner
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if events.last().is_some_and(|e| e.kind.is_terminal()) {
            return None;
        }
        let sequence = events.len() as u64 + 1;
        let ended = kind.is_terminal();
        events.push(Event {
            execution_id: self.inner.execution_id,
            sequence,
            at: Utc::now(),
            kind,
        });
        drop(events);
        self.inner.last.send_replace(Last { sequence, ended });
        Some(sequence)
    }

    /// The sequence of the last event; 0 when empty.
    pub fn last_sequence(&self) -> u64 {
        self.inner.last.borrow().sequence
    }

    /// Whether the last event was appended.
    pub fn is_ended(&self) -> bool {
        self.inner.last.borrow().ended
    }

    /// Up to `limit` events after sequence `after`.
    pub fn read(&self, after: u64, limit: usize) -> Vec<Event> {
        let events = self
            .inner
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let start = usize::try_from(after)
            .unwrap_or(usize::MAX)
            .min(events.len());
        let end = start.saturating_add(limit).min(events.len());
        events[start..end].to_vec()
    }

    /// The events after sequence `after`, as they come, ending after the last event. Starting
    /// at or past the end yields nothing and ends at once (after the last event) or waits.
    pub fn observe(&self, after: u64) -> EventStream {
        let log = self.clone();
        let changes = self.inner.last.subscribe();
        let state = (log, changes, after, Vec::<Event>::new().into_iter(), false);
        futures::stream::unfold(
            state,
            |(log, mut changes, mut cursor, mut page, mut done)| async move {
                loop {
                    if let Some(event) = page.next() {
                        cursor = event.sequence;
                        done = event.kind.is_terminal();
                        return Some((event, (log, changes, cursor, page, done)));
                    }
                    if done {
                        return None;
                    }
                    let last = *changes.borrow_and_update();
                    if last.sequence > cursor {
                        page = log.read(cursor, OBSERVE_PAGE).into_iter();
                        continue;
                    }
                    if last.ended {
                        return None;
                    }
                    if changes.changed().await.is_err() {
                        return None;
                    }
                }
            },
        )
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openbot_schema::{TurnOutcome, Usage};

    fn delta(text: &str) -> EventKind {
        EventKind::TextDelta {
            step: 1,
            attempt: 1,
            text: text.into(),
        }
    }

    fn end() -> EventKind {
        EventKind::TurnEnded {
            outcome: TurnOutcome::Completed,
            usage: Usage::default(),
        }
    }

    #[tokio::test]
    async fn a_reader_resumes_from_its_cursor() {
        let log = EventLog::new(ExecutionId::new());
        for text in ["a", "b", "c"] {
            log.append(delta(text));
        }
        log.append(end());
        let seen: Vec<u64> = log.observe(2).map(|e| e.sequence).collect().await;
        assert_eq!(seen, vec![3, 4]);
    }

    #[tokio::test]
    async fn observing_after_the_end_ends_at_once() {
        let log = EventLog::new(ExecutionId::new());
        log.append(end());
        assert_eq!(log.observe(1).count().await, 0);
        assert_eq!(log.observe(0).count().await, 1);
        assert_eq!(
            log.append(delta("late")),
            None,
            "nothing follows the last event"
        );
    }

    #[tokio::test]
    async fn a_waiting_reader_wakes_for_new_events() {
        let log = EventLog::new(ExecutionId::new());
        let reader = tokio::spawn(log.observe(0).map(|e| e.sequence).collect::<Vec<_>>());
        tokio::task::yield_now().await;
        log.append(delta("a"));
        log.append(end());
        assert_eq!(reader.await.unwrap(), vec![1, 2]);
    }
}
