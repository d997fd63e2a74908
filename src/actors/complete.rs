//! CompleteActor: applies run results to their log rows and finishes them (protocol.md §3.3, §7.7,
//! §7.10).
//!
//! Receives [`Callback`] batches (in-process executor: queued for writing, nobody waits),
//! [`RecordResults`] (`/api/callback`: answered once written), [`RunsFinished`] from the
//! run-row writer. The writer applies "first result wins",
//! appends messages and caps them at 15,000 characters; successful runs whose job has child
//! jobs come back as [`RunsFinished`], and this actor triggers the children (type PARENT): ids
//! are validated, a job listing itself is skipped, and a chain deeper than the configured limit
//! (a loop such as A → B → A) stops with a clear message. It runs the periodic sweep of
//! [`crate::lost_runs`] (runs on addresses that never registered).

use std::collections::HashSet;
use std::sync::Arc;

use actix::prelude::*;
use sea_orm::DatabaseConnection;

use crate::activity::Activity;
use crate::actors::trigger_pool::TriggerJob;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::executor::Callback;
use crate::fire::HandleResult;
use crate::lost_runs;
use crate::metrics::Metrics;
use crate::model::TriggerType;
use crate::model::wire::HandleCallbackParam;
use crate::store::logs;
pub(crate) use crate::store::writer::RunsFinished;
use crate::store::writer::{FinishedRun, LogWriter};
use crate::trigger::TriggerRequest;

/// A batch of run results from an executor's callback; answers once they are written, so the
/// executor re-sends them if this node could not write them.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<()>")]
pub struct RecordResults(pub Vec<HandleCallbackParam>);

/// Runs the lost-result sweep now.
#[derive(Message, Debug)]
#[rtype(result = "Result<usize>")]
pub struct SweepLost;

/// Answers once every message sent to this actor before it was handled (the local sweep's way
/// to let the results its executor sent before through).
#[derive(Message, Debug)]
#[rtype(result = "()")]
struct Settle;

/// Results of this node's own executor held until written: past this many, taking more waits
/// (back-pressure on the executor's callbacks) instead of growing memory.
const MAX_UNWRITTEN: usize = 4 * crate::store::writer::QUEUE;
/// The first wait before a given-up write of this node's own results is tried again (doubling
/// up to [`RETRY_MAX`]).
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(500);
/// The longest wait between tries.
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// Applies results.
pub struct CompleteActor {
    db: DatabaseConnection,
    clock: Clock,
    activity: Activity,
    pool: Recipient<TriggerJob>,
    max_chain_depth: i16,
    metrics: Metrics,
    writer: LogWriter,
    /// The node's own executor, for the lost-run sweep (`None` while a sweep runs).
    local: Option<lost_runs::LocalRuns>,
    /// Places for this node's own results until written ([`MAX_UNWRITTEN`]).
    unwritten: Arc<tokio::sync::Semaphore>,
    /// Runs whose result a given-up write holds for another try.
    retrying: Arc<parking_lot::Mutex<HashSet<i64>>>,
}

/// Waits for `written`; when the writer gave the batch up, writes `items` again (with a growing
/// pause) until they are written or the writer stopped. Holds `permit` until then.
async fn until_written(
    writer: LogWriter,
    items: Vec<HandleResult>,
    at_ms: i64,
    written: crate::store::writer::Written,
    retrying: Arc<parking_lot::Mutex<HashSet<i64>>>,
    permit: tokio::sync::OwnedSemaphorePermit,
) {
    let mut ok = written.wait().await;
    let mut pause = RETRY_FIRST;
    let mut marked = false;
    while let Ok(false) = ok {
        if !marked {
            retrying.lock().extend(items.iter().map(|i| i.log_id));
            marked = true;
        }
        tracing::warn!(
            results = items.len(),
            "run results not written; trying again"
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY_MAX);
        ok = writer.results_written(items.clone(), at_ms).await;
    }
    if let Err(e) = ok {
        tracing::error!(results = items.len(), error = %e, "run results lost: the writer stopped");
    }
    if marked {
        let mut r = retrying.lock();
        for i in &items {
            r.remove(&i.log_id);
        }
    }
    drop(permit);
}

fn handle_results(items: Vec<HandleCallbackParam>) -> Vec<HandleResult> {
    if tracing::enabled!(tracing::Level::DEBUG) {
        for i in &items {
            let span = tracing::debug_span!("result", log_id = i.log_id);
            span.in_scope(|| tracing::debug!(code = i.handle_code, "result received"));
        }
    }
    items
        .into_iter()
        .map(|i| HandleResult {
            log_id: i.log_id,
            code: i.handle_code,
            msg: i.handle_msg,
        })
        .collect()
}

impl CompleteActor {
    /// An actor whose results go through `writer` and whose child jobs start on `pool`; child
    /// chains stop below `max_chain_depth` parents. The pool dispatches through this node's
    /// executor, whose results come here: create this actor's context first and hand its
    /// address around (see `EngineBuilder::start`).
    pub(crate) fn new(
        db: DatabaseConnection,
        clock: Clock,
        activity: Activity,
        max_chain_depth: i16,
        metrics: Metrics,
        writer: LogWriter,
        pool: Recipient<TriggerJob>,
    ) -> Self {
        CompleteActor {
            db,
            clock,
            activity,
            metrics,
            writer,
            pool,
            max_chain_depth,
            local: None,
            unwritten: Arc::new(tokio::sync::Semaphore::new(MAX_UNWRITTEN)),
            retrying: Arc::default(),
        }
    }

    /// Watches this node's own executor for runs whose result was lost.
    pub(crate) fn with_local(mut self, local: Option<lost_runs::LocalRuns>) -> Self {
        self.local = local;
        self
    }

    /// Triggers the child jobs of a run that finished successfully and notes each outcome on
    /// the run's handle message.
    async fn trigger_children(
        db: &DatabaseConnection,
        pool: &Recipient<TriggerJob>,
        max_depth: i16,
        row: FinishedRun,
    ) -> Result<()> {
        let children: Vec<&str> = row
            .children
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        if children.is_empty() {
            return Ok(());
        }
        let mut text = String::from(
            "<br><br><span style=\"color:#00c0ef;\" > >>>>>>>>>>>Trigger child job<<<<<<<<<<< </span><br>",
        );
        let depth = row.chain_depth.saturating_add(1);
        if depth > max_depth {
            tracing::warn!(
                job_id = row.job_id,
                log_id = row.id,
                depth,
                "child jobs not triggered: chain too deep"
            );
            text.push_str(&format!(
                "Child jobs not triggered: the chain of parent jobs reached the limit of {max_depth} (a loop of child jobs?)<br>"
            ));
            return logs::append_handle_msg(db, row.id, &text).await;
        }
        let n = children.len();
        for (k, c) in children.iter().enumerate() {
            let k = k + 1;
            let line = match c.parse::<i32>() {
                Ok(id) if id > 0 && id == row.job_id => {
                    format!(
                        "{k}/{n} [Job ID={id}], Trigger skipped, Trigger msg: a job cannot be its own child <br>"
                    )
                }
                Ok(id) if id > 0 => {
                    let mut req = TriggerRequest::new(id, TriggerType::Parent);
                    req.chain_depth = depth;
                    let sent = pool
                        .send(TriggerJob(req))
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(|r| r.map_err(|e| e.to_string()));
                    match sent {
                        Ok(()) => format!(
                            "{k}/{n} [Job ID={id}], Trigger success, Trigger msg: null <br>"
                        ),
                        Err(e) => {
                            format!("{k}/{n} [Job ID={id}], Trigger Fail, Trigger msg: {e} <br>")
                        }
                    }
                }
                _ => format!(
                    "{k}/{n} [Job ID={c}], Trigger Fail, Trigger msg: Job ID is illegal <br>"
                ),
            };
            text.push_str(&line);
        }
        logs::append_handle_msg(db, row.id, &text).await
    }
}

impl CompleteActor {
    fn lost_sweep(&mut self, ctx: &mut Context<Self>) {
        if self.activity.halted() {
            return;
        }
        let (db, clock) = (self.db.clone(), self.clock.clone());
        let guard = self.activity.enter();
        ctx.spawn(
            async move {
                let _guard = guard;
                if let Err(e) = lost_runs::on_unregistered(&db, clock.now_ms()).await {
                    tracing::error!(error = %e, "lost-result sweep failed");
                }
            }
            .into_actor(self),
        );
        self.local_sweep(ctx);
    }

    /// The runs of this node's own executor whose result was lost ([`lost_runs::LocalRuns`]).
    /// What the executor still has is read first; then every result it sent before goes
    /// through this actor's mailbox and the writer, and only then is the database read.
    fn local_sweep(&mut self, ctx: &mut Context<Self>) {
        let Some(mut local) = self.local.take() else {
            return;
        };
        let active = local.active();
        let (db, clock, writer) = (self.db.clone(), self.clock.clone(), self.writer.clone());
        let (me, retrying) = (ctx.address(), self.retrying.clone());
        let guard = self.activity.enter();
        ctx.spawn(
            async move {
                let _guard = guard;
                let settled = me.send(Settle).await.is_ok() && writer.flush().await.is_ok();
                if settled {
                    let retrying = retrying.lock().clone();
                    if let Err(e) = local.sweep(&db, &active, &retrying, clock.now_ms()).await {
                        tracing::error!(error = %e, "lost-result sweep of the local executor failed");
                    }
                }
                local
            }
            .into_actor(self)
            .map(|local, act, _| act.local = Some(local)),
        );
    }
}

impl Actor for CompleteActor {
    type Context = Context<Self>;

    /// Sweeps for lost runs once at start, then every [`lost_runs::SWEEP`].
    fn started(&mut self, ctx: &mut Self::Context) {
        self.lost_sweep(ctx);
        ctx.run_interval(lost_runs::SWEEP, |a, ctx| a.lost_sweep(ctx));
    }
}

impl Handler<Callback> for CompleteActor {
    type Result = ();

    /// Results of this node's own executor: queued in the order they came, each batch held
    /// until written (written again when the writer gave it up), at most [`MAX_UNWRITTEN`]
    /// at once; a full write queue or too many unwritten results hold this mailbox
    /// (back-pressure).
    fn handle(&mut self, msg: Callback, ctx: &mut Self::Context) {
        self.metrics.callbacks(msg.0.len());
        let now = self.clock.now_ms();
        let items = handle_results(msg.0);
        let n = items.len().clamp(1, MAX_UNWRITTEN) as u32;
        let (writer, retrying) = (self.writer.clone(), self.retrying.clone());
        let queued = match self.unwritten.clone().try_acquire_many_owned(n) {
            Ok(permit) => match writer.try_results_acked(items.clone(), now) {
                Ok(written) => Ok((written, permit)),
                Err(_) => Err(Some(permit)),
            },
            Err(_) => Err(None),
        };
        match queued {
            Ok((written, permit)) => {
                actix::spawn(until_written(writer, items, now, written, retrying, permit));
            }
            Err(permit) => {
                let unwritten = self.unwritten.clone();
                ctx.wait(
                    async move {
                        let permit = match permit {
                            Some(p) => p,
                            None => match unwritten.acquire_many_owned(n).await {
                                Ok(p) => p,
                                Err(_) => return,
                            },
                        };
                        match writer.results_acked(items.clone(), now).await {
                            Ok(written) => {
                                actix::spawn(until_written(
                                    writer, items, now, written, retrying, permit,
                                ));
                            }
                            Err(e) => tracing::error!(error = %e, "cannot queue run results"),
                        }
                    }
                    .into_actor(self),
                );
            }
        }
    }
}

impl Handler<Settle> for CompleteActor {
    type Result = ();

    fn handle(&mut self, _: Settle, _ctx: &mut Self::Context) {}
}

impl Handler<RecordResults> for CompleteActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: RecordResults, _ctx: &mut Self::Context) -> Self::Result {
        self.metrics.callbacks(msg.0.len());
        let (writer, now) = (self.writer.clone(), self.clock.now_ms());
        Box::pin(async move {
            if writer.results_written(handle_results(msg.0), now).await? {
                Ok(())
            } else {
                Err(Error::Stopped(
                    "run results could not be written; send them again",
                ))
            }
        })
    }
}

impl Handler<RunsFinished> for CompleteActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: RunsFinished, _ctx: &mut Self::Context) -> Self::Result {
        let (db, pool, depth) = (self.db.clone(), self.pool.clone(), self.max_chain_depth);
        let guard = self.activity.enter();
        Box::pin(async move {
            let _guard = guard;
            for row in msg.0 {
                let id = row.id;
                if let Err(e) = Self::trigger_children(&db, &pool, depth, row).await {
                    tracing::error!(log_id = id, error = %e, "cannot trigger child jobs");
                }
            }
        })
    }
}

impl Handler<SweepLost> for CompleteActor {
    type Result = ResponseFuture<Result<usize>>;

    fn handle(&mut self, _: SweepLost, ctx: &mut Self::Context) -> Self::Result {
        let (db, clock) = (self.db.clone(), self.clock.clone());
        self.local_sweep(ctx);
        Box::pin(async move { lost_runs::on_unregistered(&db, clock.now_ms()).await })
    }
}
