//! The scan's pure planner (protocol.md §7.2, made lossless): from a job's schedule state, its
//! schedule and misfire policy, and the pass's [`Window`], which fires to record and the job's
//! new schedule state. No I/O; the scan actor reads the jobs and writes what this decides.

use super::Schedule;
use crate::config::SchedulerConfig;
use crate::model::{MisfireStrategy, TriggerStatus, TriggerType};

/// A job's schedule state as a pass leaves it (`trigger_last_time`, `trigger_next_time`,
/// `trigger_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleUpdate {
    /// Job id.
    pub id: i32,
    /// New `trigger_last_time`.
    pub last: i64,
    /// New `trigger_next_time`.
    pub next: i64,
    /// New `trigger_status` (0 when the pass stopped the job).
    pub status: i16,
}

/// The time window one pass plans in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The pass's now (epoch ms).
    pub now: i64,
    /// Fires up to `now + ahead_ms` are recorded (the pre-read window).
    pub ahead_ms: i64,
    /// A next time more than this before `now` is a misfire.
    pub misfire_ms: i64,
    /// At most this many fires per job and pass.
    pub max_fires: usize,
}

impl Window {
    /// The window of a pass at `now` under `cfg`.
    pub fn of(cfg: &SchedulerConfig, now: i64) -> Self {
        Window {
            now,
            ahead_ms: cfg.pre_read_ms,
            misfire_ms: cfg.misfire_threshold_ms,
            max_fires: cfg.max_fires_per_job_scan,
        }
    }
}

/// What a pass decides for one job (see [`plan_job`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobPlan {
    /// Fires to record: nominal time and type.
    pub fires: Vec<(i64, TriggerType)>,
    /// Fires skipped by the misfire policy (nominal times not recorded).
    pub misfired: usize,
    /// The job's new last / next / status.
    pub update: ScheduleUpdate,
}

/// Decides one job's fires in `window`: a next time later than the misfire threshold is a
/// misfire (FIRE_ONCE_NOW records one MISFIRE fire at that nominal time, DO_NOTHING none) and
/// the schedule resumes after now; every other fire up to `now + ahead_ms` is recorded,
/// including those slightly in the past, which fire at once. A schedule without a next time
/// stops the job (status 0).
pub fn plan_job(
    job_id: i32,
    next: i64,
    last: i64,
    schedule: &Schedule,
    misfire: MisfireStrategy,
    window: &Window,
) -> JobPlan {
    let now = window.now;
    let mut fires = Vec::new();
    let mut misfired = 0;
    let mut last = last;
    let mut next_opt = Some(next);
    if now > next + window.misfire_ms {
        match misfire {
            MisfireStrategy::FireOnceNow => fires.push((next, TriggerType::Misfire)),
            MisfireStrategy::DoNothing => misfired += 1,
        }
        last = next;
        next_opt = schedule.next_after(now, next);
    }
    while let Some(n) = next_opt {
        if n > now + window.ahead_ms || fires.len() >= window.max_fires {
            break;
        }
        fires.push((n, TriggerType::Cron));
        last = n;
        next_opt = schedule.next_after(n, n);
    }
    let (next, status) = match next_opt {
        Some(n) => (n, TriggerStatus::Running.code()),
        None => (0, TriggerStatus::Stopped.code()),
    };
    JobPlan {
        fires,
        misfired,
        update: ScheduleUpdate {
            id: job_id,
            last,
            next,
            status,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ScheduleType;

    fn every_second() -> Schedule {
        Schedule::parse(ScheduleType::Cron, Some("* * * * * ?"), chrono_tz::UTC).expect("cron")
    }

    /// XXL-JOB's defaults: a 5 s window and threshold, at most 1,000 fires a pass.
    fn window(now: i64) -> Window {
        Window {
            now,
            ahead_ms: 5_000,
            misfire_ms: 5_000,
            max_fires: 1000,
        }
    }

    /// A next time 3 s late (within the threshold) fires, with everything up to 5 s ahead.
    #[test]
    fn upcoming_and_slightly_late_fires_are_all_recorded() {
        let s = every_second();
        let p = plan_job(
            1,
            97_000,
            96_000,
            &s,
            MisfireStrategy::DoNothing,
            &window(100_000),
        );
        let times: Vec<i64> = p.fires.iter().map(|f| f.0).collect();
        assert_eq!(times, (97..=105).map(|s| s * 1000).collect::<Vec<_>>());
        assert_eq!(
            p.update,
            ScheduleUpdate {
                id: 1,
                last: 105_000,
                next: 106_000,
                status: 1
            }
        );
    }

    /// Past the threshold, DO_NOTHING skips the missed time and FIRE_ONCE_NOW fires it once
    /// (as MISFIRE); both resume after now.
    #[test]
    fn misfire_policies() {
        let s = every_second();
        let p = plan_job(
            1,
            10_000,
            9_000,
            &s,
            MisfireStrategy::DoNothing,
            &window(100_000),
        );
        assert_eq!(p.misfired, 1);
        assert_eq!(
            p.fires.first().map(|f| f.0),
            Some(101_000),
            "resumes after now"
        );
        let p = plan_job(
            1,
            10_000,
            9_000,
            &s,
            MisfireStrategy::FireOnceNow,
            &window(100_000),
        );
        assert_eq!(p.fires[0], (10_000, TriggerType::Misfire));
        assert_eq!(p.fires[1].0, 101_000);
    }

    /// A cron with a last fire time fires it and stops the job.
    #[test]
    fn a_schedule_that_ends_stops_the_job() {
        let s = Schedule::parse(ScheduleType::Cron, Some("0 0 0 1 1 ? 2028"), chrono_tz::UTC)
            .expect("cron");
        let t = chrono::NaiveDate::from_ymd_opt(2028, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|d| d.and_utc().timestamp_millis())
            .expect("date");
        let p = plan_job(1, t, 0, &s, MisfireStrategy::DoNothing, &window(t - 1000));
        assert_eq!(p.fires, vec![(t, TriggerType::Cron)]);
        assert_eq!(p.update.status, 0);
        assert_eq!(p.update.next, 0);
    }

    /// The window caps the fires of one job per pass.
    #[test]
    fn the_window_caps_fires_per_job() {
        let s = every_second();
        let w = Window {
            max_fires: 3,
            ..window(100_000)
        };
        let p = plan_job(1, 100_000, 99_000, &s, MisfireStrategy::DoNothing, &w);
        assert_eq!(p.fires.len(), 3);
        assert_eq!(p.update.next, 103_000, "the next pass goes on from the cap");
    }
}
