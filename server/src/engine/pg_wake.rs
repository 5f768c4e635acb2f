//! Wake-ups between nodes over PostgreSQL LISTEN/NOTIFY.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::signals::{CHANNEL, Hub, Outgoing, decode_batch, encode_batch};

/// Sends the wake-ups of this node to the others: each batch of wake-ups that arrived while
/// the previous `NOTIFY` was in flight goes out as one notification, outside any transaction.
/// What waits is bounded ([`Outgoing`]), however long the database does not answer.
pub fn spawn_notifier(
    pool: PgPool,
    wakes: Arc<Outgoing>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    crate::telemetry::spawn(async move {
        loop {
            let batch = tokio::select! {
                batch = wakes.next_batch() => batch,
                _ = stop.cancelled() => return,
            };
            for payload in encode_batch(&batch) {
                let sent = sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(CHANNEL)
                    .bind(&payload)
                    .execute(&pool)
                    .await;
                if let Err(err) = sent {
                    // Readers fall back to reading the log; nothing is lost, only later.
                    tracing::warn!(error = %err, "could not send a wake-up notification");
                }
            }
        }
    })
}

/// Listens for other nodes' wake-ups on one shared connection and delivers them to `hub`.
/// After a lost connection it reconnects and wakes everyone, since notifications may have
/// been missed meanwhile.
pub fn spawn_listener(pool: PgPool, hub: Arc<Hub>, stop: CancellationToken) -> JoinHandle<()> {
    crate::telemetry::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            let mut listener = match PgListener::connect_with(&pool).await {
                Ok(listener) => listener,
                Err(err) => {
                    tracing::warn!(error = %err, "wake-up listener cannot connect; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.cancelled() => return,
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            if let Err(err) = listener.listen(CHANNEL).await {
                tracing::warn!(error = %err, "wake-up listener cannot listen; retrying");
                continue;
            }
            backoff = Duration::from_millis(100);
            // Anything that happened before LISTEN took effect is read from the log.
            hub.deliver_all();
            loop {
                let received = tokio::select! {
                    received = listener.try_recv() => received,
                    _ = stop.cancelled() => return,
                };
                match received {
                    Ok(Some(notification)) => {
                        for wake in decode_batch(notification.payload()) {
                            hub.deliver(&wake);
                        }
                    }
                    // The connection was lost and is re-established on the next call.
                    Ok(None) => hub.deliver_all(),
                    Err(err) => {
                        tracing::warn!(error = %err, "wake-up listener lost its connection");
                        hub.deliver_all();
                        break;
                    }
                }
            }
        }
    })
}
