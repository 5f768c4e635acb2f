//! Checks of a Turn's limits.

use std::time::{Duration, SystemTime};

use openbot_schema::{Limits, ToolCall, TurnOutcome, Usage};

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

/// Counts each tool call (the tool's name and its arguments, compared as canonical JSON) in
/// a Turn. The counts come from the model's saved answers, so a replay counts the same.
#[derive(Debug, Default)]
pub(crate) struct RepeatCounter {
    seen: std::collections::HashMap<(String, String), u32>,
}

impl RepeatCounter {
    /// Whether [`RepeatCounter::admit`] would refuse `calls`, counting nothing.
    pub(crate) fn would_refuse(&self, calls: &[ToolCall], max: u32) -> bool {
        let mut counts: std::collections::HashMap<(String, String), u32> =
            std::collections::HashMap::new();
        calls.iter().any(|call| {
            let key = (call.name.clone(), canonical(&call.arguments));
            let before = self.seen.get(&key).copied().unwrap_or(0);
            let count = counts.entry(key).or_insert(before);
            *count += 1;
            *count > max
        })
    }

    /// Counts `calls`; false when one of them ran `max` times already, so the Turn must stop.
    pub(crate) fn admit(&mut self, calls: &[ToolCall], max: u32) -> bool {
        let mut admitted = true;
        for call in calls {
            let count = self
                .seen
                .entry((call.name.clone(), canonical(&call.arguments)))
                .or_default();
            *count += 1;
            if *count > max {
                admitted = false;
            }
        }
        admitted
    }
}

/// JSON with object keys sorted at every level, so equal arguments give equal text.
fn canonical(value: &serde_json::Value) -> String {
    use serde_json::Value;
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), sorted(v)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
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

    fn call(arguments: serde_json::Value) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: "add".into(),
            arguments,
        }
    }

    #[test]
    fn the_loop_breaker_counts_equal_arguments_in_any_key_order() {
        let mut counter = RepeatCounter::default();
        let first = call(serde_json::json!({"a": 1, "b": {"x": 1, "y": 2}}));
        let same = call(serde_json::json!({"b": {"y": 2, "x": 1}, "a": 1}));
        let other = call(serde_json::json!({"a": 2}));
        assert!(counter.admit(std::slice::from_ref(&first), 2));
        assert!(!counter.would_refuse(std::slice::from_ref(&same), 2));
        assert!(counter.admit(std::slice::from_ref(&same), 2));
        assert!(counter.admit(&[other], 2), "other arguments count apart");
        assert!(counter.would_refuse(std::slice::from_ref(&same), 2));
        assert!(!counter.admit(&[same], 2));
    }

    #[test]
    fn each_limit_names_its_outcome() {
        let limits = Limits {
            max_steps: Some(2),
            max_wall_time_ms: Some(1000),
            max_cost_micros: Some(10),
            max_repeated_calls: None,
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
