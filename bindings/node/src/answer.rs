//! Answering a call from JavaScript with the fewest thread hops.
//!
//! A call's future is polled once right here, on the JavaScript thread, inside the Tokio
//! runtime's context. When it is ready (most in-memory calls are: creating a Chat, sending
//! input, reading an execution, events already in the log) its value is returned at once, with
//! no hop to a runtime thread and back. Otherwise the future is spawned on the runtime and the
//! call answers with a Promise, as an `async fn` would.

use std::future::Future;

use futures::FutureExt;
use napi::Env;
use napi::bindgen_prelude::{Either, PromiseRaw, Result, ToNapiValue, within_runtime_if_available};

/// The value of `call` now when it is ready, else a Promise of it.
pub fn answer<'env, T, F>(env: &'env Env, call: F) -> Result<Either<T, PromiseRaw<'env, T>>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    let mut call = Box::pin(call);
    match within_runtime_if_available(|| call.as_mut().now_or_never()) {
        Some(result) => result.map(Either::A),
        None => env.spawn_future(call).map(Either::B),
    }
}
