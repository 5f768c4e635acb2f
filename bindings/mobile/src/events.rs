//! An execution's events as an object with `next()`.
//!
//! A task on the runtime reads the core's stream into a small channel; `next()` only receives
//! from it. Receiving is cancel-safe, so a cancelled `next()` (a coroutine timeout) loses no
//! event: the next call gets it.

use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinHandle;

use futures::StreamExt;
use openbot_core::ObserveStream;

use crate::error::{OpenBotError, from_core};
use crate::runtime::runtime;
use openbot_schema::Event;

/// Events read ahead of the caller, at most.
const READ_AHEAD: usize = 64;

/// The events of one execution after a cursor, in order. `next()` returns `null` (`nil`) after
/// the execution's last event. Closing it stops observing only; it cancels nothing.
#[derive(uniffi::Object)]
pub struct EventStream {
    receiver: Mutex<Option<mpsc::Receiver<Result<Event, OpenBotError>>>>,
    reader: JoinHandle<()>,
}

impl EventStream {
    pub(crate) fn start(mut stream: ObserveStream) -> Result<Self, OpenBotError> {
        let (sender, receiver) = mpsc::channel(READ_AHEAD);
        let reader = runtime()?.spawn(async move {
            while let Some(item) = stream.next().await {
                let item = item.map_err(from_core);
                let failed = item.is_err();
                if sender.send(item).await.is_err() || failed {
                    return;
                }
            }
        });
        Ok(Self {
            receiver: Mutex::new(Some(receiver)),
            reader,
        })
    }
}

#[uniffi::export]
impl EventStream {
    /// The next event, or none after the last one. Fails when the events can no longer be read
    /// (the client closed, access was lost); after a failure it returns none.
    pub async fn next(&self) -> Result<Option<Event>, OpenBotError> {
        let mut receiver = self.receiver.lock().await;
        match receiver.as_mut() {
            Some(receiver) => receiver.recv().await.transpose(),
            None => Ok(None),
        }
    }

    /// Stops reading. Later `next()` calls return none. The execution goes on.
    pub async fn close(&self) {
        // The reader ends first, so a `next()` waiting on the channel returns and lets go of it.
        self.reader.abort();
        self.receiver.lock().await.take();
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
