//! CompleteActor: applies run results to their log rows and finishes them (spec §4.3, §8.7,
//! §8.10).
//!
//! Receives [`Callback`] batches (in-process executor: queued for writing, nobody waits),
//! [`RecordResults`] (`/api/callback`: answered once written), [`RunsFinished`] from the
//! run-row writer. The writer applies "first result wins",
//! appends messages and caps them at 15,000 characters; successful runs whose job has child
//! jobs come back as [`RunsFinished`], and this actor triggers the children (type PARENT): ids
//! are validated, a job listing itself is skipped, and a chain deeper than the configured limit
//! (a loop such as A → B → A) stops with a clear message. It runs the periodic sweep of
//! [`crate::lost_runs`] (runs on addresses that never registered).

use actix::prelude::*;
use sea_orm::DatabaseConnection;

use crate::activity::Activity;
use crate::actors::trigger_pool::TriggerJob;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::executor::Callback;
use crate::lost_runs;
use crate::metrics::Metrics;
use crate::model::TriggerType;
use crate::model::wire::HandleCallbackParam;
use crate::store::log_batches::HandleResult;
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

/// Applies results.
pub struct CompleteActor {
    db: DatabaseConnection,
    clock: Clock,
    activity: Activity,
    pool: Recipient<TriggerJob>,
    max_chain_depth: i16,
    metrics: Metrics,
    writer: LogWriter,
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
    pub fn new(
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
        }
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

    fn handle(&mut self, msg: Callback, ctx: &mut Self::Context) {
        self.metrics.callbacks(msg.0.len());
        let now = self.clock.now_ms();
        if let Err(items) = self.writer.try_results(handle_results(msg.0), now) {
            // the write queue is full: hold this mailbox until there is room (back-pressure)
            let writer = self.writer.clone();
            ctx.wait(
                async move {
                    if let Err(e) = writer.results(items, now).await {
                        tracing::error!(error = %e, "cannot queue run results");
                    }
                }
                .into_actor(self),
            );
        }
    }
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

    fn handle(&mut self, _: SweepLost, _ctx: &mut Self::Context) -> Self::Result {
        let (db, clock) = (self.db.clone(), self.clock.clone());
        Box::pin(async move { lost_runs::on_unregistered(&db, clock.now_ms()).await })
    }
}
