//! The Tokio runtime every call runs on. Kotlin and Swift poll the futures uniffi hands them;
//! the work itself (Turns, HTTP, timers) needs Tokio, so each call is spawned here and only its
//! join handle is polled from the foreign side.

use std::future::Future;
use std::sync::OnceLock;

use futures::FutureExt;
use tokio::runtime::{Builder, Runtime};

use crate::error::OpenBotError;

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The runtime, started on first use.
pub(crate) fn runtime() -> Result<&'static Runtime, OpenBotError> {
    let runtime = RUNTIME.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("openbot")
            .enable_all()
            .build()
            .map_err(|e| format!("the OpenBot runtime could not start: {e}"))
    });
    runtime
        .as_ref()
        .map_err(|reason| OpenBotError::internal(reason.clone()))
}

/// Runs `work` on the runtime and waits for it. Dropping the returned future (a cancelled
/// coroutine) stops the waiting only; the work goes on to its end.
pub(crate) async fn run<T, F>(work: F) -> Result<T, OpenBotError>
where
    F: Future<Output = Result<T, OpenBotError>> + Send + 'static,
    T: Send + 'static,
{
    let runtime = runtime()?;
    let mut work = Box::pin(work);
    // Most in-memory calls are ready at once: answer them on the caller's thread, with no hop to
    // a runtime thread and no wake-up through the foreign callback.
    let ready = {
        let _context = runtime.enter();
        std::panic::AssertUnwindSafe(&mut work)
            .catch_unwind()
            .now_or_never()
    };
    match ready {
        Some(Ok(result)) => return result,
        Some(Err(_)) => return Err(panicked()),
        None => {}
    }
    match runtime.spawn(work).await {
        Ok(result) => result,
        Err(join) if join.is_panic() => Err(panicked()),
        Err(_) => Err(OpenBotError::new(
            openbot_schema::ErrorCode::Cancelled,
            "the call was cancelled",
        )),
    }
}

fn panicked() -> OpenBotError {
    OpenBotError::internal("an OpenBot call panicked; the runtime goes on")
}
