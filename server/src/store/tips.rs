//! What this store last wrote of the executions its node runs: each one's generation, last
//! event sequence and whether it has a parent. With it a PostgreSQL commit seals its events
//! before it runs and sends its rows in one statement (`PostgresStore::commit_at_once`).
//!
//! Only a hint: that statement checks the generation and the last sequence against the row, so
//! a stale tip (another writer added events, another node took the execution over, a reply was
//! lost) makes it change nothing, and the commit is written the usual way, which refreshes the
//! tip.

use std::collections::HashMap;
use std::sync::Mutex;

use openbot_schema::ExecutionId;

/// One execution's tip, as this store's last write left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tip {
    /// The owner's generation.
    pub generation: i64,
    /// The execution's last event sequence.
    pub last_sequence: i64,
    /// Whether usage rolls up to a parent.
    pub has_parent: bool,
}

/// The tips of the executions this store writes for, bounded.
#[derive(Debug, Default)]
pub(crate) struct Tips(Mutex<HashMap<ExecutionId, Tip>>);

impl Tips {
    /// More tips than a node runs executions; past it the map starts over (tips are hints).
    const MAX: usize = 65_536;

    /// The tip of `id` if this store knows it for `generation`.
    pub fn get(&self, id: ExecutionId, generation: i64) -> Option<Tip> {
        let tips = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        tips.get(&id)
            .copied()
            .filter(|tip| tip.generation == generation)
    }

    /// Records what a write of `id` left.
    pub fn set(&self, id: ExecutionId, tip: Tip) {
        let mut tips = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if tips.len() >= Self::MAX && !tips.contains_key(&id) {
            tips.clear();
        }
        tips.insert(id, tip);
    }

    /// Forgets `id`: its owner let it go, or the tip proved stale.
    pub fn forget(&self, id: ExecutionId) {
        let mut tips = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        tips.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tip(generation: i64) -> Tip {
        Tip {
            generation,
            last_sequence: 7,
            has_parent: false,
        }
    }

    #[test]
    fn a_tip_is_known_only_for_its_generation() {
        let tips = Tips::default();
        let id = ExecutionId::new();
        tips.set(id, tip(3));
        assert_eq!(tips.get(id, 3), Some(tip(3)));
        assert_eq!(tips.get(id, 4), None);
        tips.forget(id);
        assert_eq!(tips.get(id, 3), None);
    }

    #[test]
    fn a_full_map_starts_over_instead_of_growing() {
        let tips = Tips::default();
        let first = ExecutionId::new();
        tips.set(first, tip(1));
        for _ in 1..Tips::MAX {
            tips.set(ExecutionId::new(), tip(1));
        }
        let last = ExecutionId::new();
        tips.set(last, tip(1));
        assert_eq!(tips.get(first, 1), None);
        assert_eq!(tips.get(last, 1), Some(tip(1)));
    }
}
