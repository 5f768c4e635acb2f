//! Backoff for storage retries: 100 ms, doubling, at most 5 s.

use std::time::Duration;

/// Delays that grow from 100 ms to 5 s.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Backoff {
    /// Starts at 100 ms.
    pub fn new() -> Self {
        Self {
            next: Duration::from_millis(100),
        }
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(Duration::from_secs(5));
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_from_100_ms_to_5_s() {
        let mut backoff = Backoff::new();
        let delays: Vec<u64> = (0..8)
            .map(|_| backoff.next_delay().as_millis() as u64)
            .collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
    }
}
