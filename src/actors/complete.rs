//! CompleteActor: applies run results to their log rows and finishes them (spec §4.3, §8.7,
//! §8.10).
//!
//! Receives [`Callback`] batches (in-process executor, `/api/callback`) and [`ConnectPool`] at
//! wiring. The first result for a log wins; later ones are ignored; messages are appended and
//! capped at 15,000 characters. A success triggers the job's child jobs (type PARENT): ids are
//! validated, a job listing itself is skipped, and a chain deeper than the configured limit
//! (a loop such as A → B → A) stops with a clear message. Every [`LOST_SWEEP`] it marks runs on
//! addresses that never registered (manual groups) as lost after XXL-JOB's ten minutes; runs on
//! registered executors that die are marked by the registry when it evicts them.

use std::time::Duration;

use actix::prelude::*;
use sea_orm::DatabaseConnection;

use crate::activity::Activity;
use crate::actors::trigger_pool::TriggerJob;
use crate::clock::{Clock, ms_to_naive};
use crate::error::Result;
use crate::group_commit::GroupCommit;
use crate::metrics::Metrics;
use crate::model::TriggerType;
use crate::model::wire::{FAIL_CODE, HandleCallbackParam, SUCCESS_CODE};
use crate::store::log_batches::{self, Finished, HandleResult};
use crate::store::{logs, registry};
use crate::trigger::TriggerRequest;

/// How often runs on never-registered addresses are checked.
pub const LOST_SWEEP: Duration = Duration::from_secs(10);
/// XXL-JOB's age after which a run on an unregistered address counts as lost.
pub const LOST_UNREGISTERED_MS: i64 = 10 * 60 * 1000;
/// The message of a lost run (spec §8.10).
pub const LOST_MSG: &str = "Job result lost, marked as failure";

/// A batch of run results.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct Callback(pub Vec<HandleCallbackParam>);

/// Gives the actor the trigger pool it starts child jobs on.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ConnectPool(pub Recipient<TriggerJob>);

/// Runs the lost-result sweep now.
#[derive(Message, Debug)]
#[rtype(result = "Result<usize>")]
pub struct SweepLost;

/// Applies results.
pub struct CompleteActor {
    db: DatabaseConnection,
    clock: Clock,
    activity: Activity,
    pool: Option<Recipient<TriggerJob>>,
    max_chain_depth: i16,
    metrics: Metrics,
    writers: Writers,
}

/// Batched writes and reads of the result path (one statement per batch, see
/// [`crate::group_commit`]).
#[derive(Clone)]
struct Writers {
    /// Results → the rows as they were when this node wrote them (None: ignored).
    handles: GroupCommit<HandleResult, Option<Finished>>,
    /// Job id → its child job list (None: the job is gone).
    children: GroupCommit<i32, Option<String>>,
}

/// Most results (or child-list reads) per statement.
const RESULT_BATCH: usize = 512;

impl CompleteActor {
    /// An actor writing to `db`; child chains stop below `max_chain_depth` parents.
    pub fn new(
        db: DatabaseConnection,
        clock: Clock,
        activity: Activity,
        max_chain_depth: i16,
        metrics: Metrics,
    ) -> Self {
        let (hdb, cdb, hclock) = (db.clone(), db.clone(), clock.clone());
        let writers = Writers {
            handles: GroupCommit::spawn(RESULT_BATCH, move |batch: Vec<HandleResult>| {
                let (db, now) = (hdb.clone(), hclock.now_ms());
                async move { log_batches::record_handles(&db, &batch, now).await }
            }),
            children: GroupCommit::spawn(RESULT_BATCH, move |ids: Vec<i32>| {
                let db = cdb.clone();
                async move { log_batches::child_lists(&db, &ids).await }
            }),
        };
        CompleteActor {
            db,
            clock,
            activity,
            metrics,
            writers,
            pool: None,
            max_chain_depth,
        }
    }

    /// Applies one result; on a first success, triggers the children.
    async fn apply(
        db: &DatabaseConnection,
        writers: &Writers,
        pool: Option<&Recipient<TriggerJob>>,
        max_depth: i16,
        item: HandleCallbackParam,
    ) -> Result<()> {
        let Some(row) = writers
            .handles
            .submit(HandleResult {
                log_id: item.log_id,
                code: item.handle_code,
                msg: item.handle_msg,
            })
            .await?
        else {
            tracing::debug!(log_id = item.log_id, "repeated or unknown callback ignored");
            return Ok(());
        };
        tracing::debug!(
            log_id = item.log_id,
            code = item.handle_code,
            "run finished"
        );
        if item.handle_code != SUCCESS_CODE {
            return Ok(());
        }
        let Some(child_jobid) = writers.children.submit(row.job_id).await? else {
            return Ok(());
        };
        let children: Vec<&str> = child_jobid
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
                    let sent = match pool {
                        Some(p) => p
                            .send(TriggerJob(req))
                            .await
                            .map_err(|e| e.to_string())
                            .and_then(|r| r.map_err(|e| e.to_string())),
                        None => Err("no trigger pool".to_string()),
                    };
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

    /// Marks runs lost whose address never registered and which started over ten minutes ago.
    pub async fn sweep_lost(db: &DatabaseConnection, clock: &Clock) -> Result<usize> {
        let now = clock.now_ms();
        let candidates = logs::running_since(db, ms_to_naive(now - LOST_UNREGISTERED_MS)).await?;
        if candidates.is_empty() {
            return Ok(0);
        }
        let known = registry::all_values(db).await?;
        let mut n = 0;
        for (id, addr) in candidates {
            if addr.as_ref().is_some_and(|a| known.contains(a)) {
                continue;
            }
            if logs::record_handle(db, id, FAIL_CODE, Some(LOST_MSG), now)
                .await?
                .is_some()
            {
                n += 1;
            }
        }
        if n > 0 {
            tracing::warn!(lost = n, "runs on unregistered executors marked lost");
        }
        Ok(n)
    }
}

impl Actor for CompleteActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(LOST_SWEEP, |a, ctx| {
            let (db, clock) = (a.db.clone(), a.clock.clone());
            let guard = a.activity.enter();
            ctx.spawn(
                async move {
                    let _guard = guard;
                    if let Err(e) = Self::sweep_lost(&db, &clock).await {
                        tracing::error!(error = %e, "lost-result sweep failed");
                    }
                }
                .into_actor(a),
            );
        });
    }
}

impl Handler<ConnectPool> for CompleteActor {
    type Result = ();

    fn handle(&mut self, msg: ConnectPool, _ctx: &mut Self::Context) {
        self.pool = Some(msg.0);
    }
}

impl Handler<Callback> for CompleteActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: Callback, _ctx: &mut Self::Context) -> Self::Result {
        let (db, writers, pool, depth) = (
            self.db.clone(),
            self.writers.clone(),
            self.pool.clone(),
            self.max_chain_depth,
        );
        let guard = self.activity.enter();
        self.metrics.callbacks(msg.0.len());
        Box::pin(async move {
            let _guard = guard;
            // concurrently, so the message's results (and other messages') share batches
            futures::future::join_all(msg.0.into_iter().map(|item| {
                let (db, writers, pool) = (&db, &writers, pool.as_ref());
                async move {
                    let id = item.log_id;
                    if let Err(e) = Self::apply(db, writers, pool, depth, item).await {
                        tracing::error!(log_id = id, error = %e, "cannot record run result");
                    }
                }
            }))
            .await;
        })
    }
}

impl Handler<SweepLost> for CompleteActor {
    type Result = ResponseFuture<Result<usize>>;

    fn handle(&mut self, _: SweepLost, _ctx: &mut Self::Context) -> Self::Result {
        let (db, clock) = (self.db.clone(), self.clock.clone());
        Box::pin(async move { Self::sweep_lost(&db, &clock).await })
    }
}
