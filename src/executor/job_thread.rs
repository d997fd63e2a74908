//! JobThread: one actor per job id on an executor (protocol.md §6.4).
//!
//! Its triggers wait in a [`TriggerQueue`] shared with the executor, which enqueues (a log id
//! already queued is refused, and a full queue is a clear failure, never unbounded growth) and
//! answers `/run` without a round trip to the thread, waking it with [`Wake`] only when it was
//! idle. Receives [`StopThread`] (kill: the running run and every queued one each get their
//! failure result). Runs one trigger at a time, as a future of
//! the actor's own context (no task or message per run); a timeout drops the handler's future
//! (502), a panic is a failed run.
//! Idle threads are retired by their executor (one sweep every [`IDLE_POLL`] over all of them,
//! not a timer per thread), which runs the handler's destroy hook.
//!
//! Each trigger yields exactly one result: normal completion and a kill race through one flag.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tracing::Instrument;

use actix::prelude::*;
use futures::FutureExt;

use super::Callback;
use super::run_logs::RunLogs;
use super::{Handler as JobHandler, JobContext, JobLogger};
use crate::clock::Clock;
use crate::model::wire::{
    FAIL_CODE, HandleCallbackParam, ReturnT, SUCCESS_CODE, TIMEOUT_CODE, TriggerParam,
};

/// How often an executor counts an idle round of its threads (XXL-JOB polls each queue every
/// 3 s).
pub(super) const IDLE_POLL: Duration = Duration::from_secs(3);

/// Executor-side cap on a handle message (protocol.md §6.4).
pub(super) const EXECUTOR_MSG_MAX: usize = 50_000;

/// Something was queued for an idle thread: start it.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(super) struct Wake;

/// A job thread's trigger queue, shared between the executor (which enqueues and refuses) and
/// the thread (which takes from it). `load` counts queued and running triggers.
#[derive(Clone)]
pub(super) struct TriggerQueue(Arc<QueueInner>);

struct QueueInner {
    queue: parking_lot::Mutex<VecDeque<TriggerParam>>,
    load: AtomicUsize,
    capacity: usize,
}

impl TriggerQueue {
    /// An empty queue holding at most `capacity` waiting triggers.
    pub(super) fn new(capacity: usize) -> Self {
        TriggerQueue(Arc::new(QueueInner {
            queue: parking_lot::Mutex::new(VecDeque::new()),
            load: AtomicUsize::new(0),
            capacity,
        }))
    }

    /// Enqueues `p`: `Ok(true)` when the thread was idle and must be woken, `Ok(false)` when it
    /// will take `p` after what it is doing, `Err` with XXL-JOB's text when `p`'s log id is
    /// already queued or the queue is full.
    pub(super) fn push(&self, p: TriggerParam) -> Result<bool, ReturnT> {
        let mut q = self.0.queue.lock();
        if q.iter().any(|w| w.log_id == p.log_id) {
            return Err(ReturnT::fail(format!(
                "repeate trigger job, logId:{}",
                p.log_id
            )));
        }
        if q.len() >= self.0.capacity {
            return Err(ReturnT::fail(format!(
                "job queue is full ({} waiting), trigger refused, logId:{}",
                self.0.capacity, p.log_id
            )));
        }
        q.push_back(p);
        Ok(self.0.load.fetch_add(1, Ordering::SeqCst) == 0)
    }

    /// Whether a trigger is queued or running.
    pub(super) fn busy(&self) -> bool {
        self.0.load.load(Ordering::SeqCst) > 0
    }

    fn pop(&self) -> Option<TriggerParam> {
        self.0.queue.lock().pop_front()
    }

    fn take_all(&self) -> VecDeque<TriggerParam> {
        std::mem::take(&mut *self.0.queue.lock())
    }

    fn done(&self) {
        self.0.load.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Kills the thread: the running and queued runs fail with `reason`, then it stops.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(super) struct StopThread {
    /// Why, as written into each killed run's message.
    pub reason: String,
}

struct Running {
    log_id: i64,
    log_date: i64,
    reported: Arc<AtomicBool>,
    task: SpawnHandle,
}

/// One job's worker.
pub(super) struct JobThread {
    job_id: i32,
    handler: JobHandler,
    queue: TriggerQueue,
    running: Option<Running>,
    /// Queued + running, read by the executor without a message round trip.
    callback: Reporter,
    clock: Clock,
    log_dir: Option<PathBuf>,
}

fn cap(msg: String) -> String {
    if msg.chars().count() > EXECUTOR_MSG_MAX {
        let mut s: String = msg.chars().take(EXECUTOR_MSG_MAX).collect();
        s.push_str("...");
        s
    } else {
        msg
    }
}

/// Where job threads report results: a queue in front of the executor's callback recipient.
/// The first result queued schedules one task that sends everything queued by the time it
/// runs as one [`Callback`] (the results of one dispatch pass go together, like XXL-JOB's
/// callback thread draining its whole queue), instead of one message per run.
#[derive(Clone)]
pub(crate) struct Reporter(Arc<ReporterInner>);

/// How many runs whose result was sent an executor remembers: a center settling a run it is in
/// doubt about (its node stopped while sending it) asks within seconds of the run.
pub(crate) const RECENT_RUNS: usize = 65_536;

/// The log ids of the last [`RECENT_RUNS`] runs whose result was sent.
#[derive(Default)]
struct RecentRuns {
    order: std::collections::VecDeque<i64>,
    ids: foldhash::HashSet<i64>,
}

impl RecentRuns {
    fn contains(&self, log_id: i64) -> bool {
        !self.ids.is_empty() && self.ids.contains(&log_id)
    }

    fn push(&mut self, log_id: i64) {
        if log_id <= 0 || !self.ids.insert(log_id) {
            return;
        }
        self.order.push_back(log_id);
        if self.order.len() > RECENT_RUNS
            && let Some(old) = self.order.pop_front()
        {
            self.ids.remove(&old);
        }
    }
}

struct ReporterInner {
    queue: parking_lot::Mutex<Vec<HandleCallbackParam>>,
    sink: Recipient<Callback>,
    /// Runs accepted whose result has not been handed to `sink` yet.
    active: parking_lot::Mutex<foldhash::HashSet<i64>>,
    /// Runs whose result was handed to `sink` lately (lock order: `recent`, then `active`).
    recent: parking_lot::Mutex<RecentRuns>,
    /// Logs of runs done at once, written before their results are queued.
    logs: RunLogs,
    /// Counts each write of queued logs while it lasts.
    activity: Option<crate::activity::Activity>,
}

impl Reporter {
    /// A queue sending to `sink`, counting each write of queued run logs as `activity` while
    /// it lasts.
    pub(super) fn new(
        sink: Recipient<Callback>,
        activity: Option<crate::activity::Activity>,
    ) -> Self {
        Reporter(Arc::new(ReporterInner {
            queue: parking_lot::Mutex::new(Vec::new()),
            sink,
            active: Default::default(),
            recent: Default::default(),
            logs: RunLogs::default(),
            activity,
        }))
    }

    /// Takes run `log_id`: it counts as active until its result is sent. Answers false (and
    /// takes nothing) when this executor already has that run, queued, running or done a moment
    /// ago: a log id is run once, however often it is sent (XXL-JOB's executors refuse a
    /// repeated log id the same way).
    pub(super) fn accept_id(&self, log_id: i64) -> bool {
        if log_id <= 0 {
            self.0.active.lock().insert(log_id);
            return true;
        }
        if self.0.recent.lock().contains(log_id) {
            return false;
        }
        self.0.active.lock().insert(log_id)
    }

    /// Gives run `log_id` back (its job thread refused it).
    pub(super) fn refused(&self, log_id: i64) {
        self.0.active.lock().remove(&log_id);
    }

    /// Whether this executor received run `log_id`: it is queued or running, or its result was
    /// sent a moment ago (the last [`RECENT_RUNS`] runs are remembered).
    pub(crate) fn knows(&self, log_id: i64) -> bool {
        self.0.active.lock().contains(&log_id) || self.0.recent.lock().contains(log_id)
    }

    /// The runs accepted whose result has not been sent yet (queued, running, or reported
    /// and about to be sent): a run of this executor missing here has had its result sent.
    pub(crate) fn active(&self) -> foldhash::HashSet<i64> {
        self.0.active.lock().clone()
    }

    /// Queues one result (sent with the others queued before the flush task runs).
    pub(super) fn report(&self, item: HandleCallbackParam) {
        let first = {
            let mut q = self.0.queue.lock();
            q.push(item);
            q.len() == 1
        };
        if first {
            let me = self.clone();
            actix::spawn(async move { me.send_queued() });
        }
    }

    /// Queues `item` once `logger`'s held lines (a run done in its handler's first poll) are
    /// written, when the executor is quiet ([`super::run_logs`]); at once when none are held.
    pub(super) fn report_after_log(&self, logger: &JobLogger, item: HandleCallbackParam) {
        let Some((path, text)) = logger.take_held() else {
            return self.report(item);
        };
        if self.0.logs.queue(path, item.log_id, text, item) {
            let me = self.clone();
            actix::spawn(async move {
                while let Some(wait) = me.0.logs.wait() {
                    tokio::time::sleep(wait).await;
                }
                // on the blocking pool: the executor's thread goes on accepting runs meanwhile
                let _busy = me.0.activity.as_ref().map(crate::activity::Activity::enter);
                let writer = me.clone();
                if let Err(e) = tokio::task::spawn_blocking(move || writer.write_logs()).await {
                    tracing::error!(error = %e, "writing queued run logs failed");
                }
                me.send_queued();
            });
        }
    }

    /// Writes the queued run logs and queues the results that waited for them (blocking file
    /// I/O; the results are sent by [`Reporter::send_queued`]).
    fn write_logs(&self) {
        self.0.logs.write_all(|item| self.0.queue.lock().push(item));
    }

    /// Writes run `log_id`'s log now if it is queued (a `/log` read; blocking file I/O).
    pub(crate) fn write_log_now(&self, log_id: i64) {
        self.0.logs.write_now(log_id);
    }

    /// Sends every queued result as one callback.
    fn send_queued(&self) {
        let items = std::mem::take(&mut *self.0.queue.lock());
        if !items.is_empty() {
            let ids: Vec<i64> = items.iter().map(|i| i.log_id).collect();
            self.0.sink.do_send(Callback(items));
            let mut recent = self.0.recent.lock();
            let mut active = self.0.active.lock();
            for id in ids {
                active.remove(&id);
                recent.push(id);
            }
        }
    }

    /// Writes the queued run logs (after a write under way, whose results are then queued too)
    /// and sends every queued result now (the executor's shutdown, after its threads stopped).
    pub(super) fn flush(&self) {
        self.write_logs();
        self.send_queued();
    }

    /// [`Reporter::flush`], answering once the recipient has taken the results (a stopping
    /// engine then counts them as its own work in flight).
    pub(super) async fn flush_delivered(&self) {
        self.write_logs();
        let items = std::mem::take(&mut *self.0.queue.lock());
        if items.is_empty() {
            return;
        }
        let ids: Vec<i64> = items.iter().map(|i| i.log_id).collect();
        if let Err(e) = self.0.sink.send(Callback(items)).await {
            tracing::warn!(error = %e, "results of runs done at the stop not delivered");
        }
        let mut active = self.0.active.lock();
        for id in ids {
            active.remove(&id);
        }
    }
}

/// What a thread needs besides its handler.
#[derive(Clone)]
pub(super) struct ThreadEnv {
    /// Where results go.
    pub callback: Reporter,
    /// The executor's clock.
    pub clock: Clock,
    /// Run-log root.
    pub log_dir: Option<PathBuf>,
}

impl JobThread {
    /// A thread for `job_id` running `handler`.
    pub(super) fn new(
        job_id: i32,
        handler: JobHandler,
        env: ThreadEnv,
        queue: TriggerQueue,
    ) -> Self {
        JobThread {
            job_id,
            handler,
            queue,
            running: None,
            callback: env.callback,
            clock: env.clock,
            log_dir: env.log_dir,
        }
    }

    /// Reports a run's result once: after the run's held log lines (`logger`'s, if given)
    /// are written.
    fn report(
        &self,
        reported: &AtomicBool,
        (log_id, log_date): (i64, i64),
        code: i32,
        msg: Option<String>,
        logger: Option<&JobLogger>,
    ) {
        if reported.swap(true, Ordering::SeqCst) {
            return;
        }
        self.queue.done();
        let item = HandleCallbackParam {
            log_id,
            log_date_tim: log_date,
            handle_code: code,
            handle_msg: msg,
        };
        match logger {
            Some(logger) => self.callback.report_after_log(logger, item),
            None => self.callback.report(item),
        }
    }

    fn start_next(&mut self, ctx: &mut Context<Self>) {
        if self.running.is_some() {
            return;
        }
        let Some(p) = self.queue.pop() else {
            return;
        };
        let (log_id, log_date) = (p.log_id, p.log_date_time);
        let logger = JobLogger::new(self.log_dir.clone(), self.clock.clone(), log_id, log_date);
        let job_ctx = JobContext::new(
            p.job_id,
            log_id,
            p.executor_params.clone().unwrap_or_default(),
            (p.broadcast_index, p.broadcast_total.max(1)),
            log_date,
            logger.clone(),
        );
        // the logger holding the run's first line until its handler waits
        let mut waiting = None;
        if logger.active() {
            // written with the run's next line, or as soon as its handler waits: a run done in
            // its handler's first poll opens its file once (BENCHMARKS.md, 2026-11-26, a0a74de)
            logger.hold(&format!(
                "<br>----------- xxl-job job execute start -----------<br>----------- Param:{}",
                job_ctx.param
            ));
            waiting = Some(logger.clone());
        }
        let outputs = job_ctx.outputs();
        let mut run = AssertUnwindSafe(self.handler.call(job_ctx)).catch_unwind();
        let run = futures::future::poll_fn(move |cx| {
            let poll = run.poll_unpin(cx);
            if poll.is_pending()
                && let Some(logger) = waiting.take()
            {
                logger.release();
            }
            poll
        });
        let timeout = p.executor_timeout;
        // one span per run (debug level: free unless asked for), so a fire reads as trigger →
        // run → result under its log id
        let span = tracing::debug_span!("run", job_id = p.job_id, log_id);
        let run = async move {
            tracing::debug!("run started");
            let outcome = if timeout > 0 {
                tokio::time::timeout(Duration::from_secs(timeout as u64), run)
                    .await
                    .ok()
            } else {
                Some(run.await)
            };
            let (code, msg) = match outcome {
                None => (TIMEOUT_CODE, Some("job execute timeout ".to_string())),
                Some(Ok(Ok(()))) => (SUCCESS_CODE, None),
                Some(Ok(Err(e))) => (FAIL_CODE, Some(cap(format!("{e:#}")))),
                Some(Err(panic)) => {
                    let text = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "handler panicked".into());
                    (
                        FAIL_CODE,
                        Some(cap(format!("job handler panicked: {text}"))),
                    )
                }
            };
            // what the run put for its workflow's context travels on its result's first line
            let outputs = std::mem::take(&mut *outputs.lock());
            let (code, msg) = match super::context::with_outputs(&outputs, msg) {
                Ok(msg) => (code, msg),
                Err(e) => (FAIL_CODE, Some(e)),
            };
            if logger.active() {
                logger.log(&format!(
                    "<br>----------- xxl-job job execute end(finish) -----------<br>----------- Result: handleCode={code}, handleMsg = {}",
                    msg.as_deref().unwrap_or("null")
                ));
            }
            tracing::debug!(code, "run finished");
            (code, msg, logger)
        }
        .instrument(span);
        let task = ctx.spawn(
            run.into_actor(self)
                .map(move |(code, msg, logger), a, ctx| {
                    a.finished(log_id, code, msg, &logger, ctx);
                }),
        );
        self.running = Some(Running {
            log_id,
            log_date,
            reported: Arc::new(AtomicBool::new(false)),
            task,
        });
    }

    /// A run's handler returned: report it (after its log, when the run held it) and start
    /// the next.
    fn finished(
        &mut self,
        log_id: i64,
        code: i32,
        msg: Option<String>,
        logger: &JobLogger,
        ctx: &mut Context<Self>,
    ) {
        if let Some(r) = self.running.take_if(|r| r.log_id == log_id) {
            self.report(&r.reported, (r.log_id, r.log_date), code, msg, Some(logger));
        }
        self.start_next(ctx);
    }
}

impl Actor for JobThread {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.handler.init();
        let _ = ctx;
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        tracing::debug!(job_id = self.job_id, "job thread stopped");
        self.handler.destroy();
    }
}

impl Handler<Wake> for JobThread {
    type Result = ();

    fn handle(&mut self, _: Wake, ctx: &mut Self::Context) {
        self.start_next(ctx);
    }
}

impl Handler<StopThread> for JobThread {
    type Result = ();

    fn handle(&mut self, msg: StopThread, ctx: &mut Self::Context) {
        if let Some(r) = self.running.take() {
            ctx.cancel_future(r.task);
            self.report(
                &r.reported,
                (r.log_id, r.log_date),
                FAIL_CODE,
                Some(format!("{} [job running, killed]", msg.reason)),
                None,
            );
        }
        for p in self.queue.take_all() {
            self.report(
                &AtomicBool::new(false),
                (p.log_id, p.log_date_time),
                FAIL_CODE,
                Some(format!(
                    "{} [job not executed, in the job queue, killed.]",
                    msg.reason
                )),
                None,
            );
        }
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Collect(Arc<parking_lot::Mutex<Vec<Vec<i64>>>>);

    impl Actor for Collect {
        type Context = Context<Self>;
    }

    impl Handler<Callback> for Collect {
        type Result = ();

        fn handle(&mut self, msg: Callback, _: &mut Self::Context) {
            self.0.lock().push(msg.0.iter().map(|c| c.log_id).collect());
        }
    }

    fn item(log_id: i64) -> HandleCallbackParam {
        HandleCallbackParam {
            log_id,
            log_date_tim: 0,
            handle_code: SUCCESS_CODE,
            handle_msg: None,
        }
    }

    /// Results reported in one turn of the event loop reach the sink as one callback, in
    /// order; a result reported later starts a new one.
    #[actix::test]
    async fn results_of_one_turn_go_as_one_callback() {
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let sink = Collect(seen.clone()).start();
        let r = Reporter::new(sink.recipient(), None);
        for id in 1..=3 {
            r.report(item(id));
        }
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        r.report(item(4));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(*seen.lock(), vec![vec![1, 2, 3], vec![4]]);
    }
}
