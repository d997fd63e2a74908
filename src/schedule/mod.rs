//! Next-fire-time logic for the three schedule types (protocol.md §5.4, §7.2), pure and clock-free.
//!
//! - `CRON`: a Quartz expression ([`CronExpr`]) in the job's time zone or the center's.
//! - `FIX_RATE`: every N seconds, keeping its phase: fires stay on `anchor + k × N`, so a restart
//!   or a misfire does not shift them. The anchor is rounded up to a whole second (as XXL-JOB
//!   3.4 does), so every fire time, cron or fixed rate, is a whole second.
//! - `NONE`: never.

pub(crate) mod plan;
mod quartz;

use std::sync::Arc;

use chrono_tz::Tz;
pub use quartz::CronExpr;

use crate::error::{Error, Result};
use crate::model::ScheduleType;

/// A parsed schedule.
#[derive(Clone, Debug, PartialEq)]
pub enum Schedule {
    /// No automatic fire.
    None,
    /// A cron expression in a time zone.
    Cron {
        /// The expression.
        expr: Arc<CronExpr>,
        /// The zone its wall times are read in.
        tz: Tz,
    },
    /// Every `every_ms` milliseconds.
    FixRate {
        /// The period.
        every_ms: i64,
    },
}

impl Schedule {
    /// Parses `(schedule_type, schedule_conf)` as stored on a job; `tz` is the job's zone.
    pub fn parse(kind: ScheduleType, conf: Option<&str>, tz: Tz) -> Result<Self> {
        let conf = conf.map(str::trim).unwrap_or("");
        match kind {
            ScheduleType::None => Ok(Schedule::None),
            ScheduleType::Cron => Ok(Schedule::Cron {
                expr: Arc::new(CronExpr::parse(conf)?),
                tz,
            }),
            ScheduleType::FixRate => {
                let secs: i64 = conf.parse().map_err(|_| Error::InvalidSchedule {
                    conf: conf.to_string(),
                    reason: "FIX_RATE needs a whole number of seconds".into(),
                })?;
                if secs < 1 {
                    return Err(Error::InvalidSchedule {
                        conf: conf.to_string(),
                        reason: "FIX_RATE must be at least 1 second".into(),
                    });
                }
                Ok(Schedule::FixRate {
                    every_ms: secs * 1000,
                })
            }
        }
    }

    /// Parses a job's schedule from its stored strings, with its own zone when it has one.
    pub fn for_job(
        schedule_type: &str,
        conf: Option<&str>,
        job_zone: Option<&str>,
        default_zone: Tz,
    ) -> Result<Self> {
        let kind: ScheduleType = schedule_type.parse()?;
        let tz = match job_zone.map(str::trim).filter(|z| !z.is_empty()) {
            None => default_zone,
            Some(z) => z.parse().map_err(|_| Error::Invalid {
                field: "timeZone",
                reason: format!("`{z}` is not an IANA time zone name"),
            })?,
        };
        Schedule::parse(kind, conf, tz)
    }

    /// The next fire strictly after `from_ms`. `anchor_ms` fixes a FIX_RATE phase (any earlier or
    /// later fire time of the same job; pass `from_ms` when there is none).
    pub fn next_after(&self, from_ms: i64, anchor_ms: i64) -> Option<i64> {
        match self {
            Schedule::None => None,
            Schedule::Cron { expr, tz } => expr.next_after(from_ms, *tz),
            Schedule::FixRate { every_ms } => {
                let anchor_ms = (anchor_ms + 999).div_euclid(1000) * 1000;
                let k = (from_ms - anchor_ms).div_euclid(*every_ms) + 1;
                Some(anchor_ms + k * every_ms)
            }
        }
    }

    /// The first fire of a schedule started at `now_ms`: the next cron time, or one period
    /// after `now_ms` rounded up to the second for a fixed rate.
    pub fn first_after(&self, now_ms: i64) -> Option<i64> {
        match self {
            Schedule::FixRate { every_ms } => {
                Some((now_ms + 999).div_euclid(1000) * 1000 + every_ms)
            }
            _ => self.next_after(now_ms, now_ms),
        }
    }

    /// The next `n` fire times of a schedule started at `from_ms` (fewer if it ends).
    pub fn next_n(&self, from_ms: i64, n: usize) -> Vec<i64> {
        let mut out = Vec::with_capacity(n);
        let Some(first) = self.first_after(from_ms) else {
            return out;
        };
        out.push(first);
        let mut t = first;
        while out.len() < n {
            match self.next_after(t, first) {
                Some(next) => {
                    out.push(next);
                    t = next;
                }
                None => break,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FIX_RATE's next time keeps the phase of the first time, not of when it is asked.
    #[test]
    fn fix_rate_keeps_phase() {
        let s = Schedule::parse(ScheduleType::FixRate, Some("10"), chrono_tz::UTC).expect("ok");
        // anchor 5_000: fires at 5s, 15s, 25s …
        assert_eq!(s.next_after(0, 5_000), Some(5_000));
        assert_eq!(s.next_after(5_000, 5_000), Some(15_000));
        assert_eq!(s.next_after(123_456, 5_000), Some(125_000));
        assert_eq!(s.next_n(0, 3), vec![10_000, 20_000, 30_000]);
        // an anchor off the second is rounded up to it
        assert_eq!(s.next_after(1_234, 1_234), Some(2_000));
        assert_eq!(s.first_after(1_234), Some(12_000));
        assert_eq!(s.next_n(1_234, 2), vec![12_000, 22_000]);
    }

    /// An invalid schedule configuration is an error naming the schedule field.
    #[test]
    fn bad_confs_are_named() {
        let e = Schedule::parse(ScheduleType::FixRate, Some("0"), chrono_tz::UTC).unwrap_err();
        assert!(e.to_string().contains("at least 1"), "{e}");
        let e = Schedule::parse(ScheduleType::Cron, Some("0 0 1 15 * 2"), chrono_tz::UTC)
            .unwrap_err()
            .to_string();
        assert!(e.contains("day-of-week") && e.contains("`?`"), "{e}");
        let e = Schedule::for_job(
            "CRON",
            Some("* * * * * ?"),
            Some("Nowhere/X"),
            chrono_tz::UTC,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("timeZone"), "{e}");
        assert_eq!(
            Schedule::parse(ScheduleType::None, None, chrono_tz::UTC)
                .expect("none")
                .next_after(0, 0),
            None
        );
    }
}
