//! WorkflowActor: runs workflows ([`crate::store::workflow_runs`]).
//!
//! Every [`POLL`] (and [`FOLLOW_UP`] after a pass that moved runs on) it starts the runs of
//! scheduled workflows that are due, applies the results of node runs' run rows (written by the
//! run-row writer like any run's) in one transaction per batch, which starts the node runs they
//! make due, their run rows recorded claimed by this node; it then hands them to the trigger
//! pool, the path of a scheduled fire. Results are looked for at every poll while the actor is
//! active (for [`ACTIVE_FOR_MS`] after it moved or sent runs, started one or was asked to apply
//! runs) and once a second otherwise ([`looks_for_results`]): an idle node then costs the
//! database one look a second instead of five, and the node that moved a run on looks at the
//! pace of its runs. Scheduled workflows are looked for when the last look saw the next one
//! due, and at least once a second (a schedule changed on this node is looked for at the next
//! poll: [`SchedulesChanged`]). Every [`RECOVER_MS`] (and at start) it recovers what a
//! stopped node left: pending rows nobody claimed (recorded by earlier releases) are claimed
//! and dispatched; rows claimed by a node that died before or while sending them are in doubt,
//! and the settle actor (`actors::settle`, docs/architecture.md
//! §6) asks their executors: a run one has is awaited, one none has is sent again under the same
//! log id, one that cannot be settled in time is recorded as a failed trigger (the node's
//! attempts then act); rows deleted before their result count as failed. On a shared database
//! every node does this: the run's row lock, the once-only `done` of each row's link and the
//! claim make each step happen once.

use std::time::Duration;

use actix::prelude::*;
use sea_orm::DatabaseConnection;

use crate::activity::Activity;
use crate::actors::trigger_pool::{DispatchClaimed, TriggerPool};
use crate::clock::Clock;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::model::TriggerType;
use crate::store::workflow_runs::{Changes, Dispatch, Finished, Runs, SCHEDULE_AHEAD_MS, StartOne};
use crate::trigger::TriggerRequest;

/// How often results are looked for.
pub(crate) const POLL: Duration = Duration::from_millis(200);
/// How soon a pass that moved runs on is followed by the next.
const FOLLOW_UP: Duration = Duration::from_millis(20);
/// How long after its last work (ms) the actor looks for results at every poll.
const ACTIVE_FOR_MS: i64 = 30_000;
/// When idle, results are looked for at one poll in this many (once a second).
const IDLE_LOOK_EVERY: u64 = 5;
/// Time between two recovery passes, ms.
const RECOVER_MS: i64 = 5_000;
/// Most run-row results one pass reads and applies.
const BATCH: u64 = 1000;
// a full pass is split into lanes
const _: () = assert!(crate::store::workflow_runs::LANES_FROM as u64 <= BATCH);

/// Most starts recorded in one transaction.
pub(crate) const MAX_STARTS: usize = 256;

/// Most batches of started runs being claimed and sent at once; beyond that the next batch of
/// starts waits (dispatch is not outrun without bound).
const DISPATCHES: usize = 4;

/// Starts a run of a workflow; answers the run's id.
#[derive(Message, Debug)]
#[rtype(result = "Result<i64>")]
pub(crate) struct StartRun {
    /// The workflow.
    pub(crate) workflow_id: i32,
    /// Why it runs.
    pub(crate) trigger_type: TriggerType,
    /// The trigger's params (the run's first context).
    pub(crate) params: Option<String>,
}

/// Runs started by the start lane (`actors::workflow_starts`), answered already: their
/// changes are counted and their node runs sent, holding `permit` (one of [`DISPATCHES`],
/// taken only when there are node runs to send) and `activity` until sent.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Started {
    pub(crate) ch: Changes,
    pub(crate) permit: Option<tokio::sync::OwnedSemaphorePermit>,
    pub(crate) activity: crate::activity::ActivityGuard,
}

/// Applies the results there are now (tests, and a node that just wrote some).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct PollNow;

/// A workflow's schedule was created, changed, started or stopped on this node: the next poll
/// looks for due scheduled workflows, whenever the last look expected the next one.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct SchedulesChanged;

/// Node runs were sent outside the actor (a run started again, a node marked): their results
/// are looked for at every poll for a while.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct Awake;

/// Stops polling, firing schedules and dispatching (the engine is stopping); answers once a
/// pass in progress has ended.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct StopWorkflows;

/// How the actor recovers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Recovery {
    /// A single-node database: everything an earlier process left is stale at start.
    pub(crate) single_node: bool,
    /// Pending rows older than this (ms) are recovered.
    pub(crate) recover_after_ms: i64,
    /// A scheduled fire later than this (ms) follows the workflow's misfire strategy.
    pub(crate) misfire_ms: i64,
    /// The zone CRON schedules are read in.
    pub(crate) time_zone: chrono_tz::Tz,
}

/// Runs workflows.
pub(crate) struct WorkflowActor {
    db: DatabaseConnection,
    runs: Runs,
    pool: Addr<TriggerPool>,
    clock: Clock,
    activity: Activity,
    metrics: Metrics,
    alarms: std::sync::Arc<Vec<Box<dyn crate::alarm::Alarm>>>,
    recovery: Recovery,
    /// When this actor started (epoch ms): a single node's earlier rows are older.
    started_ms: i64,
    polls: u64,
    /// Until when (epoch ms) results are looked for at every poll ([`looks_for_results`]).
    active_until_ms: i64,
    /// When the next look for due scheduled workflows is (epoch ms): the next fire the last
    /// look saw, or a second after it (schedules changed on other nodes are seen then).
    schedules_due_ms: i64,
    /// Schedule changes told ([`SchedulesChanged`]): a look that began before one does not
    /// put the next look off.
    schedule_changes: u64,
    /// When the last recovery pass ran (epoch ms).
    recovered_ms: i64,
    busy: bool,
    stopped: bool,
    /// Starts asked while a batch of them was being recorded: the next batch.
    starts: Vec<(StartOne, tokio::sync::oneshot::Sender<Result<i64>>)>,
    /// A batch of starts is being recorded.
    starting: bool,
    /// Batches of started runs being claimed and sent (at most [`DISPATCHES`]).
    dispatching: std::sync::Arc<tokio::sync::Semaphore>,
}

/// What a [`WorkflowActor`] is built from.
pub(crate) struct WorkflowWiring {
    pub(crate) db: DatabaseConnection,
    pub(crate) runs: Runs,
    /// Where node runs are dispatched.
    pub(crate) pool: Addr<TriggerPool>,
    pub(crate) clock: Clock,
    pub(crate) activity: Activity,
    pub(crate) metrics: Metrics,
    /// Told when a top-level run fails.
    pub(crate) alarms: std::sync::Arc<Vec<Box<dyn crate::alarm::Alarm>>>,
    pub(crate) recovery: Recovery,
}

impl WorkflowActor {
    /// A workflow actor dispatching through `pool`.
    pub(crate) fn new(w: WorkflowWiring) -> Self {
        let WorkflowWiring {
            db,
            runs,
            pool,
            clock,
            activity,
            metrics,
            alarms,
            recovery,
        } = w;
        let started_ms = clock.now_ms();
        WorkflowActor {
            db,
            runs,
            pool,
            clock,
            activity,
            metrics,
            alarms,
            recovery,
            started_ms,
            polls: 0,
            active_until_ms: 0,
            schedules_due_ms: 0,
            schedule_changes: 0,
            recovered_ms: 0,
            busy: false,
            stopped: false,
            starts: Vec::new(),
            starting: false,
            dispatching: std::sync::Arc::new(tokio::sync::Semaphore::new(DISPATCHES)),
        }
    }

    /// The batches of started runs being sent: a start lane's batches count among them.
    pub(crate) fn dispatching(&self) -> std::sync::Arc<tokio::sync::Semaphore> {
        self.dispatching.clone()
    }

    fn outlet(&self) -> Outlet {
        Outlet {
            db: self.db.clone(),
            metrics: self.metrics.clone(),
            alarms: self.alarms.clone(),
            activity: self.activity.clone(),
        }
    }

    /// Results are looked for at every poll for a while from now.
    fn touch(&mut self) {
        self.active_until_ms = self
            .active_until_ms
            .max(self.clock.now_ms() + ACTIVE_FOR_MS);
    }

    fn poll(&mut self, ctx: &mut Context<Self>) {
        if self.busy || self.stopped {
            return;
        }
        self.busy = true;
        let first = self.polls == 0;
        let now = self.clock.now_ms();
        let recover = first || due_by(now, self.recovered_ms + RECOVER_MS, RECOVER_MS);
        if recover {
            self.recovered_ms = now;
        }
        let look = recover || looks_for_results(now, self.active_until_ms, self.polls);
        let due_look = recover || due_by(now, self.schedules_due_ms, SCHEDULE_AHEAD_MS);
        let changes = self.schedule_changes;
        self.polls += 1;
        let (db, runs, pool, clock, out, r) = (
            self.db.clone(),
            self.runs.clone(),
            self.pool.clone(),
            self.clock.clone(),
            self.outlet(),
            self.recovery,
        );
        let started_ms = self.started_ms;
        let guard = self.activity.enter();
        let fut = async move {
            if recover {
                let now = clock.now_ms();
                // a single node's earlier process left everything older than this one (what
                // it claimed and did not record is in doubt: the settle actor's)
                let pending_before = if first && r.single_node {
                    started_ms
                } else {
                    now - r.recover_after_ms
                };
                recover_pass(&db, &runs, &pool, pending_before, now).await?;
            }
            // scheduled workflows due now, when one may be
            let mut worked = false;
            let mut next_due = None;
            if due_look {
                out.metrics.workflow_schedule_looked();
                let (ch, next) = runs
                    .fire_due(&db, clock.now_ms(), r.misfire_ms, r.time_zone)
                    .await?;
                next_due = Some(next);
                worked = !ch.dispatch.is_empty();
                out.done(&ch);
                dispatch(&db, &runs, &pool, ch).await;
            }
            if look {
                out.metrics.workflow_looked();
                loop {
                    // the look reads through the pool: an idle poll costs the writer nothing
                    let items = runs.finished(&db, BATCH).await?;
                    let n = items.len() as u64;
                    if n == 0 {
                        break;
                    }
                    worked = true;
                    let (ch, failed) = apply_in_lanes(&db, &runs, items, clock.now_ms()).await;
                    out.done(&ch);
                    dispatch(&db, &runs, &pool, ch).await;
                    if let Some(e) = failed {
                        return Err(e);
                    }
                    if n < BATCH {
                        break;
                    }
                }
            }
            Ok::<_, crate::Error>((worked, next_due))
        };
        ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| {
            drop(guard);
            act.busy = false;
            if let Ok((_, Some(next))) = res
                && act.schedule_changes == changes
            {
                act.schedules_due_ms = next;
            }
            match res {
                // a pass that moved runs on looks again soon: their next results are near
                Ok((true, _)) => {
                    act.touch();
                    ctx.run_later(FOLLOW_UP, |a, ctx| a.poll(ctx));
                }
                Ok((false, _)) => {}
                Err(e) => tracing::warn!(error = %e, "workflow pass failed; the next one retries"),
            }
        }));
    }
}

/// Where a pass's ended runs are told: the metrics, the log, and the alarms of failed runs.
#[derive(Clone)]
struct Outlet {
    db: DatabaseConnection,
    metrics: Metrics,
    alarms: std::sync::Arc<Vec<Box<dyn crate::alarm::Alarm>>>,
    activity: Activity,
}

impl Outlet {
    fn done(&self, ch: &Changes) {
        self.metrics.workflow_transitions(ch.applied);
        for _ in 0..ch.started {
            self.metrics.workflow_started();
        }
        for &(run, workflow, ok) in &ch.ended {
            self.metrics.workflow_ended(ok);
            if ok {
                tracing::info!(run, workflow, "workflow run succeeded");
            } else {
                tracing::warn!(run, workflow, "workflow run failed");
                let me = self.clone();
                let guard = self.activity.enter();
                actix::spawn(async move {
                    me.alarm(run).await;
                    drop(guard);
                });
            }
        }
    }

    /// Sends the alarms of failed run `run` (a top-level one).
    async fn alarm(&self, run: i64) {
        let event = match crate::store::workflow_runs::failure_event(&self.db, run).await {
            Ok(Some(e)) => e,
            Ok(None) => return,
            Err(e) => {
                tracing::error!(run, error = %e, "workflow alarm not built");
                return;
            }
        };
        for a in self.alarms.iter() {
            if let Err(e) = a.send(event.clone()).await {
                tracing::error!(run, alarm = a.name(), error = %e, "workflow alarm not delivered");
            }
        }
    }
}

/// Applies `items` in [`Runs::lanes`] transactions at once, each over the results of its own
/// runs (by run id): a large pass on a database server uses more than one of its cores. A lane
/// the database ended for losing a race (two lanes locking one parent run of nested runs) is
/// applied again alone. Answers what the lanes that committed changed, and the error of one
/// that did not (its results stay unapplied for the next pass).
async fn apply_in_lanes(
    db: &DatabaseConnection,
    runs: &Runs,
    items: Vec<Finished>,
    now: i64,
) -> (Changes, Option<crate::Error>) {
    let lanes = runs.lanes(db, items.len());
    let mut parts: Vec<Vec<Finished>> = (0..lanes).map(|_| Vec::new()).collect();
    for f in items {
        parts[f.run_id.rem_euclid(lanes as i64) as usize].push(f);
    }
    parts.retain(|p| !p.is_empty());
    let applied =
        futures::future::join_all(parts.iter().map(|p| runs.apply(db, p.clone(), now))).await;
    let mut ch = Changes::default();
    let mut failed = None;
    for (r, part) in applied.into_iter().zip(parts) {
        let r = match r {
            Err(e) if crate::store::lost_race(&e) => runs.apply(db, part, now).await,
            r => r,
        };
        match r {
            Ok(c) => ch.absorb(c),
            Err(e) => failed = Some(e),
        }
    }
    (ch, failed)
}

async fn recover_pass(
    db: &DatabaseConnection,
    runs: &Runs,
    pool: &Addr<TriggerPool>,
    pending_before: i64,
    now: i64,
) -> Result<()> {
    let stale = runs.stale_pending(db, pending_before, BATCH).await?;
    if !stale.is_empty() {
        tracing::info!(
            rows = stale.len(),
            "dispatching workflow node runs an earlier node recorded but did not send"
        );
        let ch = Changes {
            dispatch: stale,
            ..Changes::default()
        };
        dispatch(db, runs, pool, ch).await;
    }
    let gone = runs.vanished(db, BATCH).await?;
    if !gone.is_empty() {
        let ch = runs.apply(db, gone, now).await?;
        dispatch(db, runs, pool, ch).await;
    }
    Ok(())
}

/// Claims `ch`'s pending rows to dispatch (unless it holds claimed ones already, as every
/// workflow transaction answers) and hands the ones this node holds to the trigger pool.
pub(crate) async fn dispatch(
    db: &DatabaseConnection,
    runs: &Runs,
    pool: &Addr<TriggerPool>,
    ch: Changes,
) {
    let list: Vec<Dispatch> = ch.dispatch;
    if list.is_empty() {
        return;
    }
    // the jobs the transaction read for its node runs: the trigger pool reads no job again
    let read: Vec<_> = ch.jobs.into_values().flatten().collect();
    let claimed: Option<std::collections::HashSet<i64>> = if ch.claimed {
        None
    } else {
        let ids: Vec<i64> = list.iter().map(|d| d.log_id).collect();
        let n = ids.len();
        match runs.claim(db, ids).await {
            Ok(c) => Some(c.into_iter().collect()),
            Err(e) => {
                // left pending: the recovery pass claims them
                tracing::warn!(error = %e, rows = n, "cannot claim workflow node runs; recovery sends them");
                return;
            }
        }
    };
    let reqs: Vec<TriggerRequest> = list
        .into_iter()
        .filter(|d| claimed.as_ref().is_none_or(|c| c.contains(&d.log_id)))
        .map(|d| {
            let mut req = TriggerRequest::new(d.job_id, TriggerType::Workflow);
            req.log_id = Some(d.log_id);
            // a node's attempts are the workflow's: the run row itself is not retried
            req.fail_retry_count = Some(0);
            // …and its message states the node's attempts left, the job's retry count at first
            req.shown_retry = Some(d.retries_left);
            req.executor_param = d.param;
            req.sharding_param = d.shard.map(|(i, n)| format!("{i}/{n}"));
            req
        })
        .collect();
    let n = reqs.len();
    if let Err(e) = pool.send(DispatchClaimed(reqs, read)).await {
        tracing::error!(rows = n, error = %e, "workflow node runs not handed to the trigger pool");
    }
}

impl actix::Supervised for WorkflowActor {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        tracing::warn!(actor = "workflow", "actor stopped; restarting it");
        self.busy = false;
    }
}

impl Actor for WorkflowActor {
    type Context = Context<Self>;

    /// A recovery pass at start, then a poll every [`POLL`].
    fn started(&mut self, ctx: &mut Self::Context) {
        self.poll(ctx);
        ctx.run_interval(POLL, |a, ctx| a.poll(ctx));
    }
}

impl Handler<StartRun> for WorkflowActor {
    type Result = ResponseFuture<Result<i64>>;

    /// Starts asked at once are recorded together: one transaction for all of them (their
    /// node runs' rows recorded claimed), so callers starting many runs cost the database a
    /// few statements per batch; on PostgreSQL a batch of starts of `PARALLEL` workflows
    /// started before is one statement ([`Runs::start_many`]). Each is answered once its
    /// batch committed; the sending follows.
    fn handle(&mut self, msg: StartRun, ctx: &mut Self::Context) -> Self::Result {
        let (answer, rx) = tokio::sync::oneshot::channel();
        let one = StartOne {
            workflow_id: msg.workflow_id,
            trigger_type: msg.trigger_type,
            params: msg.params,
        };
        self.starts.push((one, answer));
        self.touch();
        self.start_batch(ctx);
        Box::pin(async move {
            rx.await
                .map_err(|_| crate::Error::Stopped("workflow starts"))?
        })
    }
}

impl Handler<Started> for WorkflowActor {
    type Result = ();

    fn handle(&mut self, msg: Started, _ctx: &mut Self::Context) {
        let Started {
            ch,
            permit,
            activity,
        } = msg;
        self.touch();
        self.outlet().done(&ch);
        if ch.dispatch.is_empty() {
            return;
        }
        let (db, runs, pool) = (self.db.clone(), self.runs.clone(), self.pool.clone());
        actix::spawn(async move {
            dispatch(&db, &runs, &pool, ch).await;
            drop((permit, activity));
        });
    }
}

impl WorkflowActor {
    /// Records the starts asked so far, unless a batch is being recorded (the next one takes
    /// what came meanwhile).
    fn start_batch(&mut self, ctx: &mut Context<Self>) {
        if self.starting || self.starts.is_empty() {
            return;
        }
        self.starting = true;
        let n = self.starts.len().min(MAX_STARTS);
        let batch: Vec<_> = self.starts.drain(..n).collect();
        let (db, runs, pool, clock, out) = (
            self.db.clone(),
            self.runs.clone(),
            self.pool.clone(),
            self.clock.clone(),
            self.outlet(),
        );
        let (guard, dispatching) = (self.activity.enter(), self.dispatching.clone());
        let fut = async move {
            let (starts, answers): (Vec<StartOne>, Vec<_>) = batch.into_iter().unzip();
            let recorded = runs.start_many(&db, starts, clock.now_ms()).await;
            // the next batch is recorded while at most `DISPATCHES` are sent
            if let Some(ch) = answer_starts(recorded, answers) {
                out.done(&ch);
                if !ch.dispatch.is_empty()
                    && let Ok(permit) = dispatching.acquire_owned().await
                {
                    actix::spawn(async move {
                        dispatch(&db, &runs, &pool, ch).await;
                        drop((permit, guard));
                    });
                    return;
                }
            }
            drop(guard);
        };
        ctx.spawn(fut.into_actor(self).map(|_, act, ctx| {
            act.starting = false;
            act.start_batch(ctx);
        }));
    }
}

/// Answers a batch of starts with what recording them gave (`start_many`'s answer, one per
/// start in order): each its run's id or why not, once committed; answers the batch's changes
/// to count and send (its node runs are claimed and sent after the answers; a row left pending
/// by a failed claim is the recovery pass's). A failed batch gives its error to the first start
/// and `Stopped` to the others (a batch of more than one fails start by start in `start_many`).
pub(crate) fn answer_starts(
    recorded: Result<(Vec<Result<i64>>, Changes)>,
    answers: Vec<tokio::sync::oneshot::Sender<Result<i64>>>,
) -> Option<Changes> {
    match recorded {
        Ok((ids, ch)) => {
            for (id, answer) in ids.into_iter().zip(answers) {
                let _ = answer.send(id);
            }
            Some(ch)
        }
        Err(e) => {
            let mut e = Some(e);
            for answer in answers {
                let err = e.take().unwrap_or(crate::Error::Stopped("workflow start"));
                let _ = answer.send(Err(err));
            }
            None
        }
    }
}

impl Handler<StopWorkflows> for WorkflowActor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, _: StopWorkflows, _ctx: &mut Self::Context) -> Self::Result {
        self.stopped = true;
        // a pass in progress ends on its own; its activity unit is waited for by the stop
        Box::pin(actix::fut::ready(()))
    }
}

impl Handler<PollNow> for WorkflowActor {
    type Result = ();

    fn handle(&mut self, _: PollNow, ctx: &mut Self::Context) {
        self.touch();
        self.poll(ctx);
    }
}

impl Handler<SchedulesChanged> for WorkflowActor {
    type Result = ();

    fn handle(&mut self, _: SchedulesChanged, _ctx: &mut Self::Context) {
        self.schedule_changes += 1;
        self.schedules_due_ms = 0;
    }
}

impl Handler<Awake> for WorkflowActor {
    type Result = ();

    fn handle(&mut self, _: Awake, _ctx: &mut Self::Context) {
        self.touch();
    }
}

/// Whether something set for `at` (epoch ms, never more than `within` ms ahead when it was set)
/// is due `now`: when `now` reached it, or when it is further ahead than it can be — the clock
/// was set back, and waiting for it would stop the look for as long as the step.
fn due_by(now: i64, at: i64, within: i64) -> bool {
    now >= at || at - now > within
}

/// Whether the poll numbered `polls` (from 0) at `now` looks for results: every poll until
/// `active_until` (epoch ms), then one in [`IDLE_LOOK_EVERY`].
fn looks_for_results(now: i64, active_until: i64, polls: u64) -> bool {
    now < active_until || polls.is_multiple_of(IDLE_LOOK_EVERY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A time set ahead is due once the clock reaches it, never before while the clock
        /// moves on; if the clock is set back further than it can be ahead, it is due at once.
        #[test]
        fn a_time_set_ahead_is_due_when_reached_or_when_the_clock_went_back(
            set_at in 0i64..1_000_000_000,
            ahead in 0i64..=5_000,
            later in 0i64..10_000,
            back in 0i64..100_000,
        ) {
            let at = set_at + ahead;
            // the clock moving on from when it was set
            prop_assert_eq!(due_by(set_at + later, at, 5_000), later >= ahead);
            // the clock set back: due at once only beyond the furthest it could be ahead
            prop_assert_eq!(
                due_by(set_at - back, at, 5_000),
                ahead + back > 5_000 || ahead + back == 0
            );
        }

        /// While active, every poll looks for results; idle, exactly one poll in any
        /// [`IDLE_LOOK_EVERY`] in a row does (once a second at [`POLL`]'s 200 ms), so a
        /// result is applied within a second of its row being written whatever the state.
        #[test]
        fn an_idle_actor_looks_once_a_second_and_an_active_one_at_every_poll(
            now in 0i64..1_000_000_000,
            ahead in 1i64..60_000,
            first in 0u64..1_000_000,
        ) {
            let window = first..first + IDLE_LOOK_EVERY;
            prop_assert!(window.clone().all(|p| looks_for_results(now, now + ahead, p)));
            let idle = window.filter(|&p| looks_for_results(now, now, p)).count();
            prop_assert_eq!(idle, 1);
            prop_assert_eq!(
                IDLE_LOOK_EVERY as u128 * POLL.as_millis(),
                1_000,
                "idle looks are a second apart"
            );
        }
    }
}
