//! The HTTP/1.1 server loop of a node: one small task per connection.
//!
//! `axum::serve` runs each connection as hyper-util's protocol-detecting connection (the
//! HTTP/1 and HTTP/2 states side by side in one task), and an idle observer cost the node some
//! 64 KiB (`observer-memory`, docs/benchmarks.md). Here a connection whose requests are an
//! execution's events is answered by [`super::lean`] (its socket, its task and the handler's
//! state), and any other connection, from its first other request on, by hyper's HTTP/1
//! connection alone (12-17 KiB: its task, hyper's read and write buffers of 8 KiB each and the
//! request's own state).

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
    let routing = std::sync::Arc::new(tokio::sync::Semaphore::new(super::lean::ROUTED_AT_ONCE));
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
        let router = router.clone();
        let mut stopped = stopped.clone();
        let routing = std::sync::Arc::clone(&routing);
        crate::telemetry::spawn(async move {
            let Some(stream) = serve_events(stream, &router, &routing, &mut stopped).await else {
                return;
            };
            // Boxed: a connection served by `lean` never needs the room of hyper's state.
            Box::pin(serve_hyper(stream, router, stopped)).await;
        });
    }
    drop(listener);
    let _ = stop.send(true);
    drop(stopped);
    stop.closed().await;
    Ok(())
}

/// Serves the connection with hyper's HTTP/1 connection until it closes; on shutdown, lets
/// its request in flight finish.
async fn serve_hyper(
    stream: tokio::net::TcpStream,
    router: axum::Router,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let service = TowerToHyperService::new(router);
    // hyper's defaults, as `axum::serve` had them (no timer, so no header timeout); with
    // upgrades, for the WebSocket of a Computer's link (`/v1/computers/link`).
    let connection = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => return,
        () = super::lean::stopping(&mut stopped) => {}
    }
    connection.as_mut().graceful_shutdown();
    let _ = connection.await;
}

/// Answers the connection's requests while they are events requests (see [`super::lean`]);
/// returns the connection, its next request unread, when one is not, and `None` when it
/// closed.
async fn serve_events(
    mut stream: tokio::net::TcpStream,
    router: &axum::Router,
    routing: &tokio::sync::Semaphore,
    stopped: &mut tokio::sync::watch::Receiver<bool>,
) -> Option<tokio::net::TcpStream> {
    loop {
        let head = tokio::select! {
            head = super::lean::peek_head(&stream) => head.ok()?,
            () = super::lean::stopping(stopped) => return None,
        };
        let Some(head) = head else {
            return Some(stream);
        };
        match super::lean::answer(&mut stream, head, router, routing, stopped).await {
            Ok(true) => {}
            Ok(false) | Err(_) => return None,
        }
    }
}
