//! Checks of a Turn's limits.

use std::time::{Duration, SystemTime};

use openbot_schema::{Limits, TurnOutcome, Usage};

/// The deadline of a Turn, from its first start.
pub(crate) fn deadline(limits: &Limits, started_at: SystemTime) -> Option<SystemTime> {
    limits
        .max_wall_time_ms
        .map(|ms| started_at + Duration::from_millis(ms))
}

/// The limit that stops the Turn before it sends the request of `step`, if any.
pub(crate) fn reached(
    limits: &Limits,
    step: u32,
    usage: &Usage,
    deadline: Option<SystemTime>,
) -> Option<TurnOutcome> {
    if limits.max_steps.is_some_and(|max| step > max) {
        return Some(TurnOutcome::MaxSteps);
    }
    if deadline.is_some_and(|d| SystemTime::now() >= d) {
        return Some(TurnOutcome::MaxTime);
    }
    if let (Some(max), Some(spent)) = (limits.max_cost_micros, usage.cost_micros)
        && spent >= max
    {
        return Some(TurnOutcome::MaxCost);
    }
    None
}

/// Sleeps until the deadline; forever when there is none.
pub(crate) async fn sleep_until(deadline: Option<SystemTime>) {
    match deadline {
        Some(at) => {
            let left = at
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
            tokio::time::sleep(left).await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_names_its_outcome() {
        let limits = Limits {
            max_steps: Some(2),
            max_wall_time_ms: Some(1000),
            max_cost_micros: Some(10),
        };
        let now = SystemTime::now();
        let usage = Usage::default();
        assert_eq!(reached(&limits, 2, &usage, deadline(&limits, now)), None);
        assert_eq!(
            reached(&limits, 3, &usage, deadline(&limits, now)),
            Some(TurnOutcome::MaxSteps)
        );
        let past = now - Duration::from_secs(5);
        assert_eq!(
            reached(&limits, 1, &usage, deadline(&limits, past)),
            Some(TurnOutcome::MaxTime)
        );
        let spent = Usage {
            cost_micros: Some(10),
            ..Usage::default()
        };
        assert_eq!(
            reached(&limits, 1, &spent, None),
            Some(TurnOutcome::MaxCost)
        );
    }

    #[test]
    fn unknown_cost_does_not_stop_a_turn() {
        let limits = Limits {
            max_cost_micros: Some(1),
            ..Limits::default()
        };
        assert_eq!(
            reached(
                &limits,
                1,
                &Usage {
                    input_tokens: 99,
                    ..Usage::default()
                },
                None
            ),
            None
        );
    }
}
