//! ScanActor: the durable pre-read scan (spec §8.2).
//!
//! Once a second, aligned to the second boundary, one transaction over the buckets this node
//! schedules ([`Ownership`]: every one on SQLite, its leases on a shared database; no global
//! lock, so nodes scan at the same time): take over the fires of buckets just taken (or, on
//! one node, recover pending fires left by an earlier run); read the running jobs of those
//! buckets due within the pre-read window; for each, apply the misfire policy to fires later
//! than the threshold and record every other fire in the window as a pending log row; advance
//! `trigger_next_time` for all of them in one batched statement; on a shared database check in
//! the same transaction that every lease is still this node's at its epoch (fencing); commit.
//! Only then are the recorded fires pushed to the ring ([`PushRing`]), so a fire the ring holds
//! is always durable.
//!
//! Messages: [`ScanNow`] (run a pass now, for tests and tools), [`StopScan`].

use std::collections::{HashMap, HashSet};

use actix::prelude::*;
use chrono_tz::Tz;
use sea_orm::{DatabaseConnection, TransactionTrait};

use crate::activity::Activity;
use crate::actors::ring::PushRing;
use crate::actors::trigger_pool::Backlog;
use crate::clock::Clock;
use crate::config::SchedulerConfig;
use crate::directory::Directory;
use crate::error::Result;
use crate::jobs::JobDef;
use crate::metrics::Metrics;
use crate::model::{MisfireStrategy, TriggerStatus, TriggerType};
use crate::ownership::{Ownership, ScanSet};
use crate::schedule::Schedule;
use crate::schedule::plan::{ScheduleUpdate, Window, plan_job};
use crate::store::jobs;
use crate::store::leases::{self, Lease};
use crate::store::logs::{self, Fire, PendingFire};
use crate::store::writer::LogWriter;
use futures::future::LocalBoxFuture;

/// Parsed schedules by job id, with the (type, conf, zone) they were parsed from.
type ScheduleCache = HashMap<i32, (String, Option<String>, Option<String>, Schedule)>;

/// Jobs as fires carry them, one shared copy per job definition.
type JobArcs = HashMap<i32, std::sync::Arc<JobDef>>;

/// What a pass borrows from the actor and gives back.
#[derive(Default)]
struct ScanCache {
    schedules: ScheduleCache,
    jobs: JobArcs,
    /// For the single-node pass: each cached job's definition version (`update_time` as
    /// stored) and when it was read.
    versions: HashMap<i32, (Option<String>, i64)>,
}

/// The shared copy of `job` for fires: the one already held when its definition is unchanged
/// (fires of every pass in the ring then share one copy per job instead of one per pass).
fn shared_job(cache: &mut JobArcs, job: entity::xxl_job_info::Model) -> std::sync::Arc<JobDef> {
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

/// What a pass answers: its fires and report, and the schedule cache it borrowed.
type PassOutput = (Result<(Vec<Fire>, ScanReport)>, ScanCache);

/// Most stale pending fires one pass recovers.
pub(crate) const RECOVER_BATCH: u64 = 10_000;

/// Where in each second the scan runs: half a second away from the ring's tick at the whole
/// second, so the scan's write transaction never holds SQLite's write lock while the tick
/// claims the fires that are due. The pre-read window (5 s) leaves ample margin.
pub(crate) const SCAN_PHASE_MS: i64 = 500;

/// Runs one scan pass now and answers what it did.
#[derive(Message, Debug)]
#[rtype(result = "Result<ScanReport>")]
pub(crate) struct ScanNow;

/// Stops the scan loop; answers once no pass is in progress (a running pass finishes and
/// pushes its fires to the ring first, so nothing it recorded is held back).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct StopScan;

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanReport {
    /// Jobs read.
    pub jobs: usize,
    /// Fires recorded and pushed to the ring.
    pub fires: usize,
    /// Fires skipped by the misfire policy.
    pub misfired: usize,
    /// Pending fires recovered from the database.
    pub recovered: usize,
    /// Jobs stopped because their next time could not be computed.
    pub stopped: usize,
}

impl ScanReport {
    fn add(&mut self, o: &ScanReport) {
        self.jobs += o.jobs;
        self.fires += o.fires;
        self.misfired += o.misfired;
        self.recovered += o.recovered;
        self.stopped += o.stopped;
    }
}

/// Which stale pending fires a pass recovers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recovery {
    /// A single-node database: every pending fire recorded after start-up is this node's and is
    /// in its ring or lanes, so only the first pass recovers, and only what an earlier run left
    /// before `before` (fires after it were adopted into the ring at start-up).
    FirstPass {
        /// Nominal times at or before this (epoch ms) are recovered.
        before: i64,
    },
    /// Nothing left to recover.
    Done,
}

/// Plans every due job of a pass at `now`: the fires to record and each job's new schedule
/// state (a job whose schedule is invalid or ended is stopped); counts into `report`. Jobs in
/// `compensated` already had their FIRE_ONCE_NOW fire this pass (from a recovered fire).
fn plan_due<'a>(
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

/// A pass on the single-node SQLite writer's own connection (after the first pass, which
/// recovers through the pool): the same steps as the pooled pass without recovery, each
/// statement a cached single-row one. Answers the fires, the report and the groups read.
/// How far ahead of now a job must next fire for a pass to read it: half the pre-read window
/// (at least 2 s, at most the window). A pass records each read job's fires through the whole
/// window, so a job firing every second is read and its schedule row written about once per
/// half window (2–3 fires per read at XXL-JOB's 5 s) instead of once per fire, and every fire
/// is still recorded seconds before it is due.
fn due_horizon(cfg: &SchedulerConfig) -> i64 {
    (cfg.pre_read_ms / 2).max(cfg.pre_read_ms.min(2_000))
}

/// Jobs per page of a single-node pass: each page is one transaction on the writer's
/// connection, and the run-row writes queued meanwhile go between pages (a pass over many jobs
/// never holds the writer long enough to fill its queue and stall dispatch).
const SYNC_PAGE: u64 = 2_000;

/// One page of a single-node pass: jobs due with an id above `after_id`, at most `limit`.
/// The first page (`after_id` 0) also reads the groups and fails orphaned claims.
struct SyncPage {
    fires: Vec<Fire>,
    report: ScanReport,
    groups: Option<Vec<entity::xxl_job_group::Model>>,
    /// The last job id of a full page (there may be more), `None` when the pass is done.
    next_after: Option<i32>,
}

#[allow(clippy::too_many_arguments)]
fn pass_sync(
    conn: &mut rusqlite::Connection,
    now: i64,
    cfg: &SchedulerConfig,
    after_id: i32,
    limit: u64,
    cache: &mut ScanCache,
    directory: &Directory,
    tz: Tz,
) -> Result<SyncPage> {
    use crate::store::sqlite_sync as sync;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut report = ScanReport::default();
    let groups = if after_id == 0 {
        let orphans = sync::fail_orphaned_claims(&tx, now - cfg.claim_timeout_ms, now)?;
        if orphans > 0 {
            tracing::warn!(
                orphans,
                "fires claimed by a node that stopped mid-dispatch recorded as failed"
            );
        }
        Some(sync::groups(&tx)?)
    } else {
        None
    };
    // the schedule state of the due jobs; a job's whole definition is read again only when
    // its version changed or this node's console edited it since
    let rows = sync::due_rows(&tx, now + due_horizon(cfg), after_id, limit)?;
    report.jobs = rows.len();
    let next_after = (rows.len() as u64 == limit && limit > 0)
        .then(|| rows.last().map(|r| r.id))
        .flatten();
    if cache.jobs.len() > 1_000_000 {
        cache.jobs.clear();
        cache.versions.clear();
    }
    let mut due = Vec::with_capacity(rows.len());
    for r in rows {
        let known = cache
            .versions
            .get(&r.id)
            .is_some_and(|(v, read)| *v == r.version && !directory.edited_since(r.id, *read));
        let job = match cache.jobs.get(&r.id).filter(|_| known) {
            Some(j) => j.clone(),
            None => {
                let Some((job, version)) = sync::job_by_id(&tx, r.id)? else {
                    continue;
                };
                let job = std::sync::Arc::new(JobDef::new(job));
                cache.jobs.insert(r.id, job.clone());
                cache.versions.insert(r.id, (version, now));
                job
            }
        };
        due.push((job, r.last, r.next));
    }
    let (pending, updates) = plan_due(
        due.iter().map(|(j, last, next)| (&**j, *last, *next)),
        now,
        cfg,
        &HashSet::new(),
        &|_| None,
        &mut |job| cached_schedule(&mut cache.schedules, job, tz),
        &mut report,
    );
    let jobs = &cache.jobs;
    let fires = sync::insert_pending(&tx, &pending, |id| jobs.get(&id).cloned(), now)?;
    sync::update_schedules(&tx, &updates)?;
    tx.commit()?;
    report.fires = fires.len();
    Ok(SyncPage {
        fires,
        report,
        groups,
        next_after,
    })
}

/// The scan.
pub(crate) struct ScanActor {
    db: DatabaseConnection,
    clock: Clock,
    cfg: SchedulerConfig,
    tz: Tz,
    pre_read_count: u64,
    ring: Recipient<PushRing>,
    activity: Activity,
    metrics: Metrics,
    cache: ScanCache,
    directory: Directory,
    recovery: Recovery,
    /// The single-node SQLite writer, whose connection runs the passes after the first.
    writer: Option<LogWriter>,
    /// Fires due but not yet on a lane: no new fires are recorded while it is over the limit.
    backlog: Backlog,
    /// The buckets this node schedules (every one on SQLite; its leases on a shared database).
    ownership: Ownership,
    /// This node's id in the lease table.
    node: String,
    stopped: bool,
    running: bool,
    /// A loop pass came due while another pass ran: the loop goes on when it ends.
    loop_due: bool,
    /// [`ScanNow`] callers waiting for a pass.
    now_waiters: Vec<tokio::sync::oneshot::Sender<Result<ScanReport>>>,
    /// [`StopScan`] callers waiting for the pass in progress.
    stop_waiters: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl ScanActor {
    /// A scan over `db` pushing to `ring`, refreshing `directory`'s groups every pass.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        db: DatabaseConnection,
        clock: Clock,
        cfg: SchedulerConfig,
        pre_read_count: u64,
        ring: Recipient<PushRing>,
        activity: Activity,
        metrics: Metrics,
        directory: Directory,
        recovery: Recovery,
        writer: Option<LogWriter>,
        backlog: Backlog,
        ownership: Ownership,
        node: String,
    ) -> Self {
        let tz = cfg.time_zone.parse().unwrap_or(chrono_tz::UTC);
        ScanActor {
            db,
            clock,
            cfg,
            tz,
            pre_read_count,
            ring,
            activity,
            metrics,
            cache: ScanCache::default(),
            directory,
            recovery,
            writer,
            backlog,
            ownership,
            node,
            stopped: false,
            running: false,
            loop_due: false,
            now_waiters: Vec::new(),
            stop_waiters: Vec::new(),
        }
    }

    /// One pass in one transaction, as named steps: refresh the groups; take over the fires of
    /// buckets just taken ([`Self::take_over`]) or, without leases, [`Self::recover_stale`];
    /// fail orphaned claims; [`Self::record_due`] for the pass's buckets; on a shared database
    /// check that this node still holds every lease of the pass ([`leases::fence`]); commit.
    /// No global lock: nodes scan their own buckets at the same time. Answers the fires to push
    /// (taken-over ones first) and a report.
    #[allow(clippy::too_many_arguments)]
    async fn pass(
        db: DatabaseConnection,
        clock: Clock,
        cfg: SchedulerConfig,
        pre_read_count: u64,
        directory: &Directory,
        recovery: Recovery,
        set: &ScanSet,
        node: &str,
        jobs: &mut JobArcs,
        mut schedule_of: impl FnMut(&entity::xxl_job_info::Model) -> Result<Schedule>,
    ) -> Result<(Vec<Fire>, ScanReport)> {
        let txn = db.begin().await?;
        let now = clock.now_ms();
        let mut report = ScanReport::default();
        directory.set_groups(crate::store::groups::all(&txn).await?);
        if set.is_empty() && set.takeovers.is_empty() {
            txn.commit().await?;
            return Ok((Vec::new(), report));
        }
        let (mut to_ring, compensated) = if set.all {
            Self::recover_stale(&txn, now, &cfg, recovery, &mut report).await?
        } else {
            Self::take_over(&txn, now, &cfg, &set.takeovers, &mut report).await?
        };
        Self::fail_orphaned_claims(&txn, now, &cfg).await?;
        let recorded = Self::record_due(
            &txn,
            now,
            &cfg,
            pre_read_count,
            &compensated,
            set,
            jobs,
            &mut schedule_of,
            &mut report,
        )
        .await?;
        to_ring.extend(recorded);
        if !set.all {
            let mut all: Vec<Lease> = set.leases.clone();
            all.extend(set.takeovers.iter().map(|(l, _)| *l));
            all.sort();
            all.dedup();
            if !leases::fence(&txn, node, &all).await? {
                // rolled back (the transaction is dropped): nothing of this pass is recorded
                return Err(crate::Error::LeaseLost);
            }
        }
        txn.commit().await?;
        report.fires = to_ring.len();
        Ok((to_ring, report))
    }

    /// Takes over the fires the previous holders of buckets just taken recorded: those at or
    /// before a bucket's dispatch mark may have been sent, so they are handed over (never sent
    /// again; recorded as failed unless their outcome arrives); the later ones were never sent
    /// and go to the ring under the new lease, or get their job's misfire policy when later
    /// than the threshold. Answers the fires and the jobs whose FIRE_ONCE_NOW compensation this
    /// made.
    async fn take_over(
        txn: &sea_orm::DatabaseTransaction,
        now: i64,
        cfg: &SchedulerConfig,
        takeovers: &[(Lease, i64)],
        report: &mut ScanReport,
    ) -> Result<(Vec<Fire>, HashSet<i32>)> {
        if takeovers.is_empty() {
            return Ok((Vec::new(), HashSet::new()));
        }
        let marks: HashMap<i32, (i64, i64)> = takeovers
            .iter()
            .map(|(l, through)| (l.bucket, (l.epoch, *through)))
            .collect();
        let buckets: Vec<i32> = marks.keys().copied().collect();
        let pending = logs::pending_in_buckets(txn, &buckets).await?;
        let mut handed = Vec::new();
        let mut fresh = Vec::new();
        for mut f in pending {
            let Some(&(epoch, through)) = marks.get(&crate::store::leases::bucket_of(f.job_id))
            else {
                continue;
            };
            if f.fire_time <= through {
                handed.push(f.log_id);
            } else {
                f.epoch = epoch;
                fresh.push(f);
            }
        }
        if !handed.is_empty() {
            let n = logs::hand_over(txn, &handed).await?;
            tracing::warn!(
                fires = n,
                "fires a previous holder may have sent are not sent again; recorded as failed unless their outcome arrives"
            );
        }
        let (late, on_time): (Vec<Fire>, Vec<Fire>) = fresh
            .into_iter()
            .partition(|f| now > f.fire_time + cfg.misfire_threshold_ms);
        report.recovered += on_time.len();
        let mut to_ring = on_time;
        let mut compensated = HashSet::new();
        if !late.is_empty() {
            let (fire, skip) = Self::misfire_recovered(txn, late).await?;
            compensated.extend(fire.iter().map(|f| f.job_id));
            report.recovered += fire.len();
            report.misfired += skip.len();
            logs::delete_pending(txn, &skip.iter().map(|f| f.log_id).collect::<Vec<_>>()).await?;
            to_ring.extend(fire);
        }
        if !to_ring.is_empty() {
            tracing::info!(
                fires = to_ring.len(),
                buckets = buckets.len(),
                "fires of buckets taken over go out from this node"
            );
        }
        Ok((to_ring, compensated))
    }

    /// Pending fires whose node should have dispatched them by now (per `recovery`): those
    /// within the misfire threshold go to the ring again, later ones get their job's misfire
    /// policy. Answers the fires and the jobs whose FIRE_ONCE_NOW compensation this made.
    async fn recover_stale(
        txn: &sea_orm::DatabaseTransaction,
        now: i64,
        cfg: &SchedulerConfig,
        recovery: Recovery,
        report: &mut ScanReport,
    ) -> Result<(Vec<Fire>, HashSet<i32>)> {
        let mut to_ring = Vec::new();
        let mut compensated = HashSet::new();
        let recover_before = match recovery {
            Recovery::FirstPass { before } => Some(before.min(now - cfg.recover_after_ms)),
            Recovery::Done => None,
        };
        let stale = match recover_before {
            Some(before) => logs::stale_pending(txn, before, RECOVER_BATCH).await?,
            None => Vec::new(),
        };
        if stale.is_empty() {
            return Ok((to_ring, compensated));
        }
        let (late, on_time): (Vec<Fire>, Vec<Fire>) = stale
            .into_iter()
            .partition(|f| now > f.fire_time + cfg.misfire_threshold_ms);
        report.recovered += on_time.len();
        to_ring.extend(on_time);
        if !late.is_empty() {
            let (fire, skip) = Self::misfire_recovered(txn, late).await?;
            compensated.extend(fire.iter().map(|f| f.job_id));
            report.recovered += fire.len();
            report.misfired += skip.len();
            for f in &skip {
                tracing::warn!(
                    job_id = f.job_id,
                    fire_time = f.fire_time,
                    "recovered fire is past the misfire threshold; skipped"
                );
            }
            logs::delete_pending(txn, &skip.iter().map(|f| f.log_id).collect::<Vec<_>>()).await?;
            to_ring.extend(fire);
        }
        Ok((to_ring, compensated))
    }

    /// Fires claimed by a node that died before recording them: failed, not lost.
    async fn fail_orphaned_claims(
        txn: &sea_orm::DatabaseTransaction,
        now: i64,
        cfg: &SchedulerConfig,
    ) -> Result<()> {
        let orphans = logs::fail_orphaned_claims(txn, now - cfg.claim_timeout_ms, now).await?;
        if orphans > 0 {
            tracing::warn!(
                orphans,
                "fires claimed by a node that stopped mid-dispatch recorded as failed"
            );
        }
        Ok(())
    }

    /// Jobs due within the window: plans their fires ([`plan_due`]), records them as pending
    /// rows and advances each job's schedule. Answers the recorded fires, each carrying its
    /// job as read now (shared), so dispatch reads nothing.
    #[allow(clippy::too_many_arguments)]
    async fn record_due(
        txn: &sea_orm::DatabaseTransaction,
        now: i64,
        cfg: &SchedulerConfig,
        pre_read_count: u64,
        compensated: &HashSet<i32>,
        set: &ScanSet,
        jobs: &mut JobArcs,
        schedule_of: &mut dyn FnMut(&entity::xxl_job_info::Model) -> Result<Schedule>,
        report: &mut ScanReport,
    ) -> Result<Vec<Fire>> {
        if set.is_empty() {
            return Ok(Vec::new());
        }
        // each job with its schedule state as read now; its definition shared with the fires
        // of earlier passes while it is unchanged
        let due: Vec<(std::sync::Arc<JobDef>, i64, i64)> =
            jobs::due(txn, now + due_horizon(cfg), pre_read_count, &set.buckets())
                .await?
                .into_iter()
                .map(|j| {
                    let (last, next) = (j.trigger_last_time, j.trigger_next_time);
                    (shared_job(jobs, j), last, next)
                })
                .collect();
        report.jobs = due.len();
        let (pending, updates) = plan_due(
            due.iter().map(|(j, last, next)| (&**j, *last, *next)),
            now,
            cfg,
            compensated,
            &|job_id| set.cap_of(job_id),
            schedule_of,
            report,
        );
        let mut fires = Vec::new();
        if !pending.is_empty() {
            let recorded = logs::record_pending(txn, &pending).await?;
            let models: JobArcs = due.into_iter().map(|(j, _, _)| (j.id, j)).collect();
            fires.extend(recorded.into_iter().map(|mut f| {
                f.job = models.get(&f.job_id).cloned();
                f.read_ms = now;
                f.epoch = set.epoch_of(f.job_id);
                f
            }));
        }
        jobs::update_schedules(txn, &updates).await?;
        Ok(fires)
    }

    /// Applies each job's misfire policy to recovered fires later than the threshold: the newest
    /// of a FIRE_ONCE_NOW job fires (as MISFIRE), the rest are skipped.
    async fn misfire_recovered(
        txn: &sea_orm::DatabaseTransaction,
        late: Vec<Fire>,
    ) -> Result<(Vec<Fire>, Vec<Fire>)> {
        let mut by_job: HashMap<i32, Vec<Fire>> = HashMap::new();
        for f in late {
            by_job.entry(f.job_id).or_default().push(f);
        }
        let (mut fire, mut skip) = (Vec::new(), Vec::new());
        for (job_id, mut fs) in by_job {
            let policy = match jobs::get(txn, job_id).await {
                Ok(j) => j
                    .misfire_strategy
                    .parse()
                    .unwrap_or(MisfireStrategy::DoNothing),
                Err(crate::Error::JobNotFound { .. }) => MisfireStrategy::DoNothing,
                Err(e) => return Err(e),
            };
            fs.sort_by_key(|f| f.fire_time);
            if policy == MisfireStrategy::FireOnceNow
                && let Some(mut newest) = fs.pop()
            {
                newest.trigger_type = TriggerType::Misfire;
                fire.push(newest);
            }
            skip.extend(fs);
        }
        Ok((fire, skip))
    }

    /// The recovery the next pass makes; a single node's one-time recovery is handed to exactly
    /// one pass (two passes recovering the same fires would dispatch them twice).
    fn take_recovery(&mut self) -> Recovery {
        let r = self.recovery;
        if matches!(r, Recovery::FirstPass { .. }) {
            self.recovery = Recovery::Done;
        }
        r
    }

    /// Gives a failed pass's one-time recovery back to the next pass.
    fn restore_recovery(&mut self, r: Recovery) {
        if matches!(r, Recovery::FirstPass { .. }) {
            self.recovery = r;
        }
    }

    /// One pass, as a future answering its outcome and the schedule cache it borrowed: on the
    /// single-node SQLite writer's connection once recovery is done, else through the pool.
    fn pass_future(&mut self) -> (Recovery, LocalBoxFuture<'static, PassOutput>) {
        // back-pressure: while dispatch trails by more than a pass's worth of fires, record
        // none (jobs wait, later the misfire policy applies), so memory stays bounded
        let limit = self.pre_read_count as usize;
        let behind = self.backlog.get();
        let n = if behind > limit {
            tracing::warn!(
                behind,
                limit,
                "dispatch is behind; this scan pass records no fires"
            );
            0
        } else {
            self.pre_read_count
        };
        let (db, clock, cfg, tz) = (
            self.db.clone(),
            self.clock.clone(),
            self.cfg.clone(),
            self.tz,
        );
        let mut cache = std::mem::take(&mut self.cache);
        let (directory, recovery) = (self.directory.clone(), self.take_recovery());
        if let (Some(writer), Recovery::Done) = (self.writer.clone(), recovery) {
            let now = clock.now_ms();
            let ring = self.ring.clone();
            return (
                recovery,
                Box::pin(async move {
                    // page by page; each page's fires go to the ring as soon as it is written
                    let mut total = ScanReport::default();
                    let (mut after, mut left) = (0, n);
                    loop {
                        let (dir, cfg) = (directory.clone(), cfg.clone());
                        let limit = left.min(SYNC_PAGE);
                        let out = writer
                            .exec(move |conn| {
                                let r =
                                    pass_sync(conn, now, &cfg, after, limit, &mut cache, &dir, tz);
                                (r, cache)
                            })
                            .await;
                        let page = match out {
                            Ok((Ok(page), c)) => {
                                cache = c;
                                page
                            }
                            Ok((Err(e), c)) => return (Err(e), c),
                            Err(e) => return (Err(e), ScanCache::default()),
                        };
                        if let Some(groups) = page.groups {
                            directory.set_groups(groups);
                        }
                        total.add(&page.report);
                        if !page.fires.is_empty() {
                            ring.do_send(PushRing(page.fires));
                        }
                        left -= page.report.jobs as u64;
                        match page.next_after {
                            Some(id) if left > 0 => after = id,
                            _ => break,
                        }
                    }
                    (Ok((Vec::new(), total)), cache)
                }),
            );
        }
        let set = self
            .ownership
            .scan_set(std::time::Instant::now(), self.clock.now_ms());
        let (node, ownership) = (self.node.clone(), self.ownership.clone());
        (
            recovery,
            Box::pin(async move {
                let res = Self::pass(
                    db,
                    clock,
                    cfg,
                    n,
                    &directory,
                    recovery,
                    &set,
                    &node,
                    &mut cache.jobs,
                    |job| cached_schedule(&mut cache.schedules, job, tz),
                )
                .await;
                if res.is_ok() {
                    ownership.took_over(&set.takeovers);
                }
                (res, cache)
            }),
        )
    }

    /// Runs one pass unless one is running (passes never overlap: two at once would take
    /// over the same bucket's fires twice). `reschedule`: the loop's pass, which schedules the
    /// next one; a loop pass due while another runs is scheduled when that one ends. The
    /// [`ScanNow`] callers waiting when the pass starts get its report; those that came later,
    /// the next pass's, run right after.
    fn run_pass(&mut self, ctx: &mut Context<Self>, reschedule: bool) {
        if self.running {
            self.loop_due |= reschedule;
            return;
        }
        self.running = true;
        let waiters = std::mem::take(&mut self.now_waiters);
        let clock = self.clock.clone();
        let (recovery, pass) = self.pass_future();
        let guard = self.activity.enter();
        ctx.spawn(
            async move {
                let _guard = guard;
                let started = clock.now_ms();
                let wall = std::time::Instant::now();
                let (res, cache) = pass.await;
                let wall_us = wall.elapsed().as_micros() as u64;
                (res, cache, clock.now_ms() - started, wall_us)
            }
            .into_actor(self)
            .map(move |(res, cache, took, wall_us), act, ctx| {
                act.metrics.scan_pass(wall_us);
                act.running = false;
                let report = act.finish(recovery, res, cache, took);
                if let Err(e) = &report {
                    tracing::error!(error = %e, "scan pass failed; retrying next second");
                }
                let mut report = Some(report);
                for w in waiters {
                    let r = report.take().unwrap_or_else(|| {
                        Err(crate::Error::Stopped(
                            "scan pass failed (see the first caller)",
                        ))
                    });
                    let again = match &r {
                        Ok(rep) => Ok(rep.clone()),
                        Err(_) => Err(crate::Error::Stopped("scan pass failed")),
                    };
                    let _ = w.send(r);
                    report = Some(again);
                }
                let reschedule = reschedule || std::mem::take(&mut act.loop_due);
                if !act.now_waiters.is_empty() {
                    act.run_pass(ctx, false);
                }
                if reschedule && !act.stopped {
                    let delay = if took >= 1000 {
                        std::time::Duration::ZERO
                    } else {
                        act.clock.until_phase(SCAN_PHASE_MS)
                    };
                    ctx.run_later(delay, |a, ctx| a.run_pass(ctx, true));
                }
                for w in act.stop_waiters.drain(..) {
                    let _ = w.send(());
                }
            }),
        );
    }

    /// What every pass ends with, the loop's and [`ScanNow`]'s: takes the cache back, keeps
    /// the recovery for the next pass if this one failed, pushes the recorded fires to the
    /// ring and counts them; answers the report.
    fn finish(
        &mut self,
        recovery: Recovery,
        res: Result<(Vec<Fire>, ScanReport)>,
        cache: ScanCache,
        took_ms: i64,
    ) -> Result<ScanReport> {
        self.cache = cache;
        if res.is_err() {
            self.restore_recovery(recovery);
        }
        let (fires, report) = res?;
        self.metrics.scanned(report.fires, report.misfired);
        if !fires.is_empty() {
            self.ring.do_send(PushRing(fires));
        }
        if report.misfired > 0 {
            tracing::warn!(
                misfired = report.misfired,
                "misfire: fires later than the threshold skipped by DO_NOTHING this pass"
            );
        }
        if report.jobs > 0 || report.recovered > 0 {
            tracing::debug!(?report, took_ms, "scan pass");
        }
        Ok(report)
    }
}

fn cached_schedule(
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

impl actix::Supervised for ScanActor {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        tracing::warn!(actor = "scan", "actor stopped; restarting it");
    }
}

impl Actor for ScanActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_later(self.clock.until_phase(SCAN_PHASE_MS), |a, ctx| {
            a.run_pass(ctx, true)
        });
    }
}

impl Handler<ScanNow> for ScanActor {
    type Result = ResponseActFuture<Self, Result<ScanReport>>;

    fn handle(&mut self, _: ScanNow, ctx: &mut Self::Context) -> Self::Result {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.now_waiters.push(tx);
        self.run_pass(ctx, false);
        Box::pin(
            async move { rx.await.unwrap_or(Err(crate::Error::Stopped("scan actor"))) }
                .into_actor(self),
        )
    }
}

impl Handler<StopScan> for ScanActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: StopScan, _ctx: &mut Self::Context) -> Self::Result {
        self.stopped = true;
        if !self.running {
            return Box::pin(async {});
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.stop_waiters.push(tx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A single-node pass goes page by page: each page a transaction of at most `limit` jobs,
    /// answering where the next one starts; together the pages record every due job's fires
    /// once, and a second pass over the same window records none again.
    #[tokio::test]
    async fn a_single_node_pass_goes_page_by_page_and_records_each_fire_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let db = crate::store::connect(&crate::config::DatabaseConfig {
            url: format!("sqlite://{}?mode=rwc", path.display()),
            max_connections: 1,
            ..Default::default()
        })
        .await
        .unwrap();
        crate::store::migrate(&db).await.unwrap();
        let t0 = 1_800_000_000_000;
        let now = crate::clock::ms_to_naive(t0);
        let g = crate::store::groups::insert(&db, "app", "App", 0, None, now)
            .await
            .unwrap();
        for i in 0..5 {
            let spec = crate::JobSpec::cron(g, &format!("j{i}"), "* * * * * ?", "h")
                .validate(chrono_tz::UTC, now)
                .unwrap();
            let id = crate::store::jobs::insert(&db, spec).await.unwrap();
            crate::store::jobs::set_running(&db, id, t0 + 1_000)
                .await
                .unwrap();
        }
        db.close().await.unwrap();
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        let cfg = SchedulerConfig::default();
        let (mut cache, directory) = (ScanCache::default(), Directory::default());
        let mut pass = |conn: &mut rusqlite::Connection| {
            let (mut after, mut pages, mut fires) = (0, Vec::new(), Vec::new());
            loop {
                let p = pass_sync(
                    conn,
                    t0,
                    &cfg,
                    after,
                    2,
                    &mut cache,
                    &directory,
                    chrono_tz::UTC,
                )
                .unwrap();
                pages.push((p.report.jobs, p.groups.map(|g| g.len())));
                fires.extend(p.fires.iter().map(|f| (f.job_id, f.fire_time)));
                match p.next_after {
                    Some(id) => after = id,
                    None => break,
                }
            }
            (pages, fires)
        };
        let (pages, fires) = pass(&mut conn);
        assert_eq!(
            pages,
            vec![(2, Some(1)), (2, None), (1, None)],
            "jobs per page; the first page also reads the groups"
        );
        let mut unique = fires.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), fires.len(), "no fire twice");
        assert_eq!(
            fires.len(),
            5 * 5,
            "five jobs, a fire per second of the 5 s window"
        );
        let (_, again) = pass(&mut conn);
        assert!(again.is_empty(), "{again:?}");
    }

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
