//! TriggerPool: the fast and slow trigger lanes (protocol.md §7.4).
//!
//! Receives [`FireBatch`] from the ring (on a shared database claims the fires first; a
//! single-node SQLite database needs no claim; then dispatches each with the job the scan read
//! and the group from the [`Directory`]) and
//! [`TriggerJob`] for unscheduled triggers (manual, retry, child). Each lane runs at most its
//! configured number of triggers at once; when a lane is full, dispatch waits for a place
//! (back-pressure), it never drops. A trigger slower than the threshold counts against its job;
//! a job with more than the limit of slow triggers in the current minute goes to the slow lane;
//! the counts reset when the minute changes.

use std::collections::HashMap;
use std::sync::Arc;

use actix::prelude::*;
use parking_lot::Mutex;
use sea_orm::DatabaseConnection;
use tokio::sync::Semaphore;

use crate::activity::Activity;
use crate::clock::Clock;
use crate::config::TriggerPoolConfig;
use crate::directory::Directory;
use crate::error::Result;
use crate::fire::Fire;
use crate::ownership::Ownership;
use crate::store::leases::{self, bucket_of};
use crate::trigger::{Preloaded, Trigger, TriggerRequest};

/// Fires handed to the pool that have not yet got a lane place: how far dispatch trails. The
/// scan reads it to stop recording new fires while dispatch is behind (back-pressure: past the
/// ceiling fires get late, memory does not grow).
#[derive(Clone, Debug, Default)]
pub(crate) struct Backlog(Arc<std::sync::atomic::AtomicUsize>);

impl Backlog {
    /// Fires waiting for a lane place now.
    pub(crate) fn get(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn add(&self, n: usize) {
        self.0.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    fn done(&self, n: usize) {
        self.0.fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Most fires of one batched dispatch.
const CHUNK_MAX: usize = 256;

/// Recorded fires due now: claim them and dispatch the ones this node won.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct FireBatch(pub Vec<Fire>);

/// An unscheduled trigger; answers once it is accepted onto a lane.
#[derive(Message, Debug)]
#[rtype(result = "Result<()>")]
pub(crate) struct TriggerJob(pub TriggerRequest);

/// Run rows this node has claimed (a workflow's node runs): dispatched like recorded fires,
/// in batches with their jobs read in one query — but for the jobs the sender read already
/// (the second field: a workflow transaction reads each node's job); answers once all are on
/// a lane.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct DispatchClaimed(
    pub Vec<TriggerRequest>,
    pub Vec<Arc<entity::xxl_job_info::Model>>,
);

/// A snapshot of the lanes.
#[derive(Message, Debug)]
#[rtype(result = "PoolStats")]
pub(crate) struct GetPoolStats;

/// Lane occupancy and totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Triggers running on the fast lane.
    pub fast_in_flight: usize,
    /// Triggers running on the slow lane.
    pub slow_in_flight: usize,
    /// Triggers waiting for a place on the fast lane.
    pub fast_waiting: usize,
    /// Triggers waiting for a place on the slow lane.
    pub slow_waiting: usize,
    /// Claimed fires of ring batches not yet handed to a lane.
    pub backlog: usize,
    /// Triggers finished since start.
    pub completed: u64,
    /// Fires another node claimed first.
    pub lost_claims: u64,
}

/// Which lane a trigger runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    /// The default lane.
    Fast,
    /// For jobs whose triggers have been slow this minute.
    Slow,
}

/// Per-job slow-trigger counts for the current minute (XXL-JOB's rule).
#[derive(Debug, Default)]
pub(crate) struct SlowCounter {
    minute: i64,
    counts: HashMap<i32, u32>,
}

impl SlowCounter {
    /// Records a trigger of `job_id` that took `elapsed_ms`, at `now_ms`.
    pub(crate) fn record(&mut self, job_id: i32, elapsed_ms: u64, now_ms: i64, threshold_ms: u64) {
        self.roll(now_ms);
        if elapsed_ms > threshold_ms {
            *self.counts.entry(job_id).or_default() += 1;
        }
    }

    /// The lane for `job_id` at `now_ms`.
    pub(crate) fn lane(&mut self, job_id: i32, now_ms: i64, limit: u32) -> Lane {
        self.roll(now_ms);
        if self.counts.get(&job_id).is_some_and(|&c| c > limit) {
            Lane::Slow
        } else {
            Lane::Fast
        }
    }

    fn roll(&mut self, now_ms: i64) {
        let minute = now_ms.div_euclid(60_000);
        if minute != self.minute {
            self.minute = minute;
            self.counts.clear();
        }
    }
}

struct Shared {
    trigger: Arc<Trigger>,
    clock: Clock,
    cfg: TriggerPoolConfig,
    fast: Arc<Semaphore>,
    slow: Arc<Semaphore>,
    slow_counter: Mutex<SlowCounter>,
    stats: Mutex<PoolStats>,
    activity: Activity,
}

impl Shared {
    fn lane_of(&self, job_id: i32) -> Lane {
        self.slow_counter
            .lock()
            .lane(job_id, self.clock.now_ms(), self.cfg.slow_count_limit)
    }

    /// Most fires one batched dispatch carries: a quarter of the fast lane, so a few batches
    /// overlap and a slow remote call holds back at most that many places.
    fn chunk_size(&self) -> usize {
        (self.cfg.fast_max / 4).clamp(1, CHUNK_MAX)
    }

    /// Waits for one fast-lane place per fire of `chunk`, then dispatches the chunk as one
    /// batch ([`Trigger::dispatch_batch_on`]) in its own task: once its executor calls are
    /// made it keeps one place per call (a batch handed over in one call keeps one), until
    /// every call has answered.
    async fn dispatch_chunk(self: Arc<Self>, chunk: Vec<TriggerRequest>) {
        let n = chunk.len();
        self.stats.lock().fast_waiting += n;
        let acquired = self.fast.clone().acquire_many_owned(n as u32).await;
        self.stats.lock().fast_waiting -= n;
        let Ok(permits) = acquired else {
            return;
        };
        self.stats.lock().fast_in_flight += n;
        let me = self.clone();
        let guard = self.activity.enter();
        actix::spawn(async move {
            let _guard = guard;
            let started = me.clock.now_ms();
            let jobs: Vec<i32> = chunk.iter().map(|r| r.job_id).collect();
            if let Err(e) = me.trigger.dispatch_batch_on(chunk, Some(permits)).await {
                tracing::error!(fires = n, error = %e, "batched trigger failed");
            }
            let now = me.clock.now_ms();
            let elapsed = (now - started).max(0) as u64;
            if elapsed > me.cfg.slow_threshold_ms {
                let mut slow = me.slow_counter.lock();
                for job_id in jobs {
                    slow.record(job_id, elapsed, now, me.cfg.slow_threshold_ms);
                }
            }
            let mut s = me.stats.lock();
            s.fast_in_flight -= n;
            s.completed += n as u64;
        });
    }

    /// Waits for a place on the job's lane, then runs the trigger in its own task.
    async fn dispatch(self: Arc<Self>, req: TriggerRequest) {
        let lane = self.lane_of(req.job_id);
        let sem = match lane {
            Lane::Fast => self.fast.clone(),
            Lane::Slow => self.slow.clone(),
        };
        let wait = |delta: isize| {
            let mut s = self.stats.lock();
            let w = match lane {
                Lane::Fast => &mut s.fast_waiting,
                Lane::Slow => &mut s.slow_waiting,
            };
            *w = w.saturating_add_signed(delta);
        };
        wait(1);
        let acquired = sem.acquire_owned().await;
        wait(-1);
        let Ok(permit) = acquired else {
            return;
        };
        {
            let mut s = self.stats.lock();
            match lane {
                Lane::Fast => s.fast_in_flight += 1,
                Lane::Slow => s.slow_in_flight += 1,
            }
        }
        let me = self.clone();
        let guard = self.activity.enter();
        actix::spawn(async move {
            let _guard = guard;
            let started = me.clock.now_ms();
            let job_id = req.job_id;
            if let Err(e) = me.trigger.trigger_on_lane(req, Some(permit)).await {
                tracing::error!(job_id, error = %e, "trigger failed");
            }
            let elapsed = (me.clock.now_ms() - started).max(0) as u64;
            me.slow_counter.lock().record(
                job_id,
                elapsed,
                me.clock.now_ms(),
                me.cfg.slow_threshold_ms,
            );
            {
                let mut s = me.stats.lock();
                match lane {
                    Lane::Fast => s.fast_in_flight -= 1,
                    Lane::Slow => s.slow_in_flight -= 1,
                }
                s.completed += 1;
            }
        });
    }
}

/// Reads the jobs of `fires` that came without one (recovered fires, or edited since the scan
/// read them), by job id.
async fn read_jobs(
    db: &DatabaseConnection,
    fires: &[Fire],
) -> Result<HashMap<i32, Arc<crate::jobs::JobDef>>> {
    let mut job_ids: Vec<i32> = fires.iter().map(|f| f.job_id).collect();
    if job_ids.is_empty() {
        return Ok(HashMap::new());
    }
    job_ids.sort_unstable();
    job_ids.dedup();
    Ok(crate::store::jobs::get_many(db, &job_ids)
        .await?
        .into_iter()
        .map(|j| (j.id, Arc::new(crate::jobs::JobDef::new(j))))
        .collect())
}

/// The two trigger lanes.
pub(crate) struct TriggerPool {
    db: DatabaseConnection,
    shared: Arc<Shared>,
    directory: Directory,
    /// The buckets this node schedules: on a shared database a fire goes out only under the
    /// lease it was recorded under, after its dispatch mark is written.
    ownership: Ownership,
    /// This node's id in the lease table.
    node: String,
    backlog: Backlog,
}

/// What a [`TriggerPool`] is built from.
pub(crate) struct TriggerPoolWiring {
    pub(crate) db: DatabaseConnection,
    pub(crate) trigger: Arc<Trigger>,
    pub(crate) clock: Clock,
    /// The lanes' bounds.
    pub(crate) cfg: TriggerPoolConfig,
    pub(crate) activity: Activity,
    pub(crate) directory: Directory,
    /// The buckets this node holds.
    pub(crate) ownership: Ownership,
    /// This node's id in the lease table.
    pub(crate) node: String,
    pub(crate) backlog: Backlog,
}

impl TriggerPool {
    /// A pool running `trigger` under `cfg`'s lane bounds, dispatching the fires of the
    /// buckets `ownership` holds (node `node`).
    pub(crate) fn new(w: TriggerPoolWiring) -> Self {
        let TriggerPoolWiring {
            db,
            trigger,
            clock,
            cfg,
            activity,
            directory,
            ownership,
            node,
            backlog,
        } = w;
        TriggerPool {
            db,
            directory,
            ownership,
            node,
            backlog,
            shared: Arc::new(Shared {
                trigger,
                clock,
                fast: Arc::new(Semaphore::new(cfg.fast_max)),
                slow: Arc::new(Semaphore::new(cfg.slow_max)),
                cfg,
                slow_counter: Mutex::new(SlowCounter::default()),
                stats: Mutex::new(PoolStats::default()),
                activity,
            }),
        }
    }
}

impl actix::Supervised for TriggerPool {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        tracing::warn!(actor = "trigger pool", "actor stopped; restarting it");
    }
}

impl Actor for TriggerPool {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(1024);
    }
}

impl Handler<FireBatch> for TriggerPool {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: FireBatch, _ctx: &mut Self::Context) -> Self::Result {
        let db = self.db.clone();
        let shared = self.shared.clone();
        let guard = shared.activity.enter();
        let directory = self.directory.clone();
        let (ownership, node) = (self.ownership.clone(), self.node.clone());
        let backlog = self.backlog.clone();
        let handed = msg.0.len();
        backlog.add(handed);
        Box::pin(async move {
            let _guard = guard;
            let fires = if ownership.is_leased() {
                marked(&db, &shared, &ownership, &node, msg.0).await
            } else {
                // one node: a SQLite file's dispatch mark covers the fires before they go out
                let through = msg.0.iter().map(|f| f.fire_time).max().unwrap_or(0);
                if let Err(e) = shared.trigger.dispatch_mark(through).await {
                    tracing::error!(
                        fires = handed,
                        error = %e,
                        "dispatch mark not written: these fires are not sent (a restart sends them)"
                    );
                    backlog.done(handed);
                    return;
                }
                msg.0
            };
            backlog.done(handed - fires.len());
            // jobs as the scan read them; only fires without one (or edited since) read theirs
            // sized for the whole batch (a second's fires): grown from empty, it was copied as
            // it grew
            let mut ready: Vec<Fire> = Vec::with_capacity(fires.len());
            let mut unread: Vec<Fire> = Vec::new();
            for f in fires {
                if f.job.is_some() && !directory.edited_since(f.job_id, f.read_ms) {
                    ready.push(f);
                } else {
                    unread.push(f);
                }
            }
            let read = match read_jobs(&db, &unread).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "job read failed; triggers read their own jobs");
                    HashMap::new()
                }
            };
            let groups = directory.groups();
            shared.stats.lock().backlog += ready.len() + unread.len();
            let reqs = ready.into_iter().chain(unread).map(|mut f| {
                let job = match f.job.take().filter(|_| !read.contains_key(&f.job_id)) {
                    Some(j) => Some(j),
                    None => read.get(&f.job_id).cloned(),
                };
                let mut req = TriggerRequest::new(f.job_id, f.trigger_type);
                req.log_id = Some(f.log_id);
                req.fire_time = Some(f.fire_time);
                req.preloaded = job.map(|job| Preloaded {
                    group: groups.get(&job.job_group).cloned(),
                    job,
                });
                req
            });
            hand_over(&shared, reqs, |n| {
                shared.stats.lock().backlog -= n;
                backlog.done(n);
            })
            .await;
        })
    }
}

/// Hands `reqs` to the lanes: batchable fast-lane ones in chunks ([`Shared::dispatch_chunk`]),
/// the others one by one; `sent(n)` after each hand-over.
async fn hand_over(
    shared: &Arc<Shared>,
    reqs: impl IntoIterator<Item = TriggerRequest>,
    sent: impl Fn(usize),
) {
    // each chunk sized up front: grown from empty, its requests were copied as it grew
    let size = shared.chunk_size();
    let mut chunk = Vec::with_capacity(size);
    for req in reqs {
        if Trigger::batchable(&req) && shared.lane_of(req.job_id) == Lane::Fast {
            chunk.push(req);
            if chunk.len() >= size {
                let n = chunk.len();
                shared
                    .clone()
                    .dispatch_chunk(std::mem::replace(&mut chunk, Vec::with_capacity(size)))
                    .await;
                sent(n);
            }
            continue;
        }
        shared.clone().dispatch(req).await;
        sent(1);
    }
    let n = chunk.len();
    if n > 0 {
        shared.clone().dispatch_chunk(chunk).await;
        sent(n);
    }
}

/// On a shared database, the fires this node may send: each only while it holds its bucket at
/// the epoch the fire was recorded under, and only once the buckets' dispatch mark (the fires'
/// latest nominal time) is written under those leases. A fire of a bucket that moved on is left
/// to its new holder; a bucket whose mark cannot be written is given up ([`Ownership::give_up`]:
/// the lease keeper hands it back at its next round, and whichever node takes it, this one
/// included, sends the fires this one did not).
async fn marked(
    db: &DatabaseConnection,
    shared: &Shared,
    ownership: &Ownership,
    node: &str,
    fires: Vec<Fire>,
) -> Vec<Fire> {
    let now = std::time::Instant::now();
    let total = fires.len();
    let mut fires: Vec<Fire> = fires
        .into_iter()
        .filter(|f| ownership.dispatchable(f.job_id, f.epoch, now))
        .collect();
    if fires.len() < total {
        shared.stats.lock().lost_claims += (total - fires.len()) as u64;
        tracing::debug!(
            fires = total - fires.len(),
            "fires of buckets this node no longer holds left to their new holder"
        );
    }
    if fires.is_empty() {
        return fires;
    }
    let leases = ownership.leases_of(fires.iter().map(|f| f.job_id));
    let through = fires.iter().map(|f| f.fire_time).max().unwrap_or(0);
    // a node that believes it holds every bucket checks them all at once (`held_of`)
    let held = ownership.held();
    let every = (held.len() >= leases::BUCKETS as usize).then_some(held);
    let mut ok = None;
    for attempt in 0..3u32 {
        match leases::mark_dispatched(db, node, &leases, through, every.as_deref()).await {
            Ok(held) => {
                ok = Some(held);
                break;
            }
            Err(e) => {
                tracing::warn!(attempt, error = %e, "cannot write the dispatch mark; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(50 << attempt)).await;
            }
        }
    }
    let Some(held) = ok else {
        tracing::error!(
            fires = fires.len(),
            "dispatch mark not written: these buckets are given up to whichever node takes them"
        );
        ownership.give_up(&leases);
        return Vec::new();
    };
    if held.len() < leases.len() {
        let lost: Vec<_> = leases
            .iter()
            .filter(|l| !held.contains(l))
            .copied()
            .collect();
        ownership.forget(&lost);
    }
    let held: std::collections::HashSet<i32> = held.iter().map(|l| l.bucket).collect();
    let before = fires.len();
    fires.retain(|f| held.contains(&bucket_of(f.job_id)));
    if fires.len() < before {
        shared.stats.lock().lost_claims += (before - fires.len()) as u64;
    }
    fires
}

impl Handler<DispatchClaimed> for TriggerPool {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: DispatchClaimed, _ctx: &mut Self::Context) -> Self::Result {
        let (db, shared, directory) =
            (self.db.clone(), self.shared.clone(), self.directory.clone());
        let guard = shared.activity.enter();
        Box::pin(async move {
            let _guard = guard;
            let DispatchClaimed(reqs, read) = msg;
            let mut jobs: HashMap<i32, Arc<crate::jobs::JobDef>> = read
                .into_iter()
                .map(|j| (j.id, Arc::new(crate::jobs::JobDef::new((*j).clone()))))
                .collect();
            let mut ids: Vec<i32> = reqs
                .iter()
                .map(|r| r.job_id)
                .filter(|id| !jobs.contains_key(id))
                .collect();
            ids.sort_unstable();
            ids.dedup();
            if !ids.is_empty() {
                match crate::store::jobs::get_many(&db, &ids).await {
                    Ok(js) => jobs.extend(
                        js.into_iter()
                            .map(|j| (j.id, Arc::new(crate::jobs::JobDef::new(j)))),
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "job read failed; triggers read their own jobs");
                    }
                }
            }
            let groups = directory.groups();
            let reqs = reqs.into_iter().map(|mut req| {
                req.preloaded = jobs.get(&req.job_id).map(|job| Preloaded {
                    group: groups.get(&job.job_group).cloned(),
                    job: job.clone(),
                });
                req
            });
            hand_over(&shared, reqs, |_| {}).await;
        })
    }
}

impl Handler<TriggerJob> for TriggerPool {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: TriggerJob, _ctx: &mut Self::Context) -> Self::Result {
        let shared = self.shared.clone();
        Box::pin(async move {
            shared.dispatch(msg.0).await;
            Ok(())
        })
    }
}

impl Handler<GetPoolStats> for TriggerPool {
    type Result = MessageResult<GetPoolStats>;

    fn handle(&mut self, _: GetPoolStats, _ctx: &mut Self::Context) -> Self::Result {
        MessageResult(*self.shared.stats.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job is slow after more than ten triggers over 500 ms in a minute; other jobs and the next minute stay fast.
    #[test]
    fn slow_lane_rule() {
        let mut c = SlowCounter::default();
        let t0 = 60_000 * 100;
        for i in 0..10 {
            c.record(7, 501, t0 + i, 500);
        }
        // exactly 10 slow triggers: still fast (the rule is "more than 10")
        assert_eq!(c.lane(7, t0 + 20, 10), Lane::Fast);
        c.record(7, 600, t0 + 30, 500);
        assert_eq!(c.lane(7, t0 + 40, 10), Lane::Slow);
        // other jobs unaffected; a trigger of exactly the threshold does not count
        c.record(8, 500, t0 + 50, 500);
        assert_eq!(c.lane(8, t0 + 60, 10), Lane::Fast);
        // a new minute resets the counts
        assert_eq!(c.lane(7, t0 + 60_000, 10), Lane::Fast);
    }
}
