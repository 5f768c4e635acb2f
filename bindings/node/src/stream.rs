//! An execution's events, read in batches: the TypeScript layer turns them into an async
//! iterator.

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use napi::Env;
use napi::bindgen_prelude::{Either, PromiseRaw, Result};
use napi_derive::napi;
use openbot_core::{Error, ObserveStream};
use openbot_schema::{ErrorCode, Event};
use serde_json::Value;
use tokio::sync::{Mutex, watch};

use crate::answer::answer;
use crate::error;

/// The most events one [`EventStream::next_batch`] returns.
const BATCH: usize = 256;

struct State {
    /// `None` once the stream ended or was closed.
    stream: Option<ObserveStream>,
    /// An error met after events of the same batch; thrown by the next call.
    error: Option<Error>,
}

/// The events of one execution after a cursor, ending after its last event. Closing it stops
/// observing only; it cancels nothing.
#[napi]
pub struct EventStream {
    state: Arc<Mutex<State>>,
    closed: watch::Sender<bool>,
}

impl EventStream {
    /// A stream over core's observation.
    pub fn new(stream: ObserveStream) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                stream: Some(stream),
                error: None,
            })),
            closed: watch::Sender::new(false),
        }
    }
}

#[napi]
impl EventStream {
    /// The next events: waits for at least one, then takes the ones already there (at most
    /// 256). An empty list means the stream has ended or was closed.
    #[napi(ts_return_type = "Array<any> | Promise<Array<any>>")]
    pub fn next_batch<'env>(
        &self,
        env: &'env Env,
    ) -> Result<Either<Vec<Value>, PromiseRaw<'env, Vec<Value>>>> {
        let state = Arc::clone(&self.state);
        let closed = self.closed.subscribe();
        answer(env, next_batch(state, closed))
    }

    /// Stops observing: a waiting `nextBatch` returns an empty list, and so does every later
    /// one. Cancels nothing.
    #[napi]
    pub fn close(&self) {
        self.closed.send_replace(true);
        if let Ok(mut state) = self.state.try_lock() {
            state.stream = None;
        }
    }
}

/// The next events: waits for at least one, then takes the ones already there.
async fn next_batch(
    state: Arc<Mutex<State>>,
    mut closed: watch::Receiver<bool>,
) -> Result<Vec<Value>> {
    let mut state = state.lock_owned().await;
    if let Some(e) = state.error.take() {
        return Err(error::to_js(e));
    }
    let Some(stream) = state.stream.as_mut() else {
        return Ok(Vec::new());
    };
    let first = tokio::select! {
        biased;
        _ = closed.wait_for(|closed| *closed) => None,
        item = stream.next() => item,
    };
    let mut batch = Vec::new();
    let Some(first) = first else {
        state.stream = None;
        return Ok(batch);
    };
    batch.push(encode(first)?);
    while batch.len() < BATCH {
        match stream.next().now_or_never() {
            Some(Some(Ok(event))) => batch.push(encode(Ok(event))?),
            Some(Some(Err(e))) => {
                state.error = Some(e);
                break;
            }
            Some(None) => {
                state.stream = None;
                break;
            }
            None => break,
        }
    }
    Ok(batch)
}

fn encode(item: std::result::Result<Event, Error>) -> Result<Value> {
    let event = item.map_err(error::to_js)?;
    serde_json::to_value(&event).map_err(|e| {
        error::to_js(Error::new(
            ErrorCode::RequestFailed,
            format!("an event could not be encoded: {e}"),
        ))
    })
}
