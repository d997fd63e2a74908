//! A scan page, written once for both connections: reads the jobs due within the pre-read
//! window, plans their fires with each job's misfire policy ([`plan_due`]), and advances their
//! schedules, in the caller's transaction on the store port. The one thing a caller does its own
//! way is recording the planned fires: in the writer's journal on a SQLite file
//! ([`super::file`]), as pending run rows through the pool ([`super::pool`]).

use std::collections::HashSet;
use std::sync::Arc;

use chrono_tz::Tz;

use super::ScanReport;
use super::plan::{ScanCache, cached_schedule, due_horizon, plan_due, shared_job};
use crate::config::SchedulerConfig;
use crate::directory::Directory;
use crate::error::Result;
use crate::fire::PendingFire;
use crate::jobs::JobDef;
use crate::ownership::ScanSet;
use crate::store::jobs;
use crate::store::port::Port;

/// Which jobs a page reads, and under what settings.
pub(super) struct PageOf<'a> {
    /// The pass's now (epoch ms).
    pub(super) now: i64,
    pub(super) cfg: &'a SchedulerConfig,
    /// The default time zone of schedules.
    pub(super) tz: Tz,
    pub(super) directory: &'a Directory,
    /// The database is this node's alone (a SQLite file it holds the lock of): a job's
    /// definition is read again only when its version changed or this node's console edited
    /// it, and pages go by id (jobs after `after_id`).
    pub(super) exclusive: bool,
    pub(super) after_id: i32,
    /// Most jobs read.
    pub(super) limit: u64,
    /// The buckets scanned on a shared database (`None`: every job).
    pub(super) set: Option<&'a ScanSet>,
    /// Jobs whose missed fires this pass already compensated.
    pub(super) compensated: &'a HashSet<i32>,
}

/// What a page planned.
pub(super) struct Planned {
    /// The fires to record, in nominal-time order.
    pub(super) pending: Vec<PendingFire>,
    /// The last job id of a full exclusive page (there may be more), else `None`.
    pub(super) next_after: Option<i32>,
}

/// One page in `p`'s transaction (see the module docs): the due jobs' fires planned and their
/// schedules advanced; each planned fire's job is in `cache.jobs`.
pub(super) async fn due_page(
    p: &Port<'_>,
    of: &PageOf<'_>,
    cache: &mut ScanCache,
    report: &mut ScanReport,
) -> Result<Planned> {
    let max_next = of.now + due_horizon(of.cfg);
    let mut next_after = None;
    // each job with its schedule state as read now (last, next fire)
    let mut due: Vec<(Arc<JobDef>, i64, i64)> = Vec::new();
    if of.exclusive {
        let rows = jobs::due_rows(p, max_next, of.after_id, of.limit).await?;
        report.jobs += rows.len();
        if rows.len() as u64 == of.limit && of.limit > 0 {
            next_after = rows.last().map(|r| r.id);
        }
        if cache.jobs.len() > 1_000_000 {
            cache.jobs.clear();
            cache.versions.clear();
        }
        for r in rows {
            let known = cache.versions.get(&r.id).is_some_and(|(v, read)| {
                *v == r.version && !of.directory.edited_since(r.id, *read)
            });
            let job = match cache.jobs.get(&r.id).filter(|_| known) {
                Some(j) => j.clone(),
                None => {
                    let Some(job) = jobs::by_id(p, r.id).await? else {
                        continue;
                    };
                    let version = job.update_time;
                    let job = Arc::new(JobDef::new(job));
                    cache.jobs.insert(r.id, job.clone());
                    cache.versions.insert(r.id, (version, of.now));
                    job
                }
            };
            due.push((job, r.last, r.next));
        }
    } else {
        let buckets = of.set.map(ScanSet::buckets).unwrap_or_default();
        // definitions shared with the fires of earlier passes while they are unchanged
        for j in jobs::due_in(p, max_next, of.limit, &buckets).await? {
            let (last, next) = (j.trigger_last_time, j.trigger_next_time);
            due.push((shared_job(&mut cache.jobs, j), last, next));
        }
        report.jobs += due.len();
    }
    let tz = of.tz;
    let (mut pending, updates) = plan_due(
        due.iter().map(|(j, last, next)| (&**j, *last, *next)),
        of.now,
        of.cfg,
        of.compensated,
        &|job_id| of.set.and_then(|s| s.cap_of(job_id)),
        &mut |job| cached_schedule(&mut cache.schedules, job, tz),
        report,
    );
    // log ids in nominal-time order, not job by job through the window: a second's rows are
    // then written at neighbouring ids (near the table's end) instead of every few ids across
    // the window, which split leaf pages and put three times the pages in each commit
    // (BENCHMARKS.md, 2026-11-28, d27a0ab: WAL frames -23 %, the writer's CPU -14 %)
    pending.sort_unstable_by_key(|f| (f.fire_time, f.job_id));
    jobs::update_schedules(p, &updates).await?;
    Ok(Planned {
        pending,
        next_after,
    })
}
