//! Schedules: a cron expression read in an IANA time zone, and the next slot after a time.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;

use crate::store::Millis;

/// The shortest time between two firings of a schedule: a Turn per second would be a flood.
pub const MIN_INTERVAL_MS: Millis = 60_000;

/// A checked schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    zone: Tz,
}

/// A schedule that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The cron expression does not parse.
    #[error("the cron expression is not valid: {0}")]
    Cron(String),
    /// The time zone is not an IANA name.
    #[error("`{0}` is not an IANA time zone (such as `Europe/Berlin` or `UTC`)")]
    Zone(String),
    /// It never fires, or fires more often than once a minute.
    #[error("{0}")]
    Interval(&'static str),
}

impl Schedule {
    /// Reads `cron` in `zone` (UTC when absent) and checks that it fires, at most once a
    /// minute.
    pub fn parse(cron: &str, zone: Option<&str>) -> Result<Self, ScheduleError> {
        if cron.len() > 200 {
            return Err(ScheduleError::Cron("longer than 200 characters".into()));
        }
        let parsed = Cron::from_str(cron).map_err(|e| ScheduleError::Cron(e.to_string()))?;
        let zone_name = zone.unwrap_or("UTC");
        let zone = Tz::from_str(zone_name).map_err(|_| ScheduleError::Zone(zone_name.into()))?;
        let schedule = Self { cron: parsed, zone };
        let now = crate::store::now_ms();
        let first = schedule
            .next_after(now)
            .ok_or(ScheduleError::Interval("the schedule never fires"))?;
        if let Some(second) = schedule.next_after(first)
            && second - first < MIN_INTERVAL_MS
        {
            return Err(ScheduleError::Interval(
                "a schedule fires at most once a minute",
            ));
        }
        Ok(schedule)
    }

    /// The first slot strictly after `at`, in milliseconds since the epoch.
    pub fn next_after(&self, at: Millis) -> Option<Millis> {
        // Slots are whole seconds: the search keeps the start's fraction of a second, so it
        // starts from the whole second (a slot in that same second is not after `at`).
        let second = at.div_euclid(1000) * 1000;
        let start: DateTime<Utc> = DateTime::from_timestamp_millis(second)?;
        let local = start.with_timezone(&self.zone);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|next| next.timestamp_millis().div_euclid(1000) * 1000)
            .filter(|next| *next > at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Millis {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.timestamp_millis())
            .unwrap_or_default()
    }

    #[test]
    fn the_next_slot_is_read_in_the_time_zone() {
        let schedule = Schedule::parse("0 9 * * *", Some("Europe/Berlin")).expect("valid");
        // 09:00 in Berlin in winter is 08:00 UTC.
        assert_eq!(
            schedule.next_after(at("2026-12-01T07:00:00Z")),
            Some(at("2026-12-01T08:00:00Z"))
        );
        assert_eq!(
            schedule.next_after(at("2026-12-01T08:00:00Z")),
            Some(at("2026-12-02T08:00:00Z"))
        );
        // A fraction of a second never moves a slot off its whole second.
        assert_eq!(
            schedule.next_after(at("2026-12-01T07:59:59.750Z")),
            Some(at("2026-12-01T08:00:00Z"))
        );
        // In summer the same local time is 07:00 UTC.
        assert_eq!(
            schedule.next_after(at("2027-07-01T06:00:00.123Z")),
            Some(at("2027-07-01T07:00:00Z"))
        );
    }

    #[test]
    fn bad_schedules_are_refused() {
        assert!(matches!(
            Schedule::parse("not cron", None),
            Err(ScheduleError::Cron(_))
        ));
        assert!(matches!(
            Schedule::parse("0 9 * * *", Some("Mars/Olympus")),
            Err(ScheduleError::Zone(_))
        ));
        assert!(matches!(
            Schedule::parse("* * * * * *", None),
            Err(ScheduleError::Interval(_))
        ));
    }
}
