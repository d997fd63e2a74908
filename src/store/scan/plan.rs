//! What a scan pass plans, whichever backend records it: the due jobs' fires through the
//! pre-read window with their misfire policy ([`plan_due`]), how far ahead a job is read
//! ([`due_horizon`]), and the caches a pass keeps between passes (parsed schedules, one shared
//! copy of each job definition for its fires).

use std::collections::{HashMap, HashSet};

use chrono_tz::Tz;

use super::ScanReport;
use crate::config::SchedulerConfig;
use crate::error::Result;
use crate::fire::PendingFire;
use crate::jobs::JobDef;
use crate::model::{MisfireStrategy, TriggerStatus};
use crate::schedule::Schedule;
use crate::schedule::plan::{ScheduleUpdate, Window, plan_job};

/// Parsed schedules by job id, with the (type, conf, zone) they were parsed from.
pub(super) type ScheduleCache = HashMap<i32, (String, Option<String>, Option<String>, Schedule)>;

/// Jobs as fires carry them, one shared copy per job definition.
pub(super) type JobArcs = HashMap<i32, std::sync::Arc<JobDef>>;

/// What a pass borrows from the actor and gives back.
#[derive(Default)]
pub(crate) struct ScanCache {
    pub(super) schedules: ScheduleCache,
    pub(super) jobs: JobArcs,
    /// For the single-node pass: each cached job's definition version (`update_time` as
    /// stored) and when it was read.
    pub(super) versions: HashMap<i32, (Option<chrono::NaiveDateTime>, i64)>,
}

/// The shared copy of `job` for fires: the one already held when its definition is unchanged
/// (fires of every pass in the ring then share one copy per job instead of one per pass).
pub(super) fn shared_job(
    cache: &mut JobArcs,
    job: entity::xxl_job_info::Model,
) -> std::sync::Arc<JobDef> {
    if let Some(old) = cache.get(&job.id) {
        let mut same = job.clone();
        same.trigger_status = old.trigger_status;
        same.trigger_last_time = old.trigger_last_time;
        same.trigger_next_time = old.trigger_next_time;
        if *old.row() == same {
            return old.clone();
        }
    }
    if cache.len() > 1_000_000 {
        cache.clear();
    }
    let a = std::sync::Arc::new(JobDef::new(job));
    cache.insert(a.id, a.clone());
    a
}

/// Plans every due job of a pass at `now`: the fires to record and each job's new schedule
/// state (a job whose schedule is invalid or ended is stopped); counts into `report`. Jobs in
/// `compensated` already had their FIRE_ONCE_NOW fire this pass (from a recovered fire).
pub(super) fn plan_due<'a>(
    due: impl ExactSizeIterator<Item = (&'a JobDef, i64, i64)>,
    now: i64,
    cfg: &SchedulerConfig,
    compensated: &HashSet<i32>,
    cap_of: &dyn Fn(i32) -> Option<i64>,
    schedule_of: &mut dyn FnMut(&entity::xxl_job_info::Model) -> Result<Schedule>,
    report: &mut ScanReport,
) -> (Vec<PendingFire>, Vec<ScheduleUpdate>) {
    let full = Window::of(cfg, now);
    let mut pending = Vec::new();
    let mut updates = Vec::with_capacity(due.len());
    // each job with its schedule state as read now (last, next fire)
    for (job, last, next) in due {
        let schedule = match schedule_of(job) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(job_id = job.id, error = %e, "job stopped: its schedule is invalid");
                report.stopped += 1;
                updates.push(ScheduleUpdate {
                    id: job.id,
                    last: 0,
                    next: 0,
                    status: TriggerStatus::Stopped.code(),
                });
                continue;
            }
        };
        let misfire = if compensated.contains(&job.id) {
            MisfireStrategy::DoNothing
        } else {
            job.misfire
        };
        // a bucket being handed back gets fires up to its cutoff only
        let window = match cap_of(job.id) {
            Some(cap) => Window {
                ahead_ms: full.ahead_ms.min(cap - now),
                ..full
            },
            None => full,
        };
        let plan = plan_job(job.id, next, last, &schedule, misfire, &window);
        if plan.misfired > 0 {
            // one line per job only at debug: a node far behind misfires every job at once
            tracing::debug!(job_id = job.id, next, "misfire: skipped by DO_NOTHING");
        }
        if plan.update.status == 0 {
            tracing::warn!(
                job_id = job.id,
                "job stopped: its schedule has no next fire time"
            );
            report.stopped += 1;
        }
        report.misfired += plan.misfired;
        pending.extend(plan.fires.iter().map(|&(t, tt)| PendingFire {
            job_id: job.id,
            job_group: job.job_group,
            fire_time: t,
            trigger_type: tt,
        }));
        updates.push(plan.update);
    }
    (pending, updates)
}

/// How far ahead of now a job must next fire for a pass to read it: half the pre-read window
/// (at least 2 s, at most the window). A pass records each read job's fires through the whole
/// window, so a job firing every second is read and its schedule row written about once per
/// half window (2–3 fires per read at XXL-JOB's 5 s) instead of once per fire, and every fire
/// is still recorded seconds before it is due.
pub(super) fn due_horizon(cfg: &SchedulerConfig) -> i64 {
    (cfg.pre_read_ms / 2).max(cfg.pre_read_ms.min(2_000))
}

pub(super) fn cached_schedule(
    cache: &mut ScheduleCache,
    job: &entity::xxl_job_info::Model,
    tz: Tz,
) -> Result<Schedule> {
    if let Some((t, c, z, s)) = cache.get(&job.id)
        && *t == job.schedule_type
        && *c == job.schedule_conf
        && *z == job.time_zone
    {
        return Ok(s.clone());
    }
    let s = Schedule::for_job(
        &job.schedule_type,
        job.schedule_conf.as_deref(),
        job.time_zone.as_deref(),
        tz,
    )?;
    if cache.len() > 1_000_000 {
        cache.clear();
    }
    cache.insert(
        job.id,
        (
            job.schedule_type.clone(),
            job.schedule_conf.clone(),
            job.time_zone.clone(),
            s.clone(),
        ),
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fires of successive passes share one copy of a job until its definition changes.
    #[test]
    fn fires_share_a_job_until_its_definition_changes() {
        let now = chrono::NaiveDate::from_ymd_opt(2026, 11, 23)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .expect("date");
        let mut job = crate::JobSpec::cron(1, "j", "* * * * * ?", "h")
            .validate(chrono_tz::UTC, now)
            .expect("job");
        job.id = 7;
        let mut cache = JobArcs::new();
        let a = shared_job(&mut cache, job.clone());
        job.trigger_next_time += 5_000;
        job.trigger_last_time += 5_000;
        let b = shared_job(&mut cache, job.clone());
        assert!(
            std::sync::Arc::ptr_eq(&a, &b),
            "only the schedule state moved"
        );
        job.executor_handler = Some("other".into());
        let c = shared_job(&mut cache, job);
        assert!(
            !std::sync::Arc::ptr_eq(&a, &c),
            "an edited job is a new copy"
        );
        assert_eq!(c.executor_handler.as_deref(), Some("other"));
    }
}
