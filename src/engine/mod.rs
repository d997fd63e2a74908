//! Builds and wires the actor graph; the only file that knows all of it.
//!
//! ```text
//! ScanActor ──PushRing──▶ RingActor ──FireBatch──▶ TriggerPool ──▶ Trigger ──▶ ExecutorClient
//!                                                                   (NodeClient: in-process or remote)
//! InProcessExecutor ──Callback──▶ CompleteActor          RegistryActor (heartbeats, address lists)
//! Trigger outcomes, results ──▶ LogWriter ──RunsFinished──▶ CompleteActor (child jobs)
//! ```
//!
//! [`Engine::builder`] takes a [`Config`], optionally a database, a clock, handlers for the
//! in-process executor and a remote client; [`EngineBuilder::start`] migrates, verifies the lock
//! row, locks a SQLite file for this node (a second node on it is refused), starts the run-row
//! writer, adopts fires left pending by an earlier run, and starts the actors on the current
//! actix system. [`Engine::stop`] stops scanning, hands the ring's fires back to the database
//! (they stay pending for whichever node scans next), lets in-flight triggers finish, waits for
//! the writer to write what it was given, and releases the SQLite lock.

mod api;
mod start;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use sea_orm::DatabaseConnection;

use crate::activity::Activity;
use crate::actors::complete::CompleteActor;
use crate::actors::fail_monitor::FailMonitor;
use crate::actors::lease::{LeaseActor, ReleaseAll};
use crate::actors::log_report::LogReport;
use crate::actors::registry::{RefreshRegistry, RegistryActor};
use crate::actors::ring::{DispatchDue, DrainRing, GetRingSize, RingActor};
use crate::actors::scan::{ScanActor, ScanNow, ScanReport, StopScan};
use crate::actors::settle::SettleActor;
use crate::actors::trigger_pool::{GetPoolStats, PoolStats, TriggerJob, TriggerPool};
use crate::actors::workflow::{
    Awake, PollNow, SchedulesChanged, StartRun, StopWorkflows, WorkflowActor,
};
use crate::actors::workflow_starts::StartLane;
use crate::alarm::{Alarm, WebhookPolicy};
use crate::clock::Clock;
use crate::config::Config;
use crate::directory::Directory;
use crate::error::{Error, Result};
use crate::executor::{ExecutorClient, HandlerRegistry, HttpExecutorClient, InProcessExecutor};
use crate::jobs::JobSpec;
use crate::metrics::{Gauges, Metrics};
use crate::model::TriggerType;
use crate::model::wire::SUCCESS_CODE;
use crate::store::scan::ScanStore;
use crate::store::workflow_runs::StartOne;

use crate::schedule::Schedule;
use crate::store::writer::LogWriter;
use crate::store::{self, groups, jobs, logs};
use crate::trigger::{Trigger, TriggerRequest};

/// Starts a long-lived actor under an actix [`Supervisor`]: if its context stops it is
/// restarted with its state (its `Supervised::restarting` says so in the log).
fn supervised<A>(actor: A) -> Addr<A>
where
    A: Actor<Context = Context<A>> + Supervised,
{
    Supervisor::start(|_| actor)
}

/// A piece of a run's log, as the console's rolling log reads it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunLog {
    /// First line in `content`.
    pub from_line: i32,
    /// Last line number of the file (read again from `to_line + 1`).
    pub to_line: i32,
    /// The lines, each ending in `\n`.
    pub content: String,
    /// No more lines will come (the run has finished and everything was read).
    pub end: bool,
}

/// Builds an [`Engine`].
pub struct EngineBuilder {
    config: Config,
    clock: Option<Clock>,
    db: Option<DatabaseConnection>,
    handlers: HandlerRegistry,
    remote: Option<Arc<dyn ExecutorClient>>,
    http: Option<HttpExecutorClient>,
    log_dir: Option<PathBuf>,
    alarms: Vec<Box<dyn Alarm>>,
}

/// Handles to a running scheduling center.
#[derive(Clone)]
pub struct Engine {
    config: Arc<Config>,
    clock: Clock,
    db: DatabaseConnection,
    scan: Addr<ScanActor>,
    ring: Addr<RingActor>,
    pool: Addr<TriggerPool>,
    complete: Addr<CompleteActor>,
    registry: Addr<RegistryActor>,
    trigger: Arc<Trigger>,
    local_address: Option<String>,
    local_executor: Option<Arc<dyn ExecutorClient>>,
    /// The in-process executor (its queued run logs are written at a stop).
    in_process: Option<InProcessExecutor>,
    /// Keeps the fail monitor (retries and alarms) running.
    _fail_monitor: Addr<FailMonitor>,
    log_report: Addr<LogReport>,
    activity: Activity,
    metrics: Metrics,
    directory: Directory,
    writer: LogWriter,
    /// Where scan passes and job starts run.
    scan_store: ScanStore,
    /// The lease keeper on a shared database.
    leases: Option<Addr<LeaseActor>>,
    /// Runs workflows.
    workflows: Addr<WorkflowActor>,
    /// Records workflow starts asked of the engine, on a database server.
    start_lane: Option<StartLane>,
    /// The workflow runs' store (shared with the workflow actor).
    runs: crate::store::workflow_runs::Runs,
    /// Failed access-token checks on the admin API, per client address.
    token_failures: Arc<crate::console::auth::LoginLimiter>,
    /// Settles fires in doubt.
    settle: Addr<SettleActor>,
    /// This node's id when it is one of a cluster (leases on a shared database).
    cluster_node: Option<String>,
}

impl EngineBuilder {
    /// Uses this database instead of connecting to `config.database.url`.
    pub fn database(mut self, db: DatabaseConnection) -> Self {
        self.db = Some(db);
        self
    }

    /// Uses this clock (tests pass [`Clock::tokio_at`]); default [`Clock::system`].
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Handlers of the in-process executor (registered under `config.executor.app_name`).
    pub fn handlers(mut self, handlers: HandlerRegistry) -> Self {
        self.handlers = handlers;
        self
    }

    /// The client for executors at other addresses.
    pub fn remote_client(mut self, client: Arc<dyn ExecutorClient>) -> Self {
        self.remote = Some(client);
        self
    }

    /// Executors at other addresses are called through `client`, which is also the node's
    /// client for its own HTTP calls (webhook alarms, `httpJobHandler`): one client thread for
    /// the whole node. (Those calls never send the executors' access token.)
    pub fn http_client(mut self, client: HttpExecutorClient) -> Self {
        self.http = Some(client.clone());
        self.remote = Some(Arc::new(client));
        self
    }

    /// Adds an alarm for failed runs (besides those built from `config.alarm`).
    pub fn alarm(mut self, alarm: Box<dyn Alarm>) -> Self {
        self.alarms.push(alarm);
        self
    }

    /// Where the in-process executor writes run logs.
    pub fn log_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.log_dir = Some(dir.into());
        self
    }

    /// Connects, migrates and starts the actors on the current actix system, step by step
    /// (see `start.rs`).
    pub async fn start(self) -> Result<Engine> {
        start::run(self).await
    }
}

/// This machine's host name, for node ids operators can read (`xjob` when unknown).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| {
            h.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
                .take(40)
                .collect::<String>()
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "xjob".into())
}

impl Engine {
    /// Settles the fires in doubt now (a node stopped while sending them): asks their
    /// executors, then records them received, sends them again with their log ids, or records
    /// them failed once nobody could answer for them in time. The engine does this every 2 s.
    #[doc(hidden)]
    pub async fn settle_now(&self) -> Result<crate::actors::settle::Settled> {
        self.settle.send(crate::actors::settle::SettleNow).await?
    }

    /// Failed access-token checks on the admin API per client address (limited as failed
    /// logins are, with `security.login_max_failures_per_client` per window).
    pub(crate) fn token_failures(&self) -> &crate::console::auth::LoginLimiter {
        &self.token_failures
    }

    /// Starts building an engine with `config`.
    pub fn builder(config: Config) -> EngineBuilder {
        EngineBuilder {
            config,
            clock: None,
            db: None,
            handlers: HandlerRegistry::new(),
            remote: None,
            http: None,
            log_dir: None,
            alarms: Vec::new(),
        }
    }

    /// This node's id when it is one of a cluster (leases on a shared database), else `None`:
    /// told to xjob's executors when they register, sent with each call to them.
    pub fn cluster_node(&self) -> Option<&str> {
        self.cluster_node.as_deref()
    }

    /// The database.
    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The address this node's in-process executor registers, if it has one.
    pub fn local_address(&self) -> Option<&str> {
        self.local_address.as_deref()
    }

    /// In-flight work (tests wait for [`Activity::is_idle`] after advancing paused time).
    #[doc(hidden)]
    pub fn activity(&self) -> &Activity {
        &self.activity
    }

    /// The dispatch-time view of groups (with their own access tokens).
    pub(crate) fn directory(&self) -> &Directory {
        &self.directory
    }

    /// This node's in-process executor, if it has one (served over HTTP by the node's routes).
    pub(crate) fn local_executor(&self) -> Option<Arc<dyn ExecutorClient>> {
        self.local_executor.clone()
    }

    /// The completion actor (results from executors go here).
    #[doc(hidden)]
    pub fn complete(&self) -> &Addr<CompleteActor> {
        &self.complete
    }

    /// The log reporter.
    #[doc(hidden)]
    pub fn log_report(&self) -> &Addr<LogReport> {
        &self.log_report
    }

    /// The registry actor.
    #[doc(hidden)]
    pub fn registry(&self) -> &Addr<RegistryActor> {
        &self.registry
    }

    /// Returns the id of the group with `app_name`, creating an automatic group if none exists.
    pub async fn ensure_group(&self, app_name: &str, title: &str) -> Result<i32> {
        use sea_orm::TransactionTrait;
        if let Some(g) = groups::by_app_name(&self.db, app_name).await? {
            return Ok(g.id);
        }
        // nodes starting at once: one creates the group, the others find it
        let txn = self.db.begin().await?;
        store::lock_one_off(&txn).await?;
        if let Some(g) = groups::by_app_name(&txn, app_name).await? {
            return Ok(g.id);
        }
        let id = groups::insert(&txn, app_name, title, 0, None, self.clock.now_naive()).await?;
        txn.commit().await?;
        self.registry.send(RefreshRegistry).await??;
        Ok(id)
    }

    /// Validates and saves a job (created stopped); returns its id.
    pub async fn add_job(&self, spec: JobSpec) -> Result<i32> {
        self.check_webhook(spec.alarm_webhook.as_deref())?;
        let model = spec.validate(self.config.time_zone(), self.clock.now_naive())?;
        groups::get(&self.db, model.job_group).await?;
        Ok(self.insert_job(model).await?.id)
    }

    /// Stores a validated job (created stopped); answers it as stored.
    pub(crate) async fn insert_job(
        &self,
        model: entity::xxl_job_info::Model,
    ) -> Result<entity::xxl_job_info::Model> {
        Ok(self.scan_store.insert_job(model, None, None).await?.0)
    }

    /// [`Engine::insert_job`], or with `running` the job created started (its first fire the
    /// schedule's next time after now, as [`Engine::start_job`] sets it), in one write; answers
    /// it as stored, and `audit` (its target id set to the new job's) for the caller to record.
    pub(crate) async fn insert_job_audited(
        &self,
        model: entity::xxl_job_info::Model,
        running: bool,
        audit: crate::store::audit::Entry,
    ) -> Result<(
        entity::xxl_job_info::Model,
        Option<crate::store::audit::Entry>,
    )> {
        let (tz, now) = (self.config.time_zone(), self.clock.now_ms());
        let first = running.then(|| first_fire(&model, tz, now)).transpose()?;
        self.scan_store.insert_job(model, first, Some(audit)).await
    }

    /// Starts a job: its first fire is the schedule's next time after now.
    pub async fn start_job(&self, job_id: i32) -> Result<()> {
        self.start_checked(job_id, |_| Ok(()), None)
            .await
            .map(|_| ())
    }

    /// Starts job `job_id` if `check` accepts it as read (the console's permission check);
    /// answers it as stored, and `audit` back unless it was written with the change. On a
    /// single node the read, the check, the write and `audit` are one transaction in one round
    /// trip to the writer's connection.
    pub(crate) async fn start_checked(
        &self,
        job_id: i32,
        check: impl FnOnce(&entity::xxl_job_info::Model) -> Result<()> + Send + Sync + 'static,
        audit: Option<crate::store::audit::Entry>,
    ) -> Result<(
        entity::xxl_job_info::Model,
        Option<crate::store::audit::Entry>,
    )> {
        let (tz, now) = (self.config.time_zone(), self.clock.now_ms());
        self.scan_store
            .start_job(
                job_id,
                move |job| {
                    check(job)?;
                    first_fire(job, tz, now)
                },
                audit,
            )
            .await
    }

    /// Stops a job.
    pub async fn stop_job(&self, job_id: i32) -> Result<()> {
        jobs::get(&self.db, job_id).await?;
        jobs::set_stopped(&self.db, job_id).await?;
        self.job_edited(job_id);
        Ok(())
    }

    /// Triggers a job once now (MANUAL), with an optional param and address list override.
    pub async fn trigger_job(
        &self,
        job_id: i32,
        executor_param: Option<String>,
        address_list: Option<String>,
    ) -> Result<()> {
        jobs::get(&self.db, job_id).await?;
        let mut req = TriggerRequest::new(job_id, TriggerType::Manual);
        // absent: the job's own param (as XXL-JOB); `Some("")`: an empty one
        req.executor_param = executor_param;
        req.address_list = address_list.filter(|a| !a.trim().is_empty());
        self.pool.send(TriggerJob(req)).await?
    }

    /// Starts a run of workflow `workflow_id`'s current version (`trigger_type` MANUAL, API or
    /// CRON) with `params` as its first context (a JSON object; other text goes under
    /// `params`); answers the run's id once the run and its start nodes' run rows are
    /// committed (claimed by this node; they are sent right after). On PostgreSQL and
    /// MySQL/MariaDB the start is recorded by the start lane, a thread of its own
    /// (`actors/workflow_starts.rs`), so callers on other threads do not wait for the
    /// engine's.
    pub async fn trigger_workflow(
        &self,
        workflow_id: i32,
        trigger_type: TriggerType,
        params: Option<String>,
    ) -> Result<i64> {
        if let Some(lane) = &self.start_lane {
            return lane
                .start_run(StartOne {
                    workflow_id,
                    trigger_type,
                    params,
                })
                .await;
        }
        self.workflows
            .send(StartRun {
                workflow_id,
                trigger_type,
                params,
            })
            .await?
    }

    /// Stops workflow run `run_id` and its nested runs: node runs not yet sent are cancelled,
    /// running ones are killed at their executors. Answers `false` when the run was not
    /// running.
    pub async fn stop_workflow_run(&self, run_id: i64, who: &str) -> Result<bool> {
        let Some(kill) = self
            .runs
            .stop(&self.db, run_id, who, self.clock.now_ms())
            .await?
        else {
            return Ok(false);
        };
        for log_id in kill {
            // a row not yet dispatched, or finished meanwhile, has nothing to kill
            if let Err(e) = self.kill_run(log_id).await {
                tracing::debug!(log_id, error = %e, "workflow node run not killed");
            }
        }
        Ok(true)
    }

    /// Runs workflow run `run_id` again: from its failed and stopped nodes (`from` None, a
    /// failed or stopped run), or from node `from` (an ended run); the nodes upstream keep their
    /// results, the ones run again are kept as earlier attempts.
    pub async fn rerun_workflow_run(
        &self,
        run_id: i64,
        from: Option<String>,
        who: &str,
    ) -> Result<()> {
        use crate::store::workflow_runs::Again;
        let how = from.map_or(Again::Failed, Again::From);
        let ch = self
            .runs
            .again(&self.db, run_id, how, who, self.clock.now_ms())
            .await?;
        crate::actors::workflow::dispatch(&self.db, &self.runs, &self.pool, ch).await;
        self.workflows.do_send(Awake);
        Ok(())
    }

    /// Marks node `node` of workflow run `run_id` (failed, stopped or skipped) succeeded: what
    /// is downstream of it runs (again), and an ended run is RUNNING again.
    pub async fn mark_workflow_node(&self, run_id: i64, node: &str, who: &str) -> Result<()> {
        use crate::store::workflow_runs::Again;
        let ch = self
            .runs
            .again(
                &self.db,
                run_id,
                Again::Mark(node.to_string()),
                who,
                self.clock.now_ms(),
            )
            .await?;
        crate::actors::workflow::dispatch(&self.db, &self.runs, &self.pool, ch).await;
        self.workflows.do_send(Awake);
        Ok(())
    }

    /// A workflow's schedule was created, changed, started or stopped: the workflow actor looks
    /// for due scheduled workflows at its next poll (it otherwise looks at the next fire it
    /// saw, and once a second).
    pub(crate) fn workflow_schedules_changed(&self) {
        self.workflows.do_send(SchedulesChanged);
    }

    /// Applies the workflow node results written so far now (the actor does every 200 ms while
    /// runs move, once a second when idle).
    #[doc(hidden)]
    pub async fn poll_workflows(&self) -> Result<()> {
        self.workflows.send(PollNow).await?;
        Ok(())
    }

    /// Reads a run's log from `from_line` at the executor recorded on its row (the only address
    /// contacted); `end` is set once the run has a result and no lines are left (protocol.md §9).
    pub async fn run_log(&self, log_id: i64, from_line: i32) -> Result<RunLog> {
        self.writer.visible().await?;
        let row = logs::get(&self.db, log_id).await?;
        let Some(address) = row.executor_address.clone().filter(|a| !a.is_empty()) else {
            return Err(Error::Invalid {
                field: "logId",
                reason: "the run was never dispatched to an executor".into(),
            });
        };
        let param = crate::model::wire::LogParam {
            log_date_tim: row
                .trigger_time
                .map(crate::clock::naive_to_ms)
                .unwrap_or_default(),
            log_id,
            from_line_num: from_line.max(1),
        };
        let r = self
            .trigger
            .client_for(row.job_group)
            .log(&address, param)
            .await;
        let ok = r.is_success();
        let Some(c) = r.content.filter(|_| ok) else {
            return Err(Error::Invalid {
                field: "logId",
                reason: format!("executor {address} answered: {}", r.msg.unwrap_or_default()),
            });
        };
        let end = c.from_line_num > c.to_line_num && row.handle_code > 0;
        Ok(RunLog {
            from_line: c.from_line_num,
            to_line: c.to_line_num,
            content: c.log_content,
            end,
        })
    }

    /// Kills a running run at its executor (XXL-JOB's logKill): only a run whose trigger
    /// succeeded; on success the run is finished as failed with "Manual operation, kill job".
    pub async fn kill_run(&self, log_id: i64) -> Result<()> {
        self.writer.visible().await?;
        let row = logs::get(&self.db, log_id).await?;
        if row.trigger_code != SUCCESS_CODE {
            return Err(Error::Invalid {
                field: "logId",
                reason: "only a run whose trigger succeeded can be killed".into(),
            });
        }
        let address = row.executor_address.clone().unwrap_or_default();
        let since = self.clock.now_ms();
        let r = self
            .trigger
            .client_for(row.job_group)
            .kill(&address, row.job_id)
            .await;
        if !r.is_success() {
            return Err(Error::Invalid {
                field: "logId",
                reason: format!(
                    "executor {address} refused the kill: {}",
                    r.msg.unwrap_or_default()
                ),
            });
        }
        let msg = format!("Manual operation, kill job:{}", r.msg.unwrap_or_default());
        // the executor reports the kill too; the center's message wins whichever lands first
        logs::record_kill(&self.db, log_id, &msg, self.clock.now_ms(), since).await?;
        Ok(())
    }

    /// Runs one scan pass now (the loop also runs one every second).
    #[doc(hidden)]
    pub async fn scan_now(&self) -> Result<ScanReport> {
        self.scan.send(ScanNow).await?
    }

    /// The engine's counters and histograms.
    #[doc(hidden)]
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The addresses of group `group_id`'s executors, normalised (trailing `/`): those listed
    /// for it now and those registered under its appName with a live heartbeat.
    pub(crate) async fn group_addresses(
        &self,
        group_id: i32,
    ) -> Result<std::collections::HashSet<String>> {
        use crate::executor::client::normalise;
        let g = groups::get(&self.db, group_id).await?;
        let mut out: std::collections::HashSet<String> = g
            .address_list
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .filter(|a| !a.trim().is_empty())
            .map(normalise)
            .collect();
        if let Some(live) = self.live_executors().await?.remove(&g.app_name) {
            out.extend(live.iter().map(|a| normalise(a)));
        }
        Ok(out)
    }

    /// Executor addresses with a heartbeat younger than `registry.dead_secs`, by appname.
    pub(crate) async fn live_executors(
        &self,
    ) -> Result<std::collections::BTreeMap<String, Vec<String>>> {
        let alive_after = self
            .clock
            .now_naive()
            .checked_sub_signed(chrono::TimeDelta::seconds(
                self.config.registry.dead_secs as i64,
            ))
            .unwrap_or_default();
        crate::store::registry::live_by_app(&self.db, alive_after).await
    }

    /// The executor at `address` registered as `kind` (its path and whether it takes batches).
    pub(crate) fn learn_executor(&self, address: &str, kind: crate::executor::ExecutorKind) {
        self.trigger.client().learn(address, kind);
    }

    /// The Prometheus text exposition of the engine's metrics, with gauges read now.
    pub(crate) async fn render_metrics(&self) -> Result<String> {
        let stats = self.pool_stats().await?;
        let ring_waiting = self.ring.send(GetRingSize).await?;
        let live: std::collections::HashSet<String> = self
            .live_executors()
            .await?
            .into_values()
            .flatten()
            .collect();
        Ok(self.metrics.render(Gauges {
            fast_in_flight: stats.fast_in_flight,
            slow_in_flight: stats.slow_in_flight,
            fast_waiting: stats.fast_waiting,
            slow_waiting: stats.slow_waiting,
            backlog: stats.backlog,
            ring_waiting,
            live_executors: live.len(),
            writer_queued: self.writer.queued(),
            writer_held: self.writer.held(),
        }))
    }

    /// The trigger lanes' occupancy and totals.
    #[doc(hidden)]
    pub async fn pool_stats(&self) -> Result<PoolStats> {
        Ok(self.pool.send(GetPoolStats).await?)
    }

    /// A graceful stop that keeps its promises for the next moments: stops scanning, lets the
    /// fires already recorded for the next `window` go out at their own time (not later, and
    /// not left to the misfire policy of the next start), then [`Engine::stop`] with `grace`.
    /// `xjob serve` stops this way.
    pub async fn stop_dispatching(&self, window: Duration, grace: Duration) -> Result<usize> {
        self.scan.send(StopScan).await?;
        let until = self.clock.now_ms() + window.as_millis() as i64;
        // bounded: the ring answers at the tick of the last such fire, at most `window` on
        if tokio::time::timeout(
            window + Duration::from_secs(1),
            self.ring.send(DispatchDue(until)),
        )
        .await
        .is_err()
        {
            tracing::warn!("fires due during the stop were not all dispatched in time");
        }
        self.stop(grace).await
    }

    /// Stops scanning and the periodic upkeep (registry ticks, lost-run sweeps, the fail
    /// monitor, log reports), hands the ring's waiting fires back to the database (they stay
    /// pending and are dispatched by whichever node scans next, this one after a restart), and
    /// waits up to `grace` for in-flight triggers to finish and for the results already received
    /// to be written (so a result that arrived is not later reported lost). Returns how many
    /// fires were handed back.
    pub async fn stop(&self, grace: Duration) -> Result<usize> {
        // no new round of periodic upkeep (registry, lost runs, failures, reports)
        self.activity.halt();
        self.scan.send(StopScan).await?;
        // no more workflow passes: what they would start goes on from the database next time
        self.workflows.send(StopWorkflows).await?;
        // nor settling rounds (fires in doubt wait for the next start)
        self.settle
            .send(crate::actors::settle::StopSettling)
            .await?;
        let left = self.ring.send(DrainRing).await?;
        // the results of runs done here wait for their logs until the executor is quiet:
        // written now, so they are among the results received before the stop
        if let Some(e) = &self.in_process {
            e.write_queued_logs().await;
        }
        let deadline = tokio::time::Instant::now() + grace;
        // what the writer holds for its partner is written now, not when its hold ends
        let _ = tokio::time::timeout_at(deadline, self.writer.flush()).await;
        // every trigger on a lane, result and queued run row holds a unit of activity
        if tokio::time::timeout_at(deadline, self.activity.idle())
            .await
            .is_err()
        {
            tracing::warn!("work still in flight at the end of the stop's grace");
        }
        if tokio::time::timeout_at(deadline, self.writer.flush())
            .await
            .is_err()
        {
            tracing::warn!("run rows still being written at the end of the stop's grace");
        } else if let Err(e) = self.writer.settle_mark().await {
            tracing::warn!(error = %e, "dispatch mark not brought back to the fires sent");
        }
        self.writer.release_lock();
        // on a shared database the buckets go to the other nodes at once (not after their
        // leases lapse); the fires handed back are theirs to send
        if let Some(l) = &self.leases {
            let _ = tokio::time::timeout_at(deadline + Duration::from_secs(2), l.send(ReleaseAll))
                .await;
        }
        tracing::info!(handed_back = left.len(), "scheduling center stopped");
        Ok(left.len())
    }

    /// Queues a console change's audit entry on the run-row writer (written with its next
    /// batch); answers the entry back when the writer is stopped.
    pub(crate) async fn audit(
        &self,
        entry: crate::store::audit::Entry,
    ) -> std::result::Result<(), crate::store::audit::Entry> {
        self.writer.audit(entry.clone()).await.map_err(|_| entry)
    }

    /// Makes the audit entries queued so far visible to a read of the audit log.
    pub(crate) async fn audit_visible(&self) {
        if let Err(e) = self.writer.flush().await {
            tracing::debug!(error = %e, "audit entries not flushed (the writer is stopped)");
        }
    }

    /// Makes the report's counts of today as fresh as its budget allows, every dispatched run
    /// written first (the dashboard calls it before reading the counts).
    pub(crate) async fn fresh_counts(&self) -> Result<()> {
        self.writer.visible().await?;
        self.log_report
            .send(crate::actors::log_report::FreshReport)
            .await?
    }

    /// Writes the trigger outcomes the run-row writer holds for their results, so a read of
    /// the runs sees every dispatched run (the console's run pages call it first).
    pub(crate) async fn runs_visible(&self) -> Result<()> {
        self.writer.visible().await
    }

    /// Notes that a job's definition changed on this node: fires the scan read before now
    /// read the job again at dispatch.
    #[doc(hidden)]
    pub fn job_edited(&self, job_id: i32) {
        self.directory.job_edited(job_id, self.clock.now_ms());
    }

    /// Whether this node is the only one on its database (a locked SQLite file): every change
    /// goes through this process, so it may keep what it read.
    pub(crate) fn single_node(&self) -> bool {
        self.writer.single_node()
    }

    /// Whether group `id` is in the dispatch directory (as of the last scan pass or console
    /// edit of a group on this node).
    pub(crate) fn knows_group(&self, id: i32) -> bool {
        self.directory.groups().contains_key(&id)
    }

    /// Refuses a job's `alarmWebhook` outside `alarm.webhook_allowlist` (the global
    /// `alarm.webhook_url` is allowed too); none or blank is fine.
    pub(crate) fn check_webhook(&self, url: Option<&str>) -> Result<()> {
        let Some(url) = url.map(str::trim).filter(|u| !u.is_empty()) else {
            return Ok(());
        };
        WebhookPolicy::of(&self.config.alarm)?
            .check(url)
            .map_err(|reason| Error::Invalid {
                field: "alarmWebhook",
                reason,
            })
    }

    /// Re-reads the groups dispatch routes by (after a console edit of a group).
    pub(crate) async fn groups_edited(&self) -> Result<()> {
        self.directory.load_groups(&self.db).await
    }
}

/// A job's first fire after `now` when started: an error for schedules that never fire.
fn first_fire(job: &entity::xxl_job_info::Model, tz: chrono_tz::Tz, now: i64) -> Result<i64> {
    let schedule = Schedule::for_job(
        &job.schedule_type,
        job.schedule_conf.as_deref(),
        job.time_zone.as_deref(),
        tz,
    )?;
    if schedule == Schedule::None {
        return Err(Error::Invalid {
            field: "scheduleType",
            reason: "a job with schedule type NONE cannot be started".into(),
        });
    }
    schedule.first_after(now).ok_or_else(|| Error::Invalid {
        field: "scheduleConf",
        reason: "the schedule has no future fire time".into(),
    })
}
