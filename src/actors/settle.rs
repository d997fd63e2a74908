//! SettleActor: settles fires in doubt ([`crate::store::in_doubt`]) by asking their executors,
//! never by guessing.
//!
//! Every [`SETTLE_EVERY`] it marks claims older than `scheduler.claim_timeout_ms` in doubt
//! (their node stopped mid-dispatch), takes up to [`BATCH`] rows in doubt (no other node
//! settles them meanwhile) and asks every executor of each row's group about its log id
//! (`POST /log`, which an executor answers for a log id it received: XXL-JOB's find the run's
//! log file, filed under the day the run was sent; xjob's also remember the runs they have or
//! just had). Then, per row:
//!
//! - a result already came, or an executor has the run → **received**: recorded as dispatched
//!   to it; its result is awaited like any run's (a run whose result never comes is found lost
//!   as any other);
//! - an executor restarted since the run was sent and has no trace of it (xjob's executors
//!   say so) → **lost with it**: recorded as a failed trigger (a run it had died with it);
//! - every executor answered that it has no such run → **not received**: dispatched again,
//!   with the same log id (an executor that holds it after all refuses a repeated log id), or,
//!   for a scheduled fire now later than the misfire threshold whose job says `DO_NOTHING`,
//!   dropped as that policy drops misfires;
//! - otherwise (an executor unreachable, or answering something else) → asked again next
//!   time; once in doubt longer than `scheduler.claim_timeout_ms`, recorded as a failed
//!   trigger (the job's retry policy, or the workflow node's attempts, then act).
//!
//! Messages: [`SettleNow`] (a round now, for tests and tools).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures::StreamExt;
use sea_orm::DatabaseConnection;

use crate::activity::Activity;
use crate::actors::trigger_pool::{DispatchClaimed, TriggerPool};
use crate::clock::Clock;
use crate::directory::Directory;
use crate::error::Result;
use crate::model::TriggerType;
use crate::model::wire::{LogParam, LogResult, ReturnT, SUCCESS_CODE};
use crate::store::in_doubt::{self, Doubt};
use crate::trigger::{Trigger, TriggerRequest};

/// Time between two rounds.
pub(crate) const SETTLE_EVERY: Duration = Duration::from_secs(2);
/// Most rows one round settles.
const BATCH: u64 = 200;
/// Executors asked at once.
const ASKS_AT_ONCE: usize = 32;
/// A second ask, this much later than the row was recorded, when the first found nothing: the
/// day an executor files a run's log under is the day it was sent, which may be the next one.
const LATER_DAY_MS: i64 = 90_000;

/// Runs a round now; answers what it did.
#[derive(Message, Debug)]
#[rtype(result = "Result<Settled>")]
pub(crate) struct SettleNow;

/// What a round did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    /// Claims found orphaned (now in doubt).
    pub orphaned: u64,
    /// Rows found received by an executor.
    pub received: usize,
    /// Rows no executor had: dispatched again with their log id.
    pub resent: usize,
    /// Rows nobody could answer for within the bound, or whose executor restarted since:
    /// recorded failed.
    pub failed: usize,
    /// Scheduled fires no executor received, later than the misfire threshold, whose job
    /// skips misfires: dropped.
    pub dropped: usize,
    /// Rows left for a later round.
    pub waiting: usize,
}

/// What an executor said about a log id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// It has (or had) the run.
    Has,
    /// It has no such run.
    HasNot,
    /// It restarted since the run was sent and has no trace of it: a run its earlier process
    /// had died with it (xjob's executors).
    Lost,
    /// No telling: unreachable, refused, or an answer that is neither.
    Unknown,
}

/// Reads an executor's `/log` answer.
fn answer(r: &ReturnT<LogResult>) -> Answer {
    if r.code != SUCCESS_CODE {
        return Answer::Unknown;
    }
    let Some(c) = &r.content else {
        return Answer::Unknown;
    };
    let text = c.log_content.trim_start();
    // what executors answer for a log they never wrote: XXL-JOB's Java executors
    // (`readLog fail, logFile not exists` / `not found`), pyxxl (`No such logid logs.`), xjob's
    let head: String = text.chars().take(160).collect::<String>().to_lowercase();
    if head.starts_with("readlog fail") && head.contains("; unsure:") {
        Answer::Lost
    } else if head.starts_with("readlog fail")
        || head.starts_with("no such logid")
        || head.contains("logfile not exists")
        || head.contains("logfile not found")
    {
        Answer::HasNot
    } else {
        Answer::Has
    }
}

/// The settle actor.
pub(crate) struct SettleActor {
    metrics: crate::metrics::Metrics,
    db: DatabaseConnection,
    clock: Clock,
    directory: Directory,
    trigger: Arc<Trigger>,
    pool: Addr<TriggerPool>,
    /// How long a row may stay in doubt while nobody can answer for it (and how old a claim
    /// without its outcome is orphaned), ms.
    bound_ms: i64,
    /// `scheduler.misfire_threshold_ms`.
    misfire_ms: i64,
    activity: Activity,
    /// When this node first found each row in doubt (epoch ms).
    since: HashMap<i64, i64>,
    busy: bool,
    /// The engine is stopping: no more periodic rounds.
    stopped: bool,
}

impl SettleActor {
    /// A settler over `trigger`'s database and clock, asking executors through its client,
    /// dispatching again through `pool` and counting outcomes in its metrics; `bound_ms` is
    /// `scheduler.claim_timeout_ms`, `misfire_ms` `scheduler.misfire_threshold_ms`.
    pub(crate) fn new(
        trigger: Arc<Trigger>,
        directory: Directory,
        pool: Addr<TriggerPool>,
        (bound_ms, misfire_ms): (i64, i64),
        activity: Activity,
    ) -> Self {
        SettleActor {
            metrics: trigger.metrics().clone(),
            db: trigger.db().clone(),
            clock: trigger.clock().clone(),
            directory,
            trigger,
            pool,
            bound_ms,
            misfire_ms,
            activity,
            since: HashMap::new(),
            busy: false,
            stopped: false,
        }
    }

    /// One round (see the module docs), with when this node first found each row in doubt.
    async fn round(
        db: DatabaseConnection,
        clock: Clock,
        directory: Directory,
        trigger: Arc<Trigger>,
        pool: Addr<TriggerPool>,
        (bound_ms, misfire_ms): (i64, i64),
        mut since: HashMap<i64, i64>,
    ) -> (Result<Settled>, HashMap<i64, i64>) {
        let mut out = Settled::default();
        let now = clock.now_ms();
        let r = async {
            out.orphaned = in_doubt::mark_orphaned(&db, now - bound_ms).await?;
            if out.orphaned > 0 {
                tracing::warn!(
                    rows = out.orphaned,
                    "fires claimed by a node that stopped mid-dispatch are in doubt; asking their executors"
                );
            }
            let (token, doubts) = in_doubt::take(&db, BATCH).await?;
            if doubts.is_empty() {
                since.clear();
                return Ok(());
            }
            let seen: std::collections::HashSet<i64> = doubts.iter().map(|d| d.id).collect();
            since.retain(|id, _| seen.contains(id));
            let asked = ask_all(&directory, &trigger, &doubts).await;
            let mut resend = Vec::new();
            let mut later = Vec::new();
            for (d, answers) in doubts.into_iter().zip(asked) {
                let first = *since.entry(d.id).or_insert(now);
                let has = answers.iter().find(|(_, a)| *a == Answer::Has);
                if d.has_result || has.is_some() {
                    let address = has.map(|(a, _)| a.as_str());
                    let msg = match address {
                        Some(a) => format!(
                            "In doubt after the node sending it stopped: executor {a} has it; its result is awaited"
                        ),
                        None => "In doubt after the node sending it stopped: its result came"
                            .to_string(),
                    };
                    in_doubt::received(&db, d.id, token, address, now, &msg).await?;
                    tracing::info!(log_id = d.id, address, "fire in doubt settled: received");
                    since.remove(&d.id);
                    out.received += 1;
                } else if let Some((a, _)) = answers.iter().find(|(_, x)| *x == Answer::Lost) {
                    let msg = format!(
                        "Trigger Fail：in doubt after the node sending it stopped; executor {a} restarted since and has no trace of it (a run it had died with it)"
                    );
                    in_doubt::failed(&db, d.id, token, now, &msg).await?;
                    tracing::warn!(log_id = d.id, address = %a, "fire in doubt recorded failed: its executor restarted since");
                    since.remove(&d.id);
                    out.failed += 1;
                } else if !answers.is_empty() && answers.iter().all(|(_, a)| *a == Answer::HasNot)
                {
                    since.remove(&d.id);
                    if misfired(&db, &d, now, misfire_ms).await? {
                        in_doubt::drop_misfired(&db, d.id, token).await?;
                        tracing::info!(
                            log_id = d.id,
                            "fire in doubt settled: no executor has it, and its job skips misfires (DO_NOTHING)"
                        );
                        out.dropped += 1;
                        continue;
                    }
                    tracing::info!(
                        log_id = d.id,
                        "fire in doubt settled: no executor has it; sending it again with its log id"
                    );
                    resend.push(d);
                } else if now - first >= bound_ms {
                    let said: Vec<String> = answers
                        .iter()
                        .map(|(a, x)| format!("{a}: {x:?}"))
                        .collect();
                    let msg = format!(
                        "Trigger Fail：in doubt after the node sending it stopped, and its executors could not say whether they received it within {} s ({})",
                        bound_ms / 1000,
                        if said.is_empty() {
                            "the group has no executor".to_string()
                        } else {
                            said.join(", ")
                        }
                    );
                    in_doubt::failed(&db, d.id, token, now, &msg).await?;
                    tracing::warn!(log_id = d.id, "fire in doubt recorded failed: {msg}");
                    since.remove(&d.id);
                    out.failed += 1;
                } else {
                    later.push(d.id);
                }
            }
            out.waiting = later.len();
            in_doubt::release(&db, &later, token).await?;
            out.resent = resend.len();
            if !resend.is_empty() {
                let reqs: Vec<TriggerRequest> = resend.into_iter().map(again).collect();
                // claimed under `token`: the trigger writes each one's outcome
                if let Err(e) = pool.send(DispatchClaimed(reqs, Vec::new())).await {
                    tracing::error!(error = %e, "fires in doubt not handed to the trigger pool");
                }
            }
            Ok(())
        }
        .await;
        (r.map(|()| out), since)
    }

    fn run(
        &mut self,
        ctx: &mut Context<Self>,
        reply: Option<tokio::sync::oneshot::Sender<Result<Settled>>>,
    ) {
        if self.busy {
            if let Some(tx) = reply {
                let _ = tx.send(Ok(Settled::default()));
            }
            return;
        }
        self.busy = true;
        let guard = self.activity.enter();
        let fut = Self::round(
            self.db.clone(),
            self.clock.clone(),
            self.directory.clone(),
            self.trigger.clone(),
            self.pool.clone(),
            (self.bound_ms, self.misfire_ms),
            std::mem::take(&mut self.since),
        );
        ctx.spawn(fut.into_actor(self).map(move |(r, since), act, _| {
            drop(guard);
            act.busy = false;
            act.since = since;
            if let Ok(s) = &r {
                act.metrics.settled(s);
            }
            if let Err(e) = &r {
                tracing::warn!(error = %e, "settling fires in doubt failed; the next round retries");
            }
            if let Some(tx) = reply {
                let _ = tx.send(r);
            }
        }));
    }
}

/// Whether `d`, a fire no executor received, is a scheduled fire now later than the misfire
/// threshold whose job skips misfires (`DO_NOTHING`, the default).
async fn misfired(db: &DatabaseConnection, d: &Doubt, now: i64, misfire_ms: i64) -> Result<bool> {
    let Some(fire) = d.fire_time else {
        return Ok(false);
    };
    if d.trigger_type == TriggerType::Workflow || now - fire <= misfire_ms {
        return Ok(false);
    }
    match crate::store::jobs::get(db, d.job_id).await {
        Ok(job) => Ok(job.misfire_strategy != "FIRE_ONCE_NOW"),
        Err(crate::error::Error::JobNotFound { .. }) => Ok(true),
        Err(e) => Err(e),
    }
}

/// The request that sends `d` again, with its log id (claimed already).
fn again(d: Doubt) -> TriggerRequest {
    let mut req = TriggerRequest::new(d.job_id, d.trigger_type);
    req.log_id = Some(d.id);
    req.fire_time = d.fire_time;
    if d.trigger_type == TriggerType::Workflow {
        // a node's attempts are the workflow's: its run row is not retried itself
        req.fail_retry_count = Some(0);
        // …and its message states the node's attempts left, as its first dispatch did
        req.shown_retry = d.retries_left;
        req.executor_param = d.param;
    }
    req.sharding_param = d.sharding;
    req
}

/// Asks every executor of each row's group about the row's log id; answers, per row, what
/// each address said.
async fn ask_all(
    directory: &Directory,
    trigger: &Trigger,
    doubts: &[Doubt],
) -> Vec<Vec<(String, Answer)>> {
    let groups = directory.groups();
    let mut asks = Vec::new();
    for (i, d) in doubts.iter().enumerate() {
        if d.has_result {
            continue;
        }
        let list = groups
            .get(&d.job_group)
            .and_then(|g| g.address_list.clone())
            .unwrap_or_default();
        for a in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            asks.push((i, a.to_string(), d.job_group, d.id, d.recorded_ms));
        }
    }
    let mut out: Vec<Vec<(String, Answer)>> = vec![Vec::new(); doubts.len()];
    let mut answers = futures::stream::iter(asks.into_iter().map(|(i, address, group, id, at)| {
        let client = trigger.client_for(group);
        async move {
            let ask = |at: i64| {
                client.log(
                    &address,
                    LogParam {
                        log_date_tim: at,
                        log_id: id,
                        from_line_num: 1,
                    },
                )
            };
            let mut a = answer(&ask(at).await);
            if a == Answer::HasNot {
                a = answer(&ask(at + LATER_DAY_MS).await);
            }
            (i, address, a)
        }
    }))
    .buffer_unordered(ASKS_AT_ONCE);
    while let Some((i, address, a)) = answers.next().await {
        out[i].push((address, a));
    }
    out
}

impl Actor for SettleActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.run(ctx, None);
        ctx.run_interval(SETTLE_EVERY, |a, ctx| {
            if !a.stopped {
                a.run(ctx, None);
            }
        });
    }
}

/// No more rounds: the engine is stopping (its pool may close under a round).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct StopSettling;

impl Handler<StopSettling> for SettleActor {
    type Result = ();

    fn handle(&mut self, _: StopSettling, _: &mut Self::Context) {
        self.stopped = true;
    }
}

impl actix::Supervised for SettleActor {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        tracing::warn!(actor = "settle", "actor stopped; restarting it");
        self.busy = false;
    }
}

impl Handler<SettleNow> for SettleActor {
    type Result = ResponseFuture<Result<Settled>>;

    fn handle(&mut self, _: SettleNow, ctx: &mut Self::Context) -> Self::Result {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.run(ctx, Some(tx));
        Box::pin(async move {
            rx.await
                .unwrap_or_else(|_| Err(crate::error::Error::Stopped("settle actor")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(code: i32, content: &str) -> ReturnT<LogResult> {
        ReturnT {
            code,
            msg: None,
            content: Some(LogResult {
                from_line_num: 1,
                to_line_num: 0,
                log_content: content.into(),
                is_end: true,
            }),
        }
    }

    /// Executors' answers read as they mean: a missing log in XXL-JOB's, pyxxl's and xjob's
    /// words is "not received", any page "received", anything else "no telling".
    #[test]
    fn answers_read_as_executors_mean_them() {
        assert_eq!(
            answer(&log(200, "readLog fail, logFile not exists")),
            Answer::HasNot
        );
        assert_eq!(
            answer(&log(200, "readLog fail, logFile not found")),
            Answer::HasNot
        );
        assert_eq!(answer(&log(200, "No such logid logs.")), Answer::HasNot);
        assert_eq!(
            answer(&log(
                200,
                "readLog fail, logFile not exists (run logs are off on this executor)"
            )),
            Answer::HasNot
        );
        assert_eq!(answer(&log(200, "2026-12-02 job start\n")), Answer::Has);
        assert_eq!(answer(&log(200, "")), Answer::Has, "received, not started");
        assert_eq!(
            answer(&log(
                200,
                "readLog fail, logFile not exists; unsure: this executor started after the run was sent"
            )),
            Answer::Lost
        );
        assert_eq!(answer(&log(500, "anything")), Answer::Unknown);
        assert_eq!(
            answer(&ReturnT::fail("xxl-job remoting error(connection refused)")),
            Answer::Unknown
        );
    }
}
