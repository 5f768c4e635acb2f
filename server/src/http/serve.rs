//! The HTTP/1.1 server loop of a node: one small task per connection.
//!
//! `axum::serve` runs each connection as hyper-util's protocol-detecting connection (the
//! HTTP/1 and HTTP/2 states side by side in one task), and an idle observer cost the node some
//! 64 KiB (`observer-memory`, docs/benchmarks.md). Here each connection is hyper's HTTP/1
//! connection alone, 12-17 KiB: its task, hyper's read and write buffers (8 KiB each,
//! allocated by hyper) and the request's own state.

use std::future::Future;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// Serves `router` on `listener` until `shutdown` resolves, then lets every open connection
/// finish its request in flight (event streams end at their next event or keep-alive) and
/// returns once all are closed.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(err) => {
                // Out of file descriptors or a connection reset while queued: wait, go on.
                tracing::warn!("accepting a connection failed: {err}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Answers are whole messages: send each at once, never held back for an ACK
        // (Nagle's algorithm would wait for the peer's delayed ACK of the last segment).
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!("setting TCP_NODELAY failed: {err}");
        }
        let service = TowerToHyperService::new(router.clone());
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            // hyper's defaults, as `axum::serve` had them (no timer, so no header timeout).
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                _ = stopped.wait_for(|stop| *stop) => {}
            }
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        });
    }
    drop(listener);
    let _ = stop.send(true);
    drop(stopped);
    stop.closed().await;
    Ok(())
}
