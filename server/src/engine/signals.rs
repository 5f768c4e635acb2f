//! Wake-ups between the parts of a node and between nodes.
//!
//! Inside a node a wake-up is a direct call. Between nodes on PostgreSQL it is a
//! notification on one channel, sent by one notifier task outside every step transaction and
//! coalesced, so a burst of commits costs one `NOTIFY`. A lost notification loses nothing:
//! the database is the truth, and readers re-read it after every reconnect.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use openbot_schema::ExecutionId;
use tokio::sync::{Notify, watch};

/// The PostgreSQL channel every node listens on.
pub const CHANNEL: &str = "openbot";

/// The most bytes of one notification payload (PostgreSQL allows just under 8000).
const PAYLOAD_LIMIT: usize = 7_800;

/// The most distinct wake-ups that wait for the notifier; past it they are folded into one
/// [`Wake::All`], so a database that stops taking `NOTIFY` costs bounded memory.
pub const OUTGOING_LIMIT: usize = 4_096;

/// Something another part of the system should look at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Wake {
    /// New events of an execution were committed.
    Events(ExecutionId),
    /// An execution got a signal (cancel, a delivered result).
    Signal(ExecutionId),
    /// Work may be claimable (a submission, a release).
    Work,
    /// Outbox messages wait for delivery.
    Outbox,
    /// Anything may have changed: every watcher, the runner and the outbox look again.
    All,
}

impl Wake {
    fn encode(&self) -> String {
        match self {
            Wake::Events(id) => format!("e{id}"),
            Wake::Signal(id) => format!("s{id}"),
            Wake::Work => "w".into(),
            Wake::Outbox => "o".into(),
            Wake::All => "a".into(),
        }
    }

    fn decode(text: &str) -> Option<Self> {
        let (tag, rest) = text.split_at_checked(1)?;
        match tag {
            "e" => rest.parse().ok().map(Wake::Events),
            "s" => rest.parse().ok().map(Wake::Signal),
            "w" => Some(Wake::Work),
            "o" => Some(Wake::Outbox),
            "a" => Some(Wake::All),
            _ => None,
        }
    }
}

/// Joins wake-ups into notification payloads of at most [`PAYLOAD_LIMIT`] bytes.
pub fn encode_batch(wakes: &HashSet<Wake>) -> Vec<String> {
    let mut payloads = Vec::new();
    let mut current = String::new();
    for wake in wakes {
        let part = wake.encode();
        if !current.is_empty() && current.len() + 1 + part.len() > PAYLOAD_LIMIT {
            payloads.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push(',');
        }
        current.push_str(&part);
    }
    if !current.is_empty() {
        payloads.push(current);
    }
    payloads
}

/// Reads a notification payload; unknown parts are skipped.
pub fn decode_batch(payload: &str) -> Vec<Wake> {
    payload.split(',').filter_map(Wake::decode).collect()
}

/// The wake-up hub of one node: watchers of executions, the runner's wake, and the way out to
/// other nodes.
#[derive(Debug)]
pub struct Hub {
    watchers: Mutex<HashMap<ExecutionId, watch::Sender<u64>>>,
    tails: Mutex<HashMap<ExecutionId, std::sync::Weak<super::observe::Tail>>>,
    signals: Mutex<HashMap<ExecutionId, Arc<Notify>>>,
    work: Notify,
    outbox: Notify,
    outgoing: Option<Arc<Outgoing>>,
}

/// The wake-ups of this node that wait to go to the others: a set (a wake-up waiting twice
/// goes once) of at most [`OUTGOING_LIMIT`], then one [`Wake::All`].
#[derive(Debug, Default)]
pub struct Outgoing {
    waiting: Mutex<HashSet<Wake>>,
    ready: Notify,
}

impl Outgoing {
    /// Adds a wake-up to send.
    pub fn push(&self, wake: Wake) {
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            if !waiting.contains(&Wake::All) {
                if waiting.len() >= OUTGOING_LIMIT {
                    waiting.clear();
                    waiting.insert(Wake::All);
                } else {
                    waiting.insert(wake);
                }
            }
        }
        self.ready.notify_one();
    }

    /// Waits until wake-ups wait, and takes them all.
    pub async fn next_batch(&self) -> HashSet<Wake> {
        loop {
            let batch =
                std::mem::take(&mut *self.waiting.lock().unwrap_or_else(PoisonError::into_inner));
            if !batch.is_empty() {
                return batch;
            }
            self.ready.notified().await;
        }
    }

    /// How many wake-ups wait.
    pub fn len(&self) -> usize {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Hub {
    /// A hub whose wake-ups stay in this process (SQLite, one node).
    pub fn local() -> Arc<Self> {
        Arc::new(Self::with_outgoing(None))
    }

    /// A hub that also sends every wake-up to other nodes through `outgoing`.
    pub fn shared(outgoing: Arc<Outgoing>) -> Arc<Self> {
        Arc::new(Self::with_outgoing(Some(outgoing)))
    }

    fn with_outgoing(outgoing: Option<Arc<Outgoing>>) -> Self {
        Self {
            watchers: Mutex::new(HashMap::new()),
            tails: Mutex::new(HashMap::new()),
            signals: Mutex::new(HashMap::new()),
            work: Notify::new(),
            outbox: Notify::new(),
            outgoing,
        }
    }

    /// Tells this node and the others. Call only after the transaction that caused it
    /// committed: a rolled-back transaction wakes nobody.
    pub fn announce(&self, wake: Wake) {
        self.deliver(&wake);
        if let Some(outgoing) = &self.outgoing {
            outgoing.push(wake);
        }
    }

    /// Delivers a wake-up inside this node only (one that came from another node).
    pub fn deliver(&self, wake: &Wake) {
        match wake {
            Wake::Events(id) => {
                if let Some(sender) = self
                    .watchers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(id)
                {
                    sender.send_modify(|n| *n = n.wrapping_add(1));
                }
            }
            Wake::Signal(id) => {
                if let Some(notify) = self
                    .signals
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(id)
                {
                    notify.notify_waiters();
                    notify.notify_one();
                }
            }
            Wake::Work => self.work.notify_one(),
            Wake::Outbox => self.outbox.notify_one(),
            Wake::All => self.deliver_all(),
        }
    }

    /// Wakes every watcher and the runner: after a lost connection, anything may have been
    /// missed.
    pub fn deliver_all(&self) {
        for sender in self
            .watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            sender.send_modify(|n| *n = n.wrapping_add(1));
        }
        for notify in self
            .signals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            notify.notify_waiters();
            notify.notify_one();
        }
        self.work.notify_one();
        self.outbox.notify_one();
    }

    /// A receiver that changes whenever an execution has new events, and at least every
    /// [`FALLBACK_POLL`](super::observe::FALLBACK_POLL) while it has receivers: one timer per
    /// execution instead of one per reader bounds the delay a lost notification can cause.
    pub fn watch(&self, id: ExecutionId) -> watch::Receiver<u64> {
        self.watch_probed(id, None)
    }

    /// Like [`Hub::watch`], but the fallback timer wakes the receivers only when `probe`
    /// (given by the first watcher of the execution) answers something else than at its last
    /// tick, or nothing: idle readers of an execution that does not change are not woken.
    pub fn watch_probed(&self, id: ExecutionId, probe: Option<Probe>) -> watch::Receiver<u64> {
        let mut watchers = self.watchers.lock().unwrap_or_else(PoisonError::into_inner);
        watchers.retain(|_, sender| sender.receiver_count() > 0);
        if let Some(sender) = watchers.get(&id) {
            return sender.subscribe();
        }
        let (sender, receiver) = watch::channel(0);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(fallback_ticks(sender.clone(), probe));
        }
        watchers.insert(id, sender);
        receiver
    }

    /// The shared tail of an execution's events, for the readers of this node.
    pub fn tail(&self, id: ExecutionId) -> Arc<super::observe::Tail> {
        let mut tails = self.tails.lock().unwrap_or_else(PoisonError::into_inner);
        tails.retain(|_, tail| tail.strong_count() > 0);
        if let Some(tail) = tails.get(&id).and_then(std::sync::Weak::upgrade) {
            return tail;
        }
        let tail = Arc::new(super::observe::Tail::default());
        tails.insert(id, Arc::downgrade(&tail));
        tail
    }

    /// The notification an owner waits on for signals to one execution.
    pub fn signal_notify(&self, id: ExecutionId) -> Arc<Notify> {
        let mut signals = self.signals.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(signals.entry(id).or_default())
    }

    /// Forgets an execution's signal notification once its owner stopped.
    pub fn forget_signals(&self, id: ExecutionId) {
        self.signals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }

    /// Waits until work may be claimable.
    pub async fn work(&self) {
        self.work.notified().await;
    }

    /// Waits until outbox messages may wait for delivery.
    pub async fn outbox(&self) {
        self.outbox.notified().await;
    }
}

/// A snapshot of an execution that changes with every commit to it (its last sequence, and
/// whether it ended); `None` when it cannot be read.
pub type Probe =
    Arc<dyn Fn() -> futures::future::BoxFuture<'static, Option<(i64, bool)>> + Send + Sync>;

/// Wakes the receivers of one execution every `FALLBACK_POLL` until it has none; with a probe,
/// only when its snapshot differs from the one of the tick before (the first tick always
/// wakes). A commit whose notification was lost changes the snapshot after the tick that read
/// the one before it, so the next tick wakes the readers: the bound stays one period.
async fn fallback_ticks(sender: watch::Sender<u64>, probe: Option<Probe>) {
    let period = super::observe::FALLBACK_POLL;
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen = None;
    loop {
        ticks.tick().await;
        if sender.receiver_count() == 0 {
            return;
        }
        if let Some(probe) = &probe {
            let now = probe().await;
            if now.is_some() && now == seen {
                continue;
            }
            seen = now;
        }
        sender.send_modify(|n| *n = n.wrapping_add(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn watchers_are_woken_without_a_notification_by_one_timer_per_execution() {
        let poll = super::super::observe::FALLBACK_POLL;
        let hub = Hub::local();
        let id = ExecutionId::new();
        let mut first = hub.watch(id);
        let mut second = hub.watch(id);
        let started = tokio::time::Instant::now();
        first.changed().await.unwrap();
        second.changed().await.unwrap();
        let waited = started.elapsed();
        assert!(waited >= poll && waited < poll * 3 / 2, "{waited:?}");
        // One timer for both: each saw the same single wake-up.
        assert_eq!(*first.borrow_and_update(), 1);
        assert_eq!(*second.borrow_and_update(), 1);
        // Once an execution has no watchers its channel goes; a new watcher starts afresh.
        drop((first, second));
        assert_eq!(*hub.watch(id).borrow(), 0);
    }

    #[test]
    fn wake_ups_round_trip_through_payloads_and_respect_the_limit() {
        let wakes: HashSet<Wake> = (0..400)
            .map(|_| Wake::Events(ExecutionId::new()))
            .chain([Wake::Work])
            .collect();
        let payloads = encode_batch(&wakes);
        assert!(payloads.len() > 1);
        assert!(payloads.iter().all(|p| p.len() <= PAYLOAD_LIMIT));
        let back: HashSet<Wake> = payloads.iter().flat_map(|p| decode_batch(p)).collect();
        assert_eq!(back, wakes);
    }

    #[tokio::test]
    async fn wake_ups_waiting_for_the_notifier_are_bounded_and_fold_into_one_that_wakes_all() {
        let outgoing = Outgoing::default();
        // The same wake-up twice waits once.
        outgoing.push(Wake::Work);
        outgoing.push(Wake::Work);
        assert_eq!(outgoing.len(), 1);
        // A notifier that never gets to send: memory stays bounded.
        for _ in 0..OUTGOING_LIMIT * 3 {
            outgoing.push(Wake::Events(ExecutionId::new()));
        }
        assert!(outgoing.len() <= OUTGOING_LIMIT);
        let batch = outgoing.next_batch().await;
        assert_eq!(batch, HashSet::from([Wake::All]), "folded into one");
        assert!(outgoing.is_empty());
        // Another node reads it as a wake-up of everything.
        assert_eq!(decode_batch(&encode_batch(&batch)[0]), [Wake::All]);
    }
}
