//! ScanActor: the durable pre-read scan (protocol.md §7.2).
//!
//! Once a second, aligned to the second boundary (half a second off the ring's tick), one pass
//! over the buckets this node schedules ([`Ownership`]: every one on SQLite, its leases on a
//! shared database; no global lock, so nodes scan at the same time): take over the fires of
//! buckets just taken (or, on one node, recover pending fires left by an earlier run); read the
//! running jobs of those buckets due within the pre-read window; apply the misfire policy to
//! fires later than the threshold and record every other fire in the window as a pending log
//! row; advance each job's `trigger_next_time`; on a shared database fence on the leases;
//! commit. Only then are the recorded fires pushed to the ring ([`PushRing`]), so a fire the
//! ring holds is always durable. How a pass runs on each backend is the store's
//! ([`ScanStore`]); this actor times the passes, never overlaps them, applies back-pressure
//! and answers [`ScanNow`].
//!
//! Messages: [`ScanNow`] (run a pass now, for tests and tools), [`StopScan`].

use std::sync::Arc;

use actix::prelude::*;

use crate::activity::Activity;
use crate::actors::ring::PushRing;
use crate::actors::trigger_pool::Backlog;
use crate::clock::Clock;
use crate::config::SchedulerConfig;
use crate::directory::Directory;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::ownership::Ownership;
pub(crate) use crate::store::scan::Recovery;
pub(crate) use crate::store::scan::ScanReport;
use crate::store::scan::{PassContext, PassOutput, ScanCache, ScanStore};
use futures::future::LocalBoxFuture;

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

/// The scan.
pub(crate) struct ScanActor {
    store: ScanStore,
    cx: PassContext,
    pre_read_count: u64,
    activity: Activity,
    metrics: Metrics,
    cache: ScanCache,
    recovery: Recovery,
    /// Fires due but not yet on a lane: no new fires are recorded while it is over the limit.
    backlog: Backlog,
    stopped: bool,
    running: bool,
    /// A loop pass came due while another pass ran: the loop goes on when it ends.
    loop_due: bool,
    /// [`ScanNow`] callers waiting for a pass.
    now_waiters: Vec<tokio::sync::oneshot::Sender<Result<ScanReport>>>,
    /// [`StopScan`] callers waiting for the pass in progress.
    stop_waiters: Vec<tokio::sync::oneshot::Sender<()>>,
}

/// What a [`ScanActor`] is built from.
pub(crate) struct ScanWiring {
    pub(crate) store: ScanStore,
    pub(crate) clock: Clock,
    pub(crate) cfg: SchedulerConfig,
    /// Most jobs one page reads.
    pub(crate) pre_read_count: u64,
    /// Where recorded fires go.
    pub(crate) ring: Recipient<PushRing>,
    pub(crate) activity: Activity,
    pub(crate) metrics: Metrics,
    /// Refreshed with the groups every pass.
    pub(crate) directory: Directory,
    /// What the first pass recovers.
    pub(crate) recovery: Recovery,
    pub(crate) backlog: Backlog,
    /// The buckets this node scans.
    pub(crate) ownership: Ownership,
    /// This node's id in the lease table.
    pub(crate) node: String,
}

impl ScanActor {
    /// A scan over `store` pushing to `ring`, refreshing `directory`'s groups every pass.
    pub(crate) fn new(w: ScanWiring) -> Self {
        let ScanWiring {
            store,
            clock,
            cfg,
            pre_read_count,
            ring,
            activity,
            metrics,
            directory,
            recovery,
            backlog,
            ownership,
            node,
        } = w;
        let tz = cfg.time_zone.parse().unwrap_or(chrono_tz::UTC);
        ScanActor {
            store,
            cx: PassContext {
                clock,
                cfg,
                tz,
                directory,
                ownership,
                node,
                sink: Arc::new(move |fires| ring.do_send(PushRing(fires))),
            },
            pre_read_count,
            activity,
            metrics,
            cache: ScanCache::default(),
            recovery,
            backlog,
            stopped: false,
            running: false,
            loop_due: false,
            now_waiters: Vec::new(),
            stop_waiters: Vec::new(),
        }
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

    /// One pass, as a future answering its outcome and the cache it borrowed.
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
        let cache = std::mem::take(&mut self.cache);
        let recovery = self.take_recovery();
        (recovery, self.store.pass(&self.cx, n, recovery, cache))
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
        let clock = self.cx.clock.clone();
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
                        act.cx.clock.until_phase(SCAN_PHASE_MS)
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
    /// the recovery for the next pass if this one failed, counts the fires (the store pushed
    /// them to the ring as they were committed); answers the report.
    fn finish(
        &mut self,
        recovery: Recovery,
        res: Result<ScanReport>,
        cache: ScanCache,
        took_ms: i64,
    ) -> Result<ScanReport> {
        self.cache = cache;
        if res.is_err() {
            self.restore_recovery(recovery);
        }
        let report = res?;
        self.metrics.scanned(report.fires, report.misfired);
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

impl actix::Supervised for ScanActor {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        tracing::warn!(actor = "scan", "actor stopped; restarting it");
    }
}

impl Actor for ScanActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_later(self.cx.clock.until_phase(SCAN_PHASE_MS), |a, ctx| {
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
